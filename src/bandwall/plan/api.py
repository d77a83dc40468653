"""Plans: a job on an infrastructure → step time, efficiency, time to train and cost.

`PlanRequest` is the one user-facing input (CLI and web); `make_plan` validates the layout with
clear errors and prices it, `auto_layout` searches the fastest layout that fits, `compare_plans`
runs one job on several presets.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bandwall.errors import ConfigError, LayoutError
from bandwall.plan.cluster import Cluster, ClusterSpec, describe_cluster, resolve_cluster
from bandwall.plan.faults import checkpoint_bytes, daly_interval_s, goodput, job_mtbf_s
from bandwall.plan.layout import LayoutArrays, Schedule, Strategy
from bandwall.plan.step import (
    ASSUMPTIONS,
    USABLE_MEMORY_FRACTION,
    StepInputs,
    derived_metrics,
    evaluate_step,
)
from bandwall.workloads import Cnn, Transformer, Workload, custom_transformer, get_workload

#: Default global batch for transformers: 4 Mi tokens per step, a common large-run setting.
DEFAULT_BATCH_TOKENS = 2**22
#: Default CNN batch per GPU (Goyal et al. 2017 scale ImageNet training at 32-64 per GPU).
DEFAULT_CNN_BATCH_PER_GPU = 64
#: Chinchilla-optimal budget when none is given (Hoffmann et al. 2022: ~20 tokens/param).
CHINCHILLA_TOKENS_PER_PARAM = 20
DEFAULT_CNN_EPOCHS = 90
BREAKDOWN_KEYS = ("compute", "dp", "tp", "pp", "ep", "cp", "bubble", "straggler")


class ModelDims(BaseModel):
    """Dimensions of a custom transformer (`--model custom`)."""

    model_config = ConfigDict(extra="forbid")

    layers: int | None = None
    hidden: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    ffn: int | None = None
    vocab: int | None = None
    seq_len: int | None = None
    experts: int | None = None
    top_k: int | None = None
    gated_mlp: bool = Field(
        default=False,
        description="SwiGLU MLP (3 matrices) instead of the classic 2-matrix GELU MLP.",
    )


class PlanRequest(BaseModel):
    """Everything a plan needs; every field is validated at the edge."""

    model_config = ConfigDict(extra="forbid")

    model: str = "llama3-8b"
    dims: ModelDims = Field(default_factory=ModelDims)
    seq_len: int | None = Field(default=None, ge=1, description="Override the model's.")
    cluster: ClusterSpec
    strategy: Strategy = Field(default_factory=Strategy)
    auto: bool = False
    global_batch: int | None = Field(default=None, ge=1, description="Sequences or images.")
    tokens: float | None = Field(default=None, gt=0, description="Token budget.")
    epochs: float | None = Field(default=None, gt=0, description="Epochs (CNNs).")
    compute_efficiency: float | None = Field(default=None, gt=0, le=1)


def resolve_workload(req: PlanRequest) -> Workload:
    if req.model == "custom":
        dims = req.dims.model_dump()
        if req.seq_len:
            dims["seq_len"] = req.seq_len
        return custom_transformer(**dims)
    w = get_workload(req.model)
    if req.seq_len and isinstance(w, Transformer):
        w = w.model_copy(update={"seq_len": req.seq_len})
    return w


def default_global_batch(w: Workload, gpus: int) -> int:
    if isinstance(w, Transformer):
        return max(1, DEFAULT_BATCH_TOKENS // w.seq_len)
    return DEFAULT_CNN_BATCH_PER_GPU * gpus


@dataclass
class Plan:
    """A priced plan. `to_json()` is the `plan --json` document."""

    request: PlanRequest
    workload: Workload
    cluster: Cluster
    layout: dict[str, Any]
    metrics: dict[str, float]
    breakdown: dict[str, float]
    memory: dict[str, float]
    budget: dict[str, float]
    cost: dict[str, float]
    notes: list[str] = field(default_factory=list)
    faults: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.workload.key,
            "model_name": self.workload.name,
            "params": self.workload.params,
            "gpus": int(np.asarray(self.cluster.num_gpus)),
            **{
                k: self.metrics[k]
                for k in (
                    "step_time_s",
                    "compute_s",
                    "exposed_comm_s",
                    "comm_efficiency",
                    "mfu",
                    "tflops_per_gpu",
                    "tokens_per_s",
                    "samples_per_s",
                    "time_to_train_s",
                    "gpu_hours",
                    "cost_usd",
                    "goodput",
                    "mtbf_s",
                    "checkpoint_interval_s",
                    "ideal_time_s",
                )
            },
            "faults": self.faults,
            "breakdown": self.breakdown,
            "layout": self.layout,
            "memory_GB": self.memory,
            "budget": self.budget,
            "cost": self.cost,
            "cluster": describe_cluster(self.cluster),
            "assumptions": ASSUMPTIONS + self.notes,
        }


def _step_inputs(req: PlanRequest, gb: Any) -> StepInputs:
    s = req.strategy
    return StepInputs(
        global_batch=gb,
        recompute=s.recompute,
        grad_dtype=s.grad_dtype,
        compression=s.compression,
        local_sgd_steps=s.local_sgd_steps,
        overlap=s.overlap,
        tp_overlap=s.tp_overlap,
        ep_overlap=s.ep_overlap,
        bucket_MiB=s.bucket_MiB,
        compute_efficiency=req.compute_efficiency,
        straggler_mitigation=s.straggler_mitigation,
    )


#: Deepest interleaving tried by default (Narayanan et al. 2021 evaluate small chunk counts;
#: deeper interleaving adds point-to-point traffic and first-stage activation memory).
MAX_DEFAULT_VIRTUAL_STAGES = 4


def default_virtual_stages(w: Workload, s: Strategy) -> int:
    """Interleaving depth when not given: the largest of 1, 2, 4 model chunks per stage that
    leaves every chunk at least one layer; 1 for the plain 1F1B schedule."""
    if s.virtual_stages is not None:
        return s.virtual_stages
    if s.schedule is Schedule.ONE_F_ONE_B or s.pp == 1 or not isinstance(w, Transformer):
        return 1
    v = 1
    while v * 2 <= MAX_DEFAULT_VIRTUAL_STAGES and s.pp * v * 2 <= w.layers:
        v *= 2
    return v


def validate_layout(w: Workload, cl: Cluster, s: Strategy, gb: int, mb: int, v: int) -> None:
    """Raise a LayoutError naming the first problem a user can fix."""
    n = int(np.asarray(cl.num_gpus))
    model_par = s.tp * s.pp * s.cp
    if isinstance(w, Cnn) and (s.tp, s.pp, s.cp, s.ep) != (1, 1, 1, 1):
        raise LayoutError(
            f"layout: {w.key} is a CNN; only data parallelism (with --zero) is "
            "modelled, so tp, pp, cp and ep must be 1"
        )
    if n % model_par:
        raise LayoutError(
            f"layout: --gpus {n} is not divisible by tp×pp×cp = {s.tp}×{s.pp}×{s.cp} = {model_par}"
        )
    if s.tp > 1 and cl.gpus_per_node == 1:
        raise LayoutError(
            f"tp: {s.tp} needs a scale-up fabric inside a node, but the nodes "
            "here hold 1 GPU; use pp or dp across nodes"
        )
    if s.tp > cl.gpus_per_node or cl.gpus_per_node % s.tp:
        raise LayoutError(
            f"tp: {s.tp} must divide the {cl.gpus_per_node} GPUs of a node (the "
            "scale-up domain); tensor parallelism over the scale-out fabric is not "
            "modelled"
        )
    dp = n // model_par
    if isinstance(w, Transformer):
        if w.heads % s.tp:
            raise LayoutError(f"tp: {s.tp} does not divide the {w.heads} attention heads")
        if s.pp * v > w.layers:
            raise LayoutError(
                f"pp: {s.pp} stages × {v} virtual stages exceed the {w.layers} layers"
            )
        if w.seq_len % s.cp:
            raise LayoutError(f"cp: {s.cp} does not divide the sequence length {w.seq_len}")
        if s.ep > 1 and not w.is_moe:
            raise LayoutError(f"ep: {w.key} is dense; expert parallelism needs an MoE model")
        if w.is_moe and (w.experts % s.ep or dp % s.ep):
            raise LayoutError(f"ep: {s.ep} must divide both the {w.experts} experts and dp = {dp}")
    if gb % (dp * mb):
        raise LayoutError(f"global-batch: {gb} is not divisible by dp × micro-batch = {dp} × {mb}")
    if s.straggler_mitigation.value == "async" and s.local_sgd_steps == 1:
        raise LayoutError(
            "straggler-mitigation: async outer steps need local SGD; set --local-sgd-steps H > 1"
        )
    if s.local_sgd_steps > 1 and s.zero >= 3:
        raise LayoutError(
            "local-sgd-steps: DiLoCo needs full replicas per worker; use --zero 0, 1 or 2"
        )


def _budget(w: Workload, req: PlanRequest, tokens_per_step: float, gb: int) -> dict[str, float]:
    if isinstance(w, Transformer):
        tokens = req.tokens or CHINCHILLA_TOKENS_PER_PARAM * w.params
        steps = tokens / tokens_per_step
        return {"tokens": tokens, "steps": steps, "tokens_per_step": tokens_per_step}
    epochs = req.epochs or DEFAULT_CNN_EPOCHS
    samples = epochs * w.dataset_samples
    return {
        "epochs": epochs,
        "samples": samples,
        "steps": samples / gb,
        "samples_per_step": float(gb),
    }


def _egress_bytes_per_step(w: Workload, cl: Cluster, s: Strategy, gb: int) -> float:
    """Bytes crossing between sites per step (what egress is billed on)."""
    if cl.sites <= 1:
        return 0.0
    grad_bytes = 4.0 if s.grad_dtype == "fp32" else 2.0
    if s.pp >= cl.sites and s.pp % cl.sites == 0 and isinstance(w, Transformer):
        return (cl.sites - 1) * 2 * gb * w.seq_len * w.hidden * 2.0  # activations + grads
    return 2 * (cl.sites - 1) * w.params * grad_bytes / s.local_sgd_steps


def _finish(
    req: PlanRequest,
    w: Workload,
    cl: Cluster,
    s: Strategy,
    gb: int,
    mb: int,
    v: int,
    r: dict[str, Any],
) -> Plan:
    def f(key: str) -> float:
        return float(np.asarray(r[key]).reshape(-1)[0])

    d = {k: float(np.asarray(val).reshape(-1)[0]) for k, val in derived_metrics(r, cl).items()}
    step = f("step_time_s")
    budget = _budget(w, req, f("tokens_per_step"), gb)
    faults = fault_metrics(w, cl)
    ideal_s = budget["steps"] * step
    time_s = ideal_s / faults["goodput"]
    n = int(np.asarray(cl.num_gpus))
    gpu_hours = n * time_s / 3600
    egress_GB = _egress_bytes_per_step(w, cl, s, gb) * budget["steps"] / 1e9
    gpu_usd = gpu_hours * cl.price_per_gpu_hour
    egress_usd = egress_GB * cl.egress_usd_per_GB
    metrics = {
        "goodput": faults["goodput"],
        "mtbf_s": faults["mtbf_s"],
        "checkpoint_interval_s": faults["checkpoint_interval_s"],
        "ideal_time_s": ideal_s,
        "step_time_s": step,
        "compute_s": f("compute_s"),
        "exposed_comm_s": f("exposed_comm_s"),
        "comm_efficiency": d["comm_efficiency"],
        "mfu": d["mfu"],
        "tflops_per_gpu": d["tflops_per_gpu"],
        "tokens_per_s": d["tokens_per_s"],
        "samples_per_s": gb / step,
        "time_to_train_s": time_s,
        "gpu_hours": gpu_hours,
        "cost_usd": gpu_usd + egress_usd,
    }
    breakdown = {k: f(f"{k}_s") for k in BREAKDOWN_KEYS}
    memory = {
        "per_gpu": f("memory_bytes") / 1e9,
        "usable": f("memory_capacity_bytes") / 1e9,
        "weights": f("memory_weights_bytes") / 1e9,
        "grads": f("memory_grads_bytes") / 1e9,
        "optimizer": f("memory_optimizer_bytes") / 1e9,
        "activations": f("memory_activations_bytes") / 1e9,
    }
    layout = {
        "tp": s.tp,
        "pp": s.pp,
        "cp": s.cp,
        "ep": s.ep,
        "dp": round(f("dp")),
        "zero": s.zero,
        "micro_batch": mb,
        "micro_batches": round(f("micro_batches")),
        "global_batch": gb,
        "schedule": s.schedule.value,
        "virtual_stages": v,
        "recompute": s.recompute.value,
        "compression": s.compression,
        "local_sgd_steps": s.local_sgd_steps,
        "overlap": s.overlap,
    }
    notes = []
    if s.local_sgd_steps > 1:
        notes.append(
            f"local-SGD/DiLoCo with H={s.local_sgd_steps}: communication is amortised "
            "over H steps; convergence per token may differ from synchronous training "
            "and is not modelled."
        )
    if s.compression.startswith("topk") or s.compression == "int8":
        notes.append(
            f"gradient compression {s.compression}: bytes reduced as stated; its effect "
            "on convergence is not modelled."
        )
    faults["time_added_s"] = time_s - ideal_s
    faults["cost_added_usd"] = (time_s - ideal_s) * n / 3600 * cl.price_per_gpu_hour
    faults["failures_expected"] = time_s / faults["mtbf_s"]
    return Plan(
        request=req,
        workload=w,
        cluster=cl,
        layout=layout,
        metrics=metrics,
        breakdown=breakdown,
        memory=memory,
        budget=budget,
        cost={
            "gpu_usd": gpu_usd,
            "egress_usd": egress_usd,
            "egress_GB": egress_GB,
            "price_per_gpu_hour_usd": cl.price_per_gpu_hour,
        },
        notes=notes,
        faults=faults,
    )


def fault_arrays(w: Workload, cl: Cluster) -> dict[str, Any]:
    """MTBF, checkpoint write and restore times, Daly-optimal interval and goodput (arrays
    for sweeps). A restart costs the provider's detect/re-queue time plus reading the
    checkpoint back at the same aggregate storage rate it was written."""
    n = np.asarray(cl.num_gpus, dtype=np.float64)
    nodes = np.asarray(cl.nodes(), dtype=np.float64)
    nics = nodes * cl.nics_per_node
    write_s = checkpoint_bytes(w.params) / (np.asarray(cl.checkpoint_write_GBps()) * 1e9)
    restart_s = cl.restart_s + write_s
    if cl.failures is None:
        inf = np.full(np.shape(n), math.inf)
        return {
            "mtbf_s": inf,
            "checkpoint_write_s": write_s,
            "checkpoint_restore_s": write_s,
            "checkpoint_interval_s": inf,
            "restart_s": restart_s,
            "goodput": np.ones(np.shape(n)),
        }
    mtbf = job_mtbf_s(cl.failures, n, nodes, nics, nics)
    tau = daly_interval_s(write_s, mtbf)
    return {
        "mtbf_s": mtbf,
        "checkpoint_write_s": write_s,
        "checkpoint_restore_s": write_s,
        "checkpoint_interval_s": tau,
        "restart_s": restart_s,
        "goodput": goodput(tau, write_s, restart_s, mtbf),
    }


def fault_metrics(w: Workload, cl: Cluster) -> dict[str, float]:
    return {k: float(np.asarray(v).reshape(-1)[0]) for k, v in fault_arrays(w, cl).items()}


def _memory_error(w: Workload, cl: Cluster, s: Strategy, r: dict[str, Any]) -> LayoutError:
    def gb(key: str) -> float:
        return float(np.asarray(r[key]).reshape(-1)[0]) / 1e9

    return LayoutError(
        f"memory: tp={s.tp} pp={s.pp} cp={s.cp} zero={s.zero} needs {gb('memory_bytes'):,.1f} GB "
        f"per GPU (weights {gb('memory_weights_bytes'):,.1f}, grads "
        f"{gb('memory_grads_bytes'):,.1f}, optimizer {gb('memory_optimizer_bytes'):,.1f}, "
        f"activations {gb('memory_activations_bytes'):,.1f}) but {cl.gpu.name} has "
        f"{gb('memory_capacity_bytes'):,.1f} GB usable; try --auto, larger tp/pp, or --zero 3"
    )


def make_plan(req: PlanRequest) -> Plan:
    """Price the request's layout, or the best one found when `req.auto` is set."""
    w = resolve_workload(req)
    cl = resolve_cluster(req.cluster)
    gb = req.global_batch or default_global_batch(w, req.cluster.gpus)
    if req.auto:
        return auto_layout(req, w, cl, gb)
    s = req.strategy
    mb = s.micro_batch or _default_micro_batch(w, cl, gb, _dp(req, s))
    v = default_virtual_stages(w, s)
    validate_layout(w, cl, s, gb, mb, v)
    r = evaluate_step(w, cl, LayoutArrays.single(s, mb, v), _step_inputs(req, gb))
    if not bool(np.asarray(r["fits"]).reshape(-1)[0]):
        raise _memory_error(w, cl, s, r)
    return _finish(req, w, cl, s, gb, mb, v, r)


def _default_micro_batch(w: Workload, cl: Cluster, gb: int, dp: int) -> int:
    """Transformers: 1 sequence. CNNs: the whole per-GPU batch, or the largest divisor of it
    whose activations fit beside the model state (gradient accumulation for the rest)."""
    if isinstance(w, Transformer):
        return 1
    per_gpu = max(1, gb // dp)
    state = w.params * (2 + 2 + 12)
    room = cl.gpu.memory_GB * 1e9 * USABLE_MEMORY_FRACTION - state
    fit = max(1, int(room // w.activation_bytes_per_sample))
    return max(d for d in range(1, min(per_gpu, fit) + 1) if per_gpu % d == 0)


def _dp(req: PlanRequest, s: Strategy) -> int:
    return max(1, req.cluster.gpus // (s.tp * s.pp * s.cp))


def _pow2_upto(limit: int) -> list[int]:
    return [2**i for i in range(0, 31) if 2**i <= limit]


def candidate_layouts(w: Workload, cl: Cluster, gb: int) -> LayoutArrays:
    """Every layout worth trying, as arrays (invalid ones are masked after evaluation)."""
    n = int(np.asarray(cl.num_gpus))
    if isinstance(w, Cnn):
        dp_mb = [max(1, gb // n)]
        grid = list(itertools.product([1], [1], [1], [1], [0, 1, 3], dp_mb, [1]))
    else:
        tps = [t for t in _pow2_upto(cl.gpus_per_node) if w.heads % t == 0]
        pps = [p for p in _pow2_upto(min(w.layers, n)) if n % p == 0]
        cps = [
            c
            for c in _pow2_upto(min(32, n))
            if (w.seq_len % c == 0 and w.seq_len // c >= 1024) or c == 1
        ]
        eps = [e for e in _pow2_upto(w.experts) if w.experts % e == 0] if w.is_moe else [1]
        zeros = [1, 3]
        mbs = [1, 2, 4]
        vs = [1, 2, 4]
        grid = [
            g
            for g in itertools.product(tps, pps, cps, eps, zeros, mbs, vs)
            if (g[1] > 1 or g[6] == 1) and g[1] * g[6] <= w.layers and n % (g[0] * g[1] * g[2]) == 0
        ]
    if not grid:
        raise LayoutError("layout: no candidate layout divides the GPU count")
    arr = np.array(grid, dtype=np.int64).T
    return LayoutArrays(*(arr[i] for i in range(7)))


def auto_layout(req: PlanRequest, w: Workload, cl: Cluster, gb: int) -> Plan:
    """The fastest layout that fits in memory and divides the cluster and batch."""
    lay = candidate_layouts(w, cl, gb)
    r = evaluate_step(w, cl, lay, _step_inputs(req, gb))
    tp, pp, cp, ep, zero, mb, v = lay.broadcast()
    dp = r["dp"]
    ok = r["valid"] & r["fits"]
    ok &= np.where(ep > 1, (np.round(dp) % ep) == 0, True)
    if req.strategy.local_sgd_steps > 1:
        ok &= zero < 3
    if not np.any(ok):
        smallest = float(np.min(np.where(r["valid"], r["memory_bytes"], np.inf))) / 1e9
        raise LayoutError(
            f"memory: no layout of {w.key} fits on {int(np.asarray(cl.num_gpus))} × "
            f"{cl.gpu.name}; the smallest valid one needs {smallest:,.1f} GB per GPU against "
            f"{cl.gpu.memory_GB * 0.9:,.1f} GB usable — add GPUs or pick a larger GPU"
        )
    # fastest; ties go to the simplest layout
    complexity = tp * pp * cp * ep * v + zero * 0.1
    key = np.where(ok, r["step_time_s"] * (1 + 1e-9 * complexity), np.inf)
    i = int(np.argmin(key))
    best = req.strategy.model_copy(
        update={
            "tp": int(tp[i]),
            "pp": int(pp[i]),
            "cp": int(cp[i]),
            "ep": int(ep[i]),
            "zero": int(zero[i]),
            "micro_batch": int(mb[i]),
            "virtual_stages": int(v[i]),
            "schedule": Schedule.INTERLEAVED if v[i] > 1 else req.strategy.schedule,
        }
    )
    one = evaluate_step(
        w, cl, LayoutArrays.single(best, int(mb[i]), int(v[i])), _step_inputs(req, gb)
    )
    plan = _finish(req, w, cl, best, gb, int(mb[i]), int(v[i]), one)
    plan.notes.append(
        f"--auto searched {int(np.size(key))} layouts, {int(np.sum(ok))} valid "
        "and fitting; this is the fastest."
    )
    return plan


def compare_plans(req: PlanRequest, preset_keys: list[str]) -> list[Plan]:
    """The same job on several presets (each with its own best layout under --auto)."""
    out = []
    for key in preset_keys:
        spec = req.cluster.model_copy(update={"preset": key})
        out.append(make_plan(req.model_copy(update={"cluster": spec})))
    return out


def scale_plans(req: PlanRequest, gpu_counts: list[int]) -> list[Plan]:
    """The same job along GPU counts. Without an explicit model-parallel layout (tp, pp, cp,
    ep all 1) each count gets its own fastest fitting layout, since one layout rarely suits
    1k and 128k GPUs alike."""
    s = req.strategy
    if (s.tp, s.pp, s.cp, s.ep) == (1, 1, 1, 1):
        req = req.model_copy(update={"auto": True})
    out = []
    for n in gpu_counts:
        spec = req.cluster.model_copy(update={"gpus": n})
        out.append(make_plan(req.model_copy(update={"cluster": spec})))
    return out


def request_from_fields(**fields: Any) -> PlanRequest:
    """Build a PlanRequest from flat CLI/API fields with one-line errors naming the field."""
    cluster_keys = set(ClusterSpec.model_fields)
    strategy_keys = set(Strategy.model_fields)
    dims_keys = set(ModelDims.model_fields) - {"seq_len"}
    cluster = {k: v for k, v in fields.items() if k in cluster_keys and v is not None}
    strategy = {k: v for k, v in fields.items() if k in strategy_keys and v is not None}
    dims = {k: v for k, v in fields.items() if k in dims_keys and v is not None}
    rest = {
        k: v
        for k, v in fields.items()
        if k not in cluster_keys | strategy_keys | dims_keys and v is not None
    }
    try:
        return PlanRequest.model_validate(
            {**rest, "cluster": cluster, "strategy": strategy, "dims": dims}
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(p) for p in err["loc"] if p not in ("cluster", "strategy", "dims")]
        name = (loc[-1] if loc else "input").replace("_", "-")
        raise ConfigError(f"{name}: {err['msg']}") from None
