"""Model-parallel communication per micro-batch per pipeline stage: tensor (TP), context (CP)
and expert (EP) parallelism. Volumes are in bytes; times take the collective model's price of
one collective, so each term can be checked by hand."""

from __future__ import annotations

from typing import Any

import numpy as np

from bandwall.model.memory import ACT_BYTES

#: TP with sequence parallelism moves the layer's activations 4 times per layer per micro-batch
#: (all-gather + reduce-scatter around attention and MLP, forward and backward; Korthikanti et
#: al. 2022 §4.2.2), each the cost of one all-reduce-equivalent here.
TP_COLLECTIVES_PER_LAYER = 4
#: MoE: dispatch and combine all-to-all, in forward and backward (Lepikhin et al. 2021).
EP_ALL_TO_ALLS_PER_LAYER = 4


def tp_bytes(micro_batch: Any, seq_len: float, hidden: float, cp: Any) -> Any:
    """Activations of one micro-batch on one CP rank: the buffer of one TP collective."""
    return micro_batch * seq_len * hidden * ACT_BYTES / cp


def tp_microbatch_s(layers_per_stage: Any, collective_s: Any, overlap_share: float) -> Any:
    """Exposed TP time per micro-batch: 4 collectives per layer, less what compute hides."""
    return (1 - overlap_share) * layers_per_stage * TP_COLLECTIVES_PER_LAYER * collective_s


def cp_kv_bytes(micro_batch: Any, seq_len: float, kv_dim: float) -> Any:
    """K and V of one micro-batch's full sequence: what CP all-gathers (and reduce-scatters
    as gradients) per layer."""
    return micro_batch * seq_len * kv_dim * 2 * ACT_BYTES


def cp_microbatch_s(
    layers_per_stage: Any, all_gather_s: Any, reduce_scatter_s: Any, attention_compute_s: Any
) -> Any:
    """Exposed CP time per micro-batch: K/V all-gather (forward) and reduce-scatter
    (backward) per layer, hidden behind attention compute where it fits."""
    return np.maximum(layers_per_stage * (all_gather_s + reduce_scatter_s) - attention_compute_s, 0)


def ep_bytes(
    micro_batch: Any, seq_len: float, tp: Any, cp: Any, top_k: float, hidden: float
) -> Any:
    """Tokens a rank dispatches to experts, top_k copies of each hidden vector."""
    return micro_batch * seq_len / (cp * tp) * top_k * hidden * ACT_BYTES


def ep_microbatch_s(moe_layers_per_stage: Any, all_to_all_s: Any, overlap_share: float) -> Any:
    """Exposed EP time per micro-batch: 4 all-to-alls per MoE layer, less what is hidden."""
    return (1 - overlap_share) * moe_layers_per_stage * EP_ALL_TO_ALLS_PER_LAYER * all_to_all_s
