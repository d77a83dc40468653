"""The results store: every bench run in one SQLite file, written size by size.

Each finished size is its own committed transaction (WAL journal), so a run killed halfway
leaves a consistent database holding the sizes already measured, and a run row still marked
'running'. Default location: $BANDWALL_DB, else $XDG_DATA_HOME/bandwall/results.db
(~/.local/share/bandwall/results.db); only that default folder is ever created.

Whatever SQLite says about a file (not a database, corrupt, someone else's tables, locked)
reaches the caller as one ConfigError(field="db") naming the file: the CLI prints one line,
the web maps it to an error response, nobody sees a sqlite3 traceback.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bandwall.errors import ConfigError

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    world_size INTEGER NOT NULL,
    backend TEXT NOT NULL,
    host TEXT NOT NULL,
    versions TEXT NOT NULL,
    args TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    op TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    count INTEGER NOT NULL,
    dtype TEXT NOT NULL,
    inplace INTEGER NOT NULL,
    iters INTEGER NOT NULL,
    time_p10_s REAL NOT NULL,
    time_median_s REAL NOT NULL,
    time_p90_s REAL NOT NULL,
    time_p99_s REAL NOT NULL,
    time_min_s REAL NOT NULL,
    algbw_GBps REAL NOT NULL,
    busbw_GBps REAL NOT NULL,
    wrong INTEGER NOT NULL,
    PRIMARY KEY (run_id, op, size_bytes, inplace)
);
CREATE TABLE IF NOT EXISTS train (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    model TEXT NOT NULL,
    params INTEGER NOT NULL,
    grad_bytes INTEGER NOT NULL,
    iters INTEGER NOT NULL,
    step_median_s REAL NOT NULL,
    step_p90_s REAL NOT NULL,
    compute_median_s REAL NOT NULL,
    exposed_s REAL NOT NULL,
    world_size INTEGER NOT NULL,
    PRIMARY KEY (run_id, model)
);
CREATE TABLE IF NOT EXISTS links (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    src INTEGER NOT NULL,
    dst INTEGER NOT NULL,
    size_bytes INTEGER NOT NULL,
    bw_GBps REAL NOT NULL,
    latency_p50_s REAL NOT NULL,
    latency_p90_s REAL NOT NULL,
    latency_p99_s REAL NOT NULL,
    jitter_s REAL NOT NULL,
    PRIMARY KEY (run_id, src, dst)
);
"""

RUN_FIELDS = "id, created_at, kind, status, error, world_size, backend, host, versions, args"
#: The columns an existing database must have for bandwall to read and write it.
_EXPECTED: dict[str, set[str]] = {}

RESULT_COLUMNS = (
    "op",
    "size_bytes",
    "count",
    "dtype",
    "inplace",
    "iters",
    "time_p10_s",
    "time_median_s",
    "time_p90_s",
    "time_p99_s",
    "time_min_s",
    "algbw_GBps",
    "busbw_GBps",
    "wrong",
)
TRAIN_COLUMNS = (
    "model",
    "params",
    "grad_bytes",
    "iters",
    "step_median_s",
    "step_p90_s",
    "compute_median_s",
    "exposed_s",
    "world_size",
)
LINK_COLUMNS = (
    "src",
    "dst",
    "size_bytes",
    "bw_GBps",
    "latency_p50_s",
    "latency_p90_s",
    "latency_p99_s",
    "jitter_s",
)


_EXPECTED.update(
    runs=set(RUN_FIELDS.split(", ")),
    results={"run_id", *RESULT_COLUMNS},
    train={"run_id", *TRAIN_COLUMNS},
    links={"run_id", *LINK_COLUMNS},
)


def default_db_path() -> Path:
    env = os.environ.get("BANDWALL_DB")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "bandwall" / "results.db"


def _check_parent(path: Path, explicit: bool) -> None:
    """Only the default location's folder is created; a --db (or $BANDWALL_DB) in a folder
    that does not exist is a typo, not a request to build a directory tree."""
    parent = path.parent
    if parent.is_dir():
        return
    if explicit:
        what = "is not a folder" if parent.exists() else "does not exist"
        raise ConfigError(
            f"{str(path)!r}: folder {str(parent)!r} {what}; create it first or choose another --db",
            field="db",
        )
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create {str(parent)!r}: {exc.strerror}", field="db") from None


@dataclass(frozen=True)
class Run:
    id: int
    created_at: str
    kind: str
    status: str
    error: str | None
    world_size: int
    backend: str
    host: dict[str, Any]
    versions: dict[str, Any]
    args: dict[str, Any]

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_at": self.created_at,
            "kind": self.kind,
            "status": self.status,
            "error": self.error,
            "world_size": self.world_size,
            "backend": self.backend,
            "host": self.host.get("hostname"),
            "args": self.args,
        }


class Store:
    """A handle on one results database; safe to open from one writer at a time.

    Every SQLite failure (a corrupt file, a foreign database, a locked or read-only one) comes
    out as one :class:`ConfigError` naming the file, never as a bare ``sqlite3`` traceback, so
    the CLI prints one line and the web can map it.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_db_path()
        _check_parent(self.path, explicit=bool(path) or bool(os.environ.get("BANDWALL_DB")))
        try:
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise self._error(exc) from None
        try:
            self._check_schema()
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
        except sqlite3.Error as exc:
            self._db.close()
            raise self._error(exc) from None

    def _error(self, exc: BaseException) -> ConfigError:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if isinstance(exc, sqlite3.DatabaseError) and "not a database" in text:
            text = "not a bandwall results database (file is not SQLite or is corrupt)"
        return ConfigError(f"{str(self.path)!r}: {text}", field="db")

    def _check_schema(self) -> None:
        """A database that has tables but not ours (or ours with other columns) is refused
        before anything is written to it."""
        tables = dict(
            self._db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
        )
        if not tables:
            return
        for name, cols in _EXPECTED.items():
            if name not in tables:
                continue
            have = {r[1] for r in self._db.execute(f"PRAGMA table_info({name})").fetchall()}
            if not cols <= have:
                missing = ", ".join(sorted(cols - have))
                raise sqlite3.DatabaseError(
                    f"not a bandwall results database (table {name} lacks {missing})"
                )
        if "runs" not in tables:
            raise sqlite3.DatabaseError(
                "not a bandwall results database (it has tables "
                + ", ".join(sorted(tables)[:5])
                + " but no runs table)"
            )

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Turn a SQLite failure in the middle of a read into the one-line error."""
        try:
            yield
        except (sqlite3.Error, ValueError, TypeError) as exc:  # ValueError: a mangled JSON cell
            raise self._error(exc) from None

    def close(self) -> None:
        with suppress(sqlite3.Error):
            self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        try:
            yield self._db
        except sqlite3.Error as exc:
            with suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            raise self._error(exc) from None
        except BaseException:
            with suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            raise
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._guard():
            return list(self._db.execute(sql, params).fetchall())

    def start_run(
        self,
        kind: str,
        world_size: int,
        backend: str,
        host: dict[str, Any],
        versions: dict[str, Any],
        args: dict[str, Any],
    ) -> int:
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO runs (created_at, kind, status, world_size, backend, host, "
                "versions, args) VALUES (?, ?, 'running', ?, ?, ?, ?, ?)",
                (
                    now,
                    kind,
                    world_size,
                    backend,
                    json.dumps(host),
                    json.dumps(versions),
                    json.dumps(args, default=str),
                ),
            )
            assert cur.lastrowid is not None
            return cur.lastrowid

    def add_result(self, run_id: int, row: dict[str, Any]) -> None:
        with self._tx() as db:
            db.execute(
                f"INSERT OR REPLACE INTO results (run_id, {', '.join(RESULT_COLUMNS)}) "
                f"VALUES (?, {', '.join('?' for _ in RESULT_COLUMNS)})",
                (run_id, *(row[c] for c in RESULT_COLUMNS)),
            )

    def add_link(self, run_id: int, row: dict[str, Any]) -> None:
        with self._tx() as db:
            db.execute(
                f"INSERT OR REPLACE INTO links (run_id, {', '.join(LINK_COLUMNS)}) "
                f"VALUES (?, {', '.join('?' for _ in LINK_COLUMNS)})",
                (run_id, *(row[c] for c in LINK_COLUMNS)),
            )

    def add_train(self, run_id: int, row: dict[str, Any]) -> None:
        with self._tx() as db:
            db.execute(
                f"INSERT OR REPLACE INTO train (run_id, {', '.join(TRAIN_COLUMNS)}) "
                f"VALUES (?, {', '.join('?' for _ in TRAIN_COLUMNS)})",
                (run_id, *(row[c] for c in TRAIN_COLUMNS)),
            )

    def train(self, run_id: int) -> list[dict[str, Any]]:
        rows = self._read(
            f"SELECT {', '.join(TRAIN_COLUMNS)} FROM train WHERE run_id = ? ORDER BY model",
            (run_id,),
        )
        return [dict(zip(TRAIN_COLUMNS, r, strict=True)) for r in rows]

    def set_ranks(self, run_id: int, ranks: list[dict[str, Any]]) -> None:
        """Record which host and process each rank is (for post-mortems of lost ranks)."""
        with self._tx() as db:
            (host,) = db.execute("SELECT host FROM runs WHERE id = ?", (run_id,)).fetchone()
            info = json.loads(host)
            info["ranks"] = ranks
            db.execute("UPDATE runs SET host = ? WHERE id = ?", (json.dumps(info), run_id))

    def finish_run(self, run_id: int, status: str, error: str | None = None) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE runs SET status = ?, error = ? WHERE id = ?", (status, error, run_id)
            )

    def runs(self) -> list[Run]:
        rows = self._read(f"SELECT {RUN_FIELDS} FROM runs ORDER BY id")
        with self._guard():
            return [self._run(r) for r in rows]

    def run(self, run_id: int) -> Run:
        rows = self._read(f"SELECT {RUN_FIELDS} FROM runs WHERE id = ?", (run_id,))
        row = rows[0] if rows else None
        if row is None:
            known = ", ".join(str(r.id) for r in self.runs()) or "none"
            raise ConfigError(f"no run {run_id} in {str(self.path)!r}; runs: {known}", field="run")
        with self._guard():
            return self._run(row)

    def latest(self, kind: str | None = None) -> Run:
        runs = [r for r in self.runs() if kind is None or r.kind == kind]
        if not runs:
            raise ConfigError(f"no {kind or ''} runs in {str(self.path)!r} yet", field="run")
        return runs[-1]

    def results(self, run_id: int) -> list[dict[str, Any]]:
        rows = self._read(
            f"SELECT {', '.join(RESULT_COLUMNS)} FROM results WHERE run_id = ? "
            "ORDER BY op, inplace, size_bytes",
            (run_id,),
        )
        return [dict(zip(RESULT_COLUMNS, r, strict=True)) for r in rows]

    def links(self, run_id: int) -> list[dict[str, Any]]:
        rows = self._read(
            f"SELECT {', '.join(LINK_COLUMNS)} FROM links WHERE run_id = ? ORDER BY src, dst",
            (run_id,),
        )
        return [dict(zip(LINK_COLUMNS, r, strict=True)) for r in rows]

    def count_rows(self, run_id: int) -> int:
        """Measurements of any kind a run holds."""
        return len(self.results(run_id)) + len(self.links(run_id)) + len(self.train(run_id))

    def integrity_ok(self) -> bool:
        return bool(self._read("PRAGMA integrity_check")[0][0] == "ok")

    @staticmethod
    def _run(r: tuple[Any, ...]) -> Run:
        return Run(
            id=r[0],
            created_at=r[1],
            kind=r[2],
            status=r[3],
            error=r[4],
            world_size=r[5],
            backend=r[6],
            host=json.loads(r[7]),
            versions=json.loads(r[8]),
            args=json.loads(r[9]),
        )
