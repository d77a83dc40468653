"""Issue 23 item 3: an nccl-tests import is one transaction. A row the store cannot hold (a
`nan`, negative or infinite time, a size past 1 PiB, a negative bandwidth) is refused naming its
line, and nothing of the log is stored: no run left `running` with 0 rows, no partial run."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bandwall.errors import ConfigError
from bandwall.measure.bench.store import Store
from bandwall.measure.importers.nccl_tests import import_log

HEADER = """# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20
# Using devices
#  Rank  0 Group  0 Pid  1 on h0 device  0 [0x01] GPU
#  Rank  1 Group  0 Pid  1 on h1 device  0 [0x01] GPU
#
#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong
#   (B) (elements)           (us) (GB/s) (GB/s)       (us) (GB/s) (GB/s)
"""
GOOD = "  {size} {count} float sum -1 {t} 0.00 0.00 0 {t} 0.00 0.00 0"
FOOTER = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.01\n"


def _log(rows: list[tuple[int, str]]) -> str:
    body = "\n".join(GOOD.format(size=s, count=max(s // 4, 0), t=t) for s, t in rows)
    return HEADER + body + "\n" + FOOTER


def _runs(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as c:
        return int(c.execute("SELECT count(*) FROM runs").fetchone()[0])


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ((64, "nan"), "time"),
        ((64, "-5.00"), "time"),
        ((64, "inf"), "time"),
        ((64, "1e999"), "time"),
        ((2**51, "5.00"), "size_bytes"),
    ],
)
def test_a_bad_row_is_refused_by_line_and_nothing_is_stored(
    tmp_path: Path, bad: tuple[int, str], says: str
) -> None:
    db = tmp_path / "r.db"
    import_log(_log([(8, "5.00")]), source="first.log", db=str(db))  # one good run before
    text = _log([(8, "5.00"), (16, "5.10"), (32, "5.20"), bad])
    line = text.splitlines().index(GOOD.format(size=bad[0], count=bad[0] // 4, t=bad[1])) + 1
    with pytest.raises(ConfigError) as err:
        import_log(text, source="bad.log", db=str(db))
    assert err.value.field == "log" and f"bad.log line {line}:" in str(err.value)
    assert says in str(err.value)
    assert _runs(db) == 1  # only the good import


def test_an_interrupted_import_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "r.db"
    calls = 0
    real = Store.add_result

    def flaky(self: Store, run_id: int, row: dict[str, object]) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise KeyboardInterrupt
        real(self, run_id, row)

    monkeypatch.setattr(Store, "add_result", flaky)
    with pytest.raises(KeyboardInterrupt):
        import_log(_log([(8, "5.00"), (16, "5.10"), (32, "5.20")]), source="x.log", db=str(db))
    assert _runs(db) == 0


def test_cli_import_of_a_nan_row_is_one_line(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "n.log"
    log.write_text(_log([(8, "5.00"), (16, "nan")]))
    r = run_cli("import", "nccl-tests", str(log), "--db", str(tmp_path / "r.db"))
    assert r.code == 2 and r.err.count("\n") == 1 and "line" in r.err
    assert not (tmp_path / "r.db").exists() or _runs(tmp_path / "r.db") == 0
