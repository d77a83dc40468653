"""Tables of the model against published training runs (`bandwall validate --published`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rich.table import Table

from bandwall.catalog.models import LOW_PRECISIONS

#: How the runs are grouped in the class table: the features whose residuals the error bars
#: are drawn from (precision and dense/MoE), then the stack.
GROUPS: dict[str, Callable[[Any], str]] = {
    "precision": lambda r: r.precision if r.precision in LOW_PRECISIONS else "16-bit",
    "model": lambda r: "MoE" if r.moe else "dense",
    "stack": lambda r: r.stack,
}


def summary_row(t: Table, label: str, s: dict[str, float]) -> None:
    """One row of an error summary (rows, median and mean |error|, bias, share within 10%);
    nothing for an empty part. Training runs here, serving and energy in `cli/infer.py`."""
    if not s.get("rows"):
        return
    t.add_row(
        label,
        f"{s['rows']:.0f}",
        f"{s['median_abs_error']:.1%}",
        f"{s['mean_abs_error']:.1%}",
        f"{s['bias']:+.1%}",
        f"{s['within_10pct']:.0%}",
    )


def runs_table(
    results: Iterable[Any], summarize: Callable[[list[Any]], dict[str, float]], title: str
) -> Table:
    """Error of the predicted step time by split, then by class within each split (80 cols).
    The error is (predicted − measured) / measured: a negative bias means too fast."""
    rows = list(results)
    t = Table(title=title)
    t.add_column("split / class", no_wrap=True)
    for col in ("runs", "median |err|", "mean |err|", "bias", "≤ 10%"):
        t.add_column(col, justify="right", no_wrap=True)
    for split, label in (("fit", "fit (tuned on)"), ("heldout", "held out")):
        part = [r for r in rows if r.split == split]
        summary_row(t, label, summarize(part))
        for name, key in GROUPS.items():
            for value in sorted({key(r) for r in part}):
                summary_row(t, f"  {name} {value}", summarize([r for r in part if key(r) == value]))
    summary_row(t, "all", summarize(rows))
    return t
