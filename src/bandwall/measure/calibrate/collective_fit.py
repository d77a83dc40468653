"""Fit the collective model's per-call overheads to published nccl-tests curves, a third
of the rows at most, and report fit and held-out errors apart.

`data/collective_small_msgs.csv` holds published all_reduce curves (each row with its source
URL and date). The split is fixed before any fit: a row is fitted when sha256(its id) % 3
== 0, held out otherwise. Rows given as bus bandwidth with two decimals are only usable where
that rounding is within ±5% (busbw >= 0.10 GB/s). The fitted constants are
`bandwall.model.collectives.overheads.LAUNCH_US` (per GPU generation), `NETWORK_CALL_US`
(per scale-out transport), `PIPELINE_FILL_BYTES` and `PIPELINE_FILL_BYTES_IN_NODE` (per
channel, across nodes and within one): they minimise the sum of |log(predicted / measured)|
over the fitted rows from 8 B to 16 MiB. The per-call constants add to the model's time, so
for each pair of fills they come from coordinate descent on a 0.1 µs grid (the loss is convex
in each); the fills are scanned in turn on a 16 KiB grid.
"""

from __future__ import annotations

import csv
import hashlib
import math
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from bandwall.model.collectives import Algo, Op, collective_time_s, fast, overheads
from bandwall.model.topology import Topology, build_topology

FILE = "collective_small_msgs.csv"
#: The region the constants are fitted on and the bands errors are reported for.
FIT_BYTES = (8.0, 16.0 * 2**20)
BANDS = {"8B-1MiB": (8.0, 2.0**20), "32KiB-16MiB": (32.0 * 2**10, 16.0 * 2**20)}
#: busbw printed with two decimals below this is more than ±5% rounding.
MIN_BUSBW_GBPS = 0.10


@dataclass(frozen=True)
class Row:
    id: str
    curve: str
    size_bytes: float
    measured_s: float
    ranks: int
    topo: Topology
    fitted: bool
    algo: Algo
    """What the run forced (NCCL_ALGO), AUTO where it did not or did not say."""
    gpus_per_process: int
    """nccl-tests -g: GPUs one process drives (1 where unknown, as PyTorch runs them)."""
    tool: str = "nccl-tests"
    """What timed the calls: nccl-tests, or a torch.distributed loop (its own per-call cost)."""

    @property
    def arch(self) -> str:
        return self.topo.arch.value

    @property
    def transport(self) -> str:
        out = self.topo.scale_out
        return out.transport if out is not None and self.ranks > self.topo.gpus_per_node else ""


def is_fit_row(row_id: str) -> bool:
    """The split rule, fixed before fitting: a third of the rows by their id's hash."""
    return int(hashlib.sha256(row_id.encode()).hexdigest(), 16) % 3 == 0


def load_rows() -> list[Row]:
    """The usable rows of the published curves, each with the topology it is priced on."""
    text = resources.files("bandwall.measure.calibrate").joinpath("data", FILE).read_text()
    out = []
    topos: dict[tuple[str, ...], Topology] = {}
    for r in csv.DictReader(text.splitlines()):
        if r["measured"] == "busbw" and float(r["busbw_GBps"]) < MIN_BUSBW_GBPS:
            continue
        nodes, gpus = int(r["nodes"]), int(r["gpus"])
        key = (r["gpu"], r["fabric"], r["nics_per_node"], r["nodes"], r["gpus"])
        if key not in topos:
            topos[key] = build_topology(
                gpus_per_node=gpus // nodes,
                scale_out=r["fabric"] or None,
                gpu=r["gpu"],
                nics_per_node=float(r["nics_per_node"]) if r["nics_per_node"] else None,
            )
        out.append(
            Row(
                id=r["id"],
                curve=r["curve"],
                size_bytes=float(r["size_bytes"]),
                measured_s=float(r["time_us"]) * 1e-6,
                ranks=gpus,
                topo=topos[key],
                fitted=is_fit_row(r["id"]),
                algo=Algo.AUTO if r["algo"] in ("auto", "unknown") else Algo(r["algo"]),
                gpus_per_process=int(r["gpus_per_process"] or 1),
                tool=r["tool"] or "nccl-tests",
            )
        )
    return out


def model_s(rows: list[Row], op: Op = Op.ALL_REDUCE) -> dict[str, float]:
    """The model's time for each row, as configured now, one vector call per topology."""
    out: dict[str, float] = {}
    groups: dict[tuple[int, Algo], list[Row]] = {}
    for r in rows:
        groups.setdefault((id(r.topo), r.algo), []).append(r)
    for (_, algo), members in groups.items():
        sizes = np.array([r.size_bytes for r in members])
        ranks = np.array([float(r.ranks) for r in members])
        t = collective_time_s(op, algo, sizes, ranks, members[0].topo)
        out.update({r.id: float(v) for r, v in zip(members, t, strict=True)})
    return out


def _overhead_s(
    row: Row,
    launch: dict[str, float],
    network: dict[str, float],
    harness: dict[str, float] | None = None,
) -> float:
    """Per-call overheads the row pays: its GPU generation's launch and, across nodes, its
    transport's proxy progress; plus, for a curve not timed by nccl-tests, what its timing
    loop adds per call (a measurement convention, converted here and not charged by the
    model). (A constant per GPU beyond the first a process drives, for nccl-tests -g 8 runs,
    was fitted to 0 and dropped.)"""
    extra = (harness or {}).get(row.tool, 0.0)
    return (launch.get(row.arch, 0.0) + network.get(row.transport, 0.0) + extra) * 1e-6


@dataclass(frozen=True)
class OverheadFit:
    launch_us: dict[str, float]
    network_us: dict[str, float]
    harness_us: dict[str, float]
    """Per call, by the tool that timed a curve (nccl-tests: none)."""
    fill_bytes: float
    """Across nodes."""
    fill_in_node_bytes: float
    errors: dict[str, float]
    """Signed relative error per row id, predicted / measured − 1, with the fitted values."""
    rows: list[Row]
    loss: float

    def summary(self) -> dict[str, dict[str, dict[str, float]]]:
        """Per band, for the fitted and the held-out rows: count, median |error|, max
        |error| and the signed bias (median error)."""
        out: dict[str, dict[str, dict[str, float]]] = {}
        for band, (lo, hi) in BANDS.items():
            out[band] = {}
            for split, fitted in (("fit", True), ("held_out", False)):
                e = [
                    self.errors[r.id]
                    for r in self.rows
                    if r.fitted is fitted and lo <= r.size_bytes <= hi
                ]
                out[band][split] = {
                    "rows": float(len(e)),
                    "median_abs_error": statistics.median(abs(x) for x in e) if e else math.nan,
                    "max_abs_error": max(abs(x) for x in e) if e else math.nan,
                    "bias": statistics.median(e) if e else math.nan,
                }
        return out


@contextmanager
def _fill(fill_bytes: float, in_node_bytes: float) -> Iterator[None]:
    """The model with these pipeline fills (across nodes, within one) and no per-call
    overheads (they are added here)."""
    saved = (
        dict(overheads.LAUNCH_US),
        dict(overheads.NETWORK_CALL_US),
        overheads.PIPELINE_FILL_BYTES,
        overheads.PIPELINE_FILL_BYTES_IN_NODE,
    )
    overheads.LAUNCH_US.update({k: 0.0 for k in overheads.LAUNCH_US})
    overheads.NETWORK_CALL_US.update({k: 0.0 for k in overheads.NETWORK_CALL_US})
    overheads.PIPELINE_FILL_BYTES = fill_bytes
    overheads.PIPELINE_FILL_BYTES_IN_NODE = in_node_bytes
    fast.clear()
    try:
        yield
    finally:
        overheads.LAUNCH_US.update(saved[0])
        overheads.NETWORK_CALL_US.update(saved[1])
        overheads.PIPELINE_FILL_BYTES = saved[2]
        overheads.PIPELINE_FILL_BYTES_IN_NODE = saved[3]
        fast.clear()


def _additive(
    fit: list[Row], base: dict[str, float], step_us: float, rounds: int
) -> tuple[dict[str, float], dict[str, float], dict[str, float], float]:
    """Coordinate descent on the additive constants for fixed base times: Σ|log| is convex
    in each, so a scan of its grid finds each one's minimum."""
    launch = {a: 0.0 for a in sorted({r.arch for r in fit})}
    network = {t: 0.0 for t in sorted({r.transport for r in fit if r.transport})}
    harness = {t: 0.0 for t in sorted({r.tool for r in fit} - {"nccl-tests"})}

    def loss() -> float:
        return sum(
            abs(math.log((base[r.id] + _overhead_s(r, launch, network, harness)) / r.measured_s))
            for r in fit
        )

    grid = [round(i * step_us, 6) for i in range(int(MAX_OVERHEAD_US / step_us) + 1)]
    for _ in range(rounds):
        for table in (launch, network, harness):
            for key in table:
                scores = [_try(table, key, v, loss) for v in grid]
                table[key] = grid[scores.index(min(scores))]
    return launch, network, harness, loss()


def _try(table: dict[str, float], key: str, value: float, loss: Any) -> float:
    old = table[key]
    table[key] = value
    result = float(loss())
    table[key] = old
    return result


#: The search ranges: per-call overheads up to 500 µs, pipeline fill up to 4 MiB per channel.
MAX_OVERHEAD_US = 500.0
FILL_GRID_BYTES = tuple(float(k * 16 * 2**10) for k in range(0, 257))


def fit_overheads(step_us: float = 0.1, rounds: int = 4) -> OverheadFit:
    """Fit the two pipeline fills (each scanned on its grid in turn, coarse then fine, until
    neither moves) and, for each pair, the per-call constants (coordinate descent) on the
    fitted rows between FIT_BYTES, minimising Σ|log(predicted / measured)|; then price every
    row with the result."""
    rows = load_rows()
    fit = [r for r in rows if r.fitted and FIT_BYTES[0] <= r.size_bytes <= FIT_BYTES[1]]
    cache: dict[tuple[float, float], float] = {}

    def trial(fills: tuple[float, float]) -> float:
        if fills not in cache:
            with _fill(*fills):
                base = model_s(fit)
            cache[fills] = _additive(fit, base, 1.0, 2)[3]
        return cache[fills]

    def scan(fills: list[float], which: int) -> None:
        def at(v: float) -> tuple[float, float]:
            return (v, fills[1]) if which == 0 else (fills[0], v)

        # coarse scan, then the neighbourhood of the best on the fine grid
        centre = min(FILL_GRID_BYTES[::16], key=lambda v: trial(at(v)))
        i = FILL_GRID_BYTES.index(centre)
        fills[which] = min(FILL_GRID_BYTES[max(i - 16, 0) : i + 17], key=lambda v: trial(at(v)))

    fills = [overheads.PIPELINE_FILL_BYTES, overheads.PIPELINE_FILL_BYTES_IN_NODE]
    for _ in range(3):
        before = list(fills)
        scan(fills, 0)
        scan(fills, 1)
        if fills == before:
            break
    with _fill(*fills):
        base_all = model_s(rows)
    launch, network, harness, loss = _additive(fit, base_all, step_us, rounds)
    errors = {
        r.id: (base_all[r.id] + _overhead_s(r, launch, network, harness)) / r.measured_s - 1
        for r in rows
    }
    return OverheadFit(launch, network, harness, fills[0], fills[1], errors, rows, loss)
