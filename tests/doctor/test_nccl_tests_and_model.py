"""nccl-tests evidence: imported through the importer's public functions it feeds calibrate and
validate like a bench run (round trip), and doctor compares its busbw with the model."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bandwall.cli.app import app
from bandwall.errors import ConfigError
from bandwall.measure.doctor import busbw_comparison, diagnose, infer_layout
from bandwall.measure.importers.nccl_tests import import_log, parse_log, resolve, store_rows

NCCL_TESTS = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"
EFA = NCCL_TESTS / "eks-efa-t4-all-reduce.log"  # 2 x T4 over EFA, aws-ofi-nccl (see .source)


def test_imported_nccl_tests_round_trip_through_calibrate_and_validate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BANDWALL_PROFILE_DIR", str(tmp_path / "profiles"))
    db = str(tmp_path / "results.db")
    (run,) = import_log(EFA.read_text(), EFA.name, db, op="all_reduce")
    runner = CliRunner()
    cal = runner.invoke(
        app, ["calibrate", str(run["run_id"]), "--db", db, "--name", "efa", "--json"]
    )
    assert cal.exit_code == 0, cal.output
    fit = json.loads(cal.output)
    # the fitted bandwidth is the log's own large-message busbw (3.11 GB/s at 1 GiB, 2 ranks)
    assert fit["bandwidth_Bps"] / 1e9 == pytest.approx(3.11, rel=0.05)
    assert fit["median_abs_error"] < 0.05 and fit["backend"] == "nccl"
    # the fitted 24.9 Gb/s cannot come from a link of 10: refused, and nothing saved
    too_slow = runner.invoke(
        app, ["calibrate", str(run["run_id"]), "--db", db, "--name", "slow", "--rate", "10Gbps"]
    )
    assert too_slow.exit_code != 0 and isinstance(too_slow.exception, ConfigError)
    assert too_slow.exception.field == "rate" and "nothing was saved" in str(too_slow.exception)
    assert not list((tmp_path / "profiles").glob("slow*"))
    val = runner.invoke(
        app, ["validate", str(run["run_id"]), "--db", db, "--fabric", "measured:efa", "--json"]
    )
    assert val.exit_code == 0, val.output
    summary = json.loads(val.output)["summary"]
    assert summary["rows"] == fit["rows"] and summary["median_abs_error"] < 0.10


def test_doctor_compares_nccl_tests_busbw_with_the_model() -> None:
    (block,) = parse_log((NCCL_TESTS / "gke-a4-b200-16-ranks-all-gather.log").read_text())
    op, ranks, _ = resolve(block, "all_gather", None)
    rows = store_rows(block, op, ranks)
    layout = infer_layout(
        ranks=ranks, hosts=2, device_names=["NVIDIA B200"], transport="RoCE", fabric="roce-400"
    )
    assert (layout.gpu, layout.gpus_per_node, layout.fabric) == ("B200", 8, "roce-400")
    cmp = busbw_comparison(rows, op.value, layout)
    assert cmp["compared_sizes"][-1] == 8 << 30
    big = sorted({r["size_bytes"] for r in rows if r["size_bytes"] >= 64 << 20})
    best = [max(r["busbw_GBps"] for r in rows if r["size_bytes"] == s) for s in big]
    assert cmp["compared_sizes"] == big
    assert cmp["measured_busbw_GBps"] == pytest.approx(statistics.median(best), rel=1e-9)
    assert (
        0
        < cmp["ratio"]
        == pytest.approx(cmp["measured_busbw_GBps"] / cmp["model_busbw_GBps"], rel=0.02)
    )
    assert all(r["model_busbw_GBps"] > 0 for r in cmp["rows"])


def test_unknown_gpu_asks_for_it() -> None:
    with pytest.raises(ConfigError, match="give --gpu") as err:
        infer_layout(ranks=2, hosts=2, device_names=["Tesla T4"], transport="EFA")
    assert err.value.field == "gpu"


def test_doctor_on_an_nccl_tests_log_with_nccl_info_lines() -> None:
    """The EFA tutorial run is both a log and a table. Its GPU (T4) is not in the catalog and
    EFA's speed is not in the log: doctor says so and compares nothing, rather than assume a
    fabric; with the hardware given, the comparison is made and says what it assumed."""
    diag = diagnose([str(EFA)], op="all_reduce")
    (item,) = diag.inputs
    assert item.kinds == ["nccl-log", "nccl-tests"]
    (t,) = diag.job.tests
    assert t.op == "all_reduce" and t.ranks == 2 and t.comparison is None
    assert "GPU unknown" in t.not_compared and "Tesla T4" in t.not_compared
    assert diag.logs[0].net_transport == "EFA"
    assert [f.code for f in diag.findings if f.severity != "info"] == []
    diag = diagnose([str(EFA)], gpu="H100-SXM", fabric="efa-p5", gpus_per_node=1, op="all_reduce")
    low = next(f for f in diag.findings if f.code == "busbw_low")
    assert "efa-p5" in low.reason and low.severity == "high"


_HEADER = "#       size  count  type  redop  root  time  algbw  busbw #wrong"
_IMPOSSIBLE = "\n".join(
    [
        "CUDA_VISIBLE_DEVICES=0,1 ./build/all_reduce_perf -b 1G -e 1G -g 2",
        "#  Rank  0 Group  0 Pid   1234 on     node1 device  0 [0x18] NVIDIA H100 80GB HBM3",
        "#  Rank  1 Group  0 Pid   1234 on     node1 device  1 [0x2a] NVIDIA H100 80GB HBM3",
        _HEADER + "  time  algbw  busbw #wrong",
        "  1073741824  268435456  float  sum  -1  {t}  {bw}  {bw}  0  {t}  {bw}  {bw}  0",
        "",
    ]
)


@pytest.mark.parametrize(
    ("time_us", "busbw", "expect"),
    [("107.4", "9997.6", "28.2 x what these links carry"), ("10", "99999.0", "corrupt figures")],
)
def test_busbw_no_hardware_carries_is_said(
    tmp_path: Path, time_us: str, busbw: str, expect: str
) -> None:
    """A table 28 x what two H100s on NVLink carry is not theirs (a medium finding, not the
    'info' a fabric assumption gets); one beyond any GPU is not compared, and the notes say
    why (it was dropped in silence: 'no finding')."""
    log = tmp_path / "nt.log"
    log.write_text(_IMPOSSIBLE.format(t=time_us, bw=busbw))
    d = diagnose([str(log)], op="all_reduce", ranks=2, gpus_per_node=8, gpu="H100-SXM")
    text = " ".join([f.reason for f in d.findings] + d.notes)
    assert expect in text, text
    if expect.startswith("28"):
        assert [(f.code, f.severity) for f in d.findings] == [("model_assumption", "medium")]


def test_the_same_release_printed_twice_is_one_oldest(tmp_path: Path) -> None:
    """Two logs of one job printing the same NCCL release compared their Line objects when the
    oldest release was taken (a TypeError the corpus property test drew from blind set 14)."""
    paths = []
    for rank in (0, 1):
        log = tmp_path / f"rank{rank}.log"
        log.write_text(
            f"#  Rank  {rank} Group  0 Pid   1 on  node{rank} device  0 [0x18] NVIDIA H100 80GB\n"
            f"node{rank}:1:1 [0] NCCL INFO NCCL version 2.18.6+cuda12.2\n"
            f"node{rank}:1:1 [0] misc/socket.cc:1 NCCL WARN unhandled system error\n"
        )
        paths.append(str(log))
    diagnose(paths)  # no exception
