"""The one place the cost terms are composed: a batch of layouts on a cluster → `Metrics`.

`evaluate` reads as its list of steps, each a term group returning a small dataclass with units
in its fields (the way torchtitan's `parallelize` reads): the derived group sizes (`Dims`,
computed once, like torchtitan's `ParallelDims`), then memory, one pipeline stage's
micro-batch (the one Transformer/CNN dispatch, where the kernel model plugs in), the pipeline,
data parallelism, the step, the run (failures, budget, cost) and its energy. Every array has
one element per layout (layouts and cluster fields broadcast together). `plan`, `sweep`,
`compare`, `scale`, the layout search, `calibrate` and `validate` all call `evaluate`; nothing
else adds terms up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from bandwall.model import compute, cost, data_parallel, faults, memory, parallel, pipeline
from bandwall.model import energy as energy_terms
from bandwall.model.cluster import Cluster
from bandwall.model.collectives import Algo, Op, collective_time_s
from bandwall.model.layout import LayoutArrays, Recompute, check_layouts
from bandwall.model.metrics import ASSUMPTIONS, COUNT_FIELDS, Metrics, StepOptions
from bandwall.workloads import Transformer, Workload

__all__ = [
    "ASSUMPTIONS",
    "CHINCHILLA_TOKENS_PER_PARAM",
    "COUNT_FIELDS",
    "DEFAULT_CNN_EPOCHS",
    "Metrics",
    "StepOptions",
    "evaluate",
    "lora_trainable_fraction",
    "topk_ratio",
]

#: Chinchilla-optimal budget when none is given (Hoffmann et al. 2022: ~20 tokens/param).
CHINCHILLA_TOKENS_PER_PARAM = 20
#: ImageNet epochs when none are given (Goyal et al. 2017 train ResNet-50 for 90).
DEFAULT_CNN_EPOCHS = 90


def lora_trainable_fraction(w: Workload, rank: int | None) -> float:
    """Share of parameters that train: 1, or with LoRA of rank r on every linear layer of a
    transformer (q, k, v, o and the MLP; Hu et al. 2021) r·(d_in + d_out) per matrix."""
    if rank is None or not isinstance(w, Transformer):
        return 1.0
    h, hq, kv = w.hidden, w.heads * w.head_dim, w.kv_dim
    ffn = w.ffn or 4 * w.hidden
    mats = [(h, hq), (h, kv), (h, kv), (hq, h), (ffn, h), (h, ffn)]
    if w.gated_mlp:
        mats.append((h, ffn))
    per_layer = sum(rank * (a + b) for a, b in mats)
    return min(1.0, w.layers * per_layer / w.params)


def topk_ratio(compression: str) -> float | None:
    """The kept share of a 'topk:RATIO' compression, or None."""
    return float(compression.split(":", 1)[1]) if compression.startswith("topk:") else None


def _coll(op: Op, size: Any, ranks: Any, cl: Cluster, stride: Any) -> Any:
    """Fastest algorithm for `op` on the group `stride` ranks apart; nothing to move is free."""
    t = collective_time_s(op, Algo.AUTO, size, ranks, cl.group_topology(stride))
    return np.where(np.asarray(size) > 0, t, 0.0)


# --- the derived sizes ------------------------------------------------------------------------


@dataclass(frozen=True)
class Dims:
    """Group sizes and per-GPU shapes, derived once from the layouts (float arrays)."""

    n: Any
    tp: Any
    pp: Any
    cp: Any
    ep: Any
    zero: Any
    mb: Any
    v: Any
    gb: Any
    price: Any
    dp: Any
    """Data-parallel replicas: n / (tp·pp·cp)."""
    workers: Any
    """DiLoCo workers (1 when synchronous)."""
    dp_in: Any
    """Data-parallel replicas inside one DiLoCo worker."""
    dp_cp: Any
    """Ranks that reduce gradients and shard the optimizer (Megatron's dp_cp group)."""
    dp_expert: Any
    """Ranks that reduce the routed experts' gradients: dp·cp / ep."""
    m: Any
    """Micro-batches per step per pipeline (gradient accumulation)."""
    layers_ps: Any
    """Layers on the fullest pipeline stage."""
    moe_ps: Any
    """MoE layers among them."""
    seq: float
    hidden: float
    tokens_per_sample: float
    dense_local_params: Any
    """Non-expert parameters one GPU holds before ZeRO sharding."""
    expert_local_params: Any
    trainable: float
    """Share of parameters that train (LoRA < 1)."""
    grad_bytes: float
    """Bytes per gradient element on the wire."""
    rule: Any


def _dims(w: Workload, cl: Cluster, lay: LayoutArrays, opt: StepOptions) -> Dims:
    tp, pp, cp, ep, zero, mb, v, n, gb, price = lay.floats(
        cl.num_gpus, opt.global_batch, cl.price_per_gpu_hour_usd
    )
    dp = n / (tp * pp * cp)
    H = opt.local_sgd_steps
    # DiLoCo workers: the outer data-parallel replicas; each runs the inner layout on n/W GPUs
    # (default: one per site on a geo cluster, else every data-parallel replica)
    default_workers = cl.sites if cl.sites > 1 else np.floor(dp)
    workers = np.asarray((opt.diloco_workers or default_workers) if H > 1 else 1, dtype=np.float64)
    dp_in = np.maximum(dp / workers, 1.0) if H > 1 else dp
    rule = check_layouts(
        w,
        cl,
        lay,
        gb,
        schedule=opt.schedule,
        local_sgd_steps=H,
        mitigation=opt.straggler_mitigation,
        workers=workers,
    )
    rule = np.broadcast_to(rule, np.broadcast(tp, workers).shape)
    params = float(w.params)
    if isinstance(w, Transformer):
        seq, h, per_sample = float(w.seq_len), float(w.hidden), float(w.seq_len)
        layers_ps = np.ceil(w.layers / pp)
        moe_ps = layers_ps * (w.moe_layers / w.layers)
        routed = float(w.routed_expert_params)
    else:
        seq = h = 0.0
        per_sample = 1.0
        layers_ps, moe_ps, routed = np.ones_like(tp), np.zeros_like(tp), 0.0
    dp_cp = dp_in * cp  # Megatron reduces over DP × CP (inside a DiLoCo worker)
    return Dims(
        n=n,
        tp=tp,
        pp=pp,
        cp=cp,
        ep=ep,
        zero=zero,
        mb=mb,
        v=v,
        gb=gb,
        price=price,
        dp=dp,
        workers=workers,
        dp_in=dp_in,
        dp_cp=dp_cp,
        dp_expert=dp_cp / ep,
        m=gb / (dp * mb),
        layers_ps=layers_ps,
        moe_ps=moe_ps,
        seq=seq,
        hidden=h,
        tokens_per_sample=per_sample,
        dense_local_params=(params - routed) / (tp * pp),
        expert_local_params=routed / (tp * pp * ep),
        trainable=lora_trainable_fraction(w, opt.lora_rank),
        grad_bytes=data_parallel.grad_bytes_per_param(opt.reduce_dtype, opt.compression),
        rule=rule,
    )


# --- memory -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryTerms:
    """Bytes per GPU on the fullest (first) stage, by kind."""

    weights_bytes: Any
    grads_bytes: Any
    optimizer_bytes: Any
    activations_bytes: Any
    capacity_bytes: float
    recompute_share: Any
    """Share of layers fully recomputed (AUTO recomputation)."""

    @property
    def total_bytes(self) -> Any:
        return self.weights_bytes + self.grads_bytes + self.optimizer_bytes + self.activations_bytes


def _memory(w: Workload, cl: Cluster, d: Dims, opt: StepOptions) -> MemoryTerms:
    weights, grads, optimizer = memory.state_bytes(
        d.dense_local_params,
        d.expert_local_params,
        d.dp_cp,
        d.dp_expert,
        d.zero,
        d.grad_bytes,
        opt.local_sgd_steps,
        trainable_fraction=d.trainable,
        offload_optimizer=opt.offload_optimizer,
        outer_state_on_gpu=not opt.outer_state_on_cpu,
    )
    static = weights + grads + optimizer
    capacity = memory.usable_memory_bytes(cl.memory_bytes)
    if isinstance(w, Transformer):
        acts, share = memory.transformer_activation_bytes(
            w,
            opt.recompute,
            d.tp,
            d.pp,
            d.cp,
            d.mb,
            d.m,
            d.v,
            static,
            capacity,
            sequence_parallel=opt.sequence_parallel,
            flash_attention=opt.flash_attention,
        )
    else:
        acts = w.activation_bytes_per_sample * d.mb + np.zeros_like(static)
        share = np.zeros_like(static)
    return MemoryTerms(weights, grads, optimizer, acts, capacity, share)


# --- one pipeline stage's micro-batch -----------------------------------------------------------


@dataclass(frozen=True)
class StageTerms:
    """Seconds of one micro-batch on the slowest stage, and the optimizer step."""

    compute_s: Any
    """Forward + backward (+ recomputation) of one micro-batch on one GPU."""
    tp_s: Any
    """Exposed tensor-parallel communication per micro-batch."""
    cp_s: Any
    ep_s: Any
    optimizer_s: Any
    """Optimizer step per training step."""

    @property
    def slot_s(self) -> Any:
        """A pipeline slot: compute and exposed model-parallel communication."""
        return self.compute_s + self.tp_s + self.cp_s + self.ep_s


def _gpu_rates(cl: Cluster, opt: StepOptions) -> compute.GpuRates:
    perf = cl.perf
    return compute.GpuRates(
        peak_flops=cl.peak_flops,
        gemm_efficiency=opt.gemm_efficiency or perf.gemm_efficiency * compute.TRAINING_GEMM_FACTOR,
        attention_efficiency=perf.attention_efficiency,
        hbm_Bps=cl.gpu.memory_bandwidth_TBps * 1e12 * perf.hbm_efficiency,
        sm_count=perf.sm_count,
        tile_m=perf.gemm_tile[0],
        tile_n=perf.gemm_tile[1],
        kernel_launch_s=perf.kernel_launch_us * 1e-6,
        virtualization_overhead=cl.virtualization_overhead,
    )


def _stage(w: Workload, cl: Cluster, d: Dims, opt: StepOptions, mem: MemoryTerms) -> StageTerms:
    rates = _gpu_rates(cl, opt)
    optimizer_s = memory.optimizer_step_s(
        (d.dense_local_params + d.expert_local_params) * d.trainable,
        np.where(d.zero >= 1, d.dp_cp, 1.0),
        rates.hbm_Bps,
        opt.offload_optimizer,
    )
    if not isinstance(w, Transformer):
        t_mb = compute.cnn_microbatch_s(
            w.flops_per_sample,
            w.traffic_bytes_per_sample,
            w.kernels_per_step,
            d.mb,
            rates,
            w.compute_efficiency,
        ) + np.zeros_like(d.tp)
        zero = np.zeros_like(d.tp)
        return StageTerms(t_mb, zero, zero, zero, optimizer_s)
    return _transformer_stage(w, cl, d, opt, mem, rates, optimizer_s)


def _transformer_stage(
    w: Transformer,
    cl: Cluster,
    d: Dims,
    opt: StepOptions,
    mem: MemoryTerms,
    rates: compute.GpuRates,
    optimizer_s: Any,
) -> StageTerms:
    tokens = d.mb * d.seq / d.cp
    kw = dict(sequence_parallel=opt.sequence_parallel, flash_attention=opt.flash_attention)
    dense = compute.layer_times(w, tokens, d.tp, d.cp, d.mb, rates, moe_layer=False, **kw)
    moe = (
        compute.layer_times(w, tokens, d.tp, d.cp, d.mb, rates, moe_layer=True, **kw)
        if w.is_moe
        else dense
    )
    dense_ps = d.layers_ps - d.moe_ps
    forward = dense_ps * dense.forward_s + d.moe_ps * moe.forward_s
    gemm_fwd = dense_ps * dense.gemm_s + d.moe_ps * moe.gemm_s
    core = dense_ps * dense.attention_core_s + d.moe_ps * moe.attention_core_s
    # full recomputation reruns the forward of its share of layers; selective reruns the
    # attention core (free with FlashAttention, whose backward recomputes it anyway)
    selective = 0.0 if opt.flash_attention else core
    share = mem.recompute_share
    recompute_s = share * forward + np.where(
        opt.recompute is Recompute.NONE, 0.0, (1 - share) * selective
    )
    frozen_saving = (1 - d.trainable) * gemm_fwd  # frozen weights need no weight gradient
    t_mb = compute.microbatch_s(forward, d.layers_ps * dense.kernels, rates, recompute_s)
    t_mb = t_mb - frozen_saving + compute.lm_head_s(w, tokens, d.tp, rates)
    # tensor parallelism: the collectives of each layer, hidden behind GEMMs where they can be
    buf = parallel.tp_bytes(d.mb, d.seq, d.hidden, d.cp)
    tp_layer = parallel.tp_layer_s(
        _coll(Op.ALL_REDUCE, buf, d.tp, cl, 1.0),
        _coll(Op.ALL_GATHER, buf, d.tp, cl, 1.0),
        _coll(Op.REDUCE_SCATTER, buf, d.tp, cl, 1.0),
        gemm_fwd / d.layers_ps,
        sequence_parallel=opt.sequence_parallel,
        comm_overlap=opt.tp_comm_overlap,
        tp_ranks=d.tp,
        recompute_forward=share,
    )
    kv = parallel.cp_kv_bytes(d.mb, d.seq, float(w.kv_dim))
    cp_s = parallel.cp_microbatch_s(
        d.layers_ps,
        _coll(Op.ALL_GATHER, kv, d.cp, cl, d.tp),
        _coll(Op.REDUCE_SCATTER, kv, d.cp, cl, d.tp),
        (1 + compute.BACKWARD_FACTOR) * core,
    )
    a2a = parallel.ep_bytes(d.mb, d.seq, d.tp, d.cp, float(w.top_k), d.hidden)
    ep_s = parallel.ep_microbatch_s(
        d.moe_ps, _coll(Op.ALL_TO_ALL, a2a, d.ep, cl, d.tp * d.cp), opt.ep_overlap
    )
    tp_s = np.where(d.tp > 1, d.layers_ps * tp_layer, 0.0)
    return StageTerms(t_mb, tp_s, cp_s, ep_s, optimizer_s)


# --- pipeline ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PipelineTerms:
    bubble_s: Any
    """Fill and drain of the pipeline per step."""
    pp_s: Any
    """Exposed stage-to-stage sends per step."""


def _pipeline(cl: Cluster, d: Dims, opt: StepOptions, stage: StageTerms) -> PipelineTerms:
    size = pipeline.p2p_bytes(d.mb, d.seq, d.hidden, d.tp, d.cp)
    p2p = _coll(Op.SEND_RECV, size, 2.0, cl, d.tp * d.cp * d.dp_in)
    bubble, exposed = pipeline.pipeline_s(
        stage.slot_s, p2p, d.pp, d.v, d.m, overlap=opt.pp_comm_overlap
    )
    return PipelineTerms(bubble, exposed)


# --- data parallelism -------------------------------------------------------------------------


@dataclass(frozen=True)
class DataParallelTerms:
    dp_s: Any
    """Exposed gradient (and DiLoCo outer) synchronisation per step."""
    outer_s: Any
    """DiLoCo's outer synchronisation per inner step (inside dp_s)."""
    dp_bytes_per_gpu: Any
    """Bytes each GPU sends for data parallelism per step (ring-equivalent)."""


def _ddp_s(cl: Cluster, d: Dims, opt: StepOptions, stage: StageTerms) -> tuple[Any, Any]:
    """Exposed seconds and bytes of DDP / ZeRO-1/2: bucketed reduction behind backward."""
    dense_b = d.dense_local_params * d.grad_bytes * d.trainable
    expert_b = d.expert_local_params * d.grad_bytes * d.trainable
    ratio = topk_ratio(opt.compression)
    if ratio is not None:
        kept = ratio * (d.dense_local_params + d.expert_local_params) * d.trainable
        sparse = kept * data_parallel.TOPK_BYTES_PER_ELEMENT
        t_reduce = _coll(Op.ALL_GATHER, sparse * d.dp_cp, d.dp_cp, cl, d.tp)
    else:
        t_reduce = data_parallel.bucketed_all_reduce_s(
            dense_b, opt.bucket_MiB, lambda size: _coll(Op.ALL_REDUCE, size, d.dp_cp, cl, d.tp)
        ) + data_parallel.bucketed_all_reduce_s(
            expert_b,
            opt.bucket_MiB,
            lambda size: _coll(Op.ALL_REDUCE, size, d.dp_expert, cl, d.tp * d.ep),
        )
    window = (
        data_parallel.overlap_window_s(stage.compute_s, d.pp, d.v)
        if opt.overlap
        else np.zeros_like(stage.compute_s)
    )
    last_bucket = t_reduce * data_parallel.last_bucket_share(opt.bucket_MiB, dense_b + expert_b)
    exposed = np.where(d.dp_cp > 1, data_parallel.ddp_exposed_s(t_reduce, window, last_bucket), 0.0)
    share, share_e = data_parallel.ring_share(d.dp_cp), data_parallel.ring_share(d.dp_expert)
    return exposed, 2 * (share * dense_b + share_e * expert_b)


def _fsdp_s(cl: Cluster, d: Dims, opt: StepOptions, stage: StageTerms) -> tuple[Any, Any]:
    """FSDP / ZeRO-3: per micro-batch, all-gather the stage's weights for forward and again
    for backward (each GPU holds 1/(dp·cp)), and reduce-scatter the gradients."""
    dense_b = d.dense_local_params * d.grad_bytes * d.trainable
    expert_b = d.expert_local_params * d.grad_bytes * d.trainable
    w_dense = d.dense_local_params * memory.WEIGHT_BYTES
    w_exp = d.expert_local_params * memory.WEIGHT_BYTES
    per_mb = (
        2
        * (
            _coll(Op.ALL_GATHER, w_dense, d.dp_cp, cl, d.tp)
            + _coll(Op.ALL_GATHER, w_exp, d.dp_expert, cl, d.tp * d.ep)
        )
        + _coll(Op.REDUCE_SCATTER, dense_b, d.dp_cp, cl, d.tp)
        + _coll(Op.REDUCE_SCATTER, expert_b, d.dp_expert, cl, d.tp * d.ep)
    )
    exposed = data_parallel.fsdp_exposed_s(
        per_mb, stage.compute_s if opt.overlap else 0.0, d.layers_ps, d.m
    )
    share, share_e = data_parallel.ring_share(d.dp_cp), data_parallel.ring_share(d.dp_expert)
    sent = d.m * (share * (2 * w_dense + dense_b) + share_e * (2 * w_exp + expert_b))
    return exposed, sent


def _outer_s(
    cl: Cluster, d: Dims, opt: StepOptions, stage: StageTerms, inner_s: Any
) -> tuple[Any, Any]:
    """DiLoCo: every H steps each GPU all-reduces its 1/(dp·cp) slice of the pseudo-gradients
    with the matching GPUs of the other workers, then all-gathers the new weights inside its
    worker (Douillard et al. 2023; sharded as in INTELLECT-1). Seconds per inner step, bytes."""
    H = opt.local_sgd_steps
    if H <= 1:
        return np.zeros_like(inner_s), 0.0
    shard = (d.dense_local_params + d.expert_local_params) * d.trainable / d.dp_cp
    outer_bytes = shard * data_parallel.OUTER_BYTES[opt.outer_compression]
    t_outer = _coll(Op.ALL_REDUCE, outer_bytes, d.workers, cl, d.n / d.workers) + _coll(
        Op.ALL_GATHER, shard * d.dp_cp * memory.WEIGHT_BYTES, d.dp_cp, cl, d.tp
    )
    inner_step = d.m * stage.compute_s + inner_s
    exposed = data_parallel.outer_sync_exposed_s(t_outer, H, inner_step, opt.outer_overlap)
    return exposed, 2 * data_parallel.ring_share(d.workers) * outer_bytes / H


def _data_parallel(cl: Cluster, d: Dims, opt: StepOptions, stage: StageTerms) -> DataParallelTerms:
    ddp_s, ddp_bytes = _ddp_s(cl, d, opt, stage)
    fsdp_s, fsdp_bytes = _fsdp_s(cl, d, opt, stage)
    inner_s = np.where(d.zero >= 3, fsdp_s, ddp_s)
    outer_s, outer_bytes = _outer_s(cl, d, opt, stage, inner_s)
    sent = np.where(d.zero >= 3, fsdp_bytes, ddp_bytes) + outer_bytes
    return DataParallelTerms(inner_s + outer_s, outer_s, sent)


# --- the step ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepTerms:
    """One optimizer step: its parts add up to `step_s`."""

    compute_s: Any
    """Micro-batches and the optimizer step."""
    optimizer_s: Any
    tp_s: Any
    cp_s: Any
    ep_s: Any
    straggler_s: Any
    exposed_comm_s: Any
    step_s: Any
    flops: Any
    """Model FLOPs of the whole step (all GPUs; full attention, the PaLM convention)."""
    tokens: Any


def _step(
    w: Workload,
    cl: Cluster,
    d: Dims,
    stage: StageTerms,
    pipe: PipelineTerms,
    dpt: DataParallelTerms,
    opt: StepOptions,
) -> StepTerms:
    compute_s = d.m * stage.compute_s + stage.optimizer_s
    straggler = faults.straggler_s(
        compute_s,
        cl.straggler_fraction,
        cl.straggler_slowdown,
        d.n,
        opt.straggler_mitigation.value,
    )
    tp_s, cp_s, ep_s = d.m * stage.tp_s, d.m * stage.cp_s, d.m * stage.ep_s
    exposed = tp_s + cp_s + ep_s + pipe.pp_s + dpt.dp_s
    return StepTerms(
        compute_s=compute_s,
        optimizer_s=stage.optimizer_s,
        tp_s=tp_s,
        cp_s=cp_s,
        ep_s=ep_s,
        straggler_s=straggler,
        exposed_comm_s=exposed,
        step_s=compute_s + exposed + pipe.bubble_s + straggler,
        flops=d.gb * compute.training_flops_per_sample(w),
        tokens=d.gb * d.tokens_per_sample,
    )


# --- the run: failures, budget, cost -----------------------------------------------------------


@dataclass(frozen=True)
class RunTerms:
    mtbf_s: Any
    checkpoint_write_s: Any
    checkpoint_interval_s: Any
    restart_s: Any
    goodput: Any
    budget_tokens: float
    steps: Any
    eval_s: Any
    ideal_s: Any
    wall_s: Any
    gpu_hours: Any
    gpu_cost_usd: Any
    egress_bytes: Any
    egress_usd: Any


def _failures(w: Workload, cl: Cluster, d: Dims, step_s: Any) -> tuple[Any, ...]:
    """(MTBF, checkpoint write, interval, restart, goodput) from per-component failure rates;
    a LoRA checkpoint holds only the adapters and their optimizer state."""
    write_s = faults.checkpoint_write_s(float(w.params) * d.trainable, cl.checkpoint_write_GBps())
    write_s = write_s + np.zeros_like(step_s)
    restart = cl.restart_s + write_s
    if cl.failures is None:
        inf = np.full(step_s.shape, math.inf)
        return inf, write_s, inf, restart, np.ones(step_s.shape)
    nodes = np.asarray(cl.nodes(), dtype=np.float64)
    nics = nodes * cl.nics_per_node
    mtbf = faults.job_mtbf_s(cl.failures, d.n, nodes, nics, nics) + np.zeros_like(step_s)
    interval = faults.daly_interval_s(write_s, mtbf)
    return mtbf, write_s, interval, restart, faults.goodput(interval, write_s, restart, mtbf)


def _run(w: Workload, cl: Cluster, d: Dims, opt: StepOptions, step: StepTerms) -> RunTerms:
    mtbf, write_s, interval, restart, good = _failures(w, cl, d, step.step_s)
    is_tf = isinstance(w, Transformer)
    params = float(w.params)
    if isinstance(w, Transformer):
        budget = float(opt.tokens or CHINCHILLA_TOKENS_PER_PARAM * params)
        steps = budget / step.tokens
    else:
        budget = 0.0
        steps = (opt.epochs or DEFAULT_CNN_EPOCHS) * w.dataset_samples / d.gb
    # evaluation (MLPerf's clock includes it): a forward pass over eval_samples every
    # eval_interval_steps, at the training step's forward share of compute and TP time
    eval_s = np.zeros_like(step.step_s)
    if opt.eval_interval_steps and opt.eval_samples:
        forward_per_sample = (step.compute_s + step.tp_s) / (1 + compute.BACKWARD_FACTOR) / d.gb
        evals = np.floor(steps / opt.eval_interval_steps)
        eval_s = evals * opt.eval_samples * forward_per_sample
    ideal = steps * step.step_s + eval_s
    wall = ideal / good
    hours = cost.gpu_hours(d.n, wall)
    H = opt.local_sgd_steps
    per_param = data_parallel.OUTER_BYTES[opt.outer_compression] if H > 1 else d.grad_bytes
    egress_step = cost.egress_bytes_per_step(
        cl.sites,
        d.pp,
        d.v,
        is_tf,
        d.gb * d.seq * d.hidden * memory.ACT_BYTES,
        params * d.trainable * per_param,
        H,
        d.workers,
    )
    egress = egress_step * steps
    return RunTerms(
        mtbf_s=mtbf,
        checkpoint_write_s=write_s,
        checkpoint_interval_s=interval,
        restart_s=restart,
        goodput=good,
        budget_tokens=budget,
        steps=steps,
        eval_s=eval_s,
        ideal_s=ideal,
        wall_s=wall,
        gpu_hours=hours,
        gpu_cost_usd=hours * d.price,
        egress_bytes=egress,
        egress_usd=egress / 1e9 * cl.egress_usd_per_GB,
    )


# --- energy -----------------------------------------------------------------------------------

ENERGY_FIELDS = (
    "power_W_per_gpu",
    "energy_kwh",
    "joules_per_token",
    "tokens_per_kwh",
    "energy_cost_usd",
    "co2_kg",
)


def _energy(w: Workload, cl: Cluster, d: Dims, step: StepTerms, run: RunTerms) -> dict[str, Any]:
    """Power over a step, and the job's electricity, cost and CO2 (NaN when not priced)."""
    if cl.energy is None:
        return dict.fromkeys(ENERGY_FIELDS, np.full(step.step_s.shape, np.nan))
    power = energy_terms.training_power_W(
        cl.energy,
        step_s=step.step_s,
        compute_s=step.compute_s,
        flops_per_gpu_step=step.flops / d.n,
        peak_flops=cl.peak_flops,
    )
    work = run.budget_tokens if isinstance(w, Transformer) else run.steps * d.gb
    return energy_terms.job_energy(
        cl.energy, power_W_per_gpu=power, gpus=d.n, seconds=run.wall_s, tokens=work
    )


# --- composition ------------------------------------------------------------------------------


def evaluate(w: Workload, cl: Cluster, lay: LayoutArrays, opt: StepOptions) -> Metrics:
    """Price one training step, the whole run, its failures and its cost for every layout."""
    with np.errstate(all="ignore"):
        d = _dims(w, cl, lay, opt)
        mem = _memory(w, cl, d, opt)
        stage = _stage(w, cl, d, opt, mem)
        pipe = _pipeline(cl, d, opt, stage)
        dpt = _data_parallel(cl, d, opt, stage)
        step = _step(w, cl, d, stage, pipe, dpt, opt)
        run = _run(w, cl, d, opt, step)
        used = _energy(w, cl, d, step, run)
        return _metrics(cl, d, mem, pipe, dpt, step, run, used)


def _metrics(
    cl: Cluster,
    d: Dims,
    mem: MemoryTerms,
    pipe: PipelineTerms,
    dpt: DataParallelTerms,
    step: StepTerms,
    run: RunTerms,
    used: dict[str, Any],
) -> Metrics:
    """Every term group's fields under the names `Metrics` (and the JSON/CSV) use."""
    s = step.step_s
    values: dict[str, Any] = {
        "gpus": d.n,
        "tp": d.tp,
        "pp": d.pp,
        "cp": d.cp,
        "ep": d.ep,
        "dp": d.dp,
        "zero": d.zero,
        "micro_batch": d.mb,
        "micro_batches": d.m,
        "virtual_stages": d.v,
        "global_batch": d.gb,
        "rule": d.rule,
        "valid": d.rule == 0,
        "fits": mem.total_bytes <= mem.capacity_bytes,
        "step_time_s": s,
        "compute_s": step.compute_s,
        "exposed_comm_s": step.exposed_comm_s,
        "dp_s": dpt.dp_s,
        "tp_s": step.tp_s,
        "pp_s": pipe.pp_s,
        "ep_s": step.ep_s,
        "cp_s": step.cp_s,
        "bubble_s": pipe.bubble_s,
        "straggler_s": step.straggler_s,
        "comm_efficiency": step.compute_s / s,
        "compute_utilisation": 1 - dpt.dp_s / s,
        "outer_sync_s": dpt.outer_s,
        "mfu": step.flops / (s * d.n * cl.peak_flops),
        "tflops_per_gpu": step.flops / (s * d.n) / 1e12,
        "tokens_per_s": step.tokens / s,
        "samples_per_s": d.gb / s,
        "dp_bytes_per_gpu": dpt.dp_bytes_per_gpu,
        "memory_bytes": mem.total_bytes,
        "memory_weights_bytes": mem.weights_bytes,
        "memory_grads_bytes": mem.grads_bytes,
        "memory_optimizer_bytes": mem.optimizer_bytes,
        "memory_activations_bytes": mem.activations_bytes,
        "memory_capacity_bytes": mem.capacity_bytes,
        "recompute_share": mem.recompute_share,
        "mtbf_s": run.mtbf_s,
        "checkpoint_write_s": run.checkpoint_write_s,
        "checkpoint_interval_s": run.checkpoint_interval_s,
        "restart_s": run.restart_s,
        "goodput": run.goodput,
        "tokens": run.budget_tokens,
        "samples": run.steps * d.gb,
        "steps": run.steps,
        "optimizer_s": step.optimizer_s,
        "ideal_time_s": run.ideal_s,
        "eval_time_s": run.eval_s,
        "time_to_train_s": run.wall_s,
        "gpu_hours": run.gpu_hours,
        "price_per_gpu_hour_usd": d.price,
        "gpu_cost_usd": run.gpu_cost_usd,
        "egress_bytes": run.egress_bytes,
        "egress_usd": run.egress_usd,
        "cost_usd": run.gpu_cost_usd + run.egress_usd,
        "failure_cost_usd": cost.gpu_hours(d.n, run.wall_s - run.ideal_s) * d.price,
        **used,
    }
    shape = np.shape(s)
    return Metrics(**{k: np.broadcast_to(np.asarray(v), shape) for k, v in values.items()})
