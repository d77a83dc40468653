"""Tables for measured runs, in nccl-tests' column order."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from bandwall.safeio import printable
from bandwall.units import format_size

_WIDE = (
    "op",
    "size",
    "count",
    "type",
    "in-place",
    "time(us)",
    "algbw(GB/s)",
    "busbw(GB/s)",
    "#wrong",
    "p10(us)",
    "p90(us)",
    "p99(us)",
)
#: Below this console width a run prints one table per (op, type), without the element count
#: and p10/p90 (`--json` and `results export` keep them), times with their unit: an 80-column
#: pipe then cuts no cell.
WIDE_COLUMNS = 120


def collectives_tables(
    rows: list[dict[str, Any]], title: str, width: int | None = None
) -> list[Table]:
    """A stored run's rows, in nccl-tests' column order (one table), or at a narrow `width`
    one table per op and type with the columns that fit."""
    if width is None or width >= WIDE_COLUMNS:
        t = Table(title=title)
        for col in _WIDE:
            t.add_column(col, justify="left" if col in ("op", "type") else "right", no_wrap=True)
        for r in rows:
            t.add_row(
                printable(r["op"]),
                format_size(r["size_bytes"]),
                str(r["count"]),
                printable(r["dtype"]),
                "yes" if r["inplace"] else "no",
                f"{r['time_median_s'] * 1e6:,.1f}",
                f"{r['algbw_GBps']:.3f}",
                f"{r['busbw_GBps']:.3f}",
                str(r["wrong"]),
                f"{r['time_p10_s'] * 1e6:,.1f}",
                f"{r['time_p90_s'] * 1e6:,.1f}",
                f"{r['time_p99_s'] * 1e6:,.1f}",
            )
        return [t]
    from bandwall.report.tables import format_duration

    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((str(r["op"]), str(r["dtype"])), []).append(r)
    tables = []
    for (op, dtype), members in groups.items():
        t = Table(title=printable(f"{title}: {op}, {dtype} (count, p10, p90: --json)"))
        for col in ("size", "in-place", "time", "algbw (GB/s)", "busbw (GB/s)", "#wrong", "p99"):
            t.add_column(col, justify="right", no_wrap=col not in ("algbw (GB/s)", "busbw (GB/s)"))
        for r in members:
            t.add_row(
                format_size(r["size_bytes"]),
                "yes" if r["inplace"] else "no",
                format_duration(r["time_median_s"]),
                f"{r['algbw_GBps']:,.2f}",
                f"{r['busbw_GBps']:,.2f}",
                str(r["wrong"]),
                format_duration(r["time_p99_s"]),
            )
        tables.append(t)
    return tables


def links_tables(rows: list[dict[str, Any]], world: int, slowest: int = 5) -> list[Table]:
    """The bandwidth matrix (GB/s, src row → dst column), latency matrix, and the slowest
    links."""
    bw = {(r["src"], r["dst"]): r for r in rows}
    mats = []
    for title, key, fmt in (
        ("link bandwidth GB/s (row sends to column)", "bw_GBps", "{:.3f}"),
        ("one-way latency p50 µs", "latency_p50_s", "{:.1f}"),
    ):
        t = Table(title=title)
        t.add_column("src\\dst", justify="right")
        for d in range(world):
            t.add_column(str(d), justify="right")
        for s in range(world):
            cells = []
            for d in range(world):
                r = bw.get((s, d))
                v = r[key] * (1e6 if key.endswith("_s") else 1) if r else None
                cells.append("-" if v is None else fmt.format(v))
            t.add_row(str(s), *cells)
        mats.append(t)
    worst = sorted(rows, key=lambda r: r["bw_GBps"])[:slowest]
    t = Table(title="slowest links")
    for col in ("src", "dst", "GB/s", "Gb/s", "p50 µs", "p99 µs", "jitter µs"):
        t.add_column(col, justify="right")
    for r in worst:
        t.add_row(
            str(r["src"]),
            str(r["dst"]),
            f"{r['bw_GBps']:.3f}",
            f"{r['bw_GBps'] * 8:.2f}",
            f"{r['latency_p50_s'] * 1e6:.1f}",
            f"{r['latency_p99_s'] * 1e6:.1f}",
            f"{r['jitter_s'] * 1e6:.1f}",
        )
    mats.append(t)
    return mats


def train_table(rows: list[dict[str, Any]], title: str) -> Table:
    """`bench train` rows: DDP step (median, p90), the no_sync (compute-only) step, the
    communication the overlap left exposed, and compute / step. Fits 80 columns; the rank
    count is in the run's header line."""
    t = Table(title=title)
    for col in (
        "model",
        "params",
        "step ms",
        "p90 ms",
        "compute ms",
        "exposed ms",
        "eff.",
    ):
        t.add_column(col, justify="left" if col == "model" else "right", no_wrap=True)
    for r in rows:
        t.add_row(
            r["model"],
            f"{r['params']:,}",
            f"{r['step_median_s'] * 1e3:,.1f}",
            f"{r['step_p90_s'] * 1e3:,.1f}",
            f"{r['compute_median_s'] * 1e3:,.1f}",
            f"{r['exposed_s'] * 1e3:,.1f}",
            f"{r['compute_median_s'] / r['step_median_s']:.1%}" if r["step_median_s"] else "-",
        )
    return t
