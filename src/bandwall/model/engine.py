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
import operator
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from bandwall.catalog.models import LOW_PRECISIONS
from bandwall.model import (
    calibration,
    compute,
    cost,
    data_parallel,
    faults,
    memory,
    parallel,
    pipeline,
)
from bandwall.model import energy as energy_terms
from bandwall.model.cluster import Cluster
from bandwall.model.collectives import Algo, Op, dedupe, fast
from bandwall.model.collectives.api import compact_time_s, shared_groups
from bandwall.model.collectives.levels import check_links
from bandwall.model.layout import LAYOUT_AXES, LayoutArrays, Recompute, Rule, check_layouts
from bandwall.model.metrics import ASSUMPTIONS, COUNT_FIELDS, Metrics, StepOptions
from bandwall.model.topology import Topology
from bandwall.model.vocab import Stack
from bandwall.workloads import Transformer, Workload

__all__ = [
    "ASSUMPTIONS",
    "CHINCHILLA_TOKENS_PER_PARAM",
    "COUNT_FIELDS",
    "DEFAULT_CNN_EPOCHS",
    "FINE_TUNE_TOKENS",
    "Metrics",
    "StepOptions",
    "evaluate",
    "lora_trainable_fraction",
    "topk_ratio",
]

#: Chinchilla-optimal budget when none is given (Hoffmann et al. 2022: ~20 tokens/param).
CHINCHILLA_TOKENS_PER_PARAM = 20
#: A LoRA fine-tune's budget when none is given. Fine-tunes have no compute-optimal size (they
#: run over their dataset, from thousands to billions of tokens), so this is a pricing unit,
#: "per billion tokens", not a claim of a typical size; 20 tokens per parameter of the frozen
#: base would price a 70B adapter as a 1.4T-token pre-training run.
FINE_TUNE_TOKENS = 1e9
#: ImageNet epochs when none are given (Goyal et al. 2017 train ResNet-50 for 90).
DEFAULT_CNN_EPOCHS = 90
#: Float slack of the fits test: AUTO recompute sizes memory to the capacity itself.
FITS_RELATIVE_SLACK = 1 + 1e-9
#: How far a layout may round the default global batch (to a multiple of dp × micro-batch).
BATCH_TOLERANCE = 0.25


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


def _coll(
    op: Op, size: Any, ranks: Any, cl: Cluster, stride: Any, topo: Topology | None = None
) -> Any:
    """Fastest algorithm for `op` on the group `stride` ranks apart (or on `topo`); nothing to
    move is free."""
    topo = cl.group_topology(stride) if topo is None else topo
    if type(size) in _NUMBERS and type(ranks) in _NUMBERS and fast.topology_ndim(topo) == 0:
        # one layout: no call costs nothing; else the compiled table's price when there is one
        if not size > 0 or ranks <= 1:
            return np.float64(0.0)
        one = fast.scalar_time_s(op, Algo.AUTO, float(size), float(ranks), topo, None)
        if one is not None:
            return np.float64(one)
    elif _moves_nothing(size, ranks, topo):
        # a dense model's expert groups (0 bytes), cp = 1 or ep = 1: zero everywhere, as the
        # priced path returns, without pricing a whole grid (~3 ms each on a sweep)
        shape = np.broadcast_shapes(
            np.shape(size), np.shape(ranks), *(np.shape(v) for _, _, v in dedupe.arrays(topo))
        )
        return _full_shape(np.zeros((1,) * len(shape)), shape)
    t, shape = compact_time_s(op, Algo.AUTO, size, ranks, topo)
    # whole on the layouts' axes (numpy loops fast over a contiguous inner block; a time
    # repeating along the inner axes would make every op on it loop over a few elements)
    layouts = np.broadcast_shapes(t.shape, np.shape(size), np.shape(ranks))
    t = _full_shape(t if t.shape == layouts else np.broadcast_to(t, layouts).copy(), shape)
    if bool(np.all(size > 0)):
        return t  # np.where would only broadcast it
    return np.where(size > 0, t, 0.0)


#: The shapes `_coll`'s times would have inside one `evaluate`: it keeps them on the axes
#: they vary along (a TP group's time does not vary with a sweep's scale-out bandwidth, and
#: every term built on it then stays that small); `evaluate` broadcasts its metrics back.
_FULL_SHAPES: ContextVar[list[tuple[int, ...]] | None] = ContextVar("full_shapes", default=None)


def _full_shape(t: Any, shape: tuple[int, ...]) -> Any:
    """`t` as it is inside `evaluate` (the shape noted), else broadcast to `shape`."""
    shapes = _FULL_SHAPES.get()
    if shapes is None:
        return np.broadcast_to(t, shape)
    if np.shape(t) != shape:
        shapes.append(shape)
    return t


def _moves_nothing(size: Any, ranks: Any, topo: Topology) -> bool:
    """Whether `_coll` is 0 everywhere: no element has bytes to move (NaN sizes included) or
    every group is one rank (the priced path's `n <= 1` zero). Links are checked as that
    path checks them, so a group the topology cannot carry still raises."""
    n, b = np.asarray(ranks), np.asarray(size)
    # the first element settles most calls without a pass over the grid
    if not (n.size and n.flat[0] > 1) and bool(np.all(n <= 1)):
        return True  # one rank spans no GPU, node or site: check_links cannot refuse it
    if (b.size and b.flat[0] > 0) or bool(np.any(b > 0)):
        return False
    check_links(np.asarray(ranks, dtype=np.float64), topo)
    return True


_NUMBERS = (float, np.float64)


# --- the derived sizes ------------------------------------------------------------------------


@dataclass(frozen=True)
class Dims:
    """Group sizes and per-GPU shapes, derived once from the layouts (float arrays)."""

    n: Any
    tp: Any
    pp: Any
    cp: Any
    ep: Any
    etp: Any
    """Expert TP: the expert layers split the tp·cp·dp ranks as ep × etp × expert-dp."""
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
    """Ranks that reduce the routed experts' gradients: tp·cp·dp / (ep·etp) (expert-dp)."""
    m: Any
    """Micro-batches per step per pipeline (gradient accumulation)."""
    layers_first: Any
    """Layers on the first, a middle and the last pipeline rank (all its model chunks); the
    first holds the embedding, the last the LM head and loss."""
    layers_mid: Any
    layers_last: Any
    layers_ps: Any
    """Layers on the fullest pipeline rank."""
    moe_share: float
    """Share of layers with an MoE MLP."""
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


def _stage_layers(w: Workload, pp: Any, opt: StepOptions) -> tuple[Any, Any, Any]:
    """Layers on the first, a middle and the last pipeline rank. Given first/last counts
    (Megatron --decoder-first/last-pipeline-num-layers) the rest split evenly; an even split
    with a remainder puts the extra layers on middle ranks first, then on the first."""
    if not isinstance(w, Transformer):
        one = np.ones_like(pp)
        return one, one, one
    L = float(w.layers)
    q, r = np.floor(L / pp), np.mod(L, pp)
    r_mid = np.minimum(r, np.maximum(pp - 2, 0))
    first = q + ((r - r_mid) > 0)
    mid = q + (r_mid > 0)
    last = q + ((r - r_mid) > 1)
    if opt.pp_first_stage_layers is not None or opt.pp_last_stage_layers is not None:
        f = np.asarray(
            opt.pp_first_stage_layers if opt.pp_first_stage_layers is not None else first,
            dtype=np.float64,
        )
        la = np.asarray(
            opt.pp_last_stage_layers if opt.pp_last_stage_layers is not None else last,
            dtype=np.float64,
        )
        # Megatron splits what the given stages leave evenly over the others (a layout where
        # that leaves a stage empty is refused: layout.Rule.PP_STAGE_LAYERS)
        given = (opt.pp_first_stage_layers is not None) + (opt.pp_last_stage_layers is not None)
        others = np.maximum(pp - given, 1.0)
        left = L - (opt.pp_first_stage_layers or 0) - (opt.pp_last_stage_layers or 0)
        share = np.ceil(np.maximum(left, 0.0) / others)
        f = f if opt.pp_first_stage_layers is not None else share
        la = la if opt.pp_last_stage_layers is not None else share
        first, last = f, np.where(pp > 1, la, f)
        mid = np.where(pp > 2, share, 0.0)
    single = pp <= 1
    return (
        np.where(single, L, first),
        np.where(single, L, np.where(pp > 2, mid, 0.0)),
        np.where(single, L, last),
    )


def _dims(w: Workload, cl: Cluster, lay: LayoutArrays, opt: StepOptions) -> Dims:
    tp, pp, cp, ep, etp, zero, mb, v, n, gb, price = lay.floats(
        cl.num_gpus, opt.global_batch, cl.price_per_gpu_hour_usd
    )
    dp = n / (tp * pp * cp)
    H = opt.local_sgd_steps
    off_target = np.zeros(np.shape(gb), dtype=bool)
    if opt.batch_follows_layout:
        # the default batch is a target: the nearest multiple of dp × micro-batch (at least
        # one), so any GPU count and layout has a valid batch of about the same tokens; a
        # layout that would change it by more than BATCH_TOLERANCE is not offered
        unit = np.maximum(np.floor(dp), 1.0) * mb
        target = gb
        gb = np.maximum(np.round(gb / unit), 1.0) * unit
        off_target = np.abs(gb / target - 1.0) > BATCH_TOLERANCE
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
        stage_layers=(opt.pp_first_stage_layers, opt.pp_last_stage_layers),
    )
    rule = np.where((rule == 0) & off_target, int(Rule.BATCH_DIVISIBLE), rule)
    rule = np.broadcast_to(rule, np.broadcast(tp, workers, gb).shape)
    params = float(w.params)
    if isinstance(w, Transformer):
        seq, h, per_sample = float(w.seq_len), float(w.hidden), float(w.seq_len)
        routed = float(w.routed_expert_params)
        moe_share = w.moe_layers / w.layers
    else:
        seq = h = 0.0
        per_sample, routed, moe_share = 1.0, 0.0, 0.0
    first, mid, last = _stage_layers(w, pp, opt)
    fullest = np.maximum(np.maximum(first, mid), last)
    dp_cp = dp_in * cp  # Megatron reduces over DP × CP (inside a DiLoCo worker)
    return Dims(
        n=n,
        tp=tp,
        pp=pp,
        cp=cp,
        ep=ep,
        etp=etp,
        zero=zero,
        mb=mb,
        v=v,
        gb=gb,
        price=price,
        dp=dp,
        workers=workers,
        dp_in=dp_in,
        dp_cp=dp_cp,
        dp_expert=tp * dp_cp / (ep * etp),
        m=gb / (dp * mb),
        layers_first=first,
        layers_mid=mid,
        layers_last=last,
        layers_ps=fullest,
        moe_share=moe_share,
        seq=seq,
        hidden=h,
        tokens_per_sample=per_sample,
        dense_local_params=(params - routed) / (tp * pp),
        expert_local_params=routed / (ep * etp * pp),
        trainable=lora_trainable_fraction(w, opt.lora_rank),
        grad_bytes=data_parallel.grad_bytes_per_param(opt.reduce_dtype, opt.compression),
        rule=rule,
    )


def _largest(values: list[Any]) -> Any:
    """Index of the largest of `values` per layout (they broadcast together), as np.argmax
    over them stacked: the first of equal values, and the first NaN where there is one."""
    shape = np.broadcast(*values).shape
    if shape == ():
        return np.argmax(values)  # one layout: no broadcast_arrays (microseconds each)
    # a running comparison instead of argmax over the stacked copy (~20x faster on a sweep)
    index = np.zeros(shape, dtype=np.intp)
    best = values[0]
    best_nan = np.isnan(best)
    for i, v in enumerate(values[1:], start=1):
        v_nan = np.isnan(v)
        take = (v > best) | (v_nan & ~best_nan)
        np.copyto(index, i, where=take)
        if i < len(values) - 1:
            best, best_nan = np.where(take, v, best), best_nan | v_nan
    return index


def _chooser(index: Any, count: int) -> Any:
    """np.choose(index, choices) for `count` choices; on arrays the masks are built once for
    every call (a stage picks five terms by the same index) and each pick is a copy."""
    if np.ndim(index) == 0:
        return partial(np.choose, index)
    masks = [index == i for i in range(count - 1)]

    def choose(choices: list[Any]) -> Any:
        shape = np.broadcast_shapes(np.shape(index), *(np.shape(c) for c in choices))
        out = np.empty(shape, dtype=np.result_type(*choices))
        np.copyto(out, choices[-1])
        for mask, choice in zip(masks, choices, strict=False):
            np.copyto(out, choice, where=mask)
        return out

    return choose


# --- memory -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryTerms:
    """Bytes per GPU on the fullest (first) stage, by kind."""

    weights_bytes: Any
    grads_bytes: Any
    optimizer_bytes: Any
    activations_bytes: Any
    """Kept between forward and backward for the micro-batches in flight (with allocator
    overhead)."""
    transient_bytes: Any
    """Alive only at the backward peak: a layer rebuilt and its gradients, the logits at the
    loss, FSDP's gathered layers (with allocator overhead)."""
    capacity_bytes: float
    recompute_share: Any
    """Share of layers fully recomputed (AUTO recomputation)."""

    @property
    def total_bytes(self) -> Any:
        static = self.weights_bytes + self.grads_bytes + self.optimizer_bytes
        return static + self.activations_bytes + self.transient_bytes


def _recompute_share(w: Workload, d: Dims, opt: StepOptions) -> Any:
    """Share of layers fully recomputed when --recompute-layers limits it (None: all)."""
    if opt.recompute is not Recompute.FULL or opt.recompute_layers is None:
        return None
    return np.minimum(opt.recompute_layers * d.v / np.maximum(d.layers_ps, 1.0), 1.0)


def _memory(w: Workload, cl: Cluster, d: Dims, opt: StepOptions) -> MemoryTerms:
    """What fills a GPU: the training states (sharded by ZeRO), then the activations kept on
    the fullest pipeline rank and the transients at its backward peak."""
    w_bytes = 1.0 if opt.fp8_weights else memory.WEIGHT_BYTES
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
        weight_bytes=w_bytes,
    )
    static = weights + grads + optimizer
    capacity = memory.usable_memory_bytes(cl.memory_bytes)
    if not isinstance(w, Transformer):
        acts = w.activation_bytes_per_sample * d.mb + np.zeros_like(static)
        zero = np.zeros_like(static)
        return MemoryTerms(weights, grads, optimizer, acts, zero, capacity, zero)
    stage_params = d.dense_local_params + d.expert_local_params
    # ZeRO-3 that keeps gathered weights between forward and backward, or accumulates
    # unsharded gradients over the micro-batches, holds the whole stage's copy
    reshard, every = _fsdp_behaviour(d, opt)
    unsharded = (
        (d.zero >= 3)
        * stage_params
        * (np.where(reshard, 0.0, w_bytes) + np.where(every, 0.0, d.grad_bytes))
    )
    layer_params = stage_params / np.maximum(d.layers_ps, 1.0)
    fsdp = memory.fsdp_transient_bytes(layer_params, d.zero, w_bytes, d.grad_bytes)
    acts, transient, share = _activation_memory(w, cl, d, opt, static + unsharded, fsdp, capacity)
    return MemoryTerms(weights + unsharded, grads, optimizer, acts, transient, capacity, share)


def _activation_memory(
    w: Transformer,
    cl: Cluster,
    d: Dims,
    opt: StepOptions,
    states_bytes: Any,
    fsdp_bytes: Any,
    capacity: float,
) -> tuple[Any, Any, Any]:
    """(kept activations, backward-peak transients, share of layers fully recomputed) on the
    fullest pipeline rank, allocator overhead included."""
    full_share = _recompute_share(w, d, opt)
    selective_op = _stack(opt).op_level_selective and opt.recompute is Recompute.SELECTIVE
    # TransformerEngine keeps the linears' inputs for wgrad in fp8 (memory.py); torchao's
    # float8 keeps them in bf16 and casts again in backward
    fp8_inputs = cl.precision.value in LOW_PRECISIONS and _fp8_is_transformer_engine(opt)
    over = memory.ALLOCATOR_OVERHEAD
    work = partial(
        memory.working_set_bytes,
        w,
        d.tp,
        d.cp,
        d.mb,
        sequence_parallel=opt.sequence_parallel,
        fp8_inputs=fp8_inputs,
    )
    peak = [work(last_stage=d.pp <= 1), work(last_stage=False), work(last_stage=True)]
    # AUTO recomputes until the whole GPU fits: the kept activations get what the states,
    # the backward's working set, FSDP's gathered layers and the allocator leave over
    states = states_bytes / over

    def stage(layers: Any, in_flight: Any, logits: Any, peak_bytes: Any) -> tuple[Any, Any]:
        return memory.transformer_activation_bytes(
            w,
            opt.recompute,
            d.tp,
            d.pp,
            d.cp,
            d.mb,
            d.m,
            d.v,
            states + peak_bytes + fsdp_bytes,
            capacity / over,
            sequence_parallel=opt.sequence_parallel,
            flash_attention=opt.flash_attention,
            stage_layers=layers,
            in_flight=in_flight,
            with_logits=logits,
            full_share=full_share,
            selective_op=selective_op,
            fp8_inputs=fp8_inputs,
            modules=opt.recompute_modules,
        )

    # the first rank holds min(pp, m) micro-batches in flight (1F1B), a middle one one fewer,
    # the last one micro-batch and the logits; the fullest sets the memory
    in_flight = np.minimum(d.pp, np.maximum(d.m, 1.0))
    first, share_f = stage(d.layers_first, in_flight, False, peak[0])
    mid, share_m = stage(d.layers_mid, np.maximum(in_flight - 1, 1.0), False, peak[1])
    last, share_l = stage(d.layers_last, 1.0, True, peak[2])
    share = np.maximum(np.maximum(share_f, np.where(d.pp > 2, share_m, 0.0)), share_l)
    # the fullest rank: kept activations and the backward peak, first, middle or last
    kept = [first, mid, last]
    totals = [k + t for k, t in zip(kept, peak, strict=True)]
    totals[1] = np.where(d.pp > 2, totals[1], -np.inf)
    choose = _chooser(_largest(totals), len(totals))
    return over * choose(kept), over * (choose(peak) + fsdp_bytes), share


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
    hidden_s: Any
    """Model-parallel communication hidden behind compute per micro-batch (it takes SMs)."""

    @property
    def slot_s(self) -> Any:
        """A pipeline slot: compute and exposed model-parallel communication."""
        return self.compute_s + self.tp_s + self.cp_s + self.ep_s


#: Default fp8 recipe by architecture when the request names none (TransformerEngine: delayed
#: tensor scaling on Hopper; MXFP8 block scaling is Blackwell's native fp8).
DEFAULT_FP8_RECIPE = {"blackwell": "mxfp8"}


def _stack(opt: StepOptions) -> data_parallel.StackBehaviour:
    """What the request's training framework does by default (`data_parallel.STACKS`)."""
    return data_parallel.STACKS[opt.stack]


def _launch_mode(opt: StepOptions) -> compute.LaunchMode:
    """How kernels are issued: CUDA graphs when asked; fused kernels with Megatron's and
    DeepSpeed's TransformerEngine/apex layers, torch.compile or XLA (MaxText, which fuses
    element-wise ops into their producers); eager PyTorch otherwise (FSDP2 without
    compile)."""
    if opt.cuda_graphs:
        return compute.LaunchMode.GRAPHS
    if opt.compile or not _stack(opt).eager_kernels:
        return compute.LaunchMode.FUSED
    return compute.LaunchMode.EAGER


def _gpu_rates(cl: Cluster, opt: StepOptions) -> compute.GpuRates:
    """The kernel model's rates: built once per cluster and the few options they read (held
    on the cluster, as its group topologies are; the fitted constant is in the key)."""
    key = (
        opt.gemm_efficiency,
        _launch_mode(opt),
        opt.stack,
        opt.attention_kernel,
        calibration.FP8_GEMM_IN_STEP_EFFICIENCY,
    )
    cache: dict[tuple[Any, ...], compute.GpuRates] = cl.__dict__.setdefault("_rates", {})
    rates = cache.get(key)
    if rates is None:
        if len(cache) >= 64:
            cache.clear()
        rates = cache[key] = _build_gpu_rates(cl, opt)
    return rates


def _build_gpu_rates(cl: Cluster, opt: StepOptions) -> compute.GpuRates:
    rates = compute.gpu_rates(
        cl.perf,
        cl.gpu,
        precision=cl.precision,
        power_cap_W=cl.power_cap_W,
        virtualization_overhead=cl.virtualization_overhead,
        gemm_efficiency=opt.gemm_efficiency,
        launch_mode=_launch_mode(opt),
    )
    # fp8 GEMMs inside a step reach less of their microbenchmark rate than bf16 ones
    # (model/calibration.py); NVFP4 GEMMs, with no published runs to fit on, take fp8's factor:
    # the same scaling bookkeeping, transposed casts and training shapes
    return rates.with_(
        fp8_gemm_efficiency=rates.fp8_gemm_efficiency * calibration.FP8_GEMM_IN_STEP_EFFICIENCY,
        fp4_gemm_efficiency=rates.fp4_gemm_efficiency * calibration.FP8_GEMM_IN_STEP_EFFICIENCY,
        attention_kernel=attention_kernel(
            rates.arch, rates.attention_kernel, opt.stack, opt.attention_kernel
        ),
    )


def attention_kernel(arch: str, best: str, stack: Stack, requested: str | None) -> str:
    """The FlashAttention generation a step runs: the request's, else the stack's. FSDP2
    stacks (torchtitan, llm-foundry) call PyTorch's scaled_dot_product_attention, whose flash
    backend is the FlashAttention-2 that PyTorch vendors (aten/src/ATen/native/transformers/
    cuda/flash_attn); FA3 is a separate package. Megatron and NeMo run TransformerEngine's
    cuDNN fused attention, FA3-class on Hopper, as MaxText's GPU recipes do
    (attention=cudnn_flash_te). So on Hopper FSDP2 gets FA2. A kernel the
    architecture cannot run (FA3 off Hopper, FA4 off Blackwell) falls back to its best."""
    if requested is not None:
        own = {"fa3": "hopper", "fa4": "blackwell"}.get(requested, arch)
        return requested if own == arch else best
    if data_parallel.STACKS[stack].sdpa_attention and arch == "hopper":
        return "fa2"
    return best


def _fp8_is_transformer_engine(opt: StepOptions) -> bool:
    """Whether the stack's fp8 is TransformerEngine's (Megatron/NeMo, DeepSpeed's Megatron
    layers), which caches fp8 weights and keeps fp8 activations, or one that does neither
    (torchao's float8 under fsdp2, XLA's dot_general under maxtext): the stack's
    `StackBehaviour.fp8_transformer_engine`."""
    return _stack(opt).fp8_transformer_engine


def _fp8_recipe(cl: Cluster, opt: StepOptions) -> str | None:
    """The low-precision recipe the linears run: fp8's (the request's, else the architecture's
    default), NVFP4's for fp4 (TransformerEngine NVFP4BlockScaling, the one 4-bit training
    recipe), None for bf16."""
    if cl.precision.value == "fp4":
        return "nvfp4"
    if cl.precision.value != "fp8":
        return None
    return opt.fp8_recipe or DEFAULT_FP8_RECIPE.get(cl.perf.arch, "delayed")


def _optimizer_s(d: Dims, opt: StepOptions, rates: compute.GpuRates) -> Any:
    """Adam and gradient clipping over this GPU's shard of the trainable parameters (ZeRO-1+
    shards the optimizer over dp·cp), or ZeRO-Offload's PCIe and host work."""
    trainable = (d.dense_local_params + d.expert_local_params) * d.trainable
    shards = np.where(d.zero >= 1, d.dp_cp, 1.0)
    if opt.offload_optimizer:
        return memory.optimizer_step_s(trainable, shards, rates.hbm_Bps, True)
    shard = trainable / shards
    return compute.optimizer_step_s(shard, rates) + compute.grad_clip_s(shard, rates)


def _grad_accumulate_s(d: Dims, opt: StepOptions, rates: compute.GpuRates) -> Any:
    """Per micro-batch: gradients added into their fp32 copies by separate memory-bound kernels
    (DeepSpeed's bf16 optimizer: cast to fp32, then add; ZeRO 0-2), where Megatron and
    TransformerEngine fuse the accumulation into the weight-gradient GEMM."""
    local = (d.dense_local_params + d.expert_local_params) * d.trainable
    per_param = _stack(opt).grad_accumulate_bytes
    return np.where(d.zero < 3, compute.memory_s(local * per_param, rates), 0.0)


def _stage(w: Workload, cl: Cluster, d: Dims, opt: StepOptions, mem: MemoryTerms) -> StageTerms:
    rates = _gpu_rates(cl, opt)
    optimizer_s = _optimizer_s(d, opt, rates) / calibration.in_step_efficiency(
        rates.arch, opt.stack.value
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
        return StageTerms(t_mb, zero, zero, zero, optimizer_s, zero)
    stage = _transformer_stage(w, cl, d, opt, mem, rates, optimizer_s)
    if not _stack(opt).grad_accumulate_bytes:
        return stage  # fused into the wgrad GEMMs: nothing to add (and nothing to price)
    return replace(stage, compute_s=stage.compute_s + _grad_accumulate_s(d, opt, rates))


def _tp_total_s(ar: Any, ag: Any, rs: Any, opt: StepOptions, recompute: Any) -> Any:
    """Every TP collective of one layer for one micro-batch, hidden or not (forward, its
    recomputation, backward): what overlaps compute when it is hidden."""
    if opt.sequence_parallel or opt.tp_comm_overlap:
        return (2 * ag + 2 * rs) * (1 + recompute) + 4 * ag + 2 * rs
    return 2 * ar * (1 + recompute) + 2 * ar


@dataclass(frozen=True)
class LayerCompute:
    """GPU seconds of the model's average layer for one micro-batch, and what goes with it."""

    per_layer_s: Any
    """Forward + backward, fp8 weight casts amortised over the micro-batches."""
    recompute_s: Any
    """What recomputation reruns of the layer (full share and selective remainder)."""
    frozen_saving_s: Any
    """Weight-gradient GEMMs frozen (LoRA) weights skip."""
    wgrad_s: Any
    attention_s: Any
    """FlashAttention forward + backward: what context-parallel exchanges hide behind."""
    kernels: Any
    """Kernels per layer (host launch bound)."""
    head: Any
    """The LM head and loss (compute.lm_head)."""
    embed_s: Any


def _layer_compute(
    w: Transformer, cl: Cluster, d: Dims, opt: StepOptions, share: Any, rates: compute.GpuRates
) -> LayerCompute:
    """The kernel model's price of the average layer (dense and MoE layers mixed by their
    share), recomputation as the stack runs it, the LM head and the embedding."""
    tokens = d.mb * d.seq / d.cp
    # experts fold over tp·cp·dp as ep × etp: each GPU runs E/ep experts at a width of 1/etp,
    # which the kernel model's (tp-sliced) expert shapes reproduce in FLOPs with ep·etp/tp
    shape = compute.LayerShape(d.mb, tokens, d.tp, d.cp, d.ep * d.etp / d.tp)
    layer = partial(
        compute.transformer_layer,
        w,
        shape,
        rates,
        sequence_parallel=opt.sequence_parallel,
        flash_attention=opt.flash_attention,
        fp8=_fp8_recipe(cl, opt),
        expert_efficiency=calibration.MOE_EXPERT_IN_STEP_EFFICIENCY,
    )
    dense = layer(moe_layer=False)
    moe = layer(moe_layer=True) if w.is_moe else dense
    ms = d.moe_share

    def mix(a: Any, b: Any) -> Any:  # the average layer of the model
        return (1 - ms) * a + ms * b

    forward = mix(dense.forward_s, moe.forward_s)
    # TransformerEngine caches fp8 weights over a step's micro-batches; torchao casts (and
    # FSDP gathers) them each time
    cast = mix(dense.fp8_weight_cast_s, moe.fp8_weight_cast_s)
    per_layer = mix(dense.gpu_s, moe.gpu_s) - np.where(
        _fp8_is_transformer_engine(opt), cast * (1 - 1 / np.maximum(d.m, 1.0)), 0.0
    )
    wgrad = mix(dense.bwd_wgrad_s, moe.bwd_wgrad_s)
    # full recomputation reruns the forward of its share of layers. Selective: Megatron
    # reruns the attention core (the kernel's forward, as TransformerEngine's checkpointed
    # core attention does; the unfused scores without FlashAttention); torchtitan's op-level
    # policy reruns every other matmul and the element-wise kernels. AUTO keeps what fits
    # without rerunning anything (FlashAttention stores no scores).
    policy = memory.REMAT_POLICY_SAVES.get(opt.recompute)
    if policy is not None:  # MaxText's named policies: the projections and kernels they drop
        rerun, attention = memory.policy_rerun(w, policy)
        selective = (
            rerun * mix(dense.fwd_gemm_s, moe.fwd_gemm_s)
            + mix(dense.fwd_memory_s, moe.fwd_memory_s)
            + attention * mix(dense.fwd_attention_s, moe.fwd_attention_s)
        )
    elif opt.recompute is Recompute.SELECTIVE and _stack(opt).op_level_selective:
        rerun = memory.op_sac_recomputed_gemm_share(w)
        selective = rerun * mix(dense.fwd_gemm_s, moe.fwd_gemm_s) + mix(
            dense.fwd_memory_s, moe.fwd_memory_s
        )
    elif opt.recompute is Recompute.SELECTIVE and opt.recompute_modules:
        # Megatron's --recompute-modules: the GEMMs and element-wise kernels of the rerun
        # submodules, and the attention core only where core_attn is among them
        mods = opt.recompute_modules
        core = "core_attn" in mods

        def rerun_s(cost: compute.LayerCost, moe_layer: bool) -> Any:
            gemm, elementwise = memory.module_rerun(w, moe_layer, mods)
            attention = cost.recompute_selective_s if core else 0.0
            return gemm * cost.fwd_gemm_s + elementwise * cost.fwd_memory_s + attention

        selective = mix(rerun_s(dense, False), rerun_s(moe, True))
    elif opt.recompute is Recompute.SELECTIVE or not opt.flash_attention:
        selective = mix(dense.recompute_selective_s, moe.recompute_selective_s)
    else:
        selective = 0.0
    recompute = share * forward + np.where(
        opt.recompute is Recompute.NONE, 0.0, (1 - share) * selective
    )
    return LayerCompute(
        per_layer_s=per_layer,
        recompute_s=recompute,
        frozen_saving_s=(1 - d.trainable) * wgrad,  # frozen weights need no weight gradient
        wgrad_s=wgrad,
        attention_s=mix(
            dense.fwd_attention_s + dense.bwd_attention_s,
            moe.fwd_attention_s + moe.bwd_attention_s,
        ),
        kernels=mix(dense.kernels, moe.kernels),
        head=compute.lm_head(w, tokens, d.tp, rates, fused_loss=opt.compile),
        embed_s=compute.embedding_s(w, tokens, d.tp, rates),
    )


@dataclass(frozen=True)
class LayerComm:
    """Model-parallel collectives of one layer for one micro-batch."""

    tp_exposed_s: Any
    """Tensor-parallel time left exposed after what hides behind GEMMs."""
    tp_hidden_s: Any
    cp_all_gather_s: Any
    """Context parallelism: the K/V all-gather and its gradients' reduce-scatter."""
    cp_reduce_scatter_s: Any
    ep_all_to_all_s: Any
    """One expert-parallel all-to-all (dispatch or combine)."""


def _layer_comm(
    w: Transformer, cl: Cluster, d: Dims, opt: StepOptions, share: Any, wgrad_s: Any
) -> LayerComm:
    """TP collectives hidden behind GEMMs where the stack overlaps them, CP's K/V exchange and
    EP's all-to-all, each priced on the group's own links (`_coll`)."""
    buf = parallel.tp_bytes(d.mb, d.seq, d.hidden, d.cp)
    ar = _coll(Op.ALL_REDUCE, buf, d.tp, cl, 1.0)
    ag = _coll(Op.ALL_GATHER, buf, d.tp, cl, 1.0)
    rs = _coll(Op.REDUCE_SCATTER, buf, d.tp, cl, 1.0)
    tp_layer = parallel.tp_layer_s(
        ar,
        ag,
        rs,
        wgrad_s,
        sequence_parallel=opt.sequence_parallel,
        comm_overlap=opt.tp_comm_overlap,
        tp_ranks=d.tp,
        recompute_forward=share,
    )
    tp_on = d.tp > 1
    tp_layer = np.where(tp_on, tp_layer, 0.0)
    kv = parallel.cp_kv_bytes(d.mb, d.seq, float(w.kv_dim))
    a2a = parallel.ep_bytes(d.mb, d.seq, d.tp, d.cp, float(w.top_k), d.hidden)
    if opt.moe_dispatcher == "deepep":
        # the EP group's members on one node: G / etp of them (cl.group_topology), at most ep
        per_node = np.minimum(np.maximum(cl.gpus_per_node / d.etp, 1.0), d.ep)
        a2a = a2a * parallel.node_dispatch_share(d.ep, per_node, float(w.top_k))
    return LayerComm(
        tp_exposed_s=tp_layer,
        tp_hidden_s=np.where(tp_on, _tp_total_s(ar, ag, rs, opt, share) - tp_layer, 0.0),
        cp_all_gather_s=_coll(Op.ALL_GATHER, kv, d.cp, cl, d.tp),
        cp_reduce_scatter_s=_coll(Op.REDUCE_SCATTER, kv, d.cp, cl, d.tp),
        ep_all_to_all_s=_coll(Op.ALL_TO_ALL, a2a, d.ep, cl, d.etp),
    )


def _transformer_stage(
    w: Transformer,
    cl: Cluster,
    d: Dims,
    opt: StepOptions,
    mem: MemoryTerms,
    rates: compute.GpuRates,
    optimizer_s: Any,
) -> StageTerms:
    """One micro-batch on the slowest pipeline rank: its layers' compute (host bound
    included) and exposed TP/CP/EP communication, and what communication hides."""
    lc = _layer_compute(w, cl, d, opt, mem.recompute_share, rates)
    comm = _layer_comm(w, cl, d, opt, mem.recompute_share, lc.wgrad_s)
    ms = d.moe_share
    cp_pair = comm.cp_all_gather_s + comm.cp_reduce_scatter_s

    def on(layers: Any, first: Any, last: Any) -> tuple[Any, Any, Any, Any, Any]:
        """(compute, TP, CP, EP exposed; communication hidden) per micro-batch of a rank
        holding `layers`, the embedding if `first`, the LM head and loss if `last`."""
        gpu = layers * (lc.per_layer_s + lc.recompute_s - lc.frozen_saving_s)
        gpu = gpu + np.where(last, lc.head.total_s, 0.0) + np.where(first, lc.embed_s, 0.0)
        gpu = gpu / calibration.in_step_efficiency(rates.arch, opt.stack.value)
        launches = layers * lc.kernels + np.where(last, lc.head.kernels, 0)
        t = compute.host_bound_s(gpu, launches, rates)
        cp = parallel.cp_microbatch_s(
            layers, comm.cp_all_gather_s, comm.cp_reduce_scatter_s, layers * lc.attention_s
        )
        ep_total = layers * ms * parallel.EP_ALL_TO_ALLS_PER_LAYER * comm.ep_all_to_all_s
        ep = parallel.ep_microbatch_s(layers * ms, comm.ep_all_to_all_s, opt.ep_overlap, t)
        hidden = layers * comm.tp_hidden_s + (layers * cp_pair - cp) + (ep_total - ep)
        return t, layers * comm.tp_exposed_s, cp, ep, hidden

    # the pipeline runs at the pace of its slowest rank: first, a middle one, or the last
    # (which also runs the LM head and the loss)
    ranks = [
        on(d.layers_first, True, d.pp <= 1),
        on(d.layers_mid, False, False),
        on(d.layers_last, d.pp <= 1, True),
    ]
    totals = [sum(parts[:4]) for parts in ranks]
    totals[1] = np.where(d.pp > 2, totals[1], -np.inf)
    choose = _chooser(_largest(totals), len(totals))
    parts = [choose([r[i] for r in ranks]) for i in range(5)]
    return StageTerms(parts[0], parts[1], parts[2], parts[3], optimizer_s, parts[4])


# --- pipeline ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PipelineTerms:
    bubble_s: Any
    """Fill and drain of the pipeline per step."""
    pp_s: Any
    """Exposed stage-to-stage sends per step."""
    hidden_s: Any
    """Sends hidden behind compute per step."""


def _pipeline(cl: Cluster, d: Dims, opt: StepOptions, stage: StageTerms) -> PipelineTerms:
    size = pipeline.p2p_bytes(d.mb, d.seq, d.hidden, d.tp, d.cp)
    stride = d.tp * d.cp * d.dp_in
    # the slowest stage boundary: across nodes (or sites) once the pipeline is longer than one
    p2p = _coll(Op.SEND_RECV, size, 2.0, cl, stride, cl.hop_topology(stride, d.pp * stride))
    if _stack(opt).blocking_pipeline:
        # the slices are all-gathered over TP on the receiving stage (and again in backward)
        full = parallel.tp_bytes(d.mb, d.seq, d.hidden, d.cp)
        gather = np.where(d.tp > 1, _coll(Op.ALL_GATHER, full, d.tp, cl, 1.0), 0.0)
        bubble, exposed = pipeline.blocking_pipeline_s(stage.slot_s, p2p, gather, d.pp, d.m)
        return PipelineTerms(bubble, exposed, np.zeros_like(exposed))
    bubble, exposed = pipeline.pipeline_s(
        stage.slot_s, p2p, d.pp, d.v, d.m, overlap=opt.pp_comm_overlap
    )
    # chunks of unequal size (layers on a rank not a multiple of v): fill and drain pass
    # through every rank one chunk at a time, and the largest chunk sets that pace
    bubble = bubble * pipeline.largest_chunk_share(d.layers_ps, d.v)
    sends = np.where(d.pp > 1, d.m * 2 * d.v * p2p, 0.0)
    return PipelineTerms(bubble, exposed, np.maximum(sends - exposed, 0.0))


# --- data parallelism -------------------------------------------------------------------------


@dataclass(frozen=True)
class DataParallelTerms:
    dp_s: Any
    """Exposed gradient (and DiLoCo outer) synchronisation per step."""
    outer_s: Any
    """DiLoCo's outer synchronisation per inner step (inside dp_s)."""
    dp_bytes_per_gpu: Any
    """Bytes each GPU sends for data parallelism per step (ring-equivalent)."""
    hidden_s: Any
    """Data-parallel communication hidden behind compute per step (it shares the SMs)."""


def _grad_bytes(d: Dims) -> tuple[Any, Any]:
    """Gradient bytes per GPU to reduce: (dense, routed experts)."""
    return (
        d.dense_local_params * d.grad_bytes * d.trainable,
        d.expert_local_params * d.grad_bytes * d.trainable,
    )


def _ddp_s(
    w: Workload,
    cl: Cluster,
    d: Dims,
    opt: StepOptions,
    stage: StageTerms,
    flags: tuple[Any, Any],
) -> tuple[Any, Any, Any]:
    """DDP (ZeRO-0) and sharded optimizers (ZeRO-1/2): gradients all-reduced, or
    reduce-scattered and the updated weights all-gathered, in buckets, once per step.
    (exposed s, hidden s, bytes sent). The buckets are the stack's; a CNN trains with
    PyTorch DDP whatever the stack (Megatron and DeepSpeed are transformer frameworks)."""
    dense_b, expert_b = _grad_bytes(d)
    sharded = d.zero >= 1
    # DeepSpeed's pipeline engine all-reduces the gradients even with a sharded optimizer
    piped_all_reduce = _stack(opt).pipeline_all_reduce & (d.pp > 1)
    scattered = sharded & ~piped_all_reduce
    ratio = topk_ratio(opt.compression)
    w_b = memory.WEIGHT_BYTES * (1 - 0.5 * opt.fp8_weights)

    bucket_MiB = (
        data_parallel.default_bucket_MiB(
            opt.stack if isinstance(w, Transformer) else Stack.FSDP2,
            d.dp_cp,
            d.grad_bytes,
            flags[0],
        )
        if opt.bucket_MiB is None
        else opt.bucket_MiB
    )

    def bucketed(op: Op, size: Any, ranks: Any, stride: Any) -> Any:
        return data_parallel.bucketed_all_reduce_s(
            size, bucket_MiB, lambda b: _coll(op, b, ranks, cl, stride)
        )

    if ratio is not None:
        kept = ratio * (d.dense_local_params + d.expert_local_params) * d.trainable
        sparse = kept * data_parallel.TOPK_BYTES_PER_ELEMENT
        reduce_s = _coll(Op.ALL_GATHER, sparse * d.dp_cp, d.dp_cp, cl, d.tp)
        gather_s = np.zeros_like(reduce_s)
    else:

        def both(op: Op, dense: Any, expert: Any) -> Any:  # dense and routed-expert groups
            return bucketed(op, dense, d.dp_cp, d.tp) + bucketed(
                op, expert, d.dp_expert, d.ep * d.etp
            )

        def gathered() -> Any:
            # the updated parameters only: a sharded optimizer steps (and re-gathers) what is
            # trained; frozen base weights under LoRA stay replicated and never move (blind
            # batch 9: 70B LoRA on 128-1,024 GPUs priced 0.2-0.5 s of base-weight gathers)
            return both(
                Op.ALL_GATHER,
                d.dense_local_params * w_b * d.trainable,
                d.expert_local_params * w_b * d.trainable,
            )

        # price only what the layouts run (one plan's layout runs one of the two)
        if scattered.all():
            reduce_s = both(Op.REDUCE_SCATTER, dense_b, expert_b)
        elif not scattered.any():
            reduce_s = both(Op.ALL_REDUCE, dense_b, expert_b)
        else:
            ar = both(Op.ALL_REDUCE, dense_b, expert_b)
            rs = both(Op.REDUCE_SCATTER, dense_b, expert_b)
            reduce_s = np.where(scattered, rs, ar)
        gather_s = np.where(sharded, gathered(), 0.0) if sharded.any() else np.zeros_like(reduce_s)
    exposed = data_parallel.zero12_exposed_s(
        reduce_s,
        gather_s,
        data_parallel.overlap_window_s(stage.compute_s, d.pp, d.v),
        data_parallel.FORWARD_SHARE * stage.compute_s,
        data_parallel.last_bucket_share(bucket_MiB, dense_b + expert_b),
        overlap_grad_reduce=flags[0],
        overlap_param_gather=flags[1],
    )
    exposed = np.where(d.dp_cp > 1, exposed, 0.0)
    total = np.where(d.dp_cp > 1, reduce_s + gather_s, 0.0)
    share, share_e = data_parallel.ring_share(d.dp_cp), data_parallel.ring_share(d.dp_expert)
    sent = 2 * (share * dense_b + share_e * expert_b)
    if np.any(sharded & piped_all_reduce):
        # an all-reduce sends what reduce-scatter + all-gather do; the weights' gather comes
        # on top (priced only where a layout runs it: not on a sweep's hot path otherwise)
        gather_b = (
            share * d.dense_local_params * w_b + share_e * d.expert_local_params * w_b
        ) * d.trainable
        sent = sent + np.where(sharded & piped_all_reduce, gather_b, 0.0)
    return exposed, total - exposed, sent


def _fsdp_behaviour(d: Dims, opt: StepOptions) -> tuple[Any, Any]:
    """(reshard after forward, reduce-scatter every micro-batch) per layout for ZeRO-3. Under
    pipeline parallelism a stack that keeps the gathered weights (torchtitan's default
    reshard policy; `StackBehaviour.pipeline_keeps_gathered`) reshards nothing and reduces
    once, after the last micro-batch."""
    b = _stack(opt)
    piped = (d.pp > 1) & b.pipeline_keeps_gathered
    reshard = np.where(piped, False, b.reshard_after_forward)
    if opt.reshard_after_forward is not None:
        reshard = np.full(np.shape(piped), opt.reshard_after_forward)
    every = np.where(piped, False, b.reduce_every_microbatch)
    return reshard, every


def _fsdp_s(
    cl: Cluster, d: Dims, opt: StepOptions, stage: StageTerms, flags: tuple[Any, Any]
) -> tuple[Any, Any, Any]:
    """FSDP / ZeRO-3: per micro-batch, all-gather the stage's weights for forward and, when
    they were freed after forward, again for backward (each GPU holds 1/(dp·cp)), and
    reduce-scatter the gradients (every micro-batch, or once per step); prefetched layer by
    layer behind compute. (exposed s, hidden s, bytes sent)."""
    reshard, every = _fsdp_behaviour(d, opt)
    gathers = np.where(reshard, 2.0, 1.0)
    dense_b, expert_b = _grad_bytes(d)
    w_b = memory.WEIGHT_BYTES * (1 - 0.5 * opt.fp8_weights)
    w_dense, w_exp = d.dense_local_params * w_b, d.expert_local_params * w_b
    gather = _coll(Op.ALL_GATHER, w_dense, d.dp_cp, cl, d.tp) + _coll(
        Op.ALL_GATHER, w_exp, d.dp_expert, cl, d.ep * d.etp
    )
    scatter = _coll(Op.REDUCE_SCATTER, dense_b, d.dp_cp, cl, d.tp) + _coll(
        Op.REDUCE_SCATTER, expert_b, d.dp_expert, cl, d.ep * d.etp
    )
    per_mb = gathers * gather + np.where(every, scatter, 0.0)
    window = np.where(flags[1], stage.compute_s, 0.0)
    exposed = data_parallel.fsdp_exposed_s(per_mb, window, d.layers_ps, d.m)
    # otherwise one reduce-scatter per step, behind the last backward
    once = np.where(
        flags[0],
        np.maximum(scatter - data_parallel.overlap_window_s(stage.compute_s, d.pp, d.v), 0),
        scatter,
    )
    exposed = exposed + np.where(every, 0.0, once)
    total = d.m * per_mb + np.where(every, 0.0, scatter)
    share, share_e = data_parallel.ring_share(d.dp_cp), data_parallel.ring_share(d.dp_expert)
    reductions = np.where(every, d.m, 1.0)
    sent = d.m * gathers * (share * w_dense + share_e * w_exp) + reductions * (
        share * dense_b + share_e * expert_b
    )
    return exposed, total - exposed, sent


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


def _data_parallel(
    w: Workload, cl: Cluster, d: Dims, opt: StepOptions, stage: StageTerms
) -> DataParallelTerms:
    flags = data_parallel.overlap_flags(
        opt.stack,
        d.zero,
        overlap=opt.overlap,
        grad_reduce=opt.overlap_grad_reduce,
        param_gather=opt.overlap_param_gather,
    )
    fsdp = d.zero >= 3
    # (exposed s, hidden s, bytes sent), priced only for what the layouts run (one plan's
    # layout runs one of the two)
    if fsdp.all():
        inner_s, hidden, sent = _fsdp_s(cl, d, opt, stage, flags)
    elif not fsdp.any():
        inner_s, hidden, sent = _ddp_s(w, cl, d, opt, stage, flags)
    else:
        inner_s, hidden, sent = (
            np.where(fsdp, f, b)
            for f, b in zip(
                _fsdp_s(cl, d, opt, stage, flags), _ddp_s(w, cl, d, opt, stage, flags), strict=True
            )
        )
    outer_s, outer_bytes = _outer_s(cl, d, opt, stage, inner_s)
    return DataParallelTerms(inner_s + outer_s, outer_s, sent + outer_bytes, hidden)


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
    overlap_s: Any
    """Compute slowed by the communication it hides (NCCL kernels share SMs and HBM)."""
    exposed_comm_s: Any
    step_s: Any
    flops: Any
    """FLOPs of the whole step counting full attention (PaLM appendix B): what the power
    model's utilisation was fitted with."""
    model_flops: Any
    """Model FLOPs of the whole step for MFU: causal attention counted once (Megatron-Bridge,
    Meta; `compute.model_flops_per_sample`). Both counts leave out the weight-gradient GEMMs
    that frozen (LoRA) weights never run: 81% "MFU" for Llama 2 70B at rank 16 otherwise."""
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
    # communication hidden behind compute still takes SMs and HBM from it
    hidden = d.m * stage.hidden_s + pipe.hidden_s + dpt.hidden_s
    overlap_s = compute.overlap_slowdown(compute_s, hidden)
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
        overlap_s=overlap_s,
        exposed_comm_s=exposed,
        step_s=compute_s + overlap_s + exposed + pipe.bubble_s + straggler,
        # frozen (LoRA) weights run no weight-gradient GEMM, so neither FLOP count has it
        flops=d.gb * compute.training_flops_per_sample(w, d.trainable),
        model_flops=d.gb * compute.model_flops_per_sample(w, d.trainable),
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
    # failures vary with the GPU count and the checkpoint, not with the step time: on a grid
    # they stay on those axes (`_metrics` broadcasts them) rather than run exp and expm1 on
    # every point; one layout keeps the step's shape
    zero = np.zeros_like(step_s) if np.size(step_s) <= 1 else np.zeros(())
    write_s = write_s + zero
    restart = cl.restart_s + write_s
    if cl.failures is None:
        inf = np.full(step_s.shape, math.inf)
        return inf, write_s, inf, restart, np.ones(step_s.shape)
    nodes = np.asarray(cl.nodes(), dtype=np.float64)
    nics = nodes * cl.nics_per_node
    mtbf = faults.job_mtbf_s(cl.failures, d.n, nodes, nics, nics) + zero
    interval = faults.daly_interval_s(write_s, mtbf)
    return mtbf, write_s, interval, restart, faults.goodput(interval, write_s, restart, mtbf)


def _run(w: Workload, cl: Cluster, d: Dims, opt: StepOptions, step: StepTerms) -> RunTerms:
    mtbf, write_s, interval, restart, good = _failures(w, cl, d, step.step_s)
    is_tf = isinstance(w, Transformer)
    params = float(w.params)
    # a run takes whole optimizer steps, at least one: a batch larger than the budget is one
    # step, not a fraction of one that finishes before its own step does
    if isinstance(w, Transformer):
        default = FINE_TUNE_TOKENS if opt.lora_rank else CHINCHILLA_TOKENS_PER_PARAM * params
        budget = float(opt.tokens or default)
        steps = np.ceil(budget / step.tokens)
    else:
        budget = 0.0
        steps = np.ceil((opt.epochs or DEFAULT_CNN_EPOCHS) * w.dataset_samples / d.gb)
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
    # per token (sample) the job processed: whole steps, so a budget below one global batch
    # still runs one (dividing by the budget gave 500 J/token for --tokens 1000)
    work = run.steps * d.gb * (d.seq if isinstance(w, Transformer) else 1.0)
    return energy_terms.job_energy(
        cl.energy, power_W_per_gpu=power, gpus=d.n, seconds=run.wall_s, tokens=work
    )


# --- composition ------------------------------------------------------------------------------


def evaluate(w: Workload, cl: Cluster, lay: LayoutArrays, opt: StepOptions) -> Metrics:
    """Price one training step, the whole run, its failures and its cost for every layout."""
    shape = np.broadcast(*(getattr(lay, a) for a in LAYOUT_AXES)).shape
    if math.prod(shape) == 1:
        lay = LayoutArrays(*(np.asarray(getattr(lay, a)).reshape(())[()] for a in LAYOUT_AXES))
    # the priced groups are shared by the collectives of this evaluation (api.shared_groups)
    full_shapes: list[tuple[int, ...]] = []
    token = _FULL_SHAPES.set(full_shapes)
    try:
        with np.errstate(all="ignore"), shared_groups():
            d = _dims(w, cl, lay, opt)
            mem = _memory(w, cl, d, opt)
            stage = _stage(w, cl, d, opt, mem)
            pipe = _pipeline(cl, d, opt, stage)
            dpt = _data_parallel(w, cl, d, opt, stage)
            step = _step(w, cl, d, stage, pipe, dpt, opt)
            run = _run(w, cl, d, opt, step)
            used = _energy(w, cl, d, step, run)
            if full_shapes:  # the collectives' times were kept on fewer axes (`_full_shape`)
                shape = np.broadcast_shapes(shape, *full_shapes)
            return _metrics(cl, d, mem, pipe, dpt, step, run, used, shape)
    finally:
        _FULL_SHAPES.reset(token)


def _metrics(
    cl: Cluster,
    d: Dims,
    mem: MemoryTerms,
    pipe: PipelineTerms,
    dpt: DataParallelTerms,
    step: StepTerms,
    run: RunTerms,
    used: dict[str, Any],
    shape: tuple[int, ...],
) -> Metrics:
    """Every term group's fields under the names `Metrics` (and the JSON/CSV) use."""
    s = step.step_s
    shape = np.broadcast_shapes(np.shape(s), shape)
    # the metrics derived from the step time, on a grid into one block's rows (`_Rows`)
    put = _Rows(shape, 16) if math.prod(shape) >= _ROWS_MIN_ELEMENTS else _plain
    values: dict[str, Any] = {
        "gpus": d.n,
        "tp": d.tp,
        "pp": d.pp,
        "cp": d.cp,
        "ep": d.ep,
        "etp": d.etp,
        "dp": d.dp,
        "zero": d.zero,
        "micro_batch": d.mb,
        "micro_batches": d.m,
        "virtual_stages": d.v,
        "global_batch": d.gb,
        "rule": d.rule,
        "valid": d.rule == 0,
        # AUTO recompute fills memory to the capacity exactly; a rounding step above it made
        # a layout that fits by construction "not fit" (fuzz round 23, B3): one part in 1e9
        "fits": mem.total_bytes <= mem.capacity_bytes * FITS_RELATIVE_SLACK,
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
        "overlap_s": step.overlap_s,
        "comm_efficiency": put(np.true_divide, step.compute_s, s),
        "compute_utilisation": put(np.subtract, 1, dpt.dp_s / s),
        "outer_sync_s": dpt.outer_s,
        "mfu": put(np.true_divide, step.model_flops, s * d.n * cl.peak_flops),
        "tflops_per_gpu": put(np.true_divide, step.model_flops / (s * d.n), 1e12),
        "tokens_per_s": put(np.true_divide, step.tokens, s),
        "samples_per_s": put(np.true_divide, d.gb, s),
        "dp_bytes_per_gpu": dpt.dp_bytes_per_gpu,
        "memory_bytes": mem.total_bytes,
        "memory_weights_bytes": mem.weights_bytes,
        "memory_grads_bytes": mem.grads_bytes,
        "memory_optimizer_bytes": mem.optimizer_bytes,
        "memory_activations_bytes": mem.activations_bytes,
        "memory_transient_bytes": mem.transient_bytes,
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
        "cost_usd": put(np.add, run.gpu_cost_usd, run.egress_usd),
        "failure_cost_usd": put(
            np.multiply, cost.gpu_hours(d.n, run.wall_s - run.ideal_s), d.price
        ),
        **used,
    }
    # ranges from the model's error on published runs of the same class (model/calibration)
    low, high = calibration.step_range_factors(cl.precision.value, d.moe_share > 0)
    values |= {
        "step_time_s_p10": put(np.multiply, s, low),
        "step_time_s_p90": put(np.multiply, s, high),
        "mfu_p10": put(np.true_divide, values["mfu"], high),
        "mfu_p90": put(np.true_divide, values["mfu"], low),
        "time_to_train_s_p10": put(np.multiply, run.wall_s, low),
        "time_to_train_s_p90": put(np.multiply, run.wall_s, high),
        "cost_usd_p10": put(np.add, run.gpu_cost_usd * low, run.egress_usd),
        "cost_usd_p90": put(np.add, run.gpu_cost_usd * high, run.egress_usd),
    }
    if math.prod(shape) == 1:
        return _one_layout(values, shape)
    return Metrics(**{k: _shaped(v, shape) for k, v in values.items()})


#: Elements of a grid from which `_metrics` writes its derived metrics into one block.
_ROWS_MIN_ELEMENTS = 1 << 16
#: The operators `_plain` stands for (one layout: Python's own, as the expressions were).
_OPERATORS: dict[Any, Callable[[Any, Any], Any]] = {
    np.true_divide: operator.truediv,
    np.multiply: operator.mul,
    np.add: operator.add,
    np.subtract: operator.sub,
}


def _plain(ufunc: np.ufunc, a: Any, b: Any) -> Any:
    """`a <op> b` as written (one layout: Python numbers keep Python's semantics)."""
    return _OPERATORS[ufunc](a, b)


class _Rows:
    """`ufunc(a, b)` written into the next row of one float64 block of `shape`: a grid's
    ~16 derived metrics share one allocation instead of ~16 fresh arrays of ~1 MB each (the
    kernel maps and zeroes every fresh 4 KiB page; numpy asks for huge pages for one
    allocation of 4 MiB or more). The values are the operator's, broadcast to `shape`."""

    def __init__(self, shape: tuple[int, ...], count: int) -> None:
        self._block = np.empty((count, *shape))
        self._next = 0

    def __call__(self, ufunc: np.ufunc, a: Any, b: Any) -> Any:
        if self._next == len(self._block):  # more metrics than rows: a fresh array
            return ufunc(a, b)
        row = self._block[self._next]
        self._next += 1
        return ufunc(a, b, out=row)


def _one_layout(values: dict[str, Any], shape: tuple[int, ...]) -> Metrics:
    """`_shaped` for one layout: the float64 metrics are the rows of one read-only block (one
    array instead of ~70, each ~1 µs to build)."""
    floats = [
        k
        for k, v in values.items()
        if type(v) in (float, np.float64) or (type(v) is np.ndarray and v.dtype == np.float64)
    ]
    block = np.array(
        [v.item() if type(v) is np.ndarray else v for v in map(values.__getitem__, floats)],
        dtype=np.float64,
    ).reshape((len(floats), *shape))
    block.flags.writeable = False
    fields = dict(zip(floats, block, strict=True))
    others = {k: _shaped(v, shape) for k, v in values.items() if k not in fields}
    return Metrics(**fields, **others)


def _shaped(v: Any, shape: tuple[int, ...]) -> Any:
    """`v` broadcast to `shape` (read-only; an array already of that shape is not copied)."""
    if type(v) is np.ndarray and v.shape == shape:
        v = v.view()
    else:
        v = np.asarray(v)
        if v.size != 1 or math.prod(shape) != 1:
            return np.broadcast_to(v, shape)
        v = v.reshape(shape)  # one layout: a view, without broadcast_to's microseconds
    v.flags.writeable = False
    return v
