"""The roofline compute model the engine used before the kernel model (kept while engine.py
moves to `transformer_layer`): compute time of one micro-batch on one GPU.

A roofline per operation class, with constants per GPU generation (`bandwall catalog perf`):

- GEMMs (QKV, attention output, MLP, experts, LM head) run at the GPU's achieved large-GEMM
  efficiency, reduced when a GEMM has too few output tiles to fill the SMs;
- attention scores: FlashAttention kernels at their own achieved efficiency and only the
  unmasked half of a causal sequence (Dao 2023, §3.1), or, unfused (Megatron 2022), two
  batched GEMMs over the full s × s scores plus a memory-bound softmax and dropout;
- element-wise work (layer norms, dropout, residual adds, activations; softmax when unfused) is
  bytes over achieved HBM bandwidth; with sequence parallelism each TP rank touches 1/tp of
  the tokens (Korthikanti et al. 2022, §4.2.2);
- every kernel costs at least its launch: small models and micro-batches are launch-bound.

Backward is twice the forward's GEMM and element-wise work. Reported FLOP/s follow the
convention of the source they are compared against (see `model_flops_per_token`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bandwall.model.compute.rates import GpuRates
from bandwall.workloads import Transformer, Workload

#: Bytes per element of bf16/fp16 activations.
ELEMENT_BYTES = 2
#: Backward costs twice the forward (an input-gradient and a weight-gradient GEMM per GEMM).
BACKWARD_FACTOR = 2.0
#: Depth of the reduction dimension a GEMM tile spends outside its steady-state main loop:
#: filling a 3-4 stage software pipeline of 64-deep K slices and writing the tile back
#: (CUTLASS "Efficient GEMM in CUDA": multistage mainloop, BK = 32-64). A GEMM over K runs at
#: K / (K + GEMM_K_OVERHEAD) of the large-GEMM rate: shallow GEMMs (the TP-split attention
#: output and MLP down-projection of small models) are slower per FLOP.
GEMM_K_OVERHEAD = 256.0
#: Element-wise passes over the layer's hidden activations in a forward pass (reads + writes
#: of 2-byte elements, per token per hidden unit): two layer norms (read, write: 2 each), two
#: fused bias-dropout-residual adds (read 2, write 1, mask 0.5: 3.5 each).
HIDDEN_PASSES = 2 * 2 + 2 * 3.5
#: Passes over the MLP's intermediate activations: the fused bias-activation reads and writes.
MLP_PASSES = 2
#: Passes over unfused attention scores (Megatron 2022 fused scale-mask-softmax reads and
#: writes the b·a·s² scores; dropout reads, writes and stores a 1-byte mask).
SCORE_PASSES = 2 + 2.5
#: Kernels per transformer layer in a forward pass (norms, GEMMs, attention, activation, adds,
#: TP collectives): ~20 with fused kernels; backward twice as many.
KERNELS_PER_LAYER_FWD = 20
#: Share of a GPU's microbenchmark GEMM efficiency (catalog `gemm_efficiency`) that GEMMs
#: sustain inside a training step (clocks under sustained mixed load, NCCL kernels sharing
#: SMs, allocator and launch gaps). The one constant fitted to published runs: two thirds of
#: Korthikanti et al. 2022 Table 5 (ids in `bandwall.measure.calibrate.compute_fit`), the rest
#: held out; `python benchmarks/fit_compute.py` refits it and prints both errors.
TRAINING_GEMM_FACTOR = 0.942
#: Full recomputation reruns the forward pass in backward (Korthikanti et al. 2022, §5).
FULL_RECOMPUTE_COMPUTE_FACTOR = 4 / 3


def gemm_s(
    m: Any, n: Any, k: Any, rates: GpuRates, count: Any = 1.0, *, batched: bool = False
) -> Any:
    """Seconds of `count` GEMMs of m×n×k: 2mnk FLOPs at the GPU's large-GEMM rate, slowed by
    wave quantisation (the output's tiles run in waves of one tile per SM, and a partial last
    wave costs a whole one: NVIDIA, "Matrix Multiplication Background User's Guide", §3.2) and
    by shallow K (each tile's pipeline fill and write-back is not amortised). A `batched` GEMM
    runs its `count` problems in one kernel, so their tiles share the waves."""
    tiles = np.ceil(m / rates.tile_m) * np.ceil(n / rates.tile_n) * (count if batched else 1.0)
    waves = np.ceil(tiles / rates.sm_count)
    fill = tiles / np.maximum(waves * rates.sm_count, 1.0)
    depth = k / (k + GEMM_K_OVERHEAD)
    return count * 2.0 * m * n * k / (rates.gemm_flops * fill * depth)


def memory_s(num_bytes: Any, rates: GpuRates) -> Any:
    """Seconds to stream `num_bytes` through HBM at the achieved bandwidth."""
    return num_bytes / (rates.hbm_Bps * (1 - rates.virtualization_overhead))


@dataclass(frozen=True)
class LayerTimes:
    """Forward seconds of one transformer layer for one micro-batch on one GPU, by kind, and
    the attention-core share that selective recomputation reruns."""

    gemm_s: Any
    attention_s: Any
    elementwise_s: Any
    attention_core_s: Any
    """Score BMMs + softmax/dropout (unfused) — what selective recomputation recomputes."""
    wgrad_s: Any
    """Weight-gradient GEMMs of the backward pass (what overlaps TP collectives)."""
    kernels: float

    @property
    def forward_s(self) -> Any:
        return self.gemm_s + self.attention_s + self.elementwise_s


def layer_times(
    w: Transformer,
    tokens: Any,
    tp: Any,
    cp: Any,
    micro_batch: Any,
    rates: GpuRates,
    *,
    moe_layer: bool,
    sequence_parallel: bool,
    flash_attention: bool,
) -> LayerTimes:
    """One layer's forward on one GPU. `tokens` = micro_batch × seq_len / cp: the tokens this
    CP rank holds; the TP ranks split the GEMM widths and (with sequence parallelism) the
    element-wise work."""
    h = float(w.hidden)
    hq = float(w.heads * w.head_dim)
    kv = float(w.kv_dim)
    seq = float(w.seq_len)
    # --- GEMMs, per TP rank --------------------------------------------------------------
    if w.attention_params_per_layer is not None:  # e.g. MLA: count its matmuls as one GEMM
        attn = gemm_s(tokens, w.attention_params_per_layer / (h * tp), h, rates)
    else:
        attn = gemm_s(tokens, (hq + 2 * kv) / tp, h, rates) + gemm_s(tokens, h, hq / tp, rates)
    gate = 2.0 if w.gated_mlp else 1.0
    if moe_layer:
        width = float(w.moe_ffn or w.ffn or 4 * w.hidden)
        routed = float(w.top_k + w.shared_experts)
        mlp = gemm_s(tokens, gate * width / tp, h, rates, routed) + gemm_s(
            tokens, h, width / tp, rates, routed
        )
        mlp = mlp + gemm_s(tokens, float(w.experts), h, rates)  # router
        inner = routed * width
    else:
        width = float(w.ffn or 4 * w.hidden)
        mlp = gemm_s(tokens, gate * width / tp, h, rates) + gemm_s(tokens, h, width / tp, rates)
        inner = width
    gemm = attn + mlp
    wgrad = gemm  # one weight-gradient GEMM per forward GEMM, same shape
    # --- attention scores --------------------------------------------------------------------
    heads = w.heads / tp
    queries = seq / cp
    d = float(w.head_dim)
    if flash_attention:
        # causal: the kernel skips masked blocks, so half the scores are computed
        score_flops = 2 * 2.0 * micro_batch * heads * queries * seq * d  # QKᵀ and AV
        core = 0.5 * score_flops / (rates.peak_flops * rates.attention_efficiency)
        core = core / (1 - rates.virtualization_overhead)
        score_bytes = 0.0
    else:
        # two batched GEMMs per head over the full (masked) s × s scores: QKᵀ reduces over
        # the head dimension (shallow), AV over the sequence
        batch = micro_batch * heads
        core = gemm_s(queries, seq, d, rates, batch, batched=True) + gemm_s(
            queries, d, seq, rates, batch, batched=True
        )
        score_bytes = SCORE_PASSES * ELEMENT_BYTES * micro_batch * heads * queries * seq
    # --- element-wise -----------------------------------------------------------------------
    shard = tp if sequence_parallel else 1.0
    hidden_bytes = HIDDEN_PASSES * ELEMENT_BYTES * tokens * h / shard
    mlp_bytes = MLP_PASSES * ELEMENT_BYTES * tokens * gate * inner / tp
    elementwise = memory_s(hidden_bytes + mlp_bytes, rates)
    score_mem = memory_s(score_bytes, rates)
    return LayerTimes(
        gemm_s=gemm,
        attention_s=core + score_mem,
        elementwise_s=elementwise,
        attention_core_s=core + score_mem,
        wgrad_s=wgrad,
        kernels=KERNELS_PER_LAYER_FWD,
    )


def lm_head_s(w: Transformer, tokens: Any, tp: Any, rates: GpuRates) -> Any:
    """Forward + backward of the output projection and the fp32 cross-entropy on the last
    pipeline stage (vocabulary split over TP ranks; Megatron's vocab-parallel loss)."""
    proj = gemm_s(tokens, w.vocab / tp, float(w.hidden), rates)
    logits = memory_s(5 * 4.0 * tokens * w.vocab / tp, rates)  # write, max, exp-sum, grad
    return (1 + BACKWARD_FACTOR) * proj + logits


def microbatch_s(forward_s: Any, kernels: Any, rates: GpuRates, recompute_s: Any) -> Any:
    """Forward + backward (+ recomputation) of a micro-batch, and never faster than launching
    its kernels: the GPU idles when kernels finish before the CPU launches the next."""
    busy = (1 + BACKWARD_FACTOR) * forward_s + recompute_s
    launch = (1 + BACKWARD_FACTOR) * kernels * rates.kernel_launch_s
    return np.maximum(busy, launch)


def model_flops_per_token(w: Workload, *, causal: bool) -> float:
    """Training FLOPs per token for MFU: 6 × matmul parameters a token uses + attention
    12·L·a·d_head·s (PaLM appendix B), halved for causal attention when the source counts
    only the unmasked half (FlashAttention's convention)."""
    if not isinstance(w, Transformer):
        return w.flops_per_sample
    attention = 12 * w.layers * w.heads * w.head_dim * w.seq_len
    return w.flops_per_token - attention * (0.5 if causal else 0.0)


def model_flops_per_sample(w: Workload, trainable: float = 1.0) -> float:
    """Model FLOPs of one sample for MFU: causal attention counted once, the FLOPs a causal
    kernel runs. Megatron-Bridge's performance summary (its 25.11 H100 Llama 3 8B row: 744
    TFLOP/s at 14,451 tokens/s is 5.15e10 FLOP/token, the causal count), Meta's Llama 3 paper
    (Table 4, docs/model.md) and FlashAttention's benchmarks count this way; PaLM's appendix B
    and torchtitan count the full score matrix (`training_flops_per_sample`). `trainable`: the
    share of weights that train (LoRA); the frozen rest runs no weight-gradient GEMM."""
    if isinstance(w, Transformer):
        flops = model_flops_per_token(w, causal=True) * w.seq_len
    else:
        flops = w.flops_per_sample
    return flops - _frozen_flops_per_sample(w, trainable)


def weight_gradient_flops_per_sample(w: Workload) -> float:
    """The weight-gradient GEMMs' share of `model_flops_per_sample`: 2 × matmul parameters per
    token, a third of the 6 (Kaplan et al. 2020: forward 2, input and weight gradients 2 each).
    Frozen weights (LoRA) skip it, so their model FLOPs count forward + input gradient only."""
    if not isinstance(w, Transformer):
        return w.flops_per_sample / 3
    attention = 12 * w.layers * w.heads * w.head_dim * w.seq_len
    return (w.flops_per_token - attention) / 3 * w.seq_len


def _frozen_flops_per_sample(w: Workload, trainable: float) -> float:
    """The weight-gradient FLOPs the frozen share of the weights never runs (LoRA: counting
    them read 81% "MFU" for Llama 2 70B at rank 16)."""
    return 0.0 if trainable >= 1.0 else (1.0 - trainable) * weight_gradient_flops_per_sample(w)


def full_attention_ratio(w: Workload, trainable: float = 1.0) -> float:
    """How much higher an MFU or TFLOP/s reads counting the full score matrix (PaLM,
    torchtitan) than counting causal attention once (`model_flops_per_sample`)."""
    return training_flops_per_sample(w, trainable) / model_flops_per_sample(w, trainable)


def training_flops_per_sample(w: Workload, trainable: float = 1.0) -> float:
    """FLOPs of forward + backward for one sample (a sequence, or an image), counting the
    full attention score matrix (the Megatron/PaLM convention); `trainable` as in
    `model_flops_per_sample`."""
    flops = w.flops_per_token * w.seq_len if isinstance(w, Transformer) else w.flops_per_sample
    return flops - _frozen_flops_per_sample(w, trainable)


def sustained_flops(peak_flops: float, efficiency: float, virtualization_overhead: float) -> float:
    """FLOP/s one GPU sustains: dense peak × kernel efficiency, less what a hypervisor takes."""
    return peak_flops * efficiency * (1 - virtualization_overhead)


def cnn_microbatch_s(
    flops_per_sample: float,
    traffic_bytes_per_sample: float,
    kernels_per_step: float,
    micro_batch: Any,
    rates: GpuRates,
    efficiency: float,
) -> Any:
    """A CNN micro-batch: convolutions at the workload's share of the GEMM rate, plus the
    activation traffic through HBM, plus a launch floor per kernel that makes small per-GPU
    batches inefficient (MLPerf ResNet-50 throughput per GPU falls ~2.5× from batch 400 to 16)."""
    math_s = micro_batch * flops_per_sample / (rates.gemm_flops * efficiency)
    mem_s = memory_s(micro_batch * traffic_bytes_per_sample, rates)
    return math_s + mem_s + kernels_per_step * rates.kernel_launch_s
