"""Work priced once per micro-batch or per step outside the layers: LM head and loss,
embedding, optimizer step, gradient clipping, the CPU launch bound, and the SM share that
overlapped communication takes from compute."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bandwall.model.compute.gemm import gemm_time_s
from bandwall.model.compute.layer import WGRAD_OUT_BYTES
from bandwall.model.compute.rates import GpuRates
from bandwall.workloads import Transformer

#: Bytes per logit of Megatron's vocab-parallel cross-entropy (megatron/core/tensor_parallel/
#: cross_entropy.py): forward .float() (read 2, write 4), max (4), subtract in place (8), exp in
#: place (8), sum (4), divide in place (8); backward scale in place (8) and the bf16 cast for the
#: GEMMs (6). Fused (`--cross-entropy-loss-fusion`, fusions/fused_cross_entropy.py; Liger):
#: read the bf16 logits in forward, read and write them in backward.
CROSS_ENTROPY_BYTES = {"unfused": 52.0, "fused": 6.0}
CROSS_ENTROPY_KERNELS = {"unfused": 9.0, "fused": 2.0}
#: Fused Adam (apex/TE FusedAdam, Megatron distributed optimizer) per parameter: reads fp32
#: master, grad, m, v (16 B), writes master, m, v (12 B) and the bf16 weight (2 B).
ADAM_BYTES_PER_PARAM = 30.0
#: Gradient clipping per parameter: multi_tensor_l2norm reads the fp32 grads (4 B), then
#: multi_tensor_scale reads and writes them (8 B) (Megatron clip_grad_norm_fp32); zeroing the
#: grads for the next step writes 4 B.
CLIP_BYTES_PER_PARAM = 12.0
ZERO_GRAD_BYTES_PER_PARAM = 4.0
#: Parameters per multi_tensor_apply launch (apex: 2,048 × 320-element chunks per kernel).
PARAMS_PER_MULTI_TENSOR_KERNEL = 2048 * 320
#: Share of compute throughput lost while NCCL kernels run beside it: overlapping compute and
#: communication slows the compute kernels by 18.9% on average (max 40%) across GPT/Llama
#: layers on A100/H100/MI250/MI210 (Lee et al. 2025, arXiv 2507.03114, §5): compute runs at
#: 1/1.189 = 0.84 of its solo rate during the overlap. NCCL's ring/tree kernels hold 16-32
#: CTAs (channels) on H100 NVLink, 12-24% of 132 SMs, and contend for HBM.
OVERLAP_COMPUTE_SLOWDOWN = 0.189


@dataclass(frozen=True)
class LmHeadCost:
    """The output projection and the loss on the last pipeline stage, per micro-batch."""

    fwd_gemm_s: Any
    bwd_dgrad_s: Any
    bwd_wgrad_s: Any
    loss_s: Any
    """Cross-entropy forward + backward (memory-bound)."""
    kernels: Any

    @property
    def total_s(self) -> Any:
        return self.fwd_gemm_s + self.bwd_dgrad_s + self.bwd_wgrad_s + self.loss_s


def lm_head(
    w: Transformer, tokens: Any, tp: Any, rates: GpuRates, *, fused_loss: bool = False
) -> LmHeadCost:
    """LM head GEMMs (bf16: fp8 recipes leave it in high precision) on the vocabulary slice of
    this TP rank, and the vocab-parallel cross-entropy over tokens × vocab/tp logits."""
    h, v = float(w.hidden), float(w.vocab)
    shards = np.asarray(tp, dtype=np.float64)
    vs = v / shards
    # fprop, dgrad and wgrad priced in one vectorised call, stacked on a leading axis
    m, n, k = (_stacked(*x) for x in ((tokens, tokens, h), (vs, h, vs), (h, vs, tokens)))
    out_bytes = np.array([2.0, 2.0, WGRAD_OUT_BYTES]).reshape((3,) + (1,) * (m.ndim - 1))
    fwd, dgrad, wgrad = gemm_time_s(m, n, k, rates, out_bytes=out_bytes)
    kind = "fused" if fused_loss else "unfused"
    logits = tokens * v / shards
    loss = (
        logits * CROSS_ENTROPY_BYTES[kind] / rates.stream_Bps
        + CROSS_ENTROPY_KERNELS[kind] * rates.kernel_gpu_s
    )
    return LmHeadCost(fwd, dgrad, wgrad, loss, 3.0 + CROSS_ENTROPY_KERNELS[kind])


def _stacked(*values: Any) -> Any:
    """`values` broadcast together and stacked on a new leading axis (float64)."""
    shape = np.broadcast(*values).shape
    if not shape:
        return np.array(values, dtype=np.float64)
    return np.stack([np.broadcast_to(np.asarray(x, dtype=np.float64), shape) for x in values])


def embedding_s(w: Transformer, tokens: Any, tp: Any, rates: GpuRates) -> Any:
    """Input embedding forward (gather tokens × hidden) and backward (scatter-add into the
    fp32 gradient of this rank's vocabulary slice: read the bf16 grad, read and write fp32)."""
    h = float(w.hidden)
    fwd = tokens * h * 4.0  # read the rows, write the activations
    bwd = tokens * h * (2.0 + 8.0)
    return (fwd + bwd) / rates.stream_Bps + 3.0 * rates.kernel_gpu_s + 0.0 * np.asarray(tp)


def optimizer_step_s(params_local: Any, rates: GpuRates) -> Any:
    """Fused Adam over this GPU's shard of the trainable parameters, once per step."""
    kernels = np.ceil(np.asarray(params_local) / PARAMS_PER_MULTI_TENSOR_KERNEL)
    return params_local * ADAM_BYTES_PER_PARAM / rates.stream_Bps + kernels * rates.kernel_gpu_s


def grad_clip_s(params_local: Any, rates: GpuRates) -> Any:
    """Gradient-norm clipping and zeroing the grads, once per step (the all-reduce of the norm
    is communication, priced by the engine)."""
    kernels = 3.0 * np.ceil(np.asarray(params_local) / PARAMS_PER_MULTI_TENSOR_KERNEL)
    per_param = CLIP_BYTES_PER_PARAM + ZERO_GRAD_BYTES_PER_PARAM
    return params_local * per_param / rates.stream_Bps + kernels * rates.kernel_gpu_s


def host_bound_s(gpu_s: Any, kernels: Any, rates: GpuRates) -> Any:
    """A micro-batch is never faster than the CPU issuing its kernels: the GPU idles when
    kernels finish before the next is launched (eager PyTorch on small models and
    micro-batches); CUDA graphs remove the per-kernel CPU cost."""
    return np.maximum(gpu_s, kernels * rates.host_launch_s)


def overlap_slowdown_s(
    compute_s: Any, overlapped_comm_s: Any, *, slowdown: float = OVERLAP_COMPUTE_SLOWDOWN
) -> Any:
    """Extra compute seconds when `overlapped_comm_s` of NCCL kernels run beside `compute_s`
    of compute on the same GPU.

    While the communication runs, compute proceeds at r = 1/(1 + slowdown) of its solo rate.
    If compute outlasts the communication, the overlap window costs comm × (1 − r) extra;
    otherwise the compute stretches to compute / r.

    >>> round(float(overlap_slowdown_s(10.0, 1.0)), 3)
    0.159
    """
    r = 1.0 / (1.0 + slowdown)
    c = np.asarray(compute_s, dtype=np.float64)
    m = np.asarray(overlapped_comm_s, dtype=np.float64)
    return np.where(c >= r * m, m * (1.0 - r), c * (1.0 / r - 1.0))
