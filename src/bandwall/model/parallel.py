"""Model-parallel communication per micro-batch per pipeline stage: tensor (TP), context (CP)
and expert (EP) parallelism. Volumes are in bytes; times take the collective model's price of
one collective, so each term can be checked by hand."""

from __future__ import annotations

from typing import Any

import numpy as np

from bandwall.model.memory import ACT_BYTES

#: MoE: dispatch and combine all-to-all, in forward and backward (Lepikhin et al. 2021).
EP_ALL_TO_ALLS_PER_LAYER = 4


def tp_bytes(micro_batch: Any, seq_len: float, hidden: float, cp: Any) -> Any:
    """A layer's activations for one micro-batch on one CP rank: the buffer of one TP
    collective (all-reduce, or the output of an all-gather / input of a reduce-scatter)."""
    return micro_batch * seq_len * hidden * ACT_BYTES / cp


def tp_layer_s(
    all_reduce_s: Any,
    all_gather_s: Any,
    reduce_scatter_s: Any,
    gemm_s: Any,
    *,
    sequence_parallel: bool,
    comm_overlap: bool,
    tp_ranks: Any,
    recompute_forward: Any,
) -> Any:
    """Exposed TP seconds per layer per micro-batch (forward, backward, recomputation).

    Megatron-LM 2022 (`megatron/mpu/layers.py`, LinearWithGradAccumulationAndAsyncCommunication;
    Korthikanti et al. 2022 §4.2.2): without SP, forward runs 2 all-reduces exposed and
    backward 2 all-reduces hidden behind the weight-gradient GEMMs. With SP, forward runs 2
    all-gathers + 2 reduce-scatters exposed; backward 2 all-gathers exposed, 2 re-all-gathers
    hidden behind the input-gradient GEMMs and 2 reduce-scatters behind the weight-gradient
    GEMMs. Recomputation repeats the forward's share (`recompute_forward` of it). With
    `comm_overlap` (Megatron's --tp-comm-overlap, TransformerEngine userbuffers) every
    collective is pipelined with its GEMM in tp chunks: only what exceeds the GEMM, and at
    least one chunk, stays exposed.
    """
    gemm_each = gemm_s / 4  # the GEMM next to each of the four collectives of a pass
    if comm_overlap:  # userbuffers overlap needs sequence parallelism (Megatron asserts it)

        def hidden(comm: Any) -> Any:
            return np.maximum(comm - gemm_each, comm / tp_ranks)

        forward = 2 * hidden(all_gather_s) + 2 * hidden(reduce_scatter_s)
        backward = 4 * hidden(all_gather_s) + 2 * hidden(reduce_scatter_s)
        return forward * (1 + recompute_forward) + backward
    if sequence_parallel:
        forward = 2 * all_gather_s + 2 * reduce_scatter_s
        backward = (
            2 * all_gather_s
            + np.maximum(2 * all_gather_s - gemm_s, 0.0)
            + np.maximum(2 * reduce_scatter_s - gemm_s, 0.0)
        )
    else:
        forward = 2 * all_reduce_s
        backward = np.maximum(2 * all_reduce_s - gemm_s, 0.0)
    return forward * (1 + recompute_forward) + backward


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


def node_dispatch_share(ep: Any, members_per_node: Any, top_k: float) -> Any:
    """Share of an all-to-all dispatch's cross-node copies that a node-deduplicating dispatcher
    sends (DeepEP, Megatron's HybridEP; DeepSeek-V3 report §3.2.2): a token goes once to each
    other node holding one of its top_k experts and is forwarded there over NVLink, where an
    all-to-all sends one copy per expert. With uniform routing over an EP group spanning n
    nodes, a token reaches (n − 1)(1 − (1 − 1/n)^k) other nodes against k(n − 1)/n copies:
    n(1 − (1 − 1/n)^k)/k. 1 within a node. (Applied to the whole message: the NVLink
    forwarding it leaves out is the cheap part.)"""
    n = np.maximum(np.asarray(ep, dtype=np.float64) / np.maximum(members_per_node, 1.0), 1.0)
    share = n * (1.0 - (1.0 - 1.0 / n) ** top_k) / max(top_k, 1.0)
    return np.where(n > 1.0, share, 1.0)


def ep_microbatch_s(
    moe_layers_per_stage: Any, all_to_all_s: Any, overlap_share: float, compute_s: Any = np.inf
) -> Any:
    """Exposed EP time per micro-batch: 4 all-to-alls per MoE layer, less what is hidden. What
    overlap hides (DeepSeek's DualPipe, Megatron's --overlap-moe-expert-parallel-comm: one
    micro-batch's all-to-alls under another's compute) is at most the micro-batch's compute."""
    total = moe_layers_per_stage * EP_ALL_TO_ALLS_PER_LAYER * all_to_all_s
    return total - np.minimum(overlap_share * total, compute_s)
