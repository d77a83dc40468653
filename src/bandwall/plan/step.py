"""The training-step model: compute, exposed communication per parallel axis, bubble,
stragglers, memory. Vectorised: every layout and cluster field may be an array.

Each term is a small function of the workload, the cluster and the layout. Sources and
assumptions are in the docstrings; `ASSUMPTIONS` lists them for reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from bandwall.collectives import Algo, Op, collective_time_s
from bandwall.plan.cluster import Cluster
from bandwall.plan.layout import LayoutArrays, Mitigation, Recompute, parse_compression
from bandwall.workloads import Transformer, Workload

FloatArray = npt.NDArray[np.float64]

#: Bytes per parameter of Adam state in mixed precision: fp32 master weights, m and v.
ADAM_BYTES_PER_PARAM = 12
#: Bf16 weights and activations.
WEIGHT_BYTES = 2
ACT_BYTES = 2
#: Fraction of device memory usable by the framework (CUDA context, allocator fragmentation).
USABLE_MEMORY_FRACTION = 0.9
#: Share of a micro-batch's compute that is backward (backward ≈ 2 × forward).
BACKWARD_SHARE = 2 / 3
#: Full recomputation reruns the forward pass in backward: 4 passes' worth instead of 3.
FULL_RECOMPUTE_COMPUTE_FACTOR = 4 / 3
#: DiLoCo keeps the outer optimizer state and the last synchronised weights in fp32.
DILOCO_EXTRA_BYTES_PER_PARAM = 8

ASSUMPTIONS = [
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
    "every H steps, not overlapped. Its effect on model quality is NOT modelled (DiLoCo reports "
    "parity at moderate H; check for your model).",
    "Memory: bf16 weights, grads in the reduction dtype, 12 B/param Adam state (sharded by "
    "ZeRO stage), activations 34·h bytes per token per layer with selective recomputation "
    "(Korthikanti et al. 2022), times in-flight micro-batches on the first stage; "
    f"{USABLE_MEMORY_FRACTION:.0%} of device memory usable.",
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
class StepInputs:
    """Scalar strategy settings shared by every layout in a batch."""

    global_batch: Any  # sequences or images; scalar or array
    recompute: Recompute = Recompute.AUTO
    grad_dtype: str = "bf16"
    compression: str = "none"
    local_sgd_steps: int = 1
    overlap: bool = True
    tp_overlap: float = 0.0
    ep_overlap: float = 0.0
    bucket_MiB: float = 25.0
    compute_efficiency: float | None = None
    straggler_mitigation: Mitigation = Mitigation.NONE


def ddp_exposed_s(t_reduce: Any, backward_window_s: Any, last_bucket_s: Any) -> Any:
    """Exposed data-parallel time with bucketed reduction overlapped with backward (PyTorch
    DDP, Li et al. 2020): what the backward window cannot hide, and never less than the last
    bucket, which only starts once backward is done."""
    return np.maximum(t_reduce - backward_window_s, last_bucket_s)


def _coll(op: Op, size: Any, ranks: Any, cl: Cluster, stride: Any) -> FloatArray:
    """Fastest algorithm for `op` on the group `stride` ranks apart; nothing to move is free."""
    t = collective_time_s(op, Algo.AUTO, size, ranks, cl.group_topology(stride))
    return np.where(np.asarray(size) > 0, t, 0.0)


def evaluate_step(
    w: Workload, cl: Cluster, lay: LayoutArrays, inp: StepInputs
) -> dict[str, npt.NDArray[Any]]:
    """Price one training step for every layout in `lay` (arrays broadcast together)."""
    n = np.asarray(cl.num_gpus, dtype=np.float64)
    tp, pp, cp, ep, zero, mb, v, gb = (
        np.asarray(x, dtype=np.float64) for x in lay.broadcast(np.asarray(inp.global_batch))
    )
    n = n + np.zeros_like(tp)
    dp = n / (tp * pp * cp)
    m = gb / (dp * mb)  # micro-batches per step
    eff = inp.compute_efficiency or w.compute_efficiency
    rate = cl.peak_flops * eff * (1 - cl.virtualization_overhead)

    grad_bytes = 4.0 if inp.grad_dtype == "fp32" else 2.0
    kind, ratio = parse_compression(inp.compression)
    if kind == "int8":
        grad_bytes = 1.0

    if isinstance(w, Transformer):
        seq = float(w.seq_len)
        flops_per_sample = w.flops_per_token * seq
        tokens_per_sample = seq
        layers_ps = np.ceil(w.layers / pp)
        moe_ps = w.moe_layers / pp
        routed = float(w.routed_expert_params)
        h = float(w.hidden)
    else:
        seq = 1.0
        flops_per_sample = w.flops_per_sample
        tokens_per_sample = 1.0
        layers_ps = np.ones_like(tp)
        moe_ps = np.zeros_like(tp)
        routed = 0.0
        h = 0.0
    params = float(w.params)

    mem = _memory(w, cl, lay, inp, tp, pp, cp, ep, zero, mb, dp, m, grad_bytes, routed)
    t_mb = flops_per_sample * mb / (tp * cp * pp) / rate
    t_mb = t_mb * (1 + mem["recompute_share"] * (FULL_RECOMPUTE_COMPUTE_FACTOR - 1))
    compute_s = m * t_mb

    # --- tensor, context and expert parallelism, per micro-batch per stage ---------------
    act_block = mb * seq * h * ACT_BYTES / cp
    tp_mb = layers_ps * 4 * _coll(Op.ALL_REDUCE, act_block, tp, cl, 1.0)
    tp_exp = (1 - inp.tp_overlap) * tp_mb
    if isinstance(w, Transformer):
        kv = mb * seq * w.kv_dim * 2 * ACT_BYTES
        cp_mb = layers_ps * (
            _coll(Op.ALL_GATHER, kv, cp, cl, tp) + _coll(Op.REDUCE_SCATTER, kv, cp, cl, tp)
        )
        cp_exp = np.maximum(cp_mb - w.attention_flops_fraction * t_mb, 0.0)
        a2a = mb * seq / (cp * tp) * w.top_k * h * ACT_BYTES
        ep_mb = moe_ps * 4 * _coll(Op.ALL_TO_ALL, a2a, ep, cl, tp * cp)
        ep_exp = (1 - inp.ep_overlap) * ep_mb
    else:
        cp_exp = ep_exp = np.zeros_like(tp)
    stage = t_mb + tp_exp + cp_exp + ep_exp

    # --- pipeline -----------------------------------------------------------------------
    p2p_bytes = mb * seq * h * ACT_BYTES / (tp * cp)
    p2p = np.where(pp > 1, _coll(Op.SEND_RECV, p2p_bytes, 2.0, cl, tp * cp * dp), 0.0)
    steady = np.maximum(stage, 2 * v * p2p)
    bubble_s = (pp - 1) / v * steady
    pp_s = m * (steady - stage) + 2 * (pp - 1) * p2p

    # --- data parallelism -----------------------------------------------------------------
    dense_local = (params - routed) / (tp * pp)
    expert_local = routed / (tp * pp * ep)
    dp_expert = dp / ep
    dense_b, expert_b = dense_local * grad_bytes, expert_local * grad_bytes
    H = inp.local_sgd_steps
    if kind == "topk":
        sparse = ratio * (dense_local + expert_local) * (WEIGHT_BYTES + 4)  # values + indices
        t_reduce = _coll(Op.ALL_GATHER, sparse * dp, dp, cl, tp * cp)
    else:
        t_reduce = _coll(Op.ALL_REDUCE, dense_b, dp, cl, tp * cp) + _coll(
            Op.ALL_REDUCE, expert_b, dp_expert, cl, tp * cp * ep
        )
    window = BACKWARD_SHARE * t_mb if inp.overlap else 0.0
    bucket_frac = np.minimum(1.0, inp.bucket_MiB * 2**20 / np.maximum(dense_b + expert_b, 1.0))
    ddp_exposed = ddp_exposed_s(t_reduce, window, t_reduce * bucket_frac)
    if H > 1:
        ddp_exposed = t_reduce / H
    w_dense, w_exp = dense_local * WEIGHT_BYTES, expert_local * WEIGHT_BYTES
    fsdp_mb = (
        2
        * (
            _coll(Op.ALL_GATHER, w_dense * dp, dp, cl, tp * cp)
            + _coll(Op.ALL_GATHER, w_exp * dp_expert, dp_expert, cl, tp * cp * ep)
        )
        + _coll(Op.REDUCE_SCATTER, dense_b * dp, dp, cl, tp * cp)
        + _coll(Op.REDUCE_SCATTER, expert_b * dp_expert, dp_expert, cl, tp * cp * ep)
    )
    fsdp_window = t_mb if inp.overlap else 0.0
    fsdp_exposed = m * np.maximum(fsdp_mb - fsdp_window, fsdp_mb / np.maximum(layers_ps, 1.0))
    dp_s = np.where(zero >= 3, fsdp_exposed, ddp_exposed)
    # bytes each GPU sends for data parallelism per step (ring-equivalent volume)
    ring_share, ring_share_e = (dp - 1) / dp, (dp_expert - 1) / dp_expert
    ddp_bytes = 2 * (ring_share * dense_b + ring_share_e * expert_b) / H
    fsdp_bytes = m * (ring_share * (2 * w_dense + dense_b) + ring_share_e * (2 * w_exp + expert_b))
    dp_bytes = np.where(zero >= 3, fsdp_bytes, ddp_bytes)

    # --- stragglers -----------------------------------------------------------------------
    f, x = cl.straggler_fraction, cl.straggler_slowdown
    if inp.straggler_mitigation is Mitigation.BACKUP:
        straggler_s = compute_s * f / (1 - f)  # spare workers whose work is discarded
    elif inp.straggler_mitigation is Mitigation.ASYNC:
        straggler_s = compute_s * x * f  # each worker waits only for itself: the mean
    else:
        straggler_s = compute_s * x * (1 - (1 - f) ** n)  # the slowest of n sets the pace

    tp_s, cp_s, ep_s = m * tp_exp, m * cp_exp, m * ep_exp
    exposed = tp_s + cp_s + ep_s + pp_s + dp_s
    step = compute_s + exposed + bubble_s + straggler_s

    tokens_step = gb * tokens_per_sample
    flops_step = gb * flops_per_sample
    valid = (
        (np.abs(dp - np.round(dp)) < 1e-9) & (dp >= 1) & (np.abs(m - np.round(m)) < 1e-9) & (m >= 1)
    )
    return {
        "step_time_s": step,
        "compute_s": compute_s,
        "exposed_comm_s": exposed,
        "dp_s": dp_s,
        "tp_s": tp_s,
        "pp_s": pp_s,
        "ep_s": ep_s,
        "cp_s": cp_s,
        "bubble_s": bubble_s,
        "straggler_s": straggler_s,
        "dp": dp,
        "micro_batches": m,
        "dp_bytes_per_gpu": dp_bytes + np.zeros_like(step),
        **{k: v + np.zeros_like(step) for k, v in mem.items() if k.startswith("memory_")},
        "fits": mem["fits"] + np.zeros_like(step, dtype=bool),
        "recompute_share": mem["recompute_share"] + np.zeros_like(step),
        "valid": valid,
        "tokens_per_step": tokens_step,
        "flops_per_step": flops_step,
        "num_gpus": n,
    }


def derived_metrics(r: dict[str, npt.NDArray[Any]], cl: Cluster) -> dict[str, FloatArray]:
    """Efficiency, MFU and throughput from a step evaluation."""
    step, n = r["step_time_s"], r["num_gpus"]
    return {
        "comm_efficiency": r["compute_s"] / step,
        "mfu": r["flops_per_step"] / (step * n * cl.peak_flops),
        "tflops_per_gpu": r["flops_per_step"] / (step * n) / 1e12,
        "tokens_per_s": r["tokens_per_step"] / step,
    }


def _memory(
    w: Workload,
    cl: Cluster,
    lay: LayoutArrays,
    inp: StepInputs,
    tp: Any,
    pp: Any,
    cp: Any,
    ep: Any,
    zero: Any,
    mb: Any,
    dp: Any,
    m: Any,
    grad_bytes: float,
    routed: float,
) -> dict[str, Any]:
    """Bytes per GPU on the first pipeline stage (the fullest), by kind, and whether it fits.

    Weights bf16, gradients in the reduction dtype, Adam 12 B/param; ZeRO-1 shards the
    optimizer, ZeRO-2 also gradients, ZeRO-3 also weights, over dp (experts over dp/ep).
    Activations per token per layer (Korthikanti et al. 2022, with sequence parallelism):
    34·h with selective recomputation, 2·h with full, 34·h + 5·heads·seq with none; the first
    1F1B stage holds min(pp, micro-batches) micro-batches in flight (× (1 + (pp-1)/(pp·v))
    when interleaved); fp32 logits on top. AUTO recomputes fully the smallest share of layers
    that makes the stage fit; that share costs one extra forward pass (`recompute_share`).
    """
    dense_local = (w.params - routed) / (tp * pp)
    expert_local = routed / (tp * pp * ep)
    dp_expert = dp / ep

    def sharded(on: Any) -> Any:
        return np.where(on, dense_local / dp + expert_local / dp_expert, dense_local + expert_local)

    weights = WEIGHT_BYTES * sharded(zero >= 3)
    grads = grad_bytes * sharded(zero >= 2)
    opt = ADAM_BYTES_PER_PARAM * sharded(zero >= 1)
    if inp.local_sgd_steps > 1:
        opt = opt + DILOCO_EXTRA_BYTES_PER_PARAM * (dense_local + expert_local)
    static = weights + grads + opt
    capacity = cl.gpu.memory_GB * 1e9 * USABLE_MEMORY_FRACTION
    if isinstance(w, Transformer):
        h, seq = float(w.hidden), float(w.seq_len)
        per_tok = {
            Recompute.SELECTIVE: 34 * h,
            Recompute.FULL: 2 * h,
            Recompute.NONE: 34 * h + 5 * w.heads * seq,
        }
        v = np.asarray(lay.virtual_stages, dtype=np.float64)
        interleave = np.where(v > 1, 1 + (pp - 1) / (pp * v), 1.0)  # Narayanan et al. 2021
        in_flight = np.minimum(pp, np.maximum(m, 1.0)) * np.ceil(w.layers / pp) * interleave
        scale = mb * seq / (tp * cp) * in_flight
        logits = mb * seq * w.vocab * 4 / (tp * cp)
        if inp.recompute is Recompute.AUTO:
            # recompute just enough layers fully to fit (Megatron --recompute-num-layers)
            selective = per_tok[Recompute.SELECTIVE] * scale
            full = per_tok[Recompute.FULL] * scale
            over = static + selective + logits - capacity
            recompute_share = np.clip(over / np.maximum(selective - full, 1.0), 0.0, 1.0)
            acts = selective - recompute_share * (selective - full) + logits
        else:
            acts = per_tok[inp.recompute] * scale + logits
            recompute_share = np.full(np.shape(acts), float(inp.recompute is Recompute.FULL))
    else:
        acts = w.activation_bytes_per_sample * mb + np.zeros_like(static)
        recompute_share = np.zeros(np.shape(acts))
    total = static + acts
    return {
        "memory_bytes": total,
        "memory_weights_bytes": weights,
        "memory_grads_bytes": grads,
        "memory_optimizer_bytes": opt,
        "memory_activations_bytes": acts,
        "memory_capacity_bytes": np.full(np.shape(total), capacity),
        "fits": total <= capacity,
        "recompute_share": recompute_share,
    }
