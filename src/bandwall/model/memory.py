"""Bytes per GPU on the first pipeline stage (the fullest), by kind, and whether they fit.

Mixed-precision Adam (Rajbhandari et al. 2020, ZeRO §3): bf16 weights (2 B/param), gradients in
the reduction dtype, fp32 master weights and two moments (12 B/param). ZeRO-1 shards the
optimizer state, ZeRO-2 also the gradients, ZeRO-3 (FSDP) also the weights, over the
data-parallel ranks (routed experts over dp/ep).

Activations per token per layer (Korthikanti et al. 2022, eqs. 2-5, with sequence parallelism
and FlashAttention): 34·h with selective recomputation, 2·h with full (only the layer input is
kept), 34·h + 5·heads·seq with none. The first 1F1B stage holds min(pp, micro-batches)
micro-batches in flight, × (1 + (pp-1)/(pp·v)) when interleaved (Narayanan et al. 2021).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bandwall.model.layout import Recompute
from bandwall.workloads import Transformer

#: fp32 master weights, Adam m and v (Rajbhandari et al. 2020).
ADAM_BYTES_PER_PARAM = 12
#: bf16 weights and activations.
WEIGHT_BYTES = 2
ACT_BYTES = 2
#: fp32 logits of the LM head, kept for the loss.
LOGIT_BYTES = 4
#: Share of device memory usable by the framework (CUDA context, allocator fragmentation).
USABLE_MEMORY_FRACTION = 0.9
#: DiLoCo keeps the outer optimizer state and the last synchronised weights in fp32.
DILOCO_EXTRA_BYTES_PER_PARAM = 8
#: Activation bytes per token per layer per unit of hidden size (Korthikanti et al. 2022).
SELECTIVE_ACT_PER_H = 34
FULL_ACT_PER_H = 2
#: Attention score bytes per token per head per sequence position without recomputation.
ATTN_SCORES_PER_HEAD_SEQ = 5


@dataclass(frozen=True)
class MemoryBytes:
    """Bytes per GPU by kind (arrays broadcast with the layouts)."""

    weights: Any
    grads: Any
    optimizer: Any
    activations: Any
    recompute_share: Any

    @property
    def total(self) -> Any:
        return self.weights + self.grads + self.optimizer + self.activations


def usable_memory_bytes(device_memory_bytes: float) -> float:
    """What the framework can allocate of a device's memory."""
    return device_memory_bytes * USABLE_MEMORY_FRACTION


def state_bytes(
    dense_params_local: Any,
    expert_params_local: Any,
    dp: Any,
    dp_expert: Any,
    zero: Any,
    grad_bytes_per_param: float,
    local_sgd_steps: int,
) -> tuple[Any, Any, Any]:
    """Weights, gradients and optimizer state per GPU under ZeRO stage `zero`."""

    def sharded(on: Any) -> Any:
        return np.where(
            on,
            dense_params_local / dp + expert_params_local / dp_expert,
            dense_params_local + expert_params_local,
        )

    weights = WEIGHT_BYTES * sharded(zero >= 3)
    grads = grad_bytes_per_param * sharded(zero >= 2)
    optimizer = ADAM_BYTES_PER_PARAM * sharded(zero >= 1)
    if local_sgd_steps > 1:
        optimizer = optimizer + DILOCO_EXTRA_BYTES_PER_PARAM * (
            dense_params_local + expert_params_local
        )
    return weights, grads, optimizer


def transformer_activation_bytes(
    w: Transformer,
    recompute: Recompute,
    tp: Any,
    pp: Any,
    cp: Any,
    micro_batch: Any,
    micro_batches: Any,
    virtual_stages: Any,
    static_bytes: Any,
    capacity_bytes: float,
) -> tuple[Any, Any]:
    """Activation bytes on the first stage and the share of layers fully recomputed.

    AUTO recomputes just enough layers fully to fit (Megatron's --recompute-num-layers); that
    share costs one extra forward pass in the compute term.
    """
    h, seq = float(w.hidden), float(w.seq_len)
    per_tok = {
        Recompute.SELECTIVE: SELECTIVE_ACT_PER_H * h,
        Recompute.FULL: FULL_ACT_PER_H * h,
        Recompute.NONE: SELECTIVE_ACT_PER_H * h + ATTN_SCORES_PER_HEAD_SEQ * w.heads * seq,
    }
    interleave = np.where(virtual_stages > 1, 1 + (pp - 1) / (pp * virtual_stages), 1.0)
    in_flight = np.minimum(pp, np.maximum(micro_batches, 1.0)) * np.ceil(w.layers / pp)
    tokens_layers = micro_batch * seq / (tp * cp) * in_flight * interleave
    logits = micro_batch * seq * w.vocab * LOGIT_BYTES / (tp * cp)
    if recompute is Recompute.AUTO:
        selective = per_tok[Recompute.SELECTIVE] * tokens_layers
        full = per_tok[Recompute.FULL] * tokens_layers
        over = static_bytes + selective + logits - capacity_bytes
        share = np.clip(over / np.maximum(selective - full, 1.0), 0.0, 1.0)
        return selective - share * (selective - full) + logits, share
    acts = per_tok[recompute] * tokens_layers + logits
    return acts, np.full(np.shape(acts), float(recompute is Recompute.FULL))
