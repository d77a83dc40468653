"""The results store: every bench run in one SQLite file, written size by size.

Each finished size is its own committed transaction (WAL journal), so a run killed halfway
leaves a consistent database holding the sizes already measured, and a run row still marked
'running'. Default location: $BANDWALL_DB, else $XDG_DATA_HOME/bandwall/results.db
(~/.local/share/bandwall/results.db); only that default folder is ever created.

Reads never write. `Store.reader` (results, report, plot, validate, calibrate, the
dashboard) opens the file read-only (SQLite's `mode=ro`), refuses anything that is not a
bandwall database of a known schema version (the SQLite header, our tables, `user_version`)
before SQLite touches it, and never creates a file: a mistyped --db is an error, the default
location when absent reads as empty. Only `Store(path)` (bench, import) creates a database,
at the path given, and stamps it with `application_id` and `user_version`; a writer returns the
file to the rollback journal when it closes, so a later read-only open creates no -wal/-shm
files beside it.

Stored values are checked on read (types, finiteness, ranges): a row someone edited into
nonsense is one error naming the run, the row and the column, never a ZeroDivisionError in
`validate` or a 500 in the dashboard.

Whatever SQLite says about a file (not a database, corrupt, someone else's tables, locked)
reaches the caller as one ConfigError(field="db") naming the file: the CLI prints one line,
the web maps it to an error response, nobody sees a sqlite3 traceback.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import sqlite3
import stat
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bandwall.errors import ConfigError
from bandwall.safeio import checked_path

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
#: `PRAGMA application_id` of a bandwall database ("bwDB"); 0 in files written before it was set.
APPLICATION_ID = 0x62774442
#: `PRAGMA user_version`: the schema this code reads and writes (0: before it was recorded,
#: the same tables).
SCHEMA_VERSION = 1
KNOWN_VERSIONS = (0, 1)
#: Largest run id SQLite can store (a signed 64-bit INTEGER).
MAX_RUN_ID = 2**63 - 1
_SQLITE_MAGIC = b"SQLite format 3\x00"
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

    def __init__(self, path: str | Path | None = None, *, readonly: bool = False) -> None:
        self.path = checked_path(path, field="db") if path else default_db_path()
        self.readonly = readonly
        self._depth = 0
        self.unreadable: list[str] = []
        """Why `runs()` left runs out (corrupt rows)."""
        explicit = bool(path) or bool(os.environ.get("BANDWALL_DB"))
        exists = _regular_or_missing(self.path)
        if readonly:
            if not exists:
                if explicit:
                    folder = self.path.parent
                    why = (
                        f"folder {str(folder)!r} does not exist"
                        if not folder.is_dir()
                        else "bench and import create one"
                    )
                    raise ConfigError(
                        f"no results database at {str(self.path)!r} ({why}); check the path",
                        field="db",
                    )
                self._db = sqlite3.connect(":memory:", isolation_level=None)
                self._db.executescript(SCHEMA)  # nothing stored yet: an empty store
                self._tables = set(_EXPECTED)
                return
            self._check_header()
            self._db = self._connect_readonly()
            try:
                self._tables = self._check_schema()
            except sqlite3.Error as exc:
                self._db.close()
                raise self._error(exc) from None
            return
        _check_parent(self.path, explicit=explicit)
        if exists:
            self._check_header()
        try:
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise self._error(exc) from None
        try:
            self._check_schema()
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
            if self._db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            self._tables = set(_EXPECTED)
        except sqlite3.Error as exc:
            self._db.close()
            raise self._error(exc) from None

    @classmethod
    def reader(cls, path: str | Path | None = None) -> Store:
        """The store opened read-only (see the module docstring): what every read uses."""
        return cls(path, readonly=True)

    def _check_header(self) -> None:
        """The file starts as every SQLite database does; an empty file or a text file is not
        handed to SQLite (which would turn it into a database on the first write)."""
        try:
            with self.path.open("rb") as fh:
                head = fh.read(100)
        except OSError as exc:
            raise ConfigError(
                f"{str(self.path)!r}: cannot read: {exc.strerror}", field="db"
            ) from None
        if not head.startswith(_SQLITE_MAGIC):
            what = "an empty file" if not head else "not an SQLite file"
            raise ConfigError(
                f"{str(self.path)!r}: not a bandwall results database ({what}); bench and "
                "import create one at a new path",
                field="db",
            )

    def _connect_readonly(self) -> sqlite3.Connection:
        """`mode=ro`, and `immutable=1` for a WAL-mode file no writer has open (no -wal
        beside it): SQLite would otherwise create -wal and -shm files to read it."""
        with self.path.open("rb") as fh:
            head = fh.read(20)
        wal_mode = len(head) >= 20 and head[18:20] == b"\x02\x02"
        idle = not Path(f"{self.path}-wal").exists()
        quoted = urllib.parse.quote(str(self.path.resolve()))
        uri = f"file:{quoted}?mode=ro" + ("&immutable=1" if wal_mode and idle else "")
        try:
            return sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise self._error(exc) from None

    def _error(self, exc: BaseException) -> ConfigError:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if isinstance(exc, sqlite3.DatabaseError) and "not a database" in text:
            text = "not a bandwall results database (file is not SQLite or is corrupt)"
        journal = self.path.with_name(self.path.name + "-journal")
        if self.readonly and "readonly database" in text and journal.exists():
            # a read-only open must roll a hot journal back and cannot (fuzz round 20, D4)
            text = (
                f"a rollback journal ({journal.name}) from an interrupted write is pending: "
                "run a command that writes to it (bench, import) once to recover it"
            )
        return ConfigError(f"{str(self.path)!r}: {text}", field="db")

    def _check_schema(self) -> set[str]:
        """A database that has tables but not ours (or ours with other columns), or a schema
        version this code does not know, is refused before anything is read or written.
        Returns the bandwall tables present."""
        tables = dict(
            self._db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
        )
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        app_id = int(self._db.execute("PRAGMA application_id").fetchone()[0])
        if app_id not in (0, APPLICATION_ID):
            raise sqlite3.DatabaseError(
                f"not a bandwall results database (application id {app_id:#x})"
            )
        if version not in KNOWN_VERSIONS:
            raise sqlite3.DatabaseError(
                f"schema version {version}, which this bandwall does not know (it reads "
                f"{', '.join(map(str, KNOWN_VERSIONS))}); use the bandwall that wrote it"
            )
        if not tables:
            if self.readonly:
                raise sqlite3.DatabaseError("not a bandwall results database (it has no tables)")
            return set()
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
        return {t for t in _EXPECTED if t in tables}

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Turn a SQLite failure in the middle of a read into the one-line error."""
        try:
            yield
        except (sqlite3.Error, ValueError, TypeError) as exc:  # ValueError: a mangled JSON cell
            raise self._error(exc) from None

    def close(self) -> None:
        if not self.readonly:
            # back to the rollback journal when no one else has the file open (else SQLite
            # refuses and the next writer's close does it), so read-only opens create nothing
            with suppress(sqlite3.Error):
                self._db.execute("PRAGMA journal_mode=DELETE")
        with suppress(sqlite3.Error):
            self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; inside `transaction()` it joins the outer one."""
        if self.readonly:
            raise ConfigError(f"{str(self.path)!r} was opened read-only", field="db")
        if self._depth:
            yield self._db
            return
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        self._depth = 1
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
        finally:
            self._depth = 0
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    @contextmanager
    def transaction(self) -> Iterator[Store]:
        """Everything written inside is one transaction: all of it is stored, or (on any
        error, including Ctrl-C) none of it. Imports use it, so a bad row leaves no run."""
        with self._tx():
            yield self

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
        if "train" not in self._tables:
            return []
        rows = self._read(
            f"SELECT {', '.join(TRAIN_COLUMNS)} FROM train WHERE run_id = ? ORDER BY model",
            (_run_id(run_id),),
        )
        return [self._checked("train", run_id, i, TRAIN_COLUMNS, r) for i, r in enumerate(rows)]

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
        """Every readable run; a run whose row is corrupt is left out and its reason kept in
        `unreadable` (one bad run had failed every listing, the report and /api/results, the
        healthy runs' too: fuzz round 19, C8). `run(id)` still refuses it by name."""
        rows = self._read(f"SELECT {RUN_FIELDS} FROM runs ORDER BY id")
        out: list[Run] = []
        self.unreadable = []
        for r in rows:
            try:
                out.append(self._run(r))
            except ConfigError as exc:
                self.unreadable.append(exc.reason)
        return out

    def run(self, run_id: int) -> Run:
        if not 1 <= run_id <= MAX_RUN_ID:
            raise ConfigError(f"run ids are 1 to {MAX_RUN_ID:,}, got {run_id:,}", field="run")
        rows = self._read(f"SELECT {RUN_FIELDS} FROM runs WHERE id = ?", (run_id,))
        row = rows[0] if rows else None
        if row is None:
            known = ", ".join(str(r.id) for r in self.runs()) or "none"
            raise ConfigError(f"no run {run_id} in {str(self.path)!r}; runs: {known}", field="run")
        return self._run(row)

    def latest(self, kind: str | None = None) -> Run:
        runs = [r for r in self.runs() if kind is None or r.kind == kind]
        if not runs:
            kinds = f"{kind} runs" if kind else "runs"
            where = repr(str(self.path))
            if self.unreadable:  # not 'no runs yet' beside a run left out (fuzz round 20, D3)
                raise ConfigError(
                    f"no readable {kinds} in {where}: {len(self.unreadable):,} left out as "
                    "unreadable (bandwall results list names them)",
                    field="run",
                )
            raise ConfigError(f"no {kinds} in {where} yet", field="run")
        return runs[-1]

    def results(self, run_id: int) -> list[dict[str, Any]]:
        if "results" not in self._tables:
            return []
        rows = self._read(
            f"SELECT {', '.join(RESULT_COLUMNS)} FROM results WHERE run_id = ? "
            "ORDER BY op, inplace, size_bytes",
            (_run_id(run_id),),
        )
        return [self._checked("results", run_id, i, RESULT_COLUMNS, r) for i, r in enumerate(rows)]

    def links(self, run_id: int) -> list[dict[str, Any]]:
        if "links" not in self._tables:
            return []
        rows = self._read(
            f"SELECT {', '.join(LINK_COLUMNS)} FROM links WHERE run_id = ? ORDER BY src, dst",
            (_run_id(run_id),),
        )
        return [self._checked("links", run_id, i, LINK_COLUMNS, r) for i, r in enumerate(rows)]

    def _checked(
        self, table: str, run_id: int, index: int, columns: tuple[str, ...], row: tuple[Any, ...]
    ) -> dict[str, Any]:
        """A stored row as a dict, once every value has the type and range its column
        promises (`COLUMN_RULES`); else one error naming the run, row and column."""
        out = dict(zip(columns, row, strict=True))
        for col, value in out.items():
            problem = check_value(col, value)
            if problem:
                raise ConfigError(
                    f"{str(self.path)!r}: run {run_id}, {table} row {index + 1}: {col} is "
                    f"{_short(value)}, {problem}; the row cannot be used (re-run or re-import "
                    "the run)",
                    field="db",
                )
        return out

    def count_rows(self, run_id: int) -> int:
        """Measurements of any kind a run holds (counted, not read: a listing of runs does
        not fail on one bad value; `results show` reports it)."""
        total = 0
        for table in ("results", "links", "train"):
            if table in self._tables:
                (n,) = self._read(f"SELECT count(*) FROM {table} WHERE run_id = ?", (run_id,))[0]
                total += int(n)
        return total

    def integrity_ok(self) -> bool:
        return bool(self._read("PRAGMA integrity_check")[0][0] == "ok")

    def _run(self, r: tuple[Any, ...]) -> Run:
        """A runs row as a Run, its types and JSON cells checked."""

        def bad(col: str, value: Any, why: str) -> ConfigError:
            return ConfigError(
                f"{str(self.path)!r}: run {_short(r[0])}: {col} is {_short(value)}, {why}",
                field="db",
            )

        if not isinstance(r[0], int) or isinstance(r[0], bool):
            raise bad("id", r[0], "not a whole number")
        for i, col in ((1, "created_at"), (2, "kind"), (3, "status"), (6, "backend")):
            if not isinstance(r[i], str):
                raise bad(col, r[i], "not text")
        if r[4] is not None and not isinstance(r[4], str):
            raise bad("error", r[4], "not text")
        if not isinstance(r[5], int) or not 1 <= r[5] <= 1 << 24:
            raise bad("world_size", r[5], "not a rank count (1 to 16,777,216)")
        cells = []
        for i, col in ((7, "host"), (8, "versions"), (9, "args")):
            try:
                value = json.loads(r[i]) if isinstance(r[i], str | bytes) else None
            except (ValueError, RecursionError):
                value = None
            if not isinstance(value, dict):
                raise bad(col, r[i], "not a JSON object")
            cells.append(value)
        return Run(
            id=r[0],
            created_at=r[1],
            kind=r[2],
            status=r[3],
            error=r[4],
            world_size=r[5],
            backend=r[6],
            host=cells[0],
            versions=cells[1],
            args=cells[2],
        )


# --- stored values --------------------------------------------------------------------------

#: What every numeric column may hold: (whole number?, smallest, largest). Times are > 0
#: (a 0 s time divides algbw into infinity), sizes >= 0 bytes (nccl-tests' `-b 0` rows time
#: an empty launch: the latency a fit anchors on), bandwidths finite and >= 0.
COLUMN_RULES: dict[str, tuple[bool, float, float]] = {
    "size_bytes": (True, 0, 2**50),
    "count": (True, 0, 2**62),
    "inplace": (True, 0, 1),
    "iters": (True, 0, 2**31),
    "wrong": (True, 0, 2**62),
    "params": (True, 0, 2**62),
    "grad_bytes": (True, 0, 2**62),
    "world_size": (True, 1, 1 << 24),
    "src": (True, 0, 1 << 24),
    "dst": (True, 0, 1 << 24),
    "algbw_GBps": (False, 0, 1e9),
    "busbw_GBps": (False, 0, 1e9),
    "bw_GBps": (False, 0, 1e9),
    "jitter_s": (False, 0, 1e7),
    "exposed_s": (False, 0, 1e7),
}
#: Columns that are texts.
TEXT_COLUMNS = ("op", "dtype", "model")
#: Every other column ending in _s is a time: finite, > 0, under ~4 months.
TIME_RANGE = (1e-12, 1e7)


def check_value(col: str, value: Any) -> str | None:
    """Why `value` cannot be stored in or read from column `col`, or None when it can."""
    if col in TEXT_COLUMNS:
        return None if isinstance(value, str) and 0 < len(value) <= 64 else "not a short text"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "not a number"
    if not math.isfinite(value):
        return "not a finite number"
    whole, lo, hi = COLUMN_RULES.get(col, (False, *TIME_RANGE))
    if whole and value != int(value):
        return "not a whole number"
    if not lo <= value <= hi:
        return f"outside {lo:g} to {hi:g}"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _run_id(run_id: int) -> int:
    if not 1 <= run_id <= MAX_RUN_ID:
        raise ConfigError(f"run ids are 1 to {MAX_RUN_ID:,}, got {run_id:,}", field="run")
    return run_id


def _regular_or_missing(path: Path) -> bool:
    """Whether `path` exists; a folder, pipe or device there is an error (SQLite would block
    on a FIFO or fail with a bare message on a folder)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise ConfigError(f"{str(path)!r}: cannot read: {exc.strerror}", field="db") from None
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{str(path)!r} is a folder; give the database file", field="db")
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(
            f"{str(path)!r} is not a regular file (a pipe, socket or device)", field="db"
        )
    return True


def parse_run_ref(text: str, field: str = "results") -> int | None:
    """A run id typed by a user ('12'), or None for 'latest'; ASCII digits only ('²' passes
    `str.isdigit()` and then breaks `int()`), within SQLite's integer range."""
    t = text.strip()
    if t == "latest":
        return None
    if not (t.isascii() and t.isdigit()) or len(t) > 19 or not 1 <= int(t) <= MAX_RUN_ID:
        raise ConfigError(
            f"{text[:40]!r} must be a run id (1 to {MAX_RUN_ID:,}) or 'latest'", field=field
        )
    return int(t)
