"""The one place the cost terms are composed: a batch of layouts on a cluster → `Metrics`.

Every array in the result has one element per layout (layouts and cluster fields broadcast
together). `plan`, `sweep`, `compare`, `scale`, the layout search, `calibrate` and `validate`
all call `evaluate`; nothing else adds terms up.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from bandwall.model import compute, cost, data_parallel, faults, memory, parallel, pipeline
from bandwall.model import energy as energy_terms
from bandwall.model.cluster import Cluster
from bandwall.model.collectives import Algo, Op, collective_time_s
from bandwall.model.layout import LayoutArrays, Mitigation, Recompute, Schedule, check_layouts
from bandwall.workloads import Transformer, Workload

FloatArray = npt.NDArray[np.float64]

#: Chinchilla-optimal budget when none is given (Hoffmann et al. 2022: ~20 tokens/param).
CHINCHILLA_TOKENS_PER_PARAM = 20
#: ImageNet epochs when none are given (Goyal et al. 2017 train ResNet-50 for 90).
DEFAULT_CNN_EPOCHS = 90


#: What a plan's assumptions section lists: the model's choices, one line per term.
ASSUMPTIONS = [
    "Fabric load balance: on static-ECMP fabrics each RDMA queue pair is hashed to one spine "
    "path and a synchronous collective runs at the pace of the busiest of the job's hashed "
    "links (balls into bins); adaptive routing (IB, Spectrum-X, EFA) balances; PFC-only fabrics "
    "pay head-of-line blocking in all-to-all (docs/congestion.md).",
    "Energy: GPU power linear from idle to TDP in the FLOP utilisation it achieves, waiting "
    "(exposed communication, bubbles, stragglers) at 15%; host and fat-tree network share per "
    "GPU; x PUE of the provider kind; location-based CO2 (bandwall catalog power).",
    "Compute: FLOPs per token = 6 x matmul parameters used + 12 x layers x heads x head_dim x "
    "seq_len (PaLM appendix B); CNNs use measured per-sample FLOPs x 3; GPUs sustain "
    "compute_efficiency x dense peak, less the provider's virtualization overhead.",
    "Rank order tp-cp-ep-dp-pp (Megatron-LM): TP inside a node, PP outermost; each group gets "
    "its share of its node's NICs.",
    "TP: 4 all-reduce-equivalents of the micro-batch activations per layer (forward and "
    "backward, sequence parallel), exposed unless tp_overlap > 0.",
    "CP: all-gather of K/V in forward and reduce-scatter of dK/dV in backward per layer, "
    "hidden behind attention compute where it fits.",
    "EP: dispatch and combine all-to-all in forward and backward per MoE layer, exposed unless "
    "ep_overlap > 0.",
    "PP: 1F1B or interleaved schedule; bubble = (pp-1)/v micro-batch slots; activations sent "
    "to the next stage overlap compute except during fill and drain.",
    "DP: gradients reduced once per step (ZeRO-1/2: reduce-scatter + all-gather; FSDP: "
    "all-gather twice and reduce-scatter per micro-batch), overlapped with the last "
    "micro-batch's backward; the last bucket is always exposed.",
    "DiLoCo/local-SGD: each data-parallel replica is a worker; the outer all-reduce happens "
    "every H steps, overlapped with the next H steps only with outer_overlap (streaming "
    "DiLoCo). Its effect on model quality is NOT modelled (DiLoCo reports "
    "parity at moderate H; check for your model).",
    "Memory: bf16 weights, grads in the reduction dtype, 12 B/param Adam state (sharded by "
    "ZeRO stage), activations 34·h bytes per token per layer with selective recomputation "
    "(Korthikanti et al. 2022), times in-flight micro-batches on the first stage; "
    "90% of device memory usable.",
    "Stragglers: a fraction f of GPUs running x slower delays every synchronous step by x "
    "whenever at least one is in the job (probability 1-(1-f)^n); backup workers cost f/(1-f) "
    "extra compute instead; asynchronous outer steps (local SGD) cost only the mean, f*x.",
    "Failures: per-component rates (Llama 3 fleet) give the job MTBF; checkpoints of 14 B/param "
    "written at min(nodes x per-node rate, storage cap), every Daly-optimal interval, and read "
    "back at the same rate on restart; goodput by Daly's expected-wall-time formula with the "
    "provider's restart time plus that restore.",
    "Degraded fabric: failed scale-out links cut bandwidth to (L-K)/L with adaptive routing; "
    "with static ECMP hashing the most loaded survivor sets the pace (balls into bins).",
]


@dataclass(frozen=True)
class StepOptions:
    """Strategy settings shared by every layout of one evaluation."""

    global_batch: Any
    """Sequences (or images) per step; scalar or array."""
    recompute: Recompute = Recompute.AUTO
    reduce_dtype: str = "fp32"
    compression: str = "none"
    local_sgd_steps: int = 1
    overlap: bool = True
    sequence_parallel: bool = True
    tp_comm_overlap: bool = False
    pp_comm_overlap: bool = True
    flash_attention: bool = True
    ep_overlap: float = 0.0
    bucket_MiB: float = 25.0
    gemm_efficiency: float | None = None
    straggler_mitigation: Mitigation = Mitigation.NONE
    schedule: Schedule = Schedule.INTERLEAVED
    tokens: float | None = None
    epochs: float | None = None
    lora_rank: int | None = None
    offload_optimizer: bool = False
    eval_interval_steps: int | None = None
    eval_samples: int = 0
    diloco_workers: int | None = None
    outer_compression: str = "none"
    outer_overlap: bool = False
    outer_state_on_cpu: bool = False


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


#: Metrics that are whole numbers for a valid layout (printed and serialised as integers).
COUNT_FIELDS = frozenset(
    {"gpus", "tp", "pp", "cp", "ep", "dp", "zero", "micro_batch", "micro_batches"}
    | {"virtual_stages", "global_batch", "rule"}
)


@dataclass(frozen=True)
class Metrics:
    """Everything the model says about each layout; units in every name.

    The time terms compute_s + dp_s + tp_s + pp_s + ep_s + cp_s + bubble_s + straggler_s add
    up to step_time_s.
    """

    gpus: FloatArray
    tp: FloatArray
    pp: FloatArray
    cp: FloatArray
    ep: FloatArray
    dp: FloatArray
    zero: FloatArray
    micro_batch: FloatArray
    micro_batches: FloatArray
    """Micro-batches per step per pipeline (gradient-accumulation steps)."""
    virtual_stages: FloatArray
    global_batch: FloatArray
    rule: npt.NDArray[np.int64]
    """The first layout rule broken (0: valid); see `bandwall.model.layout.Rule`."""
    valid: npt.NDArray[np.bool_]
    fits: npt.NDArray[np.bool_]
    step_time_s: FloatArray
    compute_s: FloatArray
    exposed_comm_s: FloatArray
    dp_s: FloatArray
    tp_s: FloatArray
    pp_s: FloatArray
    ep_s: FloatArray
    cp_s: FloatArray
    bubble_s: FloatArray
    straggler_s: FloatArray
    comm_efficiency: FloatArray
    """compute_s / step_time_s."""
    compute_utilisation: FloatArray
    """Share of the step not spent waiting for data-parallel / DiLoCo synchronisation (the
    decentralized-training papers' metric): 1 - dp_s / step_time_s."""
    outer_sync_s: FloatArray
    """DiLoCo's outer synchronisation per inner step (inside dp_s)."""
    mfu: FloatArray
    """Model FLOPs per second over the dense peak of all GPUs."""
    tflops_per_gpu: FloatArray
    tokens_per_s: FloatArray
    samples_per_s: FloatArray
    dp_bytes_per_gpu: FloatArray
    """Bytes each GPU sends for data parallelism per step (ring-equivalent volume)."""
    memory_bytes: FloatArray
    """Bytes per GPU on the fullest (first) pipeline stage."""
    memory_weights_bytes: FloatArray
    memory_grads_bytes: FloatArray
    memory_optimizer_bytes: FloatArray
    memory_activations_bytes: FloatArray
    memory_capacity_bytes: FloatArray
    """Usable device memory."""
    recompute_share: FloatArray
    """Share of layers fully recomputed (AUTO recomputation)."""
    mtbf_s: FloatArray
    checkpoint_write_s: FloatArray
    checkpoint_interval_s: FloatArray
    restart_s: FloatArray
    goodput: FloatArray
    tokens: FloatArray
    """Training tokens in the budget (transformers; 0 for CNNs)."""
    samples: FloatArray
    """Sequences or images processed over the budget."""
    steps: FloatArray
    optimizer_s: FloatArray
    """Optimizer step per training step (inside compute_s): Adam's HBM traffic, or PCIe and
    host work when offloaded."""
    ideal_time_s: FloatArray
    """Time to train without failures."""
    eval_time_s: FloatArray
    """Evaluation passes over the whole run (included in ideal_time_s)."""
    time_to_train_s: FloatArray
    gpu_hours: FloatArray
    price_per_gpu_hour_usd: FloatArray
    gpu_cost_usd: FloatArray
    egress_bytes: FloatArray
    egress_usd: FloatArray
    cost_usd: FloatArray
    failure_cost_usd: FloatArray
    """What failures add to the cost: (time to train − ideal time) × GPUs × price."""
    power_W_per_gpu: FloatArray
    """Average facility power per GPU over a step, PUE included."""
    energy_kwh: FloatArray
    """Electricity of the whole job, failures and restarts included."""
    joules_per_token: FloatArray
    """Energy per trained token (per sample for CNNs)."""
    tokens_per_kwh: FloatArray
    energy_cost_usd: FloatArray
    """Electricity at the site's price (for owned clusters; rental prices already include it)."""
    co2_kg: FloatArray
    """Location-based CO2 of that electricity."""

    def row(self, i: int) -> dict[str, Any]:
        """One layout's metrics as plain Python numbers (whole counts as int)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = np.asarray(getattr(self, f.name)).reshape(-1)[i].item()
            if f.name in COUNT_FIELDS and isinstance(value, float) and value.is_integer():
                value = int(value)
            out[f.name] = value
        return out

    def take(self, index: Any) -> Metrics:
        """The rows at `index` (an integer array or a boolean mask)."""
        return Metrics(
            **{
                f.name: np.asarray(getattr(self, f.name)).reshape(-1)[index]
                for f in dataclasses.fields(self)
            }
        )

    def __len__(self) -> int:
        return int(np.size(self.step_time_s))


def _coll(op: Op, size: Any, ranks: Any, cl: Cluster, stride: Any) -> Any:
    """Fastest algorithm for `op` on the group `stride` ranks apart; nothing to move is free."""
    t = collective_time_s(op, Algo.AUTO, size, ranks, cl.group_topology(stride))
    return np.where(np.asarray(size) > 0, t, 0.0)


def evaluate(w: Workload, cl: Cluster, lay: LayoutArrays, opt: StepOptions) -> Metrics:
    """Price one training step, the whole run, its failures and its cost for every layout."""
    with np.errstate(all="ignore"):
        return _evaluate(w, cl, lay, opt)


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


def _evaluate(w: Workload, cl: Cluster, lay: LayoutArrays, opt: StepOptions) -> Metrics:
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
        local_sgd_steps=opt.local_sgd_steps,
        mitigation=opt.straggler_mitigation,
        workers=workers,
    )
    rule = np.broadcast_to(rule, np.broadcast(tp, workers).shape)
    m = gb / (dp * mb)
    rates = _gpu_rates(cl, opt)
    grad_b = data_parallel.grad_bytes_per_param(opt.reduce_dtype, opt.compression)
    params = float(w.params)
    trainable = lora_trainable_fraction(w, opt.lora_rank)
    # Megatron reduces gradients and shards the optimizer over DP × CP (inside a DiLoCo worker)
    dp_cp = dp_in * cp

    if isinstance(w, Transformer):
        seq, h = float(w.seq_len), float(w.hidden)
        tokens_per_sample = seq
        layers_ps = np.ceil(w.layers / pp)
        moe_ps = layers_ps * (w.moe_layers / w.layers)
        routed = float(w.routed_expert_params)
    else:
        seq = h = 0.0
        tokens_per_sample = 1.0
        layers_ps = np.ones_like(tp)
        moe_ps = np.zeros_like(tp)
        routed = 0.0

    # --- memory ---------------------------------------------------------------------------
    dense_local = (params - routed) / (tp * pp)
    expert_local = routed / (tp * pp * ep)
    dp_expert = dp_cp / ep
    weights, grads, optimizer = memory.state_bytes(
        dense_local,
        expert_local,
        dp_cp,
        dp_expert,
        zero,
        grad_b,
        opt.local_sgd_steps,
        trainable_fraction=trainable,
        offload_optimizer=opt.offload_optimizer,
        outer_state_on_gpu=not opt.outer_state_on_cpu,
    )
    static = weights + grads + optimizer
    capacity = memory.usable_memory_bytes(cl.memory_bytes)
    if isinstance(w, Transformer):
        acts, recompute_share = memory.transformer_activation_bytes(
            w,
            opt.recompute,
            tp,
            pp,
            cp,
            mb,
            m,
            v,
            static,
            capacity,
            sequence_parallel=opt.sequence_parallel,
            flash_attention=opt.flash_attention,
        )
    else:
        acts = w.activation_bytes_per_sample * mb + np.zeros_like(static)
        recompute_share = np.zeros_like(static)
    mem_total = static + acts

    # --- compute and tensor parallelism, per micro-batch on the slowest stage ----------------
    if isinstance(w, Transformer):
        tokens = mb * seq / cp
        layer_kw = dict(
            sequence_parallel=opt.sequence_parallel, flash_attention=opt.flash_attention
        )
        dense_layer = compute.layer_times(w, tokens, tp, cp, mb, rates, moe_layer=False, **layer_kw)
        moe_layer = (
            compute.layer_times(w, tokens, tp, cp, mb, rates, moe_layer=True, **layer_kw)
            if w.is_moe
            else dense_layer
        )
        dense_ps = layers_ps - moe_ps
        forward = dense_ps * dense_layer.forward_s + moe_ps * moe_layer.forward_s
        gemm_fwd = dense_ps * dense_layer.gemm_s + moe_ps * moe_layer.gemm_s
        core = dense_ps * dense_layer.attention_core_s + moe_ps * moe_layer.attention_core_s
        # full recomputation reruns the forward of its share of layers; selective reruns the
        # attention core (free with FlashAttention, whose backward recomputes it anyway)
        selective = 0.0 if opt.flash_attention else core
        recompute_s = recompute_share * forward + np.where(
            opt.recompute is Recompute.NONE, 0.0, (1 - recompute_share) * selective
        )
        frozen_saving = (1 - trainable) * gemm_fwd  # frozen weights need no weight gradient
        kernels = layers_ps * dense_layer.kernels
        t_mb = compute.microbatch_s(forward, kernels, rates, recompute_s) - frozen_saving
        t_mb = t_mb + compute.lm_head_s(w, tokens, tp, rates)
        buf = parallel.tp_bytes(mb, seq, h, cp)
        tp_layer = parallel.tp_layer_s(
            _coll(Op.ALL_REDUCE, buf, tp, cl, 1.0),
            _coll(Op.ALL_GATHER, buf, tp, cl, 1.0),
            _coll(Op.REDUCE_SCATTER, buf, tp, cl, 1.0),
            gemm_fwd / layers_ps,
            sequence_parallel=opt.sequence_parallel,
            comm_overlap=opt.tp_comm_overlap,
            tp_ranks=tp,
            recompute_forward=recompute_share,
        )
        tp_exp = np.where(tp > 1, layers_ps * tp_layer, 0.0)
        kv = parallel.cp_kv_bytes(mb, seq, float(w.kv_dim))
        cp_exp = parallel.cp_microbatch_s(
            layers_ps,
            _coll(Op.ALL_GATHER, kv, cp, cl, tp),
            _coll(Op.REDUCE_SCATTER, kv, cp, cl, tp),
            (1 + compute.BACKWARD_FACTOR) * core,
        )
        a2a = parallel.ep_bytes(mb, seq, tp, cp, float(w.top_k), h)
        ep_exp = parallel.ep_microbatch_s(
            moe_ps, _coll(Op.ALL_TO_ALL, a2a, ep, cl, tp * cp), opt.ep_overlap
        )
    else:
        t_mb = compute.cnn_microbatch_s(
            w.flops_per_sample,
            w.traffic_bytes_per_sample,
            w.kernels_per_step,
            mb,
            rates,
            w.compute_efficiency,
        ) + np.zeros_like(tp)
        tp_exp = cp_exp = ep_exp = np.zeros_like(tp)
    optimizer_s = memory.optimizer_step_s(
        (dense_local + expert_local) * trainable,
        np.where(zero >= 1, dp_cp, 1.0),
        rates.hbm_Bps,
        opt.offload_optimizer,
    )
    compute_s = m * t_mb + optimizer_s
    stage = t_mb + tp_exp + cp_exp + ep_exp

    # --- pipeline ---------------------------------------------------------------------------
    p2p = _coll(Op.SEND_RECV, pipeline.p2p_bytes(mb, seq, h, tp, cp), 2.0, cl, tp * cp * dp_in)
    bubble_s, pp_s = pipeline.pipeline_s(stage, p2p, pp, v, m, overlap=opt.pp_comm_overlap)

    # --- data parallelism -----------------------------------------------------------------
    dense_b = dense_local * grad_b * trainable
    expert_b = expert_local * grad_b * trainable
    ratio = topk_ratio(opt.compression)
    if ratio is not None:
        sparse = (
            ratio * (dense_local + expert_local) * trainable * data_parallel.TOPK_BYTES_PER_ELEMENT
        )
        t_reduce = _coll(Op.ALL_GATHER, sparse * dp_cp, dp_cp, cl, tp)
    else:
        t_reduce = data_parallel.bucketed_all_reduce_s(
            dense_b, opt.bucket_MiB, lambda size: _coll(Op.ALL_REDUCE, size, dp_cp, cl, tp)
        ) + data_parallel.bucketed_all_reduce_s(
            expert_b,
            opt.bucket_MiB,
            lambda size: _coll(Op.ALL_REDUCE, size, dp_expert, cl, tp * ep),
        )
    window = data_parallel.overlap_window_s(t_mb, pp, v) if opt.overlap else np.zeros_like(t_mb)
    last_bucket = t_reduce * data_parallel.last_bucket_share(opt.bucket_MiB, dense_b + expert_b)
    ddp_s = np.where(dp_cp > 1, data_parallel.ddp_exposed_s(t_reduce, window, last_bucket), 0.0)
    w_dense, w_exp = dense_local * memory.WEIGHT_BYTES, expert_local * memory.WEIGHT_BYTES
    # FSDP: per micro-batch, all-gather the stage's weights for forward and again for backward
    # (each GPU holds 1/(dp·cp)), and reduce-scatter the gradients
    fsdp_mb = (
        2
        * (
            _coll(Op.ALL_GATHER, w_dense, dp_cp, cl, tp)
            + _coll(Op.ALL_GATHER, w_exp, dp_expert, cl, tp * ep)
        )
        + _coll(Op.REDUCE_SCATTER, dense_b, dp_cp, cl, tp)
        + _coll(Op.REDUCE_SCATTER, expert_b, dp_expert, cl, tp * ep)
    )
    fsdp_s = data_parallel.fsdp_exposed_s(fsdp_mb, t_mb if opt.overlap else 0.0, layers_ps, m)
    inner_s = np.where(zero >= 3, fsdp_s, ddp_s)
    share, share_e = data_parallel.ring_share(dp_cp), data_parallel.ring_share(dp_expert)
    ddp_bytes = 2 * (share * dense_b + share_e * expert_b)
    fsdp_bytes = m * (share * (2 * w_dense + dense_b) + share_e * (2 * w_exp + expert_b))
    dp_bytes = np.where(zero >= 3, fsdp_bytes, ddp_bytes)
    # DiLoCo: every H steps each GPU all-reduces its 1/(dp·cp) slice of the pseudo-gradients
    # with the matching GPUs of the other workers, then all-gathers the new weights inside its
    # worker (Douillard et al. 2023; sharded as in INTELLECT-1)
    outer_s = np.zeros_like(inner_s)
    if H > 1:
        shard = (dense_local + expert_local) * trainable / dp_cp
        outer_bytes = shard * data_parallel.OUTER_BYTES[opt.outer_compression]
        stride = n / workers
        t_outer = _coll(Op.ALL_REDUCE, outer_bytes, workers, cl, stride) + _coll(
            Op.ALL_GATHER, shard * dp_cp * memory.WEIGHT_BYTES, dp_cp, cl, tp
        )
        inner_step = m * t_mb + inner_s
        outer_s = data_parallel.outer_sync_exposed_s(t_outer, H, inner_step, opt.outer_overlap)
        dp_bytes = dp_bytes + 2 * data_parallel.ring_share(workers) * outer_bytes / H
    dp_s = inner_s + outer_s

    # --- stragglers and the step ------------------------------------------------------------
    straggler = faults.straggler_s(
        compute_s,
        cl.straggler_fraction,
        cl.straggler_slowdown,
        n,
        opt.straggler_mitigation.value,
    )
    tp_s, cp_s, ep_s = m * tp_exp, m * cp_exp, m * ep_exp
    exposed = tp_s + cp_s + ep_s + pp_s + dp_s
    step = compute_s + exposed + bubble_s + straggler
    tokens_step = gb * tokens_per_sample
    flops_step = gb * compute.training_flops_per_sample(w)

    # --- failures and checkpoints -------------------------------------------------------------
    # a LoRA checkpoint holds only the adapters and their optimizer state
    write_s = faults.checkpoint_write_s(params * trainable, cl.checkpoint_write_GBps())
    write_s = write_s + np.zeros_like(step)
    restart = cl.restart_s + write_s
    if cl.failures is None:
        mtbf = np.full(step.shape, math.inf)
        interval = np.full(step.shape, math.inf)
        good = np.ones(step.shape)
    else:
        nodes = np.asarray(cl.nodes(), dtype=np.float64)
        nics = nodes * cl.nics_per_node
        mtbf = faults.job_mtbf_s(cl.failures, n, nodes, nics, nics) + np.zeros_like(step)
        interval = faults.daly_interval_s(write_s, mtbf)
        good = faults.goodput(interval, write_s, restart, mtbf)

    # --- budget and cost --------------------------------------------------------------------
    if isinstance(w, Transformer):
        budget_tokens = float(opt.tokens or CHINCHILLA_TOKENS_PER_PARAM * params)
        steps = budget_tokens / tokens_step
    else:
        budget_tokens = 0.0
        steps = (opt.epochs or DEFAULT_CNN_EPOCHS) * w.dataset_samples / gb
    # evaluation (MLPerf's clock includes it): a forward pass over eval_samples every
    # eval_interval_steps, at the training step's forward share of compute and TP time
    eval_total = np.zeros_like(step)
    if opt.eval_interval_steps and opt.eval_samples:
        forward_per_sample = (compute_s + tp_s) / (1 + compute.BACKWARD_FACTOR) / gb
        evals = np.floor(steps / opt.eval_interval_steps)
        eval_total = evals * opt.eval_samples * forward_per_sample
    ideal = steps * step + eval_total
    wall = ideal / good
    hours = cost.gpu_hours(n, wall)
    sync_bytes = (
        params * trainable * (data_parallel.OUTER_BYTES[opt.outer_compression] if H > 1 else grad_b)
    )
    egress_step = cost.egress_bytes_per_step(
        cl.sites,
        pp,
        v,
        isinstance(w, Transformer),
        gb * seq * h * memory.ACT_BYTES,
        sync_bytes,
        H,
        workers,
    )
    egress = egress_step * steps
    gpu_usd = hours * price
    egress_usd = egress / 1e9 * cl.egress_usd_per_GB
    if cl.energy is not None:
        power = energy_terms.training_power_W(
            cl.energy,
            step_s=step,
            compute_s=compute_s,
            flops_per_gpu_step=flops_step / n,
            peak_flops=cl.peak_flops,
        )
        work = budget_tokens if isinstance(w, Transformer) else steps * gb
        used = energy_terms.job_energy(
            cl.energy, power_W_per_gpu=power, gpus=n, seconds=wall, tokens=work
        )
    else:
        nan = np.full(step.shape, np.nan)
        used = dict.fromkeys(
            (
                "power_W_per_gpu",
                "energy_kwh",
                "joules_per_token",
                "tokens_per_kwh",
                "energy_cost_usd",
                "co2_kg",
            ),
            nan,
        )

    shape = step.shape

    def full(x: Any) -> Any:
        return np.broadcast_to(np.asarray(x), shape)

    return Metrics(
        gpus=full(n),
        tp=full(tp),
        pp=full(pp),
        cp=full(cp),
        ep=full(ep),
        dp=full(dp),
        zero=full(zero),
        micro_batch=full(mb),
        micro_batches=full(m),
        virtual_stages=full(v),
        global_batch=full(gb),
        rule=full(rule),
        valid=full(rule == 0),
        fits=full(mem_total <= capacity),
        step_time_s=step,
        compute_s=full(compute_s),
        exposed_comm_s=full(exposed),
        dp_s=full(dp_s),
        tp_s=full(tp_s),
        pp_s=full(pp_s),
        ep_s=full(ep_s),
        cp_s=full(cp_s),
        bubble_s=full(bubble_s),
        straggler_s=full(straggler),
        comm_efficiency=full(compute_s / step),
        compute_utilisation=full(1 - dp_s / step),
        outer_sync_s=full(outer_s),
        mfu=full(flops_step / (step * n * cl.peak_flops)),
        tflops_per_gpu=full(flops_step / (step * n) / 1e12),
        tokens_per_s=full(tokens_step / step),
        samples_per_s=full(gb / step),
        dp_bytes_per_gpu=full(dp_bytes),
        memory_bytes=full(mem_total),
        memory_weights_bytes=full(weights),
        memory_grads_bytes=full(grads),
        memory_optimizer_bytes=full(optimizer),
        memory_activations_bytes=full(acts),
        memory_capacity_bytes=full(capacity),
        recompute_share=full(recompute_share),
        mtbf_s=full(mtbf),
        checkpoint_write_s=full(write_s),
        checkpoint_interval_s=full(interval),
        restart_s=full(restart),
        goodput=full(good),
        tokens=full(budget_tokens),
        samples=full(steps * gb),
        steps=full(steps),
        optimizer_s=full(optimizer_s),
        ideal_time_s=full(ideal),
        eval_time_s=full(eval_total),
        time_to_train_s=full(wall),
        gpu_hours=full(hours),
        price_per_gpu_hour_usd=full(price),
        gpu_cost_usd=full(gpu_usd),
        egress_bytes=full(egress),
        egress_usd=full(egress_usd),
        cost_usd=full(gpu_usd + egress_usd),
        failure_cost_usd=full(cost.gpu_hours(n, wall - ideal) * price),
        **{k: full(v) for k, v in used.items()},
    )
