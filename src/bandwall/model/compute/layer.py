"""One transformer layer's forward and backward on one GPU, priced kernel by kernel.

`transformer_layer` lists the layer's kernels (Megatron-LM core / TransformerEngine layout:
Narayanan et al. 2021, Korthikanti et al. 2022), sizes each from the shape the GPU runs after
tp/cp/ep and the micro-batch, and prices it with its class: GEMMs (`gemm`), attention
(`attention`), memory-bound kernels and fp8 casts (`elementwise`). Everything broadcasts over
numpy arrays shaped like the layouts; all GEMMs of a layer go through one vectorised call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from typing import Any

import numpy as np

from bandwall.model.compute.attention import (
    UNFUSED_SCORE_BYTES_BWD,
    UNFUSED_SCORE_BYTES_FWD,
    flash_attention_s,
)
from bandwall.model.compute.elementwise import FP8_CAST, kernel_table
from bandwall.model.compute.gemm import FORMAT_CODE, gemm_time_s
from bandwall.model.compute.rates import GpuRates
from bandwall.model.distinct import distinct_broadcast
from bandwall.workloads import Transformer

#: Bytes of a weight-gradient GEMM's output per element: Megatron/TE accumulate wgrad into fp32
#: main grads in the GEMM epilogue (gradient_accumulation_fusion): read and write 4 B.
WGRAD_OUT_BYTES = 8.0


def recipe_format(recipe: str | None) -> int:
    """The GEMM operand format code (`gemm.FORMAT_CODE`) a low-precision recipe runs its linear
    layers in: None is bf16, nvfp4 is 4-bit, every other recipe fp8."""
    if recipe is None:
        return FORMAT_CODE["bf16"]
    return FORMAT_CODE["fp4" if recipe == "nvfp4" else "fp8"]


def _num(x: Any) -> Any:
    """Python floats for 0-d inputs (scalar arithmetic is ~20x cheaper than 0-d numpy)."""
    if isinstance(x, float | int | np.floating | np.integer):
        return float(x)
    arr = np.asarray(x, dtype=np.float64)
    return float(arr) if arr.ndim == 0 else arr


@dataclass(frozen=True)
class LayerShape:
    """The shape one GPU runs: micro-batch, the tokens it holds (micro_batch × seq / cp), and
    the parallel degrees that cut the GEMMs. Arrays broadcast like the layouts."""

    micro_batch: Any
    tokens: Any
    tp: Any = 1.0
    cp: Any = 1.0
    ep: Any = 1.0


@dataclass(frozen=True)
class LayerCost:
    """Seconds of one layer for one micro-batch on one GPU, by kernel class and pass.

    Every kernel's fixed GPU cost is inside its class. `gpu_s` adds the classes; the engine
    takes max(gpu_s, kernels × host launch) when the CPU cannot keep up (`host_bound_s`).
    """

    fwd_gemm_s: Any
    bwd_dgrad_s: Any
    bwd_wgrad_s: Any
    """Weight-gradient GEMMs: what TP/DP communication hides behind."""
    fwd_attention_s: Any
    bwd_attention_s: Any
    fwd_memory_s: Any
    """Norms, RoPE, activation, residual adds, MoE permutes (and unfused softmax)."""
    bwd_memory_s: Any
    fp8_cast_s: Any
    """Activation and gradient casts (with amax/scale) of one micro-batch, forward + backward."""
    fp8_weight_cast_s: Any
    """Weight casts: once per micro-batch, or once per step when the framework caches them."""
    kernels_fwd: Any
    kernels_bwd: Any
    flops: Any
    """FLOPs the kernels execute (causal attention counted as computed: half)."""
    fp8_ops: tuple[str, ...] = ()
    """The GEMMs that ran in fp8 (fprop, dgrad and wgrad of each)."""
    breakdown_s: dict[str, Any] = field(default_factory=dict)
    """Per class, forward + backward: gemm, attention, memory, fp8_cast."""

    @property
    def forward_s(self) -> Any:
        return self.fwd_gemm_s + self.fwd_attention_s + self.fwd_memory_s + self.fp8_fwd_share

    @property
    def fp8_fwd_share(self) -> Any:
        return 0.5 * self.fp8_cast_s

    @property
    def backward_s(self) -> Any:
        return (
            self.bwd_dgrad_s
            + self.bwd_wgrad_s
            + self.bwd_attention_s
            + self.bwd_memory_s
            + (self.fp8_cast_s - self.fp8_fwd_share)
        )

    @property
    def gpu_s(self) -> Any:
        """Forward + backward with weight casts every micro-batch."""
        return self.forward_s + self.backward_s + self.fp8_weight_cast_s

    @property
    def recompute_selective_s(self) -> Any:
        """What selective recomputation reruns: the attention core's forward."""
        return self.fwd_attention_s

    @property
    def recompute_full_s(self) -> Any:
        """What full recomputation reruns: the whole forward."""
        return self.forward_s

    @property
    def kernels(self) -> Any:
        return self.kernels_fwd + self.kernels_bwd


#: A linear layer as coefficients of the per-GPU shape: M = T·m_T·ep^m_ep, N = n0·tp^−n_tp,
#: K = k0·tp^−k_tp, count = c0·ep^−c_ep (T: tokens on this GPU).
_LinearSpec = tuple[str, float, float, float, float, float, float, float, float]


@lru_cache(maxsize=256)
def _linear_specs(w: Transformer, moe_layer: bool) -> tuple[_LinearSpec, ...]:
    """The layer's linear layers (Megatron-LM layout) in coefficient form."""
    h = float(w.hidden)
    hq = float(w.heads * w.head_dim)
    kv = float(w.kv_dim)
    gate = 2.0 if w.gated_mlp else 1.0
    out: list[_LinearSpec] = []
    if w.attention_params_per_layer is not None:  # e.g. MLA: its matmuls counted as one GEMM
        out.append(("qkv", 1, 0, w.attention_params_per_layer / h, 1, h, 0, 1, 0))
    else:
        out.append(("qkv", 1, 0, hq + 2 * kv, 1, h, 0, 1, 0))
        out.append(("proj", 1, 0, h, 0, hq, 1, 1, 0))
    if moe_layer:
        fe = float(w.moe_ffn or w.ffn or 4 * w.hidden)
        e = float(w.experts)
        # tokens per local expert with balanced routing: T·top_k·ep/E; E/ep experts per GPU
        out.append(("router", 1, 0, e, 0, h, 0, 1, 0))
        out.append(("experts_fc1", w.top_k / e, 1, gate * fe, 1, h, 0, e, 1))
        out.append(("experts_fc2", w.top_k / e, 1, h, 0, fe, 1, e, 1))
        if w.shared_experts:
            out.append(("shared_fc1", 1, 0, gate * fe, 1, h, 0, w.shared_experts, 0))
            out.append(("shared_fc2", 1, 0, h, 0, fe, 1, w.shared_experts, 0))
    else:
        f = float(w.ffn or 4 * w.hidden)
        out.append(("fc1", 1, 0, gate * f, 1, h, 0, 1, 0))
        out.append(("fc2", 1, 0, h, 0, f, 1, 1, 0))
    return tuple(out)


@lru_cache(maxsize=256)
def _gemm_table(
    w: Transformer, moe_layer: bool, fmt: int
) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray]:
    """(names, coefficient matrix (9, G), format codes (3G,), output bytes (3G,)) for the
    fprop, dgrad and wgrad GEMMs of every linear, stacked in that order. `fmt` is the
    recipe's operand format (`gemm.FORMAT_CODE`); the router stays bf16."""
    specs = _linear_specs(w, moe_layer)
    names = tuple(sp[0] for sp in specs)
    coef = np.array([sp[1:] for sp in specs], dtype=np.float64).T
    flags = np.array([float(fmt) if name != "router" else 0.0 for name in names] * 3)
    out = np.repeat([2.0, 2.0, WGRAD_OUT_BYTES], len(names))
    return names, coef, flags, out


#: The linears of the routed-expert path: what `expert_efficiency` slows.
EXPERT_PATH = frozenset({"router", "experts_fc1", "experts_fc2"})


@lru_cache(maxsize=256)
def _expert_scale(w: Transformer, moe_layer: bool, expert_efficiency: float) -> np.ndarray:
    """Per stacked GEMM (fprop, dgrad, wgrad of each linear): 1 / expert_efficiency on the
    routed-expert path, 1 elsewhere."""
    names = _gemm_table(w, moe_layer, 0)[0]
    row = [1.0 / expert_efficiency if nm in EXPERT_PATH else 1.0 for nm in names]
    return np.array(row * 3, dtype=np.float64)


def _gemms(
    w: Transformer,
    s: LayerShape,
    rates: GpuRates,
    moe_layer: bool,
    fmt: int,
    expert_efficiency: float = 1.0,
) -> tuple[Any, Any, Any, Any, Any, Any, Any, tuple[str, ...]]:
    """(fprop, dgrad, wgrad, flops, low-precision weight params, low-precision output-gradient
    elements, kernels, low-precision names) of all linears, priced in one vectorised GEMM
    call; `fmt` the recipe's operand format code (0: bf16)."""
    names, coef, flags, out_b = _gemm_table(w, moe_layer, fmt)
    if isinstance(s.tokens, float) and isinstance(s.tp, float) and isinstance(s.ep, float):
        return _gemms_scalar(w, s.tokens, s.tp, s.ep, rates, moe_layer, fmt, expert_efficiency)
    T, tp, ep = (np.asarray(x, dtype=np.float64) for x in (s.tokens, s.tp, s.ep))
    T, tp, ep = T[None], tp[None], ep[None]
    nd = max(T.ndim, tp.ndim, ep.ndim)
    c = coef.reshape(coef.shape + (1,) * (nd - 1))
    m = T * c[0] * ep ** c[1]
    n = c[2] / tp ** c[3]
    k = c[4] / tp ** c[5]
    cnt = c[6] / ep ** c[7]
    m, n, k, cnt = np.broadcast_arrays(m, n, k, cnt)
    mm = np.concatenate((m, m, k))
    nn = np.concatenate((n, k, n))
    kk = np.concatenate((k, n, m))
    cc = np.concatenate((cnt, cnt, cnt))
    shape = (len(flags),) + (1,) * (nd - 1)
    t = gemm_time_s(
        mm, nn, kk, rates, fp8=flags.reshape(shape), count=cc, out_bytes=out_b.reshape(shape)
    )
    if moe_layer and expert_efficiency != 1.0:
        t = t * _expert_scale(w, moe_layer, expert_efficiency).reshape(shape)
    g = len(names)
    flops = 6.0 * (m * n * k * cnt).sum(axis=0)
    f8 = flags[:g].reshape((g, *shape[1:])) > 0
    weights = (n * k * cnt * f8).sum(axis=0)
    grads = (m * n * cnt * f8).sum(axis=0)
    fp8_names = tuple(sorted(nm for nm, fl in zip(names, flags[:g], strict=True) if fl))
    return (
        t[:g].sum(axis=0),
        t[g : 2 * g].sum(axis=0),
        t[2 * g :].sum(axis=0),
        flops,
        weights,
        grads,
        float(g),
        fp8_names,
    )


@lru_cache(maxsize=1024)
def _scalar_shapes(
    w: Transformer, moe_layer: bool, fmt: int, tp: float, ep: float
) -> tuple[np.ndarray, ...]:
    """For one (tp, ep): the stacked fprop/dgrad/wgrad shapes as M = a·T + b, N, K = c·T + d,
    count, plus per-linear N·K·count and N·count (T: tokens, the only per-call input)."""
    names, coef, flags, out_b = _gemm_table(w, moe_layer, fmt)
    m_t = coef[0] * ep ** coef[1]  # M per token
    n = coef[2] / tp ** coef[3]
    k = coef[4] / tp ** coef[5]
    cnt = coef[6] / ep ** coef[7]
    zero = np.zeros_like(n)
    a = np.concatenate((m_t, m_t, zero))
    b = np.concatenate((zero, zero, k))
    nn = np.concatenate((n, k, n))
    c = np.concatenate((zero, zero, m_t))
    d = np.concatenate((k, n, zero))
    cc = np.concatenate((cnt, cnt, cnt))
    f8 = flags[: len(names)] > 0
    return a, b, nn, c, d, cc, flags, out_b, m_t * n * k * cnt, n * k * cnt * f8, m_t * n * cnt * f8


def _gemms_scalar(
    w: Transformer,
    T: float,
    tp: float,
    ep: float,
    rates: GpuRates,
    moe_layer: bool,
    fmt: int,
    expert_efficiency: float,
) -> tuple[Any, Any, Any, Any, Any, Any, Any, tuple[str, ...]]:
    """`_gemms` for one layout: the shapes come from a cache keyed by (tp, ep)."""
    names = _gemm_table(w, moe_layer, fmt)[0]
    a, b, nn, c, d, cc, flags, out_b, mnk, wts, grd = _scalar_shapes(w, moe_layer, fmt, tp, ep)
    t = gemm_time_s(a * T + b, nn, c * T + d, rates, fp8=flags, count=cc, out_bytes=out_b)
    if moe_layer and expert_efficiency != 1.0:
        t = t * _expert_scale(w, moe_layer, expert_efficiency)
    g = len(names)
    per = t.reshape(3, g).sum(axis=1)
    fp8_names = tuple(sorted(nm for nm, fl in zip(names, flags[:g], strict=True) if fl))
    return (
        float(per[0]),
        float(per[1]),
        float(per[2]),
        6.0 * T * float(mnk.sum()),
        float(wts.sum()),
        T * float(grd.sum()),
        float(g),
        fp8_names,
    )


@lru_cache(maxsize=64)
def _memory_kernels(launch_mode: str, act: str, moe_layer: bool) -> tuple[float, float]:
    """Memory-bound kernels per layer (forward, backward): two norms and two residual adds,
    RoPE, the activation, and the MoE permutes."""
    table = kernel_table(launch_mode)
    names = ["norm", "norm", "residual", "residual", "rope", act]
    if moe_layer:
        names.append("permute")
    return float(sum(table[k][2] for k in names)), float(sum(table[k][3] for k in names))


def transformer_layer(
    w: Transformer,
    shape: LayerShape,
    rates: GpuRates,
    *,
    moe_layer: bool,
    sequence_parallel: bool,
    flash_attention: bool,
    fp8: str | None = None,
    expert_efficiency: float = 1.0,
) -> LayerCost:
    """Price one layer's forward and backward for one micro-batch on one GPU.

    `fp8` names a low-precision recipe (delayed, current, blockwise, mxfp8, rowwise; nvfp4
    for 4-bit) or None for bf16: only the linear layers' fprop/dgrad/wgrad run in the
    recipe's format (router, attention and the LM head stay bf16), and the casts they need
    are priced as memory-bound passes.
    `expert_efficiency` is the share of the kernel model's speed the routed-expert path
    (router, expert GEMMs, token permutes) keeps inside a step (model/calibration.py).
    """
    s = LayerShape(
        *(_num(x) for x in (shape.micro_batch, shape.tokens, shape.tp, shape.cp, shape.ep))
    )
    opts = (moe_layer, sequence_parallel, flash_attention, fp8, expert_efficiency)
    grid = np.broadcast(s.micro_batch, s.tokens, s.tp, s.cp, s.ep).shape
    if math.prod(grid) > DISTINCT_ABOVE:
        cols = [
            np.asarray(x, dtype=np.float64) for x in (s.micro_batch, s.tokens, s.tp, s.cp, s.ep)
        ]
        # a layout search repeats few per-GPU shapes over many layouts: price each once
        found = distinct_broadcast(cols, grid, share=0.75, decline=0.75, sample=4096)
        if found is not None:
            rows, inverse = found
            return _expand(_layer(w, LayerShape(*rows), rates, *opts), inverse, grid)
    return _layer(w, s, rates, *opts)


#: Layouts above which transformer_layer prices each distinct per-GPU shape once.
DISTINCT_ABOVE = 4096


def _expand(cost: LayerCost, inverse: Any, grid: tuple[int, ...]) -> LayerCost:
    """`cost` priced on distinct rows, taken back to every layout of `grid`."""

    def back(v: Any) -> Any:
        if type(v) is np.ndarray and v.ndim >= 1:
            return v[inverse].reshape(grid + v.shape[1:])
        return v

    changes = {f.name: back(getattr(cost, f.name)) for f in fields(cost) if f.name != "breakdown_s"}
    breakdown = {k: back(v) for k, v in cost.breakdown_s.items()}
    return replace(cost, **changes, breakdown_s=breakdown)


def _layer(
    w: Transformer,
    s: LayerShape,
    rates: GpuRates,
    moe_layer: bool,
    sequence_parallel: bool,
    flash_attention: bool,
    fp8: str | None,
    expert_efficiency: float,
) -> LayerCost:
    h = float(w.hidden)
    hq = float(w.heads * w.head_dim)
    kv = float(w.kv_dim)
    seq = float(w.seq_len)
    tp, T = s.tp, s.tokens
    fprop, dgrad, wgrad, gemm_flops, fp8_weights, fp8_grads, n_gemm, fp8_names = _gemms(
        w, s, rates, moe_layer, recipe_format(fp8), expert_efficiency
    )

    # --- attention core ----------------------------------------------------------------------
    heads = w.heads / tp
    queries = seq / s.cp
    d = float(w.head_dim)
    if flash_attention:
        att_f = flash_attention_s(
            s.micro_batch, heads, queries, seq, d, rates, causal=True, pass_="fwd"
        )
        att_b = flash_attention_s(
            s.micro_batch, heads, queries, seq, d, rates, causal=True, pass_="bwd"
        )
        att_flops = 3.5 * 2.0 * s.micro_batch * heads * queries * seq * d
        att_kernels_f, att_kernels_b = 1.0, 3.0  # FA bwd: preprocess, main, dq convert
        score_f = score_b = 0.0
    else:
        batch = s.micro_batch * heads
        qk = gemm_time_s(queries, seq, d, rates, count=batch)
        av = gemm_time_s(queries, d, seq, rates, count=batch)
        att_f = qk + av
        att_b = 2.0 * att_f
        att_flops = 3.0 * 4.0 * batch * queries * seq * d
        att_kernels_f, att_kernels_b = 2.0, 4.0
        scores = s.micro_batch * heads * queries * seq
        score_f = scores * UNFUSED_SCORE_BYTES_FWD
        score_b = scores * UNFUSED_SCORE_BYTES_BWD

    # --- memory-bound kernels ----------------------------------------------------------------
    table = kernel_table(rates.launch_mode)
    shard = tp if sequence_parallel else 1.0
    hidden_el = T * h / shard
    if moe_layer:
        fe = float(w.moe_ffn or w.ffn or 4 * w.hidden)
        act_el = T * (w.top_k + w.shared_experts) * fe / tp
        permute_el = T * w.top_k * h / tp
    else:
        act_el = T * float(w.ffn or 4 * w.hidden) / tp
        permute_el = 0.0 * T
    act = "swiglu" if w.gated_mlp else "gelu"
    parts = {
        "norm": 2.0 * hidden_el,
        "residual": 2.0 * hidden_el,
        "rope": T * (hq + kv) / tp,
        act: act_el,
        "permute": permute_el / expert_efficiency,
    }
    mem_f = score_f + sum(table[k][0] * v for k, v in parts.items())
    mem_b = score_b + sum(table[k][1] * v for k, v in parts.items())
    kern_mem_f, kern_mem_b = _memory_kernels(rates.launch_mode, act, moe_layer)
    fixed = rates.kernel_gpu_s
    fwd_mem = mem_f / rates.stream_Bps + kern_mem_f * fixed
    bwd_mem = mem_b / rates.stream_Bps + kern_mem_b * fixed

    # --- fp8 casts ----------------------------------------------------------------------------
    zero = 0.0 * T
    if fp8:
        cast = FP8_CAST[fp8]
        # forward: the attention output (input of proj) and routed tokens need their own cast;
        # norm and activation outputs are cast inside their producing kernels (TE
        # LayerNormLinear/LayerNormMLP), which with current scaling still need an amax pass
        separate = T * hq / tp + (permute_el if moe_layer else zero)
        fused_inputs = 2.0 * hidden_el + act_el
        amax_only = cast.activation - FP8_CAST["delayed"].activation
        cast_f = separate * cast.activation + fused_inputs * amax_only
        # backward: every fp8 linear's output gradient is cast (and transposed) for dgrad/wgrad
        # and, where the recipe rescales, the dgrad (input-sized) and wgrad (weight-sized)
        # outputs are read and written once more
        cast_b = fp8_grads * cast.activation + cast.rescale * (
            separate + fused_inputs + fp8_weights
        )
        fprop = fprop / cast.fprop_efficiency  # the router's small bf16 GEMM with them
        # one rescale kernel per rescaled GEMM (dgrad and wgrad of each fp8 linear)
        n_cast = cast.kernels * (1.0 + len(fp8_names)) + 2.0 * len(fp8_names) * (cast.rescale > 0)
        fp8_cast = (cast_f + cast_b) / rates.stream_Bps + n_cast * fixed
        fp8_weight = fp8_weights * cast.weight / rates.stream_Bps + len(fp8_names) * fixed
        cast_kernels = n_cast
    else:
        fp8_cast = fp8_weight = zero
        cast_kernels = 0.0

    # --- kernel counts ------------------------------------------------------------------------
    per_collective = 4.0 if sequence_parallel else 2.0
    comm: Any = per_collective * (tp > 1) if isinstance(tp, float) else per_collective * (tp > 1.0)
    kernels_f = n_gemm + att_kernels_f + kern_mem_f + comm + 0.5 * cast_kernels
    kernels_b = 2.0 * n_gemm + att_kernels_b + kern_mem_b + comm + 0.5 * cast_kernels

    breakdown = {
        "gemm": fprop + dgrad + wgrad,
        "attention": att_f + att_b,
        "memory": fwd_mem + bwd_mem,
        "fp8_cast": fp8_cast + fp8_weight,
    }
    return LayerCost(
        fwd_gemm_s=fprop,
        bwd_dgrad_s=dgrad,
        bwd_wgrad_s=wgrad,
        fwd_attention_s=att_f,
        bwd_attention_s=att_b,
        fwd_memory_s=fwd_mem,
        bwd_memory_s=bwd_mem,
        fp8_cast_s=fp8_cast,
        fp8_weight_cast_s=fp8_weight,
        kernels_fwd=kernels_f,
        kernels_bwd=kernels_b,
        flops=gemm_flops + att_flops,
        fp8_ops=fp8_names,
        breakdown_s=breakdown,
    )
