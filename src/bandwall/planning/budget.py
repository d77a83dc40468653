"""The work budget of sweep, scale and compare: how much a request asks the engine to do,
counted before any of it is done, and refused over a limit with a clear error and the option
that raises it (`--max-points`).

A *point* is one layout evaluated at one grid row (the engine's unit of work: a searched
layout multiplies every row by the number of candidate layouts). Each looped combination
(values of non-vector axes such as model or preset: the engine runs once per combination)
adds `LOOP_POINTS` for its fixed cost (resolving the workload and cluster, building the
layout grid), and each axis value `VALUE_POINTS` (it is validated as a request).

The weights were measured on the project's shared 2-core machine under load (2026-12-03,
`tests/plan/test_budget.py` prints them): about 14 µs per point, 0.2 s per looped
combination, 0.7 ms per axis value. `DEFAULT_MAX_POINTS` is one million points, about 14 s
there, so the default refuses what would run past the 20 s a command may take.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from bandwall.errors import ConfigError

#: Default most points a command may evaluate (see the module docstring).
DEFAULT_MAX_POINTS = 2_000_000
#: Points one looped combination costs beyond its rows (its fixed set-up cost, ~0.2 s).
LOOP_POINTS = 15_000
#: Points one axis value costs (validated as a request field, ~0.7 ms).
VALUE_POINTS = 50
#: The hard ceiling `--max-points` cannot lift: beyond it a sweep's result table alone would
#: take gigabytes.
HARD_MAX_POINTS = 10_000_000_000


@dataclass(frozen=True)
class Work:
    """What a request asks for: grid rows, looped combinations and layouts per row."""

    rows: int
    loops: int
    layouts: int
    values: int = 0

    @property
    def points(self) -> int:
        return self.rows * self.layouts + self.loops * LOOP_POINTS + self.values * VALUE_POINTS

    def describe(self) -> str:
        """The sum the budget adds, each term shown (the loops' and values' set-up costs
        made 1,800 × 61,440 read as 113 M instead of the 110.6 M it is)."""
        terms = [
            f"{self.rows:,} row{'' if self.rows == 1 else 's'}"
            + (f" × {self.layouts:,} layouts searched" if self.layouts > 1 else "")
        ]
        if self.loops > 1:
            terms.append(f"{self.loops:,} looped combinations × {LOOP_POINTS:,}")
        elif self.loops == 1:  # counted in `points` whatever the count: the sum reads true
            terms.append(f"{LOOP_POINTS:,} set-up")
        if self.values:
            terms.append(f"{self.values:,} values × {VALUE_POINTS}")
        return " + ".join(terms) + f" = {self.points:,} points"


def layouts_searched(req: Any, fixed: tuple[str, ...] = ()) -> int:
    """How many layouts the engine tries per row for `req` (1 when nothing is searched);
    axes in `fixed` are given per row (sweep axes) and not searched."""
    from bandwall.planning.api import search_space
    from bandwall.planning.resolve import resolve_cluster, resolve_workload

    w = resolve_workload(req)
    gpn = resolve_cluster(req).gpus_per_node
    # what the engine prices after its prefilter (DeepSeek-V3: ~1% of the 3 M products), not
    # the product: a one-row sweep that `plan` answers in 0.6 s was refused as 3.3 M points
    searched, _, rows = search_space(req, w, gpn, fixed)
    return len(rows[0]) if searched else 1


def sweep_work(req: Any, axes: dict[str, list[Any]]) -> Work:
    """The work of `planning.api.sweep(req, axes)`."""
    from bandwall.planning.request import VECTOR_FIELDS

    rows = math.prod(len(v) for v in axes.values()) if axes else 1
    loops = math.prod(len(v) for k, v in axes.items() if k not in VECTOR_FIELDS) if axes else 1
    values = sum(len(v) for v in axes.values())
    return Work(rows, loops, layouts_searched(req, tuple(axes)), values)


def check_work(
    work: Work,
    max_points: int | None,
    field: str,
    *,
    override: bool = True,
    advice: str | None = None,
) -> None:
    """Refuse `work` over the budget, naming `field` (the largest axis) and, where the command
    has it (`override`), --max-points; `advice` replaces the layout-search advice where the
    command searches no layout (`collective`)."""
    limit = DEFAULT_MAX_POINTS if max_points is None else max_points
    if max_points is not None and not 1 <= max_points <= HARD_MAX_POINTS:
        raise ConfigError(
            f"must be 1 to {HARD_MAX_POINTS:,}, got {max_points:,}", field="max_points"
        )
    if work.points > limit:
        if advice is not None:
            tail = advice
        elif override:
            tail = (
                "give fewer values, fix layout axes (--tp, --pp, ...) to search fewer layouts, "
                "or raise --max-points (a million points take about 15 s on two cores)"
            )
        else:
            tail = "give fewer values or fix layout axes (--tp, --pp, ...) to search fewer layouts"
        raise ConfigError(f"{work.describe()}, over the budget of {limit:,}: {tail}", field=field)


#: Points one `collective` table may price: a row per (size, rank count) costs little, but
#: a million rows took 15-33 s and 3 GB and three million ran out of memory (fuzz round 23,
#: A1); 100,000 points is over 80,000 rows, more than any reader of the table needs.
COLLECTIVE_MAX_POINTS = 100_000


def check_collective(sizes: int, rank_counts: int) -> None:
    """Refuse a `collective` grid over `COLLECTIVE_MAX_POINTS`, naming its longer axis."""
    field = "sizes" if sizes >= rank_counts else "ranks"
    check_work(
        collective_work(sizes, rank_counts),
        COLLECTIVE_MAX_POINTS,
        field,
        override=False,
        advice="give fewer --sizes or --ranks values (e.g. a ×2 range instead of +1)",
    )


def collective_work(sizes: int, rank_counts: int) -> Work:
    """The work of pricing `sizes` message sizes at `rank_counts` rank counts (`collective`,
    `/api/collective`): one row each, nothing searched."""
    return Work(sizes * rank_counts, 1, 1, sizes + rank_counts)
