"""A run's own log against the model: measured vs predicted per term, where the gap is, and
the change the model says would help most.

The log gives the step time (or a rate that fixes it once the batch is known), the MFU or
TFLOP/s the framework computed, and the peak memory; the config (`--from`) gives the job. The
plan of that job gives the model's step, its terms and its memory.

Where the gap is: the log times the step, not its parts (unless DeepSpeed's
wall_clock_breakdown timed the phases), so the gap is put on the term that would need the
smallest relative error to close it: a 0.5 s gap in a step of 0.6 s compute and 5 ms exposed
communication is a compute gap (compute 1.8 × the model's) rather than a network one (100 ×).
The changes are a rule table (`CHANGES`): each applies when its condition holds, the model
prices the job with it, and the largest predicted gain comes first, carried over to the
measured step in proportion.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bandwall.errors import BandwallError, ConfigError
from bandwall.measure.importers.training_log import Summary, TrainingLog, summarize

#: Model terms a gap can sit in, with their names in words (bandwall.planning.api
#: BREAKDOWN_KEYS; memory is compared separately).
TERMS: dict[str, str] = {
    "compute": "compute",
    "overlap": "compute slowed by hidden communication",
    "dp": "data-parallel communication (exposed)",
    "tp": "tensor-parallel communication",
    "pp": "pipeline send/recv (exposed)",
    "ep": "expert-parallel all-to-all",
    "cp": "context-parallel communication",
    "bubble": "pipeline bubble",
    "straggler": "stragglers",
}
#: The cause to look at when a term holds the gap.
WHY: dict[str, str] = {
    "compute": "kernels slower than the model's GEMM efficiency (small GEMMs, memory-bound "
    "ops, launch overhead, clocks); `bandwall calibrate --from-log` fits it",
    "overlap": "communication kernels taking more SMs or HBM bandwidth from compute than modelled",
    "dp": "gradient reduction not hidden behind backward, or a slower fabric",
    "tp": "tensor-parallel collectives slower than NVLink allows, or not overlapped",
    "pp": "pipeline sends exposed",
    "ep": "expert all-to-all slower or less overlapped than modelled (load imbalance)",
    "cp": "context-parallel ring exchange exposed",
    "bubble": "a larger pipeline bubble (fewer micro-batches or no interleaving)",
    "straggler": "slow ranks",
}


def _term(key: str) -> str:
    return TERMS.get(key, key)


def _why(key: str) -> str:
    return WHY.get(key, "the model's term is too small for this run")


@dataclass(frozen=True)
class Change:
    """A setting to try: when it applies, and the request update it makes."""

    name: str
    applies: Callable[[Any, dict[str, float]], bool]
    update: Callable[[Any, dict[str, float]], dict[str, Any]]
    flags: Callable[[Any, dict[str, float]], str]


def _fp8_capable(req: Any) -> bool:
    """Whether the GPU has an fp8 peak in the catalog (Hopper and later, MI300X)."""
    from bandwall.catalog import Precision, load_catalog
    from bandwall.planning.presets import get_preset

    gpu = load_catalog().gpu(req.gpu or get_preset(req.preset).gpu)
    return Precision.FP8 in gpu.peak_TFLOPS


def _layout_flags(req: Any, m: dict[str, float]) -> str:
    return " ".join(f"--{k.replace('_', '-')} {int(m[k])}" for k in ("tp", "pp", "cp", "zero"))


#: Changes the model can price, in the order ties are shown.
CHANGES: tuple[Change, ...] = (
    Change(
        "overlap the gradient reduction with backward",
        lambda r, m: r.overlap_grad_reduce is False and m["dp"] > 1,
        lambda r, m: {"overlap_grad_reduce": True},
        lambda r, m: "--overlap-grad-reduce",
    ),
    Change(
        "overlap the parameter all-gather with forward",
        lambda r, m: r.overlap_param_gather is False and m["zero"] >= 1 and m["dp"] > 1,
        lambda r, m: {"overlap_param_gather": True},
        lambda r, m: "--overlap-param-gather",
    ),
    Change(
        "sequence parallelism with TP",
        lambda r, m: not r.sequence_parallel and m["tp"] > 1,
        lambda r, m: {"sequence_parallel": True},
        lambda r, m: "--sequence-parallel",
    ),
    Change(
        "overlap TP communication with the GEMMs",
        lambda r, m: not r.tp_comm_overlap and m["tp"] > 1,
        lambda r, m: {"tp_comm_overlap": True, "sequence_parallel": True},
        lambda r, m: "--tp-comm-overlap --sequence-parallel",
    ),
    Change(
        "selective instead of full recomputation",
        lambda r, m: str(r.recompute) == "full",
        lambda r, m: {"recompute": "selective", "recompute_layers": None},
        lambda r, m: "--recompute selective",
    ),
    Change(
        "no recomputation",
        lambda r, m: str(r.recompute) == "selective",
        lambda r, m: {"recompute": "none"},
        lambda r, m: "--recompute none",
    ),
    Change(
        "torch.compile",
        lambda r, m: not r.compile,
        lambda r, m: {"compile": True},
        lambda r, m: "--compile",
    ),
    Change(
        "CUDA graphs",
        lambda r, m: not r.cuda_graphs,
        lambda r, m: {"cuda_graphs": True},
        lambda r, m: "--cuda-graphs",
    ),
    Change(
        "fp8 GEMMs",
        lambda r, m: r.precision == "bf16" and _fp8_capable(r),
        lambda r, m: {"precision": "fp8"},
        lambda r, m: "--precision fp8",
    ),
    Change(
        "a larger micro-batch",
        lambda r, m: m["global_batch"] % (2 * m["micro_batch"] * m["dp"]) == 0,
        lambda r, m: {"micro_batch": int(m["micro_batch"]) * 2},
        lambda r, m: f"--micro-batch {int(m['micro_batch']) * 2}",
    ),
    Change(
        "bf16 gradient reduction",
        lambda r, m: r.reduce_dtype == "fp32" and m["dp"] > 1,
        lambda r, m: {"reduce_dtype": "bf16"},
        lambda r, m: "--reduce-dtype bf16",
    ),
    Change(
        "the planner's layout",
        lambda r, m: True,
        lambda r, m: {k: None for k in ("tp", "pp", "cp", "ep", "zero", "virtual_stages")},
        _layout_flags,
    ),
)


#: Smallest predicted gain worth proposing, as a share of the step.
MIN_GAIN = 0.005


@dataclass
class Comparison:
    """One log against the model."""

    log: str
    framework: str
    summary: Summary
    measured_step_s: float | None
    step_basis: str
    predicted: dict[str, float]
    breakdown: dict[str, float]
    gap_s: float | None
    gap_term: str | None
    gap_factor: float | None
    rows: list[dict[str, Any]] = field(default_factory=list)
    changes: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "log": self.log,
            "framework": self.framework,
            "summary": self.summary.to_json(),
            "measured_step_s": self.measured_step_s,
            "step_basis": self.step_basis,
            "predicted": self.predicted,
            "breakdown": self.breakdown,
            "gap_s": self.gap_s,
            "gap_term": self.gap_term,
            "gap_factor": self.gap_factor,
            "rows": self.rows,
            "changes": self.changes,
            "notes": self.notes,
        }


def step_from(
    step_time_s: float | None,
    tokens_per_s_per_gpu: float | None,
    samples_per_s: float | None,
    m: dict[str, float],
) -> tuple[float | None, str]:
    """The time per step from what a log gives (a time, or a rate) and the plan's batch:
    torchtitan's tokens/s are per GPU; DeepSpeed's samples/s are for the whole job."""
    if step_time_s is not None:
        return step_time_s, "the log's time per step"
    tokens_per_gpu = m["global_batch"] * m["seq_len"] / m["gpus"] if m.get("seq_len") else None
    if tokens_per_s_per_gpu and tokens_per_gpu:
        return (
            tokens_per_gpu / tokens_per_s_per_gpu,
            f"{tokens_per_gpu:,.0f} tokens per GPU per step / {tokens_per_s_per_gpu:,.0f} "
            "tokens/s per GPU",
        )
    if samples_per_s:
        return m["global_batch"] / samples_per_s, (
            f"{m['global_batch']:,.0f} sequences per step / {samples_per_s:,.1f} samples/s"
        )
    return None, "the log gives no time per step"


def measured_step(s: Summary, m: dict[str, float]) -> tuple[float | None, str]:
    """The measured time per step of a log's steady state, and how it was obtained."""
    return step_from(s.step_time_s, s.tokens_per_s_per_gpu, s.samples_per_s, m)


def _range(metrics: dict[str, float], key: str) -> tuple[float, float] | None:
    lo, hi = metrics.get(f"{key}_p10"), metrics.get(f"{key}_p90")
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    return float(lo), float(hi)


def _metrics(plan: Any) -> dict[str, float]:
    from bandwall.model.compute import full_attention_ratio

    m = dict(plan.metrics)
    w = plan.workload
    m["seq_len"] = float(getattr(w, "seq_len", 0) or 0)
    # the plan counts causal attention once; torchtitan's logged mfu/tflops count it in full
    m["full_attention_ratio"] = full_attention_ratio(w)
    return m


def _gap_term(breakdown: dict[str, float], gap: float) -> tuple[str, float]:
    """The term that needs the smallest relative change to absorb the gap."""
    candidates = {k: v for k, v in breakdown.items() if v > 0}
    if gap >= 0:
        term = min(candidates, key=lambda k: (candidates[k] + gap) / candidates[k])
        return term, (candidates[term] + gap) / candidates[term]
    term = max(candidates, key=lambda k: candidates[k])
    return term, max(candidates[term] + gap, 0.0) / candidates[term]


def _rows(s: Summary, step: float | None, m: dict[str, float]) -> list[dict[str, Any]]:
    gpus = m["gpus"]
    tokens = m["global_batch"] * m["seq_len"] if m.get("seq_len") else None
    rows: list[dict[str, Any]] = [
        {
            "metric": "step time",
            "unit": "s",
            "measured": step,
            "model": m["step_time_s"],
            "range": _range(m, "step_time_s"),
        }
    ]
    # MFU by the model's FLOP count unless the log gives MFU itself: Megatron's logged TFLOP/s
    # count recomputed FLOPs (hardware, not model, FLOPs utilisation); torchtitan's logged mfu
    # and tflops count full attention (PaLM), so the model's are shown the same way
    mfu = s.mfu
    basis = "logged"
    full = m.get("full_attention_ratio", 1.0) if s.mfu is not None else 1.0
    if full != 1.0:
        basis = "logged; model counted as the log counts (full attention)"
    if mfu is None and step:
        mfu, basis = m["mfu"] * m["step_time_s"] / step, "model FLOPs / measured step"
    rows.append(
        {"metric": "MFU", "unit": "%", "measured": mfu, "model": m["mfu"] * full, "basis": basis}
    )
    rows.append(
        {
            "metric": "TFLOP/s per GPU",
            "unit": "TFLOP/s",
            "measured": s.tflops_per_gpu,
            "model": m["tflops_per_gpu"] * full,
            "basis": "logged (the framework's FLOP count; Megatron counts recomputation)",
        }
    )
    if tokens:
        rows.append(
            {
                "metric": "tokens/s per GPU",
                "unit": "tokens/s",
                "measured": s.tokens_per_s_per_gpu or (tokens / gpus / step if step else None),
                "model": tokens / gpus / m["step_time_s"],
            }
        )
    rows.append(
        {
            "metric": "memory per GPU",
            "unit": "GB",
            "measured": s.memory_bytes,
            "model": m["memory_bytes"],
            "basis": "logged peak",
        }
    )
    return rows


def compare(log: TrainingLog, request: Any, *, changes: bool = True) -> Comparison:
    """The log against the plan of `request` (the job the log ran)."""
    from bandwall.planning.api import BREAKDOWN_KEYS, plan

    summary = summarize(log)
    base = plan(request)
    m = _metrics(base)
    step, basis = measured_step(summary, m)
    breakdown = {k: float(m[f"{k}_s"]) for k in BREAKDOWN_KEYS}
    out = Comparison(
        log=log.path,
        framework=log.framework,
        summary=summary,
        measured_step_s=step,
        step_basis=basis,
        predicted={
            k: float(m[k])
            for k in ("step_time_s", "compute_s", "exposed_comm_s", "mfu", "memory_bytes")
        },
        breakdown=breakdown,
        gap_s=None,
        gap_term=None,
        gap_factor=None,
    )
    out.rows = _rows(summary, step, m)
    if summary.timers_ms:
        phases = ", ".join(f"{k} {v:,.1f}" for k, v in list(summary.timers_ms.items())[:8])
        out.notes.append(f"DeepSpeed timers, median ms: {phases}")
    if summary.global_batch and int(summary.global_batch) != int(m["global_batch"]):
        out.notes.append(
            f"the log's global batch {summary.global_batch:,} differs from the plan's "
            f"{int(m['global_batch']):,}: check the config"
        )
    if step is not None:
        out.gap_s = step - m["step_time_s"]
        out.gap_term, out.gap_factor = _gap_term(breakdown, out.gap_s)
    if changes and step is not None:
        out.changes = what_if(request, base, step)
    return out


def what_if(request: Any, base: Any, measured_s: float, limit: int = 3) -> list[dict[str, Any]]:
    """The changes of `CHANGES` that apply, priced by the model, best first (gain > 0)."""
    from bandwall.planning.api import plan

    m = _metrics(base)
    base_s = m["step_time_s"]
    pinned = request.model_copy(
        update={
            k: getattr(request, k) if getattr(request, k) is not None else base.layout[k]
            for k in ("tp", "pp", "cp", "ep", "zero", "micro_batch", "virtual_stages")
        }
    )
    out: list[dict[str, Any]] = []
    for change in CHANGES:
        try:
            if not change.applies(pinned, m):
                continue
            update = change.update(pinned, m)
            new = plan(pinned.model_copy(update=update))
        except (BandwallError, KeyError, ValueError):
            continue
        new_s = float(new.metrics["step_time_s"])
        gain = base_s - new_s
        if gain <= base_s * MIN_GAIN:
            continue
        flags = change.flags(pinned, new.metrics)
        out.append(
            {
                "change": change.name,
                "flags": flags,
                "model_step_s": new_s,
                "model_gain_s": gain,
                "model_gain_share": gain / base_s,
                "measured_step_s": measured_s * new_s / base_s,
                "range": _range(new.metrics, "step_time_s"),
            }
        )
    out.sort(key=lambda c: -c["model_gain_s"])
    return out[:limit]


# --- text -------------------------------------------------------------------------------------


def _fmt(value: Any, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "s":
        return f"{value:,.3f} s" if value < 100 else f"{value:,.1f} s"
    if unit == "%":
        return f"{value:.1%}"
    if unit == "GB":
        return f"{value / 1e9:,.1f} GB"
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def render(c: Comparison) -> list[str]:
    """The comparison as lines of at most 80 characters."""
    s = c.summary
    lines = _wrap(
        f"training log {c.log} ({c.framework}): {s.steps:,} step(s), {len(s.kept):,} kept"
    )
    lines.append(f"  {'':<18}{'measured':>14}{'model':>14}{'gap':>10}")
    for r in c.rows:
        meas, model = r["measured"], r["model"]
        gap = ""
        if meas is not None and model:
            gap = f"{(meas - model) / model:+.0%}"
        lines.append(
            f"  {r['metric']:<18}{_fmt(meas, r['unit']):>14}{_fmt(model, r['unit']):>14}{gap:>10}"
        )
        if r.get("range"):
            lo, hi = r["range"]
            lines.append(f"  {'':<18}{'':>14}{f'p10-p90 {lo:.3g}-{hi:.3g} s':>24}")
    lines.append(f"  measured step: {c.step_basis}"[:80])
    if c.gap_s is not None and c.gap_term is not None:
        step = c.measured_step_s or 0.0
        term = _term(c.gap_term)
        model_term = c.breakdown[c.gap_term]
        if c.gap_s >= 0:
            lines += _wrap(
                f"where the gap is: {term}: {c.gap_s:,.3g} s of the {step:,.3g} s step is not "
                f"in the model; {term} would have to be {c.gap_factor:.3g} × the model's "
                f"{model_term:,.3g} s to hold it (the smallest change of any term). "
                f"Likely: {_why(c.gap_term)}."
            )
        else:
            lines += _wrap(
                f"the run is faster than the model by {-c.gap_s:,.3g} s: the model overprices "
                f"{term} ({model_term:,.3g} s)."
            )
    if c.changes:
        best = c.changes[0]
        rng = best["range"]
        err = f" (model p10-p90 {rng[0]:.3g}-{rng[1]:.3g} s)" if rng else " (no error range)"
        lines += _wrap(
            f"best change: {best['change']}: {best['flags']} -> model "
            f"{best['model_step_s']:,.3g} s (-{best['model_gain_share']:.0%}), on the "
            f"measured step {best['measured_step_s']:,.3g} s{err}"
        )
        for other in c.changes[1:]:
            lines += _wrap(
                f"  then: {other['flags']} -> -{other['model_gain_share']:.0%} ({other['change']})",
                indent=6,
            )
    elif c.gap_s is not None:
        lines.append("no change the model prices shortens this step")
    for n in c.notes + s.dropped[:3]:
        lines += _wrap(f"note: {n}", indent=6)
    return lines


def _wrap(text: str, indent: int = 2) -> list[str]:
    import textwrap

    return textwrap.wrap(text, 80, subsequent_indent=" " * indent, break_on_hyphens=False)


def request_for_log(
    log_path: str, configs: list[str] | None, given: dict[str, Any]
) -> tuple[Any, Any]:
    """The request the log ran: from `configs`, else from the Megatron arguments dump the log
    starts with; with the command line's options over them. Returns (request, FromConfig)."""
    from bandwall.planning.from_config import read_configs
    from bandwall.planning.request import make_request

    sources = list(configs or [])
    if not sources:
        from bandwall.planning.from_config import read_file

        try:
            label, _, _ = read_file(log_path)
        except ConfigError:
            label = ""
        if "arguments dump" not in label:
            raise ConfigError(
                "give the job's config with --from (a launch script, YAML, TOML or JSON) so "
                "the log can be compared with the model",
                field="from",
            )
        sources = [log_path]
    result = read_configs(sources, given)
    return make_request(**result.merged(given)), result


__all__ = [
    "CHANGES",
    "TERMS",
    "Change",
    "Comparison",
    "compare",
    "measured_step",
    "render",
    "request_for_log",
    "step_from",
    "what_if",
]
