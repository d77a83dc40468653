"""Parse nccl-tests logs (`*_perf` stdout) and store them as bandwall runs.

Reads what real logs look like, not only what nccl-tests prints: mpirun's `[1,0]<stdout>:`
and srun's `0: ` prefixes, NCCL INFO lines between the rows, several `*_perf` runs in one file,
the header variants of nccl-tests 2.x (`redop`/`root` columns or not, `#wrong` or the older
`error` column, per-iteration columns), `N/A` where validation was off, and logs cut before
the footer. The columns are read from each block's own header line, so a row is only taken
when it has exactly the fields that header announces.

Which collective a block is and how many ranks ran it come, in that order, from the command
line (`--op`, `--ranks`), the log (`# Collective test starting: X_perf`, an `X_perf` command
line before the block, the `# Using devices` lines) or the numbers themselves: busbw / algbw is
nccl-tests' bus factor, 2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter and
alltoall, 1 for the rest (doc/PERFORMANCE.md). Ambiguity is an error that says what to pass.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from bandwall.errors import ConfigError
from bandwall.measure.bench.nccl_format import REDOP
from bandwall.model.collectives import Op, busbw_factor

#: nccl-tests binary stem -> bandwall collective.
BINARIES = {
    "all_reduce": Op.ALL_REDUCE,
    "all_gather": Op.ALL_GATHER,
    "reduce_scatter": Op.REDUCE_SCATTER,
    "broadcast": Op.BROADCAST,
    "reduce": Op.REDUCE,
    "alltoall": Op.ALL_TO_ALL,
    "sendrecv": Op.SEND_RECV,
}
UNSUPPORTED = ("alltoallv", "gather", "scatter", "hypercube")
#: nccl-tests type name -> (bandwall dtype or the name itself, bytes per element).
TYPES: dict[str, tuple[str, int]] = {
    "float": ("float32", 4),
    "double": ("float64", 8),
    "half": ("float16", 2),
    "bfloat16": ("bfloat16", 2),
    "int32": ("int32", 4),
    "int": ("int32", 4),
    "int8": ("int8", 1),
    "char": ("int8", 1),
    "uint8": ("uint8", 1),
    "uint32": ("uint32", 4),
    "int64": ("int64", 8),
    "uint64": ("uint64", 8),
    "f8e4m3": ("f8e4m3", 1),
    "f8e5m2": ("f8e5m2", 1),
}
#: The old `error` column is the largest deviation; nccl-tests flagged floats past ~1e-3.
ERROR_THRESHOLD = 1e-3

_PREFIX = re.compile(r"^(?:\[[^\]]*\]<std(?:out|err)>:|\[default\d+\]:|\d+: )")
_BINARY = re.compile(
    r"\b("
    + "|".join(sorted([*BINARIES, *UNSUPPORTED], key=len, reverse=True))
    + r")_perf(?:_mpi)?\b"
)
#: A whole number in a header line, as `_int` reads a cell: at most 19 digits (a longer one is
#: no count, and past 4,300 digits `int()` raises); a header with one is not recognised.
_WHOLE = r"(\d{1,19})(?!\d)"
_RANK = re.compile(
    rf"Rank\s+{_WHOLE}\s+(?:Group\s+\d+\s+)?Pid\s+{_WHOLE}\s+on\s+(\S+)\s+device\s+{_WHOLE}\s+"
    r"\[([^\]]*)\]\s*(.*)$"
)
_NTHREAD = re.compile(
    rf"nThread\s+{_WHOLE}\s+nGpus\s+{_WHOLE}\s+minBytes\s+{_WHOLE}\s+maxBytes\s+{_WHOLE}"
)
_ITERS = re.compile(rf"warmup iters:\s*{_WHOLE}\s+iters:\s*{_WHOLE}")
_TIME_KEYS = ("time", "cputime")


@dataclass
class Side:
    """One column group of a row: out-of-place or in-place."""

    time_us: float | None
    algbw_GBps: float | None
    busbw_GBps: float | None
    wrong: float | None  # None: N/A (validation off)
    max_error: float | None = None  # the old `error` column


@dataclass
class Row:
    size_bytes: int
    count: int
    type: str
    redop: str | None
    root: int | None
    out_of_place: Side | None
    in_place: Side | None
    line: int = 0


@dataclass
class Block:
    """One `*_perf` run: its header, rows and footer, and what the log says about it."""

    columns: list[str]
    rows: list[Row] = field(default_factory=list)
    binary: str | None = None
    binary_from: str | None = None
    ranks: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    out_of_bounds: int | None = None
    avg_busbw_GBps: float | None = None
    first_line: int = 0

    @property
    def sides(self) -> list[Side]:
        return [s for r in self.rows for s in (r.out_of_place, r.in_place) if s is not None]


def _status(block: Block) -> tuple[str, str | None]:
    """A run's status and note: complete when its footer was seen; the older layout (an
    `error` column, no `root`, as Azure's ND v2/v4 examples print it) is complete with its
    rows, since the excerpts of it carry no footer (fuzz round 18, D2: both blocks of the
    shipped example were listed as failed runs); otherwise the log was cut before the end."""
    if block.avg_busbw_GBps is not None:
        return "complete", None
    if block.rows and "error" in block.columns and "root" not in block.columns:
        return "complete", "no footer (the older nccl-tests layout)"
    return "failed", "log ends before the '# Avg bus bandwidth' footer"


_NUMBER = re.compile(
    r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?$|^[+-]?(?:nan|inf)$", re.I
)


def _num(token: str) -> float | None:
    """A number cell: ASCII, at most 32 characters (nan and inf are read, then refused with
    their line by `check_rows`)."""
    if token.upper() in ("N/A", "NA", "-"):
        return None
    if len(token) > 32 or not _NUMBER.match(token):
        raise ValueError(f"not a number: {token[:32]!r}")
    return float(token)


def _int(token: str) -> int:
    if not (token.isascii() and token.isdigit()) or len(token) > 19:
        raise ValueError(f"not a whole number: {token[:32]!r}")
    return int(token)


def _header_columns(text: str) -> list[str] | None:
    body = text.lstrip("#").split()
    if len(body) >= 6 and body[:2] == ["size", "count"] and any(k in body for k in _TIME_KEYS):
        return body
    return None


def _parse_row(columns: list[str], text: str, line: int = 0) -> Row | None:
    tokens = text.split()
    if not tokens or not (tokens[0].isascii() and tokens[0].isdigit()):
        return None
    if "timestamp" in columns:  # a date and a time replace the one label
        columns = [c for c in columns if c != "timestamp"]
        tokens = tokens[: len(columns)]
    if len(tokens) != len(columns):
        return None
    try:
        fixed: dict[str, str] = {}
        groups: list[dict[str, str]] = []
        for name, tok in zip(columns, tokens, strict=True):
            if name in _TIME_KEYS:
                groups.append({})
            (groups[-1] if groups else fixed)[name] = tok
        sides: list[Side | None] = []
        for g in groups[:2]:
            if "error" in g:
                err = _num(g["error"])
                wrong = None if err is None else float(abs(err) > ERROR_THRESHOLD)
            else:
                err = None
                wrong = _num(g.get("#wrong", "N/A"))
            sides.append(
                Side(
                    _num(g[next(k for k in _TIME_KEYS if k in g)]),
                    _num(g.get("algbw", "N/A")),
                    _num(g.get("busbw", "N/A")),
                    wrong,
                    err,
                )
            )
        while len(sides) < 2:
            sides.append(None)
        return Row(
            size_bytes=_int(fixed["size"]),
            count=_int(fixed["count"]),
            type=fixed.get("type", "float")[:32],
            redop=fixed.get("redop"),
            root=int(_num(fixed["root"]) or 0) if "root" in fixed else None,
            out_of_place=sides[0] if sides[0] and sides[0].time_us is not None else None,
            in_place=sides[1] if sides[1] and sides[1].time_us is not None else None,
            line=line,
        )
    except (ValueError, KeyError, StopIteration):
        return None


def parse_log(  # noqa: C901
    text: str | Iterable[str], unread: list[tuple[int, str]] | None = None
) -> list[Block]:
    """Every result block in a log (its text, or its lines as `safeio.iter_lines` streams
    them: bounded, long lines cut), with what the lines around it say. Lines inside a block
    that start like a row and do not read as one go to `unread` (line number, text)."""
    blocks: list[Block] = []
    pending: dict[str, Any] = {"ranks": [], "meta": {}, "binary": None, "from": None}
    current: Block | None = None
    rank_lines: list[tuple[int, int]] = []  # (rank, pid) of every '# Rank' line
    lines = text.splitlines() if isinstance(text, str) else text
    for number, raw in enumerate(lines, 1):
        line = _PREFIX.sub("", raw).rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        m = _BINARY.search(stripped)
        if m and "Collective test concluded" not in stripped:
            starting = "Collective test starting" in stripped
            pending["binary"], pending["from"] = m.group(1), "log" if starting else "command"
            if current is not None and current.rows and not starting:
                current = None
        if (m := _NTHREAD.search(stripped)) is not None:
            pending["meta"] = {
                "nthread": int(m.group(1)),
                "ngpus": int(m.group(2)),
                "min_bytes": int(m.group(3)),
                "max_bytes": int(m.group(4)),
            }
            if (it := _ITERS.search(stripped)) is not None:
                pending["meta"] |= {"warmup": int(it.group(1)), "iters": int(it.group(2))}
            pending["ranks"] = []
            current = None
            continue
        if stripped.startswith("#") and (m := _RANK.search(stripped)) is not None:
            rank_lines.append((int(m.group(1)), int(m.group(2))))
            pending["ranks"].append(
                {
                    "rank": int(m.group(1)),
                    "pid": int(m.group(2)),
                    "hostname": m.group(3),
                    "device": int(m.group(4)),
                    "bus": m.group(5),
                    "device_name": m.group(6).strip(),
                }
            )
            continue
        if (m2 := re.search(r"NCCL version (\S+)", stripped)) is not None:
            pending["meta"]["nccl"] = m2.group(1).split("+")[0]
        if (m3 := re.search(r"nccl-tests version (\S+)", stripped)) is not None:
            pending["meta"]["nccl_tests"] = m3.group(1)
        cols = _header_columns(stripped)
        if cols is not None:
            if current is not None and current.columns == cols and not current.rows:
                continue  # the header printed again (one per process without MPI)
            current = Block(
                columns=cols,
                binary=pending["binary"],
                binary_from=pending["from"],
                ranks=list(pending["ranks"]),
                meta=dict(pending["meta"]),
                first_line=number,
            )
            blocks.append(current)
            continue
        if current is None:
            continue
        body = stripped.lstrip("#").strip()
        if body.startswith("Out of bounds values"):
            with suppress(ValueError, IndexError):
                current.out_of_bounds = int(body.split(":", 1)[1].split()[0])
            continue
        if body.startswith("Avg bus bandwidth"):
            with suppress(ValueError, IndexError):
                current.avg_busbw_GBps = float(body.split(":", 1)[1].split()[0])
            current = None
            pending = {"ranks": [], "meta": {}, "binary": None, "from": None}
            continue
        row = _parse_row(current.columns, stripped, number)
        if row is not None:
            current.rows.append(row)
        elif unread is not None and stripped[:1].isdigit() and len(unread) < 3:
            unread.append((number, stripped[:60]))
    # Without MPI every process is rank 0 of its own one-rank job and prints its own header
    # (an MPI build prints every rank's line from rank 0 of one communicator, src/common.cu)
    solo = {pid for rank, pid in rank_lines if rank == 0}
    if len(solo) > 1 and all(rank == 0 for rank, _ in rank_lines):
        for b in blocks:
            b.meta["solo_processes"] = len(solo)
    return [b for b in blocks if b.rows]


def _ratio(block: Block) -> float | None:
    """busbw / algbw from the side with the largest algbw (the least rounded one)."""
    sides = [s for s in block.sides if s.algbw_GBps and s.busbw_GBps]
    if not sides:
        return None
    best = max(sides, key=lambda s: s.algbw_GBps or 0.0)
    assert best.algbw_GBps and best.busbw_GBps
    return best.busbw_GBps / best.algbw_GBps


def _tolerance(block: Block) -> float:
    sides = [s for s in block.sides if s.algbw_GBps and s.busbw_GBps]
    best = max(sides, key=lambda s: s.algbw_GBps or 0.0)
    assert best.algbw_GBps and best.busbw_GBps
    return 0.006 / best.algbw_GBps + 0.006 / best.busbw_GBps + 1e-4


def _fit_world(op: Op, ratio: float, tol: float) -> int | None:
    """The rank count whose bus factor matches busbw / algbw; None when any would (factor 1)."""
    fits = [n for n in range(2, 1 << 15) if abs(float(busbw_factor(op, n)) - ratio) <= tol * ratio]
    if op in (Op.BROADCAST, Op.REDUCE, Op.SEND_RECV):
        return None
    return fits[0] if len(fits) == 1 else (fits[0] if fits and len(fits) < 3 else None)


def _candidates(block: Block) -> list[Op]:
    """Collectives consistent with the redop / root columns and the bus factor."""
    ops = list(Op)
    row = block.rows[0]
    if row.root is not None:  # the columns of nccl-tests >= 2.11 are reliable
        ops = [o for o in ops if (row.root >= 0) == (o in (Op.BROADCAST, Op.REDUCE))]
        if row.redop is not None:
            ops = [o for o in ops if (REDOP[o] == "none") == (row.redop == "none")]
    ratio = _ratio(block)
    if ratio is None:
        return ops
    tol = _tolerance(block)
    keep = []
    known = max(r["rank"] for r in block.ranks) + 1 if block.ranks else None
    for o in ops:
        if known is not None:
            if abs(float(busbw_factor(o, known)) - ratio) <= tol * ratio:
                keep.append(o)
        elif o in (Op.BROADCAST, Op.REDUCE, Op.SEND_RECV):
            if abs(ratio - 1.0) <= tol:
                keep.append(o)
        elif any(abs(float(busbw_factor(o, n)) - ratio) <= tol * ratio for n in range(2, 1 << 15)):
            keep.append(o)
    return keep


def resolve(block: Block, op: str | None, ranks: int | None) -> tuple[Op, int, str]:
    """The collective and rank count of a block, and where the collective came from."""
    if op is not None:
        from bandwall.model.collectives import parse_op

        chosen, origin = parse_op(op), "--op"
    elif block.binary in UNSUPPORTED:
        raise ConfigError(
            f"{block.binary}_perf (log line {block.first_line}) has no bandwall collective; "
            "supported: " + ", ".join(f"{b}_perf" for b in BINARIES),
            field="op",
        )
    elif block.binary is not None:
        chosen, origin = BINARIES[block.binary], f"log ({block.binary}_perf)"
    else:
        cands = _candidates(block)
        if len(cands) != 1:
            names = ", ".join(o.value for o in cands) or "none of bandwall's"
            raise ConfigError(
                f"the block at log line {block.first_line} does not say which collective it is "
                f"(its columns fit: {names}); give --op",
                field="op",
            )
        chosen, origin = cands[0], "inferred from redop/root and busbw/algbw"
    if ranks is not None:
        return chosen, ranks, origin
    if block.ranks:
        return chosen, max(r["rank"] for r in block.ranks) + 1, origin
    ratio = _ratio(block)
    world = _fit_world(chosen, ratio, _tolerance(block)) if ratio else None
    if world is None:
        raise ConfigError(
            f"the block at log line {block.first_line} ({chosen.value}) has no '# Using devices' "
            "lines and its bus factor does not fix the rank count; give --ranks",
            field="ranks",
        )
    return chosen, world, origin


def store_rows(block: Block, op: Op, world: int, source: str = "log") -> list[dict[str, Any]]:
    """Result rows in the store's schema. nccl-tests prints the mean time, so the median and
    percentiles all hold it; algbw is recomputed from size / time, busbw with the bus factor.
    A row the store could not hold (a time that is not a positive finite number, a negative
    bandwidth) is refused naming its line: nothing of the log is stored."""
    from bandwall.measure.bench.store import check_value

    series = sorted({(r.type, r.redop or "") for r in block.rows})
    if len(series) > 1:
        # `-d all` / `-o all` print each size once per type or reduction; merged as repeats
        # they became one median row labelled with the first type (fuzz round 20, B5)
        names = ", ".join(" ".join(x for x in pair if x) for pair in series[:4])
        more = f" and {len(series) - 4} more" if len(series) > 4 else ""
        raise ConfigError(
            f"{source} line {block.rows[0].line}: the block mixes {len(series)} data types or "
            f"reductions ({names}{more}; nccl-tests -d all or -o all) and a run keeps one "
            "series per size: import a log of one type and reduction; nothing was imported",
            field="log",
        )
    out = []
    factor = float(busbw_factor(op, world))
    iters = int(block.meta.get("iters", 0))
    for r in block.rows:
        dtype, elem = TYPES.get(r.type, (r.type, 0))
        count = r.size_bytes // elem if elem else r.count
        for inplace, s in ((0, r.out_of_place), (1, r.in_place)):
            if s is None or s.time_us is None:
                continue
            t = s.time_us * 1e-6
            algbw = r.size_bytes / t / 1e9 if t > 0 else float(s.algbw_GBps or 0.0)
            for name, value in (("algbw", s.algbw_GBps), ("busbw", s.busbw_GBps)):
                if value is not None and not (math.isfinite(value) and value >= 0):
                    raise ConfigError(
                        f"{source} line {r.line}: {name} {value:g} is not a bandwidth "
                        "(a finite number >= 0)",
                        field="log",
                    )
            row = {
                "op": op.value,
                "size_bytes": r.size_bytes,
                "count": count,
                "dtype": dtype,
                "inplace": inplace,
                "iters": iters,
                "time_p10_s": t,
                "time_median_s": t,
                "time_p90_s": t,
                "time_p99_s": t,
                "time_min_s": t,
                "algbw_GBps": algbw,
                "busbw_GBps": algbw * factor,
                "wrong": int(s.wrong or 0) if math.isfinite(s.wrong or 0) else -1,
            }
            for col in ("size_bytes", "time_median_s", "algbw_GBps", "wrong"):
                problem = check_value(col, row[col])
                if problem:
                    what = {"time_median_s": "time (us)", "algbw_GBps": "algbw (size / time)"}
                    shown = s.time_us if col == "time_median_s" else row[col]
                    raise ConfigError(
                        f"{source} line {r.line}: {what.get(col, col)} {shown!r:.32} is "
                        f"{problem}; nothing was imported",
                        field="log",
                    )
            out.append(row)
    return _merge_repeats(out, factor)


def _merge_repeats(rows: list[dict[str, Any]], factor: float) -> list[dict[str, Any]]:
    """One row per (size, in-place): nccl-tests' `-N` cycles print every size once per cycle
    in one block, and the store keeps one row per key, so all but the last cycle were lost
    while the import counted them (fuzz round 19, C3). The cycles' mean times become the row's
    spread: median, p10/p90/p99 and minimum over them; #wrong their largest."""
    import numpy as np

    groups: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["size_bytes"], row["inplace"]), []).append(row)
    out = []
    for same in groups.values():
        if len(same) == 1:
            out.append(same[0])
            continue
        times = np.sort(np.array([r["time_median_s"] for r in same]))
        t = float(np.median(times))
        merged = dict(same[0])
        merged.update(
            time_median_s=t,
            time_p10_s=float(np.percentile(times, 10)),
            time_p90_s=float(np.percentile(times, 90)),
            time_p99_s=float(np.percentile(times, 99)),
            time_min_s=float(times[0]),
            algbw_GBps=merged["size_bytes"] / t / 1e9 if t > 0 else merged["algbw_GBps"],
            wrong=max(int(r["wrong"]) for r in same),
        )
        merged["busbw_GBps"] = merged["algbw_GBps"] * factor
        out.append(merged)
    return out


#: Rows one block may hold: a size sweep from 8 B to 16 GiB doubling is 32 rows, a fine
#: sweep (-i step) a few thousand; beyond this `results show`, `validate` and `calibrate` on
#: the run take minutes (a 100,000-row block took 109 s and 1.2 GB to show).
MAX_BLOCK_ROWS = 10_000


def import_log(
    text: str | Iterable[str],
    source: str,
    db: str | None = None,
    op: str | None = None,
    ranks: int | None = None,
) -> list[dict[str, Any]]:
    """Store every block of a log as one run; returns a summary per run created. All blocks
    are resolved and every row checked before anything is written, and everything is written
    in one transaction: a log that needs --op, holds a bad row, or is interrupted stores
    nothing."""
    from bandwall.measure.bench.store import Store

    unread: list[tuple[int, str]] = []
    blocks = parse_log(text, unread)
    if not blocks:
        # a row out of range (a 20-digit size) hid its block behind 'no rows' (fuzz round
        # 22, D3): quote it
        why = (
            f"; line {unread[0][0]} does not read as a row (a number out of range or a "
            f"column missing): {unread[0][1]!r}"
            if unread
            else " (expected the '#  size  count  type ...' header followed by rows)"
        )
        raise ConfigError(f"no nccl-tests result rows in {source!r}{why}", field="log")
    for b in blocks:
        if len(b.rows) > MAX_BLOCK_ROWS:
            raise ConfigError(
                f"the block at line {b.first_line} has {len(b.rows):,} rows; at most "
                f"{MAX_BLOCK_ROWS:,} (nccl-tests prints one per size, a few dozen per op); "
                "nothing was stored",
                field="log",
            )
    plans = [(b, *resolve(b, op, ranks)) for b in blocks]
    rows_of = [store_rows(b, chosen, world, source) for b, chosen, world, _ in plans]
    out = []
    with Store(db) as store, store.transaction():
        for i, (block, chosen, world, origin) in enumerate(plans):
            rows = rows_of[i]
            hosts = sorted({r["hostname"] for r in block.ranks})
            run_id = store.start_run(
                "collectives",
                world,
                "nccl",
                {
                    "hostname": hosts[0] if hosts else "unknown",
                    "hosts": hosts,
                    "gpus": sorted({r["device_name"] for r in block.ranks}),
                    "ranks": block.ranks,
                    "imported_from": source,
                },
                {k: v for k, v in block.meta.items() if k in ("nccl", "nccl_tests")},
                {
                    "command": "import nccl-tests",
                    "source": source,
                    "block": i,
                    "first_line": block.first_line,
                    "op_from": origin,
                    "time_statistic": "mean over iterations (nccl-tests)",
                    "footer_avg_busbw_GBps": block.avg_busbw_GBps,
                    "out_of_bounds": block.out_of_bounds,
                    **{k: v for k, v in block.meta.items() if k not in ("nccl", "nccl_tests")},
                },
            )
            for row in rows:
                store.add_result(run_id, row)
            store.finish_run(run_id, *_status(block))
            sides = block.sides
            out.append(
                {
                    "run_id": run_id,
                    "op": chosen.value,
                    "op_from": origin,
                    "ranks": world,
                    "rows": len(rows),
                    "avg_busbw_GBps": block.avg_busbw_GBps
                    if block.avg_busbw_GBps is not None
                    else sum(s.busbw_GBps or 0.0 for s in sides) / max(len(sides), 1),
                }
            )
    return out
