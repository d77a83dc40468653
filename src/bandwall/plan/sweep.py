"""Grid sweeps: every combination of GPU counts, bandwidths and layouts in one vectorised call."""

from __future__ import annotations

import csv
import itertools
import sys
from typing import Any

import numpy as np

from bandwall.errors import ConfigError
from bandwall.plan.api import (
    BREAKDOWN_KEYS,
    MAX_DEFAULT_VIRTUAL_STAGES,
    PlanRequest,
    _budget,
    _step_inputs,
    default_global_batch,
    fault_arrays,
    resolve_workload,
)
from bandwall.plan.cluster import resolve_cluster
from bandwall.plan.layout import LayoutArrays, Schedule, Strategy
from bandwall.plan.step import derived_metrics, evaluate_step
from bandwall.workloads import Transformer, Workload

GRID_AXES = (
    "gpus",
    "bandwidth_Gbps",
    "oversubscription",
    "tp",
    "pp",
    "cp",
    "ep",
    "zero",
    "micro_batch",
    "virtual_stages",
)


def sweep(req: PlanRequest, grid: dict[str, list[float]]) -> dict[str, np.ndarray]:
    """Evaluate the cartesian product of `grid` (keys from GRID_AXES) around `req`.

    Axes not in the grid take the request's value. Rows that do not divide the cluster or the
    batch are kept with valid=False; rows that do not fit in memory with fits=False.
    """
    unknown = set(grid) - set(GRID_AXES)
    if unknown:
        raise ConfigError(
            f"sweep: unknown axis {sorted(unknown)[0]!r}; choose from " + ", ".join(GRID_AXES)
        )
    w = resolve_workload(req)
    s = req.strategy
    base: dict[str, list[float]] = {
        "gpus": [req.cluster.gpus],
        "bandwidth_Gbps": [np.nan],
        "oversubscription": [np.nan],
        "tp": [s.tp],
        "pp": [s.pp],
        "cp": [s.cp],
        "ep": [s.ep],
        "zero": [s.zero],
        "micro_batch": [s.micro_batch or 1],
        "virtual_stages": [s.virtual_stages or 1],
    }
    axes = {k: grid.get(k, base[k]) for k in GRID_AXES}
    rows = np.array(list(itertools.product(*axes.values())), dtype=np.float64)
    if rows.shape[0] > 50_000_000:
        raise ConfigError(f"sweep: {rows.shape[0]:,} combinations; at most 50,000,000")
    col = {k: rows[:, i] for i, k in enumerate(GRID_AXES)}
    bw = None if np.all(np.isnan(col["bandwidth_Gbps"])) else col["bandwidth_Gbps"]
    spec = req.cluster.model_copy(update={"gpus": int(np.max(col["gpus"]))})
    over = None if np.all(np.isnan(col["oversubscription"])) else col["oversubscription"]
    if over is not None and np.any(over < 1):
        raise ConfigError("oversubscription: every value must be >= 1 (1 = non-blocking)")
    cl = resolve_cluster(spec, num_gpus=col["gpus"], bandwidth_Gbps=bw, oversubscription=over)
    if over is None:
        col["oversubscription"] = np.full(rows.shape[0], float(np.max(cl.oversubscription)))
    if bw is None:
        col["bandwidth_Gbps"] = np.full(
            rows.shape[0],
            float(np.max(cl.scale_out.bandwidth_Bps)) * 8 / 1e9 if cl.scale_out else np.nan,
        )
    gb = req.global_batch or default_global_batch(w, req.cluster.gpus)
    if "virtual_stages" not in grid and s.virtual_stages is None:
        col["virtual_stages"] = _default_virtual_stages(w, s, col["pp"])
    if "micro_batch" not in grid and s.micro_batch is None and not isinstance(w, Transformer):
        col["micro_batch"] = np.maximum(1.0, np.floor(gb / col["gpus"]))
    ints = {k: col[k].astype(np.int64) for k in GRID_AXES[3:]}
    lay = LayoutArrays(
        ints["tp"],
        ints["pp"],
        ints["cp"],
        ints["ep"],
        ints["zero"],
        ints["micro_batch"],
        ints["virtual_stages"],
    )
    with np.errstate(all="ignore"):
        r = evaluate_step(w, cl, lay, _step_inputs(req, gb))
        d = derived_metrics(r, cl)
    budget = _budget(w, req, 1.0, gb)
    tokens_per_step = r["tokens_per_step"]
    steps = (
        budget["tokens"] / tokens_per_step
        if isinstance(w, Transformer)
        else budget["samples"] / gb + np.zeros_like(tokens_per_step)
    )
    faults = fault_arrays(w, cl)
    time_s = steps * r["step_time_s"] / faults["goodput"]
    gpu_hours = col["gpus"] * time_s / 3600
    valid = r["valid"] & (col["gpus"] % (col["tp"] * col["pp"] * col["cp"]) == 0)
    out: dict[str, np.ndarray] = {**col}
    out.update(
        {
            "dp": r["dp"],
            "dp_bytes_per_gpu": r["dp_bytes_per_gpu"],
            "step_time_s": r["step_time_s"],
            "compute_s": r["compute_s"],
            "exposed_comm_s": r["exposed_comm_s"],
            **{f"{k}_s": r[f"{k}_s"] for k in BREAKDOWN_KEYS if k != "compute"},
            **d,
            "memory_GB": r["memory_bytes"] / 1e9,
            "fits": r["fits"],
            "valid": valid,
            "goodput": faults["goodput"],
            "mtbf_s": faults["mtbf_s"],
            "checkpoint_interval_s": faults["checkpoint_interval_s"],
            "time_to_train_s": time_s,
            "gpu_hours": gpu_hours,
            "cost_usd": gpu_hours * cl.price_per_gpu_hour,
        }
    )
    return {k: np.broadcast_to(v, rows.shape[:1]) for k, v in out.items()}


def _default_virtual_stages(w: Workload, s: Strategy, pp: np.ndarray) -> np.ndarray:
    """Row-wise `default_virtual_stages`: the same rule as a single plan."""
    out = np.ones_like(pp)
    if s.schedule is Schedule.ONE_F_ONE_B or not isinstance(w, Transformer):
        return out
    for v in (2, 4):
        if v <= MAX_DEFAULT_VIRTUAL_STAGES:
            out = np.where((pp > 1) & (pp * v <= w.layers), float(v), out)
    return out


def write_table(table: dict[str, np.ndarray], path: str | None) -> None:
    """CSV to a file or stdout; Parquet when the path ends in .parquet (needs pyarrow)."""
    if path and path.endswith(".parquet"):
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise ConfigError(
                "output: Parquet needs pyarrow; pip install 'bandwall[parquet]' or write .csv"
            ) from None
        pq.write_table(pa.table({k: np.asarray(v) for k, v in table.items()}), path)
        return
    fh: Any = open(path, "w", newline="") if path else sys.stdout  # noqa: SIM115
    try:
        writer = csv.writer(fh)
        keys = list(table)
        writer.writerow(keys)
        cols = [np.asarray(table[k]) for k in keys]
        for i in range(len(cols[0])):
            writer.writerow([_cell(c[i]) for c in cols])
    finally:
        if path:
            fh.close()


def _cell(value: Any) -> str:
    if isinstance(value, np.bool_ | bool):
        return "true" if value else "false"
    f = float(value)
    if f.is_integer() and abs(f) < 1e15:
        return str(int(f))
    return f"{f:.6g}"
