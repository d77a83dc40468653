"""`bandwall import nccl-tests` on real published logs (tests/data/nccl-tests/*.log, each with
a .source file naming where it was published), and bench's own nccl-tests text read back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bandwall.cli.measure import import_app
from bandwall.errors import ConfigError
from bandwall.measure.bench.nccl_format import HEADER, footer, result_line, time_str
from bandwall.measure.bench.store import Store
from bandwall.measure.importers.nccl_tests import import_log, parse_log, resolve
from bandwall.model.collectives import Op, busbw_factor

LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"


def log(name: str) -> str:
    return (LOGS / name).read_text()


@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("*.log")))
def test_every_stored_log_names_its_public_source(name: str) -> None:
    source = (LOGS / name).with_suffix(".source").read_text()
    assert source.startswith("Source: https://github.com/") and "/blob/" in source


@pytest.mark.parametrize(
    ("name", "blocks", "rows"),
    [
        ("eks-efa-t4-all-reduce.log", 1, [31]),
        ("gke-a4-b200-16-ranks-all-gather.log", 1, [24]),
        ("a40-nvlink-sys-node-all-reduce.log", 3, [4, 4, 4]),
        ("azure-nd-v100-a100-old-format.log", 2, [9, 9]),
    ],
)
def test_real_logs_parse_every_row_and_match_their_footer(
    name: str, blocks: int, rows: list[int]
) -> None:
    found = parse_log(log(name))
    assert [len(b.rows) for b in found] == rows and len(found) == blocks
    for b in found:
        sides = b.sides
        assert all(r.out_of_place and r.in_place for r in b.rows)
        if b.avg_busbw_GBps is not None:  # nccl-tests' footer: mean busbw over both columns
            mean = sum(s.busbw_GBps or 0 for s in sides) / len(sides)
            assert mean == pytest.approx(b.avg_busbw_GBps, abs=0.005)


def test_mpirun_prefixes_and_nccl_info_lines_are_skipped() -> None:
    (b,) = parse_log(log("eks-efa-t4-all-reduce.log"))
    assert [r["hostname"] for r in b.ranks] == ["test-nccl-efa-worker-0", "test-nccl-efa-worker-1"]
    assert b.meta["nccl"] == "2.12.7" and b.meta["iters"] == 100
    last = b.rows[-1]
    assert (last.size_bytes, last.count, last.type, last.redop, last.root) == (
        1073741824,
        268435456,
        "float",
        "sum",
        -1,
    )
    assert last.out_of_place is not None and last.in_place is not None
    assert (last.out_of_place.time_us, last.out_of_place.busbw_GBps) == (344981.0, 3.11)
    assert (last.in_place.time_us, last.in_place.algbw_GBps, last.in_place.wrong) == (
        344454.0,
        3.12,
        0.0,
    )
    assert b.avg_busbw_GBps == 1.15327 and b.out_of_bounds == 0


def test_op_the_log_does_not_name_needs_op_and_says_so() -> None:
    (b,) = parse_log(log("eks-efa-t4-all-reduce.log"))
    with pytest.raises(ConfigError, match=r"all_reduce, send_recv.*give --op") as err:
        resolve(b, None, None)
    assert err.value.field == "op"
    assert resolve(b, "all_reduce", None) == (Op.ALL_REDUCE, 2, "--op")
    (g,) = parse_log(log("gke-a4-b200-16-ranks-all-gather.log"))
    with pytest.raises(ConfigError, match="all_gather, all_to_all"):
        resolve(g, None, None)
    assert resolve(g, "all_gather", None)[:2] == (Op.ALL_GATHER, 16)


def test_ranks_and_op_from_the_bus_factor_when_the_log_has_neither() -> None:
    """Old layout, no '# Using devices', no binary name: busbw/algbw = 2(n-1)/n = 1.875."""
    found = parse_log(log("azure-nd-v100-a100-old-format.log"))
    for b in found:
        op, world, origin = resolve(b, None, None)
        assert (op, world) == (Op.ALL_REDUCE, 16) and origin.startswith("inferred")
        assert all(s.max_error is not None and s.wrong == 0 for s in b.sides)
    a40 = parse_log(log("a40-nvlink-sys-node-all-reduce.log"))
    assert [resolve(b, None, None)[:2] for b in a40] == [
        (Op.ALL_REDUCE, 2),
        (Op.ALL_REDUCE, 4),
        (Op.ALL_REDUCE, 2),
    ]


def test_import_stores_runs_that_read_like_benchs_own(tmp_path: Path) -> None:
    db = tmp_path / "imp.db"
    out = import_log(
        log("gke-a4-b200-16-ranks-all-gather.log"), "dranet.log", str(db), op="all_gather"
    )
    assert [(x["op"], x["ranks"], x["rows"]) for x in out] == [("all_gather", 16, 48)]
    with Store(db) as store:
        run = store.run(out[0]["run_id"])
        rows = store.results(run.id)
    assert run.kind == "collectives" and run.status == "complete" and run.world_size == 16
    assert run.host["gpus"] == ["NVIDIA B200"] and len(run.host["hosts"]) == 2
    assert run.versions == {"nccl": "2.26.6"}
    big = next(r for r in rows if r["size_bytes"] == 8589934592 and r["inplace"] == 0)
    assert big["time_median_s"] == pytest.approx(30970e-6)
    assert big["count"] == 8589934592 // 4 and big["dtype"] == "float32"
    # algbw recomputed from size / time, busbw with the 16-rank factor: the log's numbers
    assert big["algbw_GBps"] == pytest.approx(277.36, abs=0.01)
    assert big["busbw_GBps"] == pytest.approx(big["algbw_GBps"] * 15 / 16)
    assert big["busbw_GBps"] == pytest.approx(260.03, abs=0.01)


def test_cli_import_command(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    runner = CliRunner()
    path = str(LOGS / "a40-nvlink-sys-node-all-reduce.log")
    res = runner.invoke(import_app, ["nccl-tests", path, "--db", str(db), "--json"])
    assert res.exit_code == 0, res.output
    runs = json.loads(res.output)
    assert [r["ranks"] for r in runs] == [2, 4, 2]
    assert [r["avg_busbw_GBps"] for r in runs] == pytest.approx([47.4509, 1.40216, 3.85845])
    res = runner.invoke(
        import_app, ["nccl-tests", str(LOGS / "eks-efa-t4-all-reduce.log"), "--db", str(db)]
    )
    assert isinstance(res.exception, ConfigError) and "give --op" in str(res.exception)
    with Store(db) as store:
        assert len(store.runs()) == 3  # the refused log stored nothing


def test_text_without_rows_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no nccl-tests result rows"):
        import_log("hello\n# Avg bus bandwidth : 3\n", "x.log", str(tmp_path / "e.db"))


@pytest.mark.parametrize("op", list(Op))
@pytest.mark.parametrize("time_us", [3.14159, 271.828, 31415.9])
def test_format_and_parse_round_trip(op: Op, time_us: float) -> None:
    world = 4
    size = 1 << 20
    t = time_us * 1e-6
    alg = size / t / 1e9
    sides = [
        {
            "size_bytes": size,
            "count": size // 4,
            "dtype": "bfloat16" if op is Op.ALL_GATHER else "float32",
            "time_median_s": t * k,
            "algbw_GBps": alg / k,
            "busbw_GBps": alg / k * float(busbw_factor(op, world)),
            "wrong": 0,
        }
        for k in (1.0, 1.5)
    ]
    text = (
        HEADER + "\n" + result_line(op, world, sides[0], sides[1]) + "\n" + footer(op, sides) + "\n"
    )
    (b,) = parse_log(f"# Collective test starting: x\n{text}")
    (row,) = b.rows
    assert row.size_bytes == size and row.root == (0 if op in (Op.BROADCAST, Op.REDUCE) else -1)
    for want, got in zip(sides, (row.out_of_place, row.in_place), strict=True):
        assert got is not None
        assert got.time_us == float(time_str(want["time_median_s"] * 1e6))
        assert got.busbw_GBps == pytest.approx(want["busbw_GBps"], abs=0.005)
    assert b.avg_busbw_GBps == pytest.approx(sum(s["busbw_GBps"] for s in sides) / 2, rel=1e-5)
