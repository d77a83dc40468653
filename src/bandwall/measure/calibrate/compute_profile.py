"""Fit one compute-efficiency constant to a cluster's own training log and save it as a
compute profile (`bandwall calibrate --from-log LOG --from CONFIG --name NAME`).

The constant is the GEMM efficiency at which the model's step for the job (`--from`) equals
the log's median step: one number that absorbs what the model misses on this cluster
(kernels, clocks, host overhead, the network as it runs). It is fitted on steps, never on a
single one, with a held-out third chosen by a fixed rule before any error is seen: the kept
steps (`training_log.steady_steps`) are ordered by the SHA-256 of their step number and every
third is held out. The range is the constant at the fit steps' p90 and p10 step times; the
fit and held-out median errors and the held-out signed bias are reported apart.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import statistics
from typing import Any

from bandwall.errors import ConfigError
from bandwall.measure.importers.run_compare import step_from
from bandwall.measure.importers.training_log import Step, TrainingLog, steady_steps

#: Held out: every HOLD_OUT-th step in SHA-256 order (a third).
HOLD_OUT = 3
#: Fewest kept steps a fit takes (two to fit, one to check).
MIN_STEPS = 3
_PINS = ("tp", "pp", "cp", "ep", "zero", "micro_batch", "virtual_stages")


def split(steps: list[Step]) -> tuple[list[Step], list[Step]]:
    """(fit, held out): every third step in SHA-256 order of its number is held out."""
    order = sorted(steps, key=lambda s: hashlib.sha256(str(s.step).encode()).hexdigest())
    held = [s for i, s in enumerate(order) if i % HOLD_OUT == HOLD_OUT - 1]
    fit = [s for s in order if s not in held]
    return fit, held


def _step_times(steps: list[Step], m: dict[str, float]) -> list[float]:
    out = []
    for s in steps:
        t, _ = step_from(s.step_time_s, s.tokens_per_s_per_gpu, s.samples_per_s, m)
        if t is not None:
            out.append(t)
    return out


def fit_efficiency(log: TrainingLog, request: Any, *, tol: float = 1e-3) -> dict[str, Any]:
    """The GEMM efficiency that makes the model's step the log's, with its range and errors."""
    from bandwall.planning.api import plan
    from bandwall.planning.request import MIN_GEMM_EFFICIENCY

    steps, dropped = steady_steps(log)
    if len(steps) < MIN_STEPS:
        raise ConfigError(
            f"{log.path}: {len(steps)} steady step(s) with a time; a fit needs at least "
            f"{MIN_STEPS} (two thirds to fit, one third held out): give a longer log",
            field="from_log",
        )
    base = plan(request)
    logged = next((s.global_batch for s in reversed(steps) if s.global_batch), None)
    if logged and int(logged) != int(base.metrics["global_batch"]):
        # a fit to a job doing another amount of work per step than the log's (fuzz round 19,
        # C4: a log of batch 7 was fitted to a config of 512 and saved)
        raise ConfigError(
            f"the log's global batch {int(logged):,} differs from the config's "
            f"{int(base.metrics['global_batch']):,}: the config does not describe the logged "
            "job (check --from and --global-batch; nothing was saved)",
            field="from_log",
        )
    pinned = request.model_copy(
        update={
            k: getattr(request, k) if getattr(request, k) is not None else base.layout[k]
            for k in _PINS
        }
        | {"profile": None}
    )
    m = dict(base.metrics)
    m["seq_len"] = float(getattr(base.workload, "seq_len", 0) or 0)
    fit_steps, held_steps = split(steps)
    fit_t, held_t = _step_times(fit_steps, m), _step_times(held_steps, m)
    if not fit_t or not held_t:
        raise ConfigError(f"{log.path}: the log's steps give no step times", field="from_log")

    def step_at(eff: float) -> float:
        return float(
            plan(pinned.model_copy(update={"gemm_efficiency": eff})).metrics["step_time_s"]
        )

    def solve(target: float, strict: bool = False) -> float:
        lo, hi = MIN_GEMM_EFFICIENCY, 1.0
        if step_at(hi) > target * (1 + tol):
            raise ConfigError(
                f"the log's step ({target:.4g} s) is faster than the model at 100% GEMM "
                "efficiency: the config does not describe the logged job (check --gpus, the "
                "batch and the layout)",
                field="from_log",
            )
        floor = step_at(lo)
        if floor < target:
            if strict and floor * (1 + tol) < target:
                # a clamped fit was saved and called a match beside its own 100% error
                # (fuzz round 19, B4): a log this slow is not the job the config describes
                raise ConfigError(
                    f"the log's step ({target:.4g} s) is slower than the model at 1% GEMM "
                    f"efficiency ({floor:.4g} s): the config does not describe the logged job "
                    "(check --gpus, the batch and the layout; nothing was saved)",
                    field="from_log",
                )
            return lo
        for _ in range(40):
            mid = math.sqrt(lo * hi)
            if step_at(mid) > target:
                lo = mid
            else:
                hi = mid
            if hi / lo < 1 + tol:
                break
        return math.sqrt(lo * hi)

    median = statistics.median(fit_t)
    eff = solve(median, strict=True)
    ordered = sorted(fit_t)
    slow = ordered[min(len(ordered) - 1, math.ceil(0.9 * (len(ordered) - 1)))]
    fast = ordered[math.floor(0.1 * (len(ordered) - 1))]
    eff_lo, eff_hi = solve(slow), solve(fast)
    predicted = step_at(eff)
    fit_err = [(predicted - t) / t for t in fit_t]
    held_err = [(predicted - t) / t for t in held_t]
    perf = _catalog_efficiency(request)
    return {
        "gemm_efficiency": eff,
        "gemm_efficiency_p10": eff_lo,
        "gemm_efficiency_p90": eff_hi,
        "catalog_gemm_efficiency": perf,
        "predicted_step_s": predicted,
        "catalog_step_s": float(base.metrics["step_time_s"]),
        "measured_step_s": median,
        "fitted_steps": len(fit_t),
        "held_out_steps": len(held_t),
        "fit_steps": [s.step for s in fit_steps],
        "held_out": [s.step for s in held_steps],
        "fit_median_abs_error": statistics.median(abs(e) for e in fit_err),
        "held_out_median_abs_error": statistics.median(abs(e) for e in held_err),
        "held_out_bias": statistics.fmean(held_err),
        "dropped": dropped,
        "gpu": base.cluster.gpu.name,
        "gpus": int(base.metrics["gpus"]),
        "model": base.workload.key,
        "fit_rule": "kept steps ordered by SHA-256 of the step number; every third held out",
    }


def _catalog_efficiency(request: Any) -> float:
    """The large-GEMM efficiency the model uses by default on the request's GPU (what
    `--gemm-efficiency`, and so the profile, replaces)."""
    from bandwall.catalog import load_catalog
    from bandwall.planning.presets import get_preset

    gpu = request.gpu or get_preset(request.preset).gpu
    perf = load_catalog().gpu_perf(gpu)
    return float(getattr(perf, "gemm_large_efficiency", None) or perf.gemm_efficiency)


def save_compute_profile(name: str, fit: dict[str, Any], log: str, configs: list[str]) -> str:
    """Write the fit as `compute/NAME.toml` (atomically); returns the path."""
    from bandwall import __version__
    from bandwall.planning.compute_profile import compute_profile_dir, profile_path
    from bandwall.safeio import write_output

    path = profile_path(name)
    compute_profile_dir().mkdir(parents=True, exist_ok=True)
    q = json.dumps  # a JSON string is a valid TOML basic string
    lines = [
        "# bandwall compute profile: `bandwall plan --profile NAME` uses gemm_efficiency",
        "[profile]",
        f"name = {q(name)}",
        'kind = "compute"',
        f"gpu = {q(fit['gpu'])}",
        f"gemm_efficiency = {fit['gemm_efficiency']:.6g}",
        f"gemm_efficiency_p10 = {fit['gemm_efficiency_p10']:.6g}",
        f"gemm_efficiency_p90 = {fit['gemm_efficiency_p90']:.6g}",
        f"catalog_gemm_efficiency = {fit['catalog_gemm_efficiency']:.6g}",
        f"fitted_steps = {fit['fitted_steps']}",
        f"held_out_steps = {fit['held_out_steps']}",
        f"fit_median_abs_error = {fit['fit_median_abs_error']:.6g}",
        f"held_out_median_abs_error = {fit['held_out_median_abs_error']:.6g}",
        f"held_out_bias = {fit['held_out_bias']:.6g}",
        f"measured_step_s = {fit['measured_step_s']:.6g}",
        f"fit_rule = {q(fit['fit_rule'])}",
        f"model = {q(fit['model'])}",
        f"gpus = {fit['gpus']}",
        f"log = {q(log)}",
        f"configs = [{', '.join(q(c) for c in configs)}]",
        f"created = {q(dt.datetime.now(dt.UTC).isoformat(timespec='seconds'))}",
        f"bandwall_version = {q(__version__)}",
    ]
    write_output(path, "\n".join(lines) + "\n", field="name", formats=(".toml",))
    return str(path)


__all__ = ["HOLD_OUT", "MIN_STEPS", "fit_efficiency", "save_compute_profile", "split"]
