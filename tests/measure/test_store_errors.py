"""Issue 14 items 4 and 11: a corrupt or foreign --db is one line naming the file, and a --db
in a folder that does not exist is refused instead of creating the folders."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bandwall.errors import ConfigError
from bandwall.measure.bench.store import Store


def _good(path: Path) -> None:
    with Store(path) as s:
        rid = s.start_run("collectives", 2, "gloo", {"hostname": "h"}, {}, {})
        s.finish_run(rid, "complete")


def _junk(path: Path) -> None:
    path.write_bytes(b"this is no database\n" * 200)


def _foreign(path: Path) -> None:
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE users (id INTEGER, name TEXT)")


def _other_runs(path: Path) -> None:
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE runs (id INTEGER, what TEXT)")


def _corrupt(path: Path) -> None:
    _good(path)
    for extra in ("-wal", "-shm"):
        Path(f"{path}{extra}").unlink(missing_ok=True)
    data = bytearray(path.read_bytes())
    data[100:] = b"\xab" * (len(data) - 100)  # keep the SQLite header, break every page
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (_junk, "not a bandwall results database"),
        (_foreign, "no runs table"),
        (_other_runs, "table runs lacks"),
        (_corrupt, "malformed"),
    ],
)
def test_bad_database_is_one_config_error_naming_the_file(
    tmp_path: Path, make: object, says: str
) -> None:
    path = tmp_path / "bad.db"
    make(path)  # type: ignore[operator]
    with pytest.raises(ConfigError) as err, Store(path) as s:
        s.runs()
    assert err.value.field == "db" and str(path) in str(err.value) and says in str(err.value)
    assert "\n" not in str(err.value)


def test_foreign_database_is_not_written_to(tmp_path: Path) -> None:
    path = tmp_path / "theirs.db"
    _foreign(path)
    with pytest.raises(ConfigError):
        Store(path)
    with sqlite3.connect(path) as c:
        names = {r[0] for r in c.execute("SELECT name FROM sqlite_master")}
    assert names == {"users"}


@pytest.mark.parametrize("args", [["results", "list"], ["results", "show", "1"]])
def test_cli_prints_one_line_for_a_corrupt_db(tmp_path: Path, run_cli, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "c.db"
    _junk(path)
    r = run_cli(*args, "--db", str(path))
    assert r.code == 2
    assert r.err.count("\n") == 1 and "Traceback" not in r.err
    assert r.err.startswith("error: --db: ") and str(path) in r.err


def test_missing_folder_is_refused_not_created(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "no" / "such" / "dir" / "x.db"
    with pytest.raises(ConfigError, match="does not exist"):
        Store(target)
    assert not (tmp_path / "no").exists()
    r = run_cli("results", "list", "--db", str(target))
    assert r.code == 2 and "does not exist" in r.err and r.err.count("\n") == 1
    assert not (tmp_path / "no").exists()


def test_env_db_in_missing_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BANDWALL_DB", str(tmp_path / "gone" / "r.db"))
    with pytest.raises(ConfigError, match="does not exist"):
        Store()
    assert not (tmp_path / "gone").exists()


def test_default_location_is_still_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BANDWALL_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    with Store() as s:
        assert s.path == tmp_path / "xdg" / "bandwall" / "results.db"
        assert s.runs() == []
    assert (tmp_path / "xdg" / "bandwall" / "results.db").is_file()


def test_bench_with_a_corrupt_db_fails_before_spawning_ranks(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "junk.db"
    _junk(path)
    r = run_cli("bench", "collectives", "--local", "2", "--sizes", "1K", "--db", str(path))
    assert r.code == 2 and r.err.count("\n") == 1 and str(path) in r.err
    assert "not a bandwall results database" in r.err
