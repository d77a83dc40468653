"""Stored values are checked on read: a results database someone edited into nonsense (text
in a number column, infinities, zero or negative times, ids past SQLite's range, broken JSON)
is one line from every command that reads it and a 503 line from the dashboard, never a
traceback, a ZeroDivisionError in `validate`, a LinAlgError in `calibrate` or a 500. Reads
never write: the file is byte-for-byte the same afterwards."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bandwall.measure.bench.store import LINK_COLUMNS, RESULT_COLUMNS, Store
from tests.fuzz.harness import Sandbox, check
from tests.fuzz.strategies import EXAMPLES
from tests.web.seed import seed_db

BAD_VALUES: list[Any] = [
    "abc",
    "",
    float("inf"),
    float("-inf"),
    -1,
    0,
    1e308,
    -1e-300,
    2**63 - 1,
    b"\x00\xff",
    "9" * 400,
    1.5,
]
RUN_BAD: list[tuple[str, Any]] = [
    ("host", "{not json"),
    ("host", "[1, 2]"),
    ("host", "[" * 10_000 + "]" * 10_000),
    ("args", "null"),
    ("world_size", 0),
    ("world_size", "two"),
    ("world_size", 2**62),
    ("kind", 5),
    ("created_at", None),
]
READERS = [
    ["results", "list"],
    ["results", "show", "1"],
    ["results", "export", "1"],
    ["validate", "1", "--fabric", "ib-ndr"],
    ["calibrate", "1", "--name", "fuzz"],
    ["plot", "busbw", "--results", "1", "-o", "p.png"],
    ["report", "--results", "1", "--no-plan", "-o", "r.html"],
]


def _corrupt(db: Path, table: str, column: str, value: Any) -> None:
    with sqlite3.connect(db) as c:
        c.execute("PRAGMA ignore_check_constraints = 1")
        c.execute(
            f"UPDATE {table} SET {column} = ? WHERE rowid = (SELECT min(rowid) FROM {table})",
            (value,),
        )


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@st.composite
def corruptions(draw: st.DrawFn) -> tuple[str, str, Any]:
    if draw(st.booleans()):
        column, value = draw(st.sampled_from(RUN_BAD))
        return "runs", column, value
    column = draw(st.sampled_from([c for c in RESULT_COLUMNS]))
    return "results", column, draw(st.sampled_from(BAD_VALUES))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(bad=corruptions(), argv=st.sampled_from(READERS))
def test_cli_reads_of_a_corrupted_db(
    bad: tuple[str, str, Any],
    argv: list[str],
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("matplotlib")
    root = tmp_path_factory.mktemp("stored")
    Sandbox(root, monkeypatch)
    db = root / "work" / "r.db"
    seed_db(db)
    try:
        _corrupt(db, *bad)
    except sqlite3.IntegrityError:
        return  # NOT NULL held: SQLite itself refused the value
    digest = _sha(db)
    out = check([*argv, "--db", str(db)], capsys)
    assert _sha(db) == digest, "a read changed the database"
    assert not Path(f"{db}-wal").exists() and not Path(f"{db}-shm").exists()
    if out.code == 2:
        assert "--db" in out.err or "results" in out.err, out.err


@pytest.mark.parametrize(
    ("table", "column", "value"),
    [
        ("results", "time_median_s", 0),
        ("results", "time_median_s", "x"),
        ("runs", "host", "{"),
        ("results", "busbw_GBps", float("inf")),
        ("results", "op", "not_an_op"),
    ],
)
def test_web_reads_of_a_corrupted_db(tmp_path: Path, table: str, column: str, value: Any) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from bandwall.web import create_app

    db = tmp_path / "r.db"
    seed_db(db)
    _corrupt(db, table, column, value)
    client = TestClient(create_app(str(db)), base_url="http://127.0.0.1")
    for path in ("/api/results", "/api/results/1", "/api/results/1/busbw.png"):
        r = client.get(path)
        assert r.status_code in (200, 404, 503), (path, r.status_code, r.text[:200])
        if r.status_code == 503:
            assert "\n" not in r.json()["detail"]


def test_links_and_results_columns_all_have_rules() -> None:
    """Every numeric stored column is checked by `check_value` (none falls through)."""
    from bandwall.measure.bench.store import check_value

    for col in (*RESULT_COLUMNS, *LINK_COLUMNS):
        assert check_value(col, "text") is not None or col in ("op", "dtype"), col
        assert check_value(col, float("nan")) is not None, col


def test_reader_on_a_writer_file_creates_no_journal(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    seed_db(db)
    before = sorted(p.name for p in tmp_path.iterdir())
    with Store.reader(db) as s:
        assert len(s.runs()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before
