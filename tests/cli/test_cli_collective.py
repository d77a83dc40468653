"""`bandwall collective` and `bandwall catalog` as a user types them."""

from __future__ import annotations

import itertools
import json

import pytest

JSON_KEYS = {
    "op",
    "ranks",
    "size_bytes",
    "algo",
    "protocol",
    "time_s",
    "algbw_GBps",
    "busbw_GBps",
    "note",
}


def test_json_rows_have_exactly_the_documented_keys(run_cli) -> None:  # type: ignore[no-untyped-def]
    r = run_cli(
        "collective",
        "--op",
        "all_reduce",
        "--ranks",
        "64",
        "--gpus-per-node",
        "8",
        "--fabric",
        "ib-ndr",
        "--scale-up",
        "nvlink4",
        "--sizes",
        "1K:8G",
        "--json",
    )
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    assert len(rows) == 24  # 1K .. 8G by x2
    assert all(set(row) == JSON_KEYS for row in rows)
    assert rows[0]["size_bytes"] == 1024 and rows[-1]["size_bytes"] == 8 * 1024**3
    assert all(row["ranks"] == 64 and row["op"] == "all_reduce" for row in rows)
    # time falls with size only where the note says NCCL's tuner runs a slower pair
    for a, b in itertools.pairwise(rows):
        assert b["time_s"] >= a["time_s"] or a["note"] or b["note"], (a, b)
    big = rows[-1]
    assert big["busbw_GBps"] == pytest.approx(big["algbw_GBps"] * 2 * 63 / 64)
    assert big["algbw_GBps"] == pytest.approx(big["size_bytes"] / big["time_s"] / 1e9)


def test_forced_algorithm_and_table_output(run_cli) -> None:  # type: ignore[no-untyped-def]
    r = run_cli(
        "collective", "--ranks", "16", "--fabric", "roce-400", "--algo", "ring", "--sizes", "1M,1G"
    )
    assert r.code == 0, r.err
    assert "busbw" in r.out and "(GB/s)" in r.out and "ring" in r.out and "1G" in r.out
    ring = json.loads(
        run_cli(
            "collective",
            "--ranks",
            "16",
            "--fabric",
            "roce-400",
            "--algo",
            "ring",
            "--sizes",
            "1G",
            "--json",
        ).out
    )[0]
    auto = json.loads(
        run_cli(
            "collective", "--ranks", "16", "--fabric", "roce-400", "--sizes", "1G", "--json"
        ).out
    )[0]
    assert ring["algo"] == "ring"
    assert auto["time_s"] <= ring["time_s"]


def _choices(run_cli, *args: str) -> list[tuple[int, int, str, str]]:  # type: ignore[no-untyped-def]
    r = run_cli("collective", "--op", "all_reduce", *args, "--json")
    assert r.code == 0, r.err
    return [(x["ranks"], x["size_bytes"], x["algo"], x["protocol"]) for x in json.loads(r.out)]


def test_nccl_algorithm_and_protocol_per_size_on_one_node(run_cli) -> None:  # type: ignore[no-untyped-def]
    """NCCL 2.30.7's tuner on HGX H100: 8 B is ring/LL (15 µs) — not NVLS (25 µs), and never
    NVLS on 4 GPUs at 8 B; up to 1 MiB ring/LL (15 + S/80.6 GB/s beats 25 + S/272 below
    ~1.1 MB), from 2 MiB NVLS (476 GB/s bus vs ring's 360): as nccl-tests issue 309 reports
    for a single HGX H100 (8 B-1 MB ring/LL, 2 MB-16 GB NVLS/Simple)."""
    assert _choices(run_cli, "--ranks", "4", "--fabric", "nvlink4", "--sizes", "8") == [
        (4, 8, "ring", "LL")
    ]
    rows = _choices(run_cli, "--ranks", "8", "--fabric", "nvlink4", "--sizes", "8,1M,2M,1G")
    assert rows == [
        (8, 8, "ring", "LL"),
        (8, 1 << 20, "ring", "LL"),
        (8, 1 << 21, "nvls", "Simple"),
        (8, 1 << 30, "nvls", "Simple"),
    ]
    off = _choices(
        run_cli, "--ranks", "8", "--fabric", "nvlink3", "--gpu", "A100-SXM-80GB", "--sizes", "1G"
    )
    assert off == [(8, 1 << 30, "ring", "Simple")]  # no NVSwitch multicast on A100
    table = run_cli("collective", "--ranks", "8", "--fabric", "nvlink4", "--sizes", "8")
    assert table.code == 0 and "ring" in table.out


def test_nccl_choices_across_nodes(run_cli) -> None:  # type: ignore[no-untyped-def]
    """8 ranks as 2 nodes × 4 GPUs on NDR: tree/LL for 8 B (2 network steps instead of the
    ring's 2 plus 12 intra-node ones); at 1 GiB tree/Simple — 4 rails search 4 channels × 48,
    duplicated to 8 × 24, so tree algBw = 0.5 × min(0.92 × 370.8, 8 × 41.4) = 165.6 GB/s
    beats NVLS-tree (4 heads × 57.7 × 8/14 = 131.9) and ring (188 × 8/14 = 107.4); 16 ranks
    (2 × 8): NVLS-tree. As 8 nodes × 1 GPU: no NVLS, ring/Simple at 1 GiB. SHARP (CollNet)
    only when asked for."""
    two = _choices(
        run_cli, "--ranks", "8", "--gpus-per-node", "4", "--fabric", "ib-ndr", "--sizes", "8,1G"
    )
    assert two == [(8, 8, "tree", "LL"), (8, 1 << 30, "tree", "Simple")]
    sixteen = _choices(run_cli, "--ranks", "16", "--fabric", "ib-ndr", "--sizes", "1G")
    assert sixteen == [(16, 1 << 30, "nvls_tree", "Simple")]
    eight = _choices(
        run_cli, "--ranks", "8", "--gpus-per-node", "1", "--fabric", "ib-ndr", "--sizes", "8,1G"
    )
    assert eight[0][2:] in {("ring", "LL"), ("tree", "LL")}
    assert eight[1][2:] == ("ring", "Simple")
    assert all(algo not in {"collnet_direct", "collnet_chain"} for *_, algo, _ in two + eight)


def test_rank_lists_and_scale_up_only_fabric(run_cli) -> None:  # type: ignore[no-untyped-def]
    rows = json.loads(
        run_cli(
            "collective", "--ranks", "2,4,8", "--fabric", "nvlink4", "--sizes", "1G", "--json"
        ).out
    )
    assert [row["ranks"] for row in rows] == [2, 4, 8]
    r = run_cli("collective", "--ranks", "16", "--fabric", "nvlink4", "--sizes", "1G")
    assert r.code == 2 and "scale-up fabric" in r.err


@pytest.mark.parametrize(
    ("args", "field", "hint"),
    [
        (["--fabric", "ib-qdr"], "fabric", "ib-ndr"),
        (["--gpu", "V100"], "gpu", "H100-SXM"),
        (["--op", "allreduce2"], "op", "all_reduce"),
        (["--algo", "magic"], "algo", "halving_doubling"),
        (["--ranks", "0"], "ranks", ">= 2"),
        (["--ranks", "-4"], "ranks", ">= 2"),
        (["--ranks", "1"], "ranks", ">= 2"),
        (["--ranks", "lots"], "ranks", "whole number"),
        (["--sizes", "12Q"], "sizes", "K/M/G"),
        (["--sizes", "8G:1K"], "sizes", "below its start"),
        (["--op", "all_gather", "--algo", "tree"], "algo", "ring"),
        (["--scale-up", "ib-ndr"], "--scale-up", "nvlink4"),
        (["--oversubscription", "0.5"], "oversubscription", "greater than or equal to 1"),
        (["--gpus-per-node", "many"], "gpus-per-node", "integer"),
        # named as themselves with their tier's choices, not as --fabric with every fabric
        (["--wan", "nope", "--nodes-per-site", "1"], "--wan:", "internet-10g"),
        (["--scale-up", "nope"], "--scale-up:", "nvlink4, nvlink4-h800"),
        (["--rdma-cc", "srd"], "--rdma-cc:", "'auto', 'dcqcn' or 'pfc'"),
        # a part-filled node is not a job NCCL sees; the error names the counts that work
        (["--ranks", "8", "--gpus-per-node", "3"], "ranks", "(6 or 9)"),
        (["--ranks", "2:48:x2", "--gpus-per-node", "3"], "4 ranks", "at most 3"),
        (["--ranks", "8KB"], "ranks", "not bytes"),
        (["--sizes", "100GB"], "sizes", "100G or 100GiB"),
    ],
)
def test_bad_input_is_one_line_exit_2(run_cli, args: list[str], field: str, hint: str) -> None:  # type: ignore[no-untyped-def]
    r = (
        run_cli("collective", "--sizes", "1M", *args)
        if "--sizes" not in args
        else run_cli("collective", *args)
    )
    assert r.code == 2
    assert r.out == ""
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    assert field in lines[0] and hint in lines[0]
    assert "Traceback" not in r.err


def test_catalog_lists_sources(run_cli) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("catalog", "fabrics", "--json")
    assert r.code == 0
    fabrics = json.loads(r.out)
    assert {f["key"] for f in fabrics} >= {"ib-ndr", "spectrum-x6-800", "internet-1g"}
    assert all(f["source"] and f["as_of"] for f in fabrics)
    ndr = next(f for f in fabrics if f["key"] == "ib-ndr")
    assert ndr["bandwidth_Gbps"] == 400 and ndr["bandwidth_GBps"] == 50
    gpus = json.loads(run_cli("catalog", "gpus", "--json").out)
    assert "H100-SXM" in {g["name"] for g in gpus} and all(g["as_of"] for g in gpus)
    table = run_cli("catalog", "gpus")
    assert table.code == 0 and "H100-" in table.out  # the table may fold long names
    both = json.loads(run_cli("catalog", "--json").out)
    assert set(both) == {"gpus", "fabrics", "providers", "failures", "perf", "power"}
    bad = run_cli("catalog", "switches")
    assert bad.code == 2 and "fabrics, failures, gpus, perf, power, providers" in bad.err


def test_no_arguments_prints_help(run_cli) -> None:  # type: ignore[no-untyped-def]
    r = run_cli()
    assert r.code == 0 and "collective" in r.out


def test_one_byte_more_is_never_faster(run_cli) -> None:  # type: ignore[no-untyped-def]
    """Issue 22: `--sizes 4194303,4194304` on 64 ranks priced the larger 9% faster (NCCL's
    tree correction per power of two used as time); now the price is continuous."""
    r = run_cli(
        "collective",
        "--op",
        "all_reduce",
        "--ranks",
        "64",
        "--fabric",
        "ib-ndr",
        "--sizes",
        "4194303,4194304",
        "--json",
    )
    assert r.code == 0, r.err
    small, large = (row["time_s"] for row in json.loads(r.out))
    assert small <= large <= small * (1 + 1e-5)


def test_table_says_where_nccls_tuner_runs_a_slower_pair(run_cli) -> None:  # type: ignore[no-untyped-def]
    """8 A100 at 16-128 KiB: NCCL's tuner runs ring/LL (its prediction has no per-channel
    floor) where tree/LL is cheaper; the rows carry a mark and one line below says so, with
    the options that force the faster pair. Everything fits 80 columns."""
    args = ("collective", "--ranks", "8", "--gpu", "A100-SXM-80GB", "--sizes", "8K:256K")
    r = run_cli(*args)
    assert r.code == 0, r.err
    assert "LL*" in r.out
    notes = [line for line in r.out.splitlines() if line.startswith("* ")]
    text = " ".join(r.out.split())
    assert len(notes) == 1 and "NCCL's tuner picks ring/LL" in text
    assert "--algo tree --protocol LL" in text
    assert all(len(line) <= 80 for line in r.out.splitlines())
    rows = json.loads(run_cli(*args, "--json").out)
    forced = json.loads(run_cli(*args, "--algo", "tree", "--protocol", "LL", "--json").out)
    for auto, tree in zip(rows, forced, strict=True):
        if auto["note"]:
            assert tree["time_s"] < auto["time_s"]


def test_rdma_cc_takes_the_words_plan_takes(run_cli) -> None:  # type: ignore[no-untyped-def]
    """`auto` is the fabric's own congestion control, as in `plan --rdma-cc auto`."""
    args = ("collective", "--fabric", "roce-400", "--ranks", "64", "--sizes", "1G", "--json")
    auto = json.loads(run_cli(*args, "--rdma-cc", "auto").out)
    unset = json.loads(run_cli(*args).out)
    assert auto == unset


def test_bandwidth_below_one_gb_per_s_keeps_three_digits(run_cli) -> None:  # type: ignore[no-untyped-def]
    """nccl-tests prints busbw with two decimals; below 1 GB/s (a WAN all-to-all, an 8-byte
    message) the table keeps three significant digits instead of printing 0.00."""
    args = ("collective", "--op", "all_to_all", "--ranks", "64", "--fabric", "internet-1g")
    out = run_cli(*args, "--sizes", "1M").out
    row = json.loads(run_cli(*args, "--sizes", "1M", "--json").out)[0]
    assert 0 < row["busbw_GBps"] < 0.01
    assert f"{row['busbw_GBps']:#.3g}" in out and " 0.00 " not in out


def test_rank_counts_take_k_like_gpus_and_tables_fit_80_columns(run_cli) -> None:  # type: ignore[no-untyped-def]
    """`--ranks 1k` is 1,024 as `--gpus 1k` is; the widest cells (a 6-digit rank count, a
    size that is no whole binary unit, a time past 0.1 s, collnet's name) stay within 80
    columns, none cut."""
    rows = json.loads(run_cli("collective", "--ranks", "1k", "--sizes", "1M", "--json").out)
    assert [r["ranks"] for r in rows] == [1024]
    args = ("--ranks", "131072", "--sizes", "100G,1000000000,12345")
    r = run_cli("collective", *args)
    assert r.code == 0, r.err
    assert max(len(line) for line in r.out.splitlines()) <= 80
    assert "…" not in r.out
    assert "953.7M" in r.out and "12,345" in r.out and "nvls_tree/Simple" in r.out
