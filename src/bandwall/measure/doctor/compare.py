"""Join the evidence with the model: what this fabric should give an nccl-tests run
(`bandwall.model.collectives.evaluate_collective` on a topology from
`bandwall.model.topology.collective_topology`), what the planner predicts for the traced job's
step and exposed communication (`bandwall.planning.api.plan`), and the compute efficiency that
makes the model's compute time match the trace (`calibrate --from-trace`).

Where the evidence does not say (GPU model, NICs, fabric), the assumption made is returned
with the numbers, so a reader sees what the comparison rests on and what to pass to change it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from bandwall.errors import ConfigError

# One device-name table for doctor: the job view and the busbw comparison read names alike.
from bandwall.measure.doctor.job import gpu_from_name

#: Scale-out fabric assumed for a transport seen in a log when --fabric is not given, with the
#: NIC speed NCCL printed (GB/s per NIC) when known.
FABRIC_BY_TRANSPORT: dict[str, tuple[tuple[float, str], ...]] = {
    "IB": ((12.5, "ib-hdr"), (25.0, "ib-hdr"), (50.0, "ib-ndr"), (100.0, "ib-xdr")),
    "RoCE": ((12.5, "roce-100"), (25.0, "roce-200"), (50.0, "roce-400")),
    "EFA": ((12.5, "efa-p4d"), (50.0, "efa-p5")),
    "Socket": ((1.25, "eth-10g-tcp"), (3.125, "eth-25g-tcp"), (12.5, "vpc-100g")),
}
DEFAULT_FABRIC = {"IB": "ib-ndr", "RoCE": "roce-400", "EFA": "efa-p5", "Socket": "eth-25g-tcp"}
#: Sizes below this are latency-bound; busbw is compared on the largest sizes at or above it.
MIN_COMPARE_BYTES = 64 << 20


@dataclass
class Layout:
    """The topology a comparison assumes, and why."""

    ranks: int
    gpus_per_node: int
    gpu: str
    fabric: str | None
    """Scale-out fabric key; None on one node (the scale-up fabric alone)."""
    assumptions: list[str] = field(default_factory=list)

    def topology(self) -> Any:
        from bandwall.catalog import load_catalog
        from bandwall.model.topology import collective_topology

        if self.fabric is None:
            up = load_catalog().gpu(self.gpu).scale_up_fabric
            return collective_topology(
                max_ranks=self.ranks, gpus_per_node=self.ranks, fabric=up, gpu=self.gpu
            )
        return collective_topology(
            max_ranks=self.ranks,
            gpus_per_node=self.gpus_per_node,
            fabric=self.fabric,
            gpu=self.gpu,
        )

    def describe(self) -> str:
        nodes = max(1, math.ceil(self.ranks / max(self.gpus_per_node, 1)))
        where = f"over {self.fabric}" if self.fabric else "on one node's scale-up fabric"
        return f"{self.ranks} × {self.gpu} ({nodes} node(s) × {self.gpus_per_node}) {where}"


def infer_layout(
    *,
    ranks: int,
    hosts: int | None,
    device_names: list[str],
    transport: str | None,
    nic_speed_GBps: float | None = None,
    fabric: str | None = None,
    gpu: str | None = None,
    gpus_per_node: int | None = None,
) -> Layout:
    """The layout to price an nccl-tests block on, from what the log says and the options."""
    notes: list[str] = []
    if gpu is None:
        found = {g for g in (gpu_from_name(n) for n in device_names) if g is not None}
        if len(found) == 1:
            gpu = found.pop()
            notes.append(f"GPU {gpu} from the device name '{device_names[0]}'")
        else:
            raise ConfigError(
                "the log does not name a GPU the catalog has ("
                + (", ".join(sorted(set(device_names))) or "no '# Using devices' lines")
                + "); give --gpu (see `bandwall catalog gpus`)",
                field="gpu",
            )
    if gpus_per_node is None:
        if hosts:
            gpus_per_node = max(1, ranks // hosts)
            notes.append(f"{gpus_per_node} GPU(s) per node: {ranks} ranks on {hosts} host(s)")
        else:
            gpus_per_node = min(ranks, 8)
            notes.append(
                f"{gpus_per_node} GPUs per node assumed (no host names): give --gpus-per-node"
            )
    single = ranks <= gpus_per_node
    if single:
        fabric = None
    elif fabric is None:
        kind = transport or "IB"
        choices = FABRIC_BY_TRANSPORT.get(kind, ())
        if nic_speed_GBps and choices:
            fabric = min(choices, key=lambda c: abs(c[0] - nic_speed_GBps))[1]
            notes.append(f"fabric {fabric}: {kind} NICs at {nic_speed_GBps:g} GB/s in the log")
        else:
            fabric = DEFAULT_FABRIC.get(kind, "ib-ndr")
            notes.append(
                f"fabric {fabric} assumed for {kind or 'an unknown transport'} (its speed is not "
                "in the log): give --fabric"
            )
    return Layout(ranks, gpus_per_node, gpu, fabric, notes)


def busbw_comparison(rows: list[dict[str, Any]], op: str, layout: Layout) -> dict[str, Any]:
    """Measured busbw of an nccl-tests block against the model's, size by size.

    `rows` are the store's rows (size_bytes, busbw_GBps, inplace); the summary compares the
    largest sizes (>= 64 MiB, or the three largest when all are smaller), where both sides
    are bandwidth-bound.
    """
    import numpy as np

    from bandwall.model.collectives import evaluate_collective, parse_op

    the_op = parse_op(op)
    best_by_size: dict[int, float] = {}  # one pass: rescanning per size was quadratic
    for r in rows:
        size, bw = int(r["size_bytes"]), float(r["busbw_GBps"])
        if size > 0 and (size not in best_by_size or bw > best_by_size[size]):
            best_by_size[size] = bw
    sizes = sorted(best_by_size)
    if not sizes:
        raise ConfigError("no row with a size > 0 to compare", field="log")
    topo = layout.topology()
    result = evaluate_collective(the_op, np.array(sizes, dtype=float), float(layout.ranks), topo)
    model = dict(zip(sizes, (float(b) for b in result.busbw_GBps), strict=True))
    algo = dict(zip(sizes, (str(a) for a in result.algo), strict=True))
    table: list[dict[str, Any]] = []
    for size in sizes:
        best = best_by_size[size]
        modelled_size = model[size]
        table.append(
            {
                "size_bytes": size,
                "measured_busbw_GBps": best,
                "model_busbw_GBps": modelled_size,
                "model_algo": algo[size],
                "ratio": best / modelled_size if modelled_size > 0 else math.nan,
            }
        )
    big = [t for t in table if t["size_bytes"] >= MIN_COMPARE_BYTES] or table[-3:]
    measured_median = float(statistics.median(t["measured_busbw_GBps"] for t in big))
    modelled = float(statistics.median(t["model_busbw_GBps"] for t in big))
    return {
        "op": the_op.value,
        "ranks": layout.ranks,
        "layout": layout.describe(),
        "assumptions": layout.assumptions,
        "rows": table,
        "compared_sizes": [t["size_bytes"] for t in big],
        "measured_busbw_GBps": measured_median,
        "model_busbw_GBps": modelled,
        # the ratio of the two medians the text quotes, so the sentence and the number agree
        "ratio": measured_median / modelled if modelled > 0 else math.nan,
    }


def plan_comparison(
    step_s: float, exposed_s: float, compute_s: float, request: Any
) -> dict[str, Any]:
    """The planner's step and exposed communication for the job's layout against the trace."""
    from bandwall.planning.api import plan

    p = plan(request)
    m = p.metrics
    return {
        "layout": p.layout,
        "predicted_step_s": float(m["step_time_s"]),
        "predicted_exposed_comm_s": float(m["exposed_comm_s"]),
        "predicted_compute_s": float(m["compute_s"]),
        "measured_step_s": step_s,
        "measured_exposed_comm_s": exposed_s,
        "measured_compute_s": compute_s,
        "step_error": float(m["step_time_s"]) / step_s - 1 if step_s > 0 else math.nan,
        "exposed_error": (float(m["exposed_comm_s"]) - exposed_s) / step_s
        if step_s > 0
        else math.nan,
        "breakdown": p.breakdown,
    }


def fit_gemm_efficiency(
    measured_compute_s: float, request: Any, *, tol: float = 1e-3
) -> dict[str, Any]:
    """The `gemm_efficiency` at which the planner's compute time per step equals the trace's.

    Compute time falls monotonically as the efficiency rises (roughly as its inverse), so a
    secant step from the GPU's default, then bisection on the bracket, converges in a few
    plans. Raises when even efficiency 1 is too slow (the request is not the traced job).
    """
    from bandwall.planning.api import plan

    if measured_compute_s <= 0:
        raise ConfigError("the trace shows no compute time to fit", field="traces")
    base = plan(request)
    # pin the searched layout: a layout that changes with the efficiency would break the
    # monotone relation the search relies on
    pins = ("tp", "pp", "cp", "ep", "zero", "micro_batch", "virtual_stages")
    request = request.model_copy(
        update={
            k: getattr(request, k) if getattr(request, k) is not None else base.layout[k]
            for k in pins
        }
    )

    def compute_at(eff: float) -> tuple[float, Any]:
        p = plan(request.model_copy(update={"gemm_efficiency": eff}))
        return float(p.metrics["compute_s"]), p

    eff0 = _gpu_efficiency(request)
    c0 = float(base.metrics["compute_s"])
    from bandwall.planning.request import MIN_GEMM_EFFICIENCY

    lo, hi = MIN_GEMM_EFFICIENCY, 1.0
    c_hi, _ = compute_at(hi)
    if c_hi > measured_compute_s * (1 + tol):
        raise ConfigError(
            f"the trace's compute ({measured_compute_s:.4g} s/step) is faster than this request "
            f"at 100% GEMM efficiency ({c_hi:.4g} s): the request is not the traced job (check "
            "--model, --gpus, --global-batch, --micro-batch and the layout)",
            field="gemm_efficiency",
        )
    c_lo, _ = compute_at(lo)
    if c_lo < measured_compute_s * (1 - tol):
        # it suggested --gemm-efficiency 0.001, which plan refuses (fuzz round 19, C5)
        raise ConfigError(
            f"the trace's compute ({measured_compute_s:.4g} s/step) is slower than this request "
            f"at the lowest GEMM efficiency a plan takes, {lo:g} ({c_lo:.4g} s): the request is "
            "not the traced job (check --model, --gpus, --global-batch, --micro-batch and the "
            "layout)",
            field="gemm_efficiency",
        )
    guess = min(max(eff0 * c0 / measured_compute_s, lo), hi)
    eff, iterations = guess, 0
    for iterations in range(1, 40):
        c, _ = compute_at(eff)
        if abs(c / measured_compute_s - 1) <= tol:
            break
        if c > measured_compute_s:
            lo = eff
        else:
            hi = eff
        eff = (
            math.sqrt(lo * hi) if iterations > 2 else min(max(eff * c / measured_compute_s, lo), hi)
        )
    c, p = compute_at(eff)
    return {
        "gemm_efficiency": eff,
        "default_gemm_efficiency": eff0,
        "predicted_compute_s": c,
        "measured_compute_s": measured_compute_s,
        "predicted_step_s": float(p.metrics["step_time_s"]),
        "layout": p.layout,
        "iterations": iterations,
        "error": c / measured_compute_s - 1,
    }


def _gpu_efficiency(request: Any) -> float:
    """The GPU's own GEMM efficiency (what `gemm_efficiency` overrides)."""
    if request.gemm_efficiency is not None:
        return float(request.gemm_efficiency)
    from bandwall.catalog import load_catalog
    from bandwall.planning.resolve import resolve_cluster

    cl = resolve_cluster(request)
    return float(load_catalog().gpu_perf(cl.gpu.name).gemm_efficiency)
