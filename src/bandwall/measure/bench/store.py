"""The results store: every bench run in one SQLite file, written size by size.

Each finished size is its own committed transaction (WAL journal), so a run killed halfway
leaves a consistent database holding the sizes already measured, and a run row still marked
'running'. Default location: $BANDWALL_DB, else $XDG_DATA_HOME/bandwall/results.db
(~/.local/share/bandwall/results.db).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
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


def default_db_path() -> Path:
    env = os.environ.get("BANDWALL_DB")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "bandwall" / "results.db"


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
    """A handle on one results database; safe to open from one writer at a time."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_db_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open {str(self.path)!r}: {exc}", field="db") from None
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

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
        cur = self._db.execute(
            f"SELECT {', '.join(TRAIN_COLUMNS)} FROM train WHERE run_id = ?", (run_id,)
        )
        return [dict(zip(TRAIN_COLUMNS, r, strict=True)) for r in cur.fetchall()]

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
        rows = self._db.execute("SELECT * FROM runs ORDER BY id").fetchall()
        return [self._run(r) for r in rows]

    def run(self, run_id: int) -> Run:
        row = self._db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            known = ", ".join(str(r.id) for r in self.runs()) or "none"
            raise ConfigError(f"no run {run_id} in {str(self.path)!r}; runs: {known}", field="run")
        return self._run(row)

    def latest(self, kind: str | None = None) -> Run:
        runs = [r for r in self.runs() if kind is None or r.kind == kind]
        if not runs:
            raise ConfigError(f"no {kind or ''} runs in {str(self.path)!r} yet", field="run")
        return runs[-1]

    def results(self, run_id: int) -> list[dict[str, Any]]:
        cur = self._db.execute(
            f"SELECT {', '.join(RESULT_COLUMNS)} FROM results WHERE run_id = ? "
            "ORDER BY op, inplace, size_bytes",
            (run_id,),
        )
        return [dict(zip(RESULT_COLUMNS, r, strict=True)) for r in cur.fetchall()]

    def links(self, run_id: int) -> list[dict[str, Any]]:
        cur = self._db.execute(
            f"SELECT {', '.join(LINK_COLUMNS)} FROM links WHERE run_id = ? ORDER BY src, dst",
            (run_id,),
        )
        return [dict(zip(LINK_COLUMNS, r, strict=True)) for r in cur.fetchall()]

    def count_rows(self, run_id: int) -> int:
        """Measurements of any kind a run holds."""
        return len(self.results(run_id)) + len(self.links(run_id)) + len(self.train(run_id))

    def integrity_ok(self) -> bool:
        return bool(self._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok")

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
