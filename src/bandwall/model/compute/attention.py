"""Attention kernels: FlashAttention 2/3/4 forward and backward, the unfused (Megatron 2022)
path, and decode attention over a KV cache.

FlashAttention FLOPs follow its own benchmarks (benchmarks/benchmark_flash_attention.py):
forward 4·b·h·s_q·s_k·d, halved with a causal mask; backward 2.5× the forward. The time is
those FLOPs at peak × η, with

    η = η_mma · d/(d + d0) · s_e/(s_e + s0) · (s_k/(s_k + B) if causal)

- d/(d + d0): the softmax (exp, max, rescale) costs per score, the matmuls per score × d, so
  small heads spend a larger share off the tensor cores (Shah et al. 2024 §3; Zadouri et al.
  2026 §2 on Blackwell's exp-unit bottleneck);
- s_e/(s_e + s0): each CTA (one query block of one head) iterates s_e key blocks (s_k, or s_k/2
  on average under a causal mask) after a fixed prologue/epilogue worth s0 keys;
- s_k/(s_k + B): a causal CTA computes its diagonal key block whole though half of it is masked
  (B = 128, the kernels' key block, e.g. hopper/tile_size.h kBlockN).

η_mma, d0 and s0 per kernel, architecture and pass are fitted on the fit third of the
attention rows of catalog/data/kernel_bench.csv (FA2 on A100, FA2 and FA3 on H100 from the
FlashAttention repo and the FA3 paper, FA4 on B200); benchmarks/kernel_model.py prints the
held-out errors. A GPU other than the reference one of its kernel scales η by its catalog
`attention_efficiency` relative to the reference (e.g. MI300X's CK FlashAttention).
"""

from __future__ import annotations

from typing import Any

from bandwall.model.compute.rates import GpuRates

#: Key block of the FlashAttention kernels (FA2 kBlockN 128 for d ≤ 128; FA3 hopper/tile_size.h).
CAUSAL_BLOCK = 128.0
#: Backward FLOPs over forward FLOPs: recompute QKᵀ, then dV, dP, dQ, dK (FlashAttention
#: benchmarks: mode "bwd" = 2.5 × "fwd").
BACKWARD_FLOPS_RATIO = 2.5

#: (η_mma, d0, s0) per (kernel, architecture, pass). Fitted on the fit third of the attention
#: rows (benchmarks/kernel_model.py --fit); the A100 rows are forward+backward only, so its
#: backward is tied to its forward by the FA2 paper's 63%/73% of peak (Dao 2023, §4.1) and
#: shares d0 and s0 with FA2 on H100. FA4 (B200) has two anchors only: the FA4 paper's forward
#: peak sets its forward η and the fwd+bwd figure its backward η, with FA3's d0 and s0. η is the
#: asymptote of the formula (d → ∞, s → ∞), not an achieved share: it may exceed 1.
ATTENTION_PARAMS: dict[tuple[str, str, str], tuple[float, float, float]] = {
    ("fa3", "hopper", "fwd"): (0.928, 56.0, 250.0),
    ("fa3", "hopper", "bwd"): (0.812, 40.0, 450.0),
    ("fa2", "hopper", "fwd"): (0.322, 0.0, 50.0),
    ("fa2", "hopper", "bwd"): (0.373, 16.0, 250.0),
    ("fa2", "ampere", "fwd"): (0.796, 0.0, 50.0),
    ("fa2", "ampere", "bwd"): (0.687, 16.0, 250.0),
    ("fa4", "blackwell", "fwd"): (1.039, 56.0, 250.0),
    ("fa4", "blackwell", "bwd"): (0.780, 40.0, 450.0),
}
#: Architecture each kernel's constants were measured on.
KERNEL_ARCH = {"fa2": "ampere", "fa3": "hopper", "fa4": "blackwell"}


def attention_efficiency(
    head_dim: Any,
    kv_len: Any,
    rates: GpuRates,
    *,
    causal: bool,
    pass_: str,
    kernel: str | None = None,
    arch: str | None = None,
) -> Any:
    """Share of the bf16 peak one FlashAttention pass reaches (see the module docstring)."""
    kern = kernel or rates.attention_kernel
    key_arch = arch or (
        rates.arch if (kern, rates.arch, pass_) in ATTENTION_PARAMS else KERNEL_ARCH[kern]
    )
    eta, d0, s0 = ATTENTION_PARAMS[(kern, key_arch, pass_)]
    d, s = head_dim, kv_len
    s_e = s * (0.5 if causal else 1.0)
    eff = eta * d / (d + d0) * s_e / (s_e + s0)
    if causal:
        eff = eff * s / (s + CAUSAL_BLOCK)
    scale = rates.attention_scale if kernel is None else 1.0
    return eff * scale


def flash_attention_flops(
    batch: Any, heads: Any, q_len: Any, kv_len: Any, head_dim: Any, *, causal: bool
) -> Any:
    """Forward FLOPs FlashAttention computes (its own convention: causal counts half)."""
    return 4.0 * batch * heads * q_len * kv_len * head_dim * (0.5 if causal else 1.0)


def flash_attention_s(
    batch: Any,
    heads: Any,
    q_len: Any,
    kv_len: Any,
    head_dim: Any,
    rates: GpuRates,
    *,
    causal: bool,
    pass_: str,
    kernel: str | None = None,
    arch: str | None = None,
) -> Any:
    """Seconds of one FlashAttention forward ("fwd") or backward ("bwd") pass. With context
    parallelism q_len is the local s/cp and kv_len the whole s (ring attention visits every
    key block; load-balanced causal chunks keep half of them, as here)."""
    flops = flash_attention_flops(batch, heads, q_len, kv_len, head_dim, causal=causal)
    if pass_ == "bwd":
        flops = flops * BACKWARD_FLOPS_RATIO
    eff = attention_efficiency(
        head_dim, kv_len, rates, causal=causal, pass_=pass_, kernel=kernel, arch=arch
    )
    rate = rates.bf16_flops * rates.clock_factor * (1 - rates.virtualization_overhead)
    return flops / (rate * eff) + rates.kernel_gpu_s


#: Passes over the b·a·s_q·s_k scores of the unfused path (Megatron 2022 fused scale-mask-
#: softmax reads and writes them in 2-byte elements; dropout reads, writes and keeps a 1-byte
#: mask: Korthikanti et al. 2022 §4). Backward: softmax grad reads output and grad, writes grad.
UNFUSED_SCORE_BYTES_FWD = 2 * 2 + 2.5 * 2
UNFUSED_SCORE_BYTES_BWD = 3 * 2 + 2.5 * 2


def kv_cache_attention_s(
    batch: Any,
    context: Any,
    kv_dim_local: Any,
    rates: GpuRates,
    *,
    kv_bytes: float = 2.0,
) -> Any:
    """One decode step of attention for `batch` sequences over `context` cached tokens on one
    GPU of one layer: reading K and V (2 × context × KV width) dominates; the FLOPs
    (4 × context × query width per sequence) are negligible at decode shapes."""
    read = 2.0 * batch * context * kv_dim_local * kv_bytes
    return read / rates.stream_Bps + rates.kernel_gpu_s
