"""Fit the collective model's fabric parameters to a measured run, save them as a fabric
profile, and check predictions against measurements.

The model for a run of n ranks, one per host, on one switched link type: for each op with its
algorithm fixed, time = α·L + S·F / B_eff (L steps, F the bytes factor, both read off the model
itself). α and 1/B_eff are fitted by least squares on relative error; B_eff divided by the
nominal link rate (a lab run records it) is the fabric's efficiency. Profiles are TOML files in
the catalog's fabric format, so `--fabric measured:NAME` works wherever a fabric key does.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from bandwall.catalog import FabricSpec
from bandwall.catalog.loader import check_profile_name, profile_dir
from bandwall.errors import ConfigError
from bandwall.measure.bench.store import Run, Store
from bandwall.model.collectives import Algo, Op, collective_time_s
from bandwall.model.topology import Link, Topology
from bandwall.units import GB

#: What gloo (and NCCL's default tuner at these sizes) runs for each op.
MEASURED_ALGO = {
    Op.ALL_REDUCE: Algo.RING,
    Op.ALL_GATHER: Algo.RING,
    Op.REDUCE_SCATTER: Algo.RING,
    Op.BROADCAST: Algo.RING,
    Op.REDUCE: Algo.RING,
    Op.ALL_TO_ALL: Algo.DIRECT,
    Op.SEND_RECV: Algo.DIRECT,
}
#: Below this, 2-core machines measure CPU time, not the network (shared/LAB-NOTES.md).
DEFAULT_MIN_SIZE = 1 << 20


def load_run(ref: str, db: str | None) -> tuple[Run, list[dict[str, Any]]]:
    """A stored run by id ('latest' for the newest) or a `results export` JSON file."""
    path = Path(ref)
    if not ref.isdigit() and ref != "latest" and path.is_file():
        data = json.loads(path.read_text())
        run = Run(**data["run"])
        return run, list(data["rows"])
    with Store(db) as store:
        if ref == "latest":
            run = store.latest("collectives")
        elif ref.isdigit():
            run = store.run(int(ref))
        else:
            raise ConfigError(
                f"{ref!r} is neither a run id, 'latest' nor a JSON export file", field="results"
            )
        return run, store.results(run.id)


def nominal_rate_Gbps(run: Run) -> float | None:
    """The lab's bottleneck link rate, when the run came from `bandwall lab run`."""
    rates = run.host.get("lab", {}).get("rates_Gbps") if isinstance(run.host, dict) else None
    return min(rates) if rates else None


def _single_level(link: Link) -> Topology:
    return Topology(gpus_per_node=1, scale_up=None, scale_out=link, nics_per_node=1.0)


def _coefficients(op: Op, sizes: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """L (seconds per unit α) and F (seconds per byte at 1 B/s) of the model, per size."""
    algo = MEASURED_ALGO[op]
    unit_alpha = _single_level(Link("a", bandwidth_Bps=np.inf, latency_s=1.0))
    unit_beta = _single_level(Link("b", bandwidth_Bps=1.0, latency_s=0.0))
    L = collective_time_s(op, algo, sizes, n, unit_alpha)
    F = collective_time_s(op, algo, sizes, n, unit_beta)
    return np.asarray(L), np.asarray(F)


def fit_run(
    rows: list[dict[str, Any]], world: int, min_size: int = DEFAULT_MIN_SIZE
) -> dict[str, Any]:
    """α and B_eff by least squares on relative error over rows ≥ min_size."""
    use = [r for r in rows if r["size_bytes"] >= min_size and r["wrong"] == 0]
    if len(use) < 2:
        raise ConfigError(
            f"need at least 2 correct rows of >= {min_size} bytes to fit, found {len(use)}",
            field="results",
        )
    t = np.array([r["time_median_s"] for r in use])
    L = np.empty(len(use))
    F = np.empty(len(use))
    for i, r in enumerate(use):
        li, fi = _coefficients(Op(r["op"]), np.array([float(r["size_bytes"])]), world)
        L[i], F[i] = li[0], fi[0]
    A = np.stack([L / t, F / t], axis=1)
    (alpha, beta), *_ = np.linalg.lstsq(A, np.ones_like(t), rcond=None)
    if alpha < 0:  # latency unidentifiable from these sizes: fit bandwidth alone
        alpha = 0.0
        beta = float(np.sum(F / t) / np.sum((F / t) ** 2))
    pred = alpha * L + beta * F
    rel = pred / t - 1
    ss_res = float(np.sum((t - pred) ** 2))
    ss_tot = float(np.sum((t - t.mean()) ** 2)) or 1.0
    per_op = {}
    for op in sorted({r["op"] for r in use}):
        idx = [i for i, r in enumerate(use) if r["op"] == op]
        per_op[op] = float(np.median([(t[i] - alpha * L[i]) / (beta * F[i]) for i in idx]))
    return {
        "latency_s": float(alpha),
        "bandwidth_Bps": float(1 / beta),
        "rows": len(use),
        "r2": 1 - ss_res / ss_tot,
        "median_abs_error": float(np.median(np.abs(rel))),
        "max_abs_error": float(np.max(np.abs(rel))),
        "op_time_factors": per_op,
        "min_size_bytes": min_size,
    }


def save_profile(name: str, fit: dict[str, Any], run: Run, nominal_Gbps: float | None) -> Path:
    """Write the fit as a fabric TOML the catalog reads as `measured:NAME`."""
    check_profile_name(name)
    measured_Gbps = fit["bandwidth_Bps"] * 8 / GB
    rate = nominal_Gbps or measured_Gbps
    eff = min(measured_Gbps / rate, 1.0)
    tcp = run.backend == "gloo"
    q = json.dumps  # a JSON string is a valid TOML basic string
    source = (
        f"bandwall calibrate on run {run.id} from {run.host.get('hostname', '?')} "
        f"({run.created_at}); fit over {fit['rows']} rows >= {fit['min_size_bytes']} B, "
        f"R2 {fit['r2']:.4f}, median error {fit['median_abs_error']:.1%}"
    )
    notes = "per-op time factors (reported, not applied): " + ", ".join(
        f"{op} {k:.3f}" for op, k in fit["op_time_factors"].items()
    )
    lines = [
        "[[fabric]]",
        f"key = {q('measured:' + name)}",
        f"name = {q(f'Measured: {name} (run {run.id}, {run.world_size} ranks, {run.backend})')}",
        'tier = "scale_out"',
        f'transport = "{"tcp" if tcp else "roce"}"',
        f"bandwidth_Gbps = {rate:.6g}",
        f"latency_us = {fit['latency_s'] * 1e6:.6g}",
        "jitter_mean_us = 0.0",
        "jitter_std_us = 0.0",
        f"efficiency = {eff:.6g}",
        f"rdma = {'false' if tcp else 'true'}",
        "in_network_reduction = false",
        f"source = {q(source)}",
        f"as_of = {dt.date.today().isoformat()}",
        f"notes = {q(notes)}",
    ]
    path = profile_dir() / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def validate_run(
    run: Run,
    rows: list[dict[str, Any]],
    fabric: FabricSpec,
    bandwidth_Gbps: float | None,
    min_size: int = DEFAULT_MIN_SIZE,
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Predicted against measured time for every row, at the run's own link rate."""
    link = Link.from_fabric(fabric)
    if bandwidth_Gbps is not None:
        link = link.with_overrides(bandwidth_Bps=bandwidth_Gbps * GB / 8)
    topo = _single_level(link)
    out = []
    for r in rows:
        op = Op(r["op"])
        pred = float(
            collective_time_s(op, MEASURED_ALGO[op], float(r["size_bytes"]), run.world_size, topo)
        )
        out.append(
            {
                "op": r["op"],
                "size_bytes": r["size_bytes"],
                "measured_s": r["time_median_s"],
                "predicted_s": pred,
                "error": pred / r["time_median_s"] - 1,
                "used": r["size_bytes"] >= min_size,
            }
        )
    errs = [abs(x["error"]) for x in out if x["used"]]
    if not errs:
        raise ConfigError(f"no rows of >= {min_size} bytes to validate", field="results")
    return out, {
        "rows": len(errs),
        "median_abs_error": statistics.median(errs),
        "max_abs_error": max(errs),
        "min_size_bytes": min_size,
    }


def predict_train(
    row: dict[str, Any],
    fabric: FabricSpec,
    world: int,
    bandwidth_Gbps: float | None,
    bucket_MiB: float = 25.0,
) -> dict[str, float]:
    """The plan model's DDP step for a measured `bench train` row: measured compute plus the
    exposed all-reduce of the gradient buckets on the (calibrated) fabric."""
    from bandwall.model.data_parallel import BACKWARD_SHARE, ddp_exposed_s

    link = Link.from_fabric(fabric)
    if bandwidth_Gbps is not None:
        link = link.with_overrides(bandwidth_Bps=bandwidth_Gbps * GB / 8)
    grads = float(row["grad_bytes"])
    buckets = max(1, int(np.ceil(grads / (bucket_MiB * 2**20))))
    t_bucket = float(
        collective_time_s(
            Op.ALL_REDUCE, MEASURED_ALGO[Op.ALL_REDUCE], grads / buckets, world, _single_level(link)
        )
    )
    compute = float(row["compute_median_s"])
    exposed = float(ddp_exposed_s(buckets * t_bucket, BACKWARD_SHARE * compute, t_bucket))
    step = compute + exposed
    return {
        "predicted_step_s": step,
        "predicted_exposed_s": exposed,
        "error": step / float(row["step_median_s"]) - 1,
    }
