"""Pipeline parallelism: the bubble and the exposed stage-to-stage sends (Narayanan et al.
2021, "Efficient Large-Scale Language Model Training on GPU Clusters", §2.2)."""

from __future__ import annotations

from typing import Any

import numpy as np

from bandwall.model.memory import ACT_BYTES


def p2p_bytes(micro_batch: Any, seq_len: float, hidden: float, tp: Any, cp: Any) -> Any:
    """Activations one stage sends the next per micro-batch (sequence-parallel shard)."""
    return micro_batch * seq_len * hidden * ACT_BYTES / (tp * cp)


def pipeline_s(
    stage_s: Any,
    p2p_s: Any,
    pp: Any,
    virtual_stages: Any,
    micro_batches: Any,
    *,
    overlap: bool = True,
) -> tuple[Any, Any]:
    """(bubble, exposed send/recv) seconds per step.

    A stage's steady-state slot is its compute + exposed TP/CP/EP. Each micro-batch crosses
    2·v stage boundaries per stage (forward activations, backward gradients, per chunk). With
    `overlap` (Megatron-Core's overlap_p2p_comm, used by NeMo recipes) the sends hide behind
    compute except for what exceeds it, and are exposed only during fill and drain
    (2·(pp-1) sends); without it (Megatron-LM 2022's blocking send/recv between chunks) every
    send is exposed. The 1F1B bubble is (pp-1)/v slots.
    """
    p2p = np.where(pp > 1, p2p_s, 0.0)
    sends = 2 * virtual_stages * p2p
    steady = np.maximum(stage_s, sends) if overlap else stage_s + sends
    bubble = (pp - 1) / virtual_stages * steady
    exposed = micro_batches * (steady - stage_s) + 2 * (pp - 1) * p2p
    return bubble, exposed


def largest_chunk_share(rank_layers: Any, virtual_stages: Any) -> Any:
    """The largest model chunk of a rank over the mean one: ceil(L/v) / (L/v) for L layers in
    v chunks (1 when they split evenly). `pipeline_s` prices fill and drain at the mean chunk
    ((pp-1)/v of a rank's slot); with 80 layers over pp 4 × v 16 the chunks hold 1 or 2
    layers and a 2-layer chunk is what each fill step waits for."""
    layers = np.maximum(np.asarray(rank_layers, dtype=np.float64), 1.0)
    v = np.asarray(virtual_stages, dtype=np.float64)
    return np.maximum(np.ceil(layers / v) * v / layers, 1.0)


#: Transfers on a stage's timeline per micro-batch when every send and receive blocks:
#: receive activations, send activations, receive gradients, send gradients.
BLOCKING_TRANSFERS_PER_MICROBATCH = 4
#: TP all-gathers of a micro-batch's activations per stage under DeepSpeed's partitioned
#: pipeline tensors: the received activations in forward; the stage's output and the received
#: gradients in backward (deepspeed/runtime/pipe/engine.py, PartitionedTensor.full()).
PARTITIONED_GATHERS_PER_MICROBATCH = 3


def blocking_pipeline_s(
    stage_s: Any, p2p_s: Any, tp_gather_s: Any, pp: Any, micro_batches: Any
) -> tuple[Any, Any]:
    """(bubble, exposed) seconds per step of a 1F1B pipeline whose sends block (DeepSpeed's
    PipelineEngine: no interleaving, p2p.send/recv wait before the next instruction).

    Each stage carries four transfers and three TP all-gathers per micro-batch on its own
    timeline, so they lengthen every slot, the fill and drain included: the bubble is (pp-1)
    of those longer slots and the exposed part is m of them.
    """
    per_microbatch = np.where(
        pp > 1,
        BLOCKING_TRANSFERS_PER_MICROBATCH * p2p_s
        + PARTITIONED_GATHERS_PER_MICROBATCH * tp_gather_s,
        0.0,
    )
    bubble = (pp - 1) * (stage_s + per_microbatch)
    return bubble, micro_batches * per_microbatch
