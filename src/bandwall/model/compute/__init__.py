"""Compute time on one GPU, kernel by kernel.

One concept per module:

- `rates`: what a GPU sustains (`GpuRates`, `gpu_rates`), clocks under a power cap;
- `gemm`: GEMM/GEMV time from the per-GPU shape (tiles, waves, K depth, bytes);
- `attention`: FlashAttention 2/3/4 forward/backward, unfused attention, KV-cache reads;
- `elementwise`: bytes and kernel counts of memory-bound kernels and fp8 casts;
- `layer`: one transformer layer's forward + backward (`transformer_layer` → `LayerCost`);
- `step`: LM head and loss, embedding, optimizer, clipping, the CPU launch bound and the
  slowdown of compute beside communication;
- `validation`: the model against the published kernel microbenchmarks;
- `roofline`: the previous one-efficiency model, kept while the engine moves over.
"""

from bandwall.model.compute.attention import (
    flash_attention_s,
    kv_cache_attention_s,
)
from bandwall.model.compute.elementwise import FP8_RECIPES
from bandwall.model.compute.gemm import gemm_tflops, gemm_time_s, gemv_time_s
from bandwall.model.compute.layer import LayerCost, LayerShape, transformer_layer
from bandwall.model.compute.rates import (
    GpuRates,
    LaunchMode,
    gpu_rates,
    sustained_clock_factor,
)
from bandwall.model.compute.roofline import (
    BACKWARD_FACTOR,
    ELEMENT_BYTES,
    FULL_RECOMPUTE_COMPUTE_FACTOR,
    GEMM_K_OVERHEAD,
    HIDDEN_PASSES,
    KERNELS_PER_LAYER_FWD,
    MLP_PASSES,
    SCORE_PASSES,
    TRAINING_GEMM_FACTOR,
    LayerTimes,
    cnn_microbatch_s,
    full_attention_ratio,
    gemm_s,
    layer_times,
    lm_head_s,
    memory_s,
    microbatch_s,
    model_flops_per_sample,
    model_flops_per_token,
    sustained_flops,
    training_flops_per_sample,
)
from bandwall.model.compute.step import (
    LmHeadCost,
    embedding_s,
    grad_clip_s,
    host_bound_s,
    lm_head,
    optimizer_step_s,
    overlap_slowdown_s,
)

#: The name the brief gives the SM-share slowdown.
overlap_slowdown = overlap_slowdown_s

__all__ = [
    "BACKWARD_FACTOR",
    "ELEMENT_BYTES",
    "FP8_RECIPES",
    "FULL_RECOMPUTE_COMPUTE_FACTOR",
    "GEMM_K_OVERHEAD",
    "HIDDEN_PASSES",
    "KERNELS_PER_LAYER_FWD",
    "MLP_PASSES",
    "SCORE_PASSES",
    "TRAINING_GEMM_FACTOR",
    "GpuRates",
    "LaunchMode",
    "LayerCost",
    "LayerShape",
    "LayerTimes",
    "LmHeadCost",
    "cnn_microbatch_s",
    "embedding_s",
    "flash_attention_s",
    "full_attention_ratio",
    "gemm_s",
    "gemm_tflops",
    "gemm_time_s",
    "gemv_time_s",
    "gpu_rates",
    "grad_clip_s",
    "host_bound_s",
    "kv_cache_attention_s",
    "layer_times",
    "lm_head",
    "lm_head_s",
    "memory_s",
    "microbatch_s",
    "model_flops_per_sample",
    "model_flops_per_token",
    "optimizer_step_s",
    "overlap_slowdown",
    "overlap_slowdown_s",
    "sustained_clock_factor",
    "sustained_flops",
    "training_flops_per_sample",
    "transformer_layer",
]
