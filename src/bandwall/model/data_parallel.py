"""Data-parallel synchronisation: bucketed gradient all-reduce overlapped with backward
(DDP / ZeRO-1/2), FSDP's per-micro-batch gathers, compression and local SGD (DiLoCo)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bandwall.model.vocab import Stack

#: Share of a micro-batch's compute that is backward (backward ≈ 2 × forward).
BACKWARD_SHARE = 2 / 3
#: Bytes per kept element of a top-k sparsified gradient: a bf16 value and an int32 index.
TOPK_BYTES_PER_ELEMENT = 2 + 4


def grad_bytes_per_param(reduce_dtype: str, compression: str) -> float:
    """Bytes per gradient element on the wire: the reduction dtype, or 1 with int8.

    fp32 is what the common stacks reduce in by default: Megatron-LM with bf16 accumulates and
    all-reduces gradients in fp32 (`accumulate_allreduce_grads_in_fp32`, set for bf16 in
    megatron/training/arguments.py), PyTorch DDP under autocast keeps fp32 `.grad`, and
    torchtitan's FSDP2 `mixed_precision_reduce` is float32 (torchtitan/config/configs.py).
    """
    if compression == "int8":
        return 1.0
    return 4.0 if reduce_dtype == "fp32" else 2.0


def bucketed_all_reduce_s(grad_bytes: Any, bucket_MiB: Any, all_reduce_s: Any) -> Any:
    """All gradient buckets reduced one after another (PyTorch DDP, Li et al. 2020; Megatron's
    grad buckets): n buckets of the bucket size each pay the collective's latency, so small
    models are latency-bound. `all_reduce_s(size)` prices one bucket; an infinite bucket is
    one collective."""
    bucket = np.asarray(bucket_MiB, dtype=float) * 2**20
    count = np.maximum(np.ceil(grad_bytes / bucket), 1.0)
    return count * all_reduce_s(grad_bytes / count)


def overlap_window_s(microbatch_s: Any, pp: Any, virtual_stages: Any) -> Any:
    """Backward time the gradient reduction can hide behind.

    Without interleaving a stage's gradients are final only during its last micro-batch's
    backward (⅔ of a micro-batch). With v model chunks per stage, each chunk's gradients are
    final as soon as its last backward ends, so the earlier chunks reduce during the whole
    cooldown of (pp-1)/v slots (Megatron-Core's overlap_grad_reduce: "exposes only one DP
    communication chunk", NeMo performance guide).
    """
    cooldown = np.where(virtual_stages > 1, (pp - 1) / virtual_stages, 0.0)
    return BACKWARD_SHARE * microbatch_s * (1 + cooldown)


def ddp_exposed_s(reduce_s: Any, backward_window_s: Any, last_bucket_s: Any) -> Any:
    """Exposed data-parallel time with bucketed reduction overlapped with backward (PyTorch
    DDP, Li et al. 2020): what the backward window cannot hide, and never less than the last
    bucket, which only starts once backward is done."""
    return np.maximum(reduce_s - backward_window_s, last_bucket_s)


#: PyTorch DDP's `bucket_cap_mb` default (torch/nn/parallel/distributed.py): the bucket of
#: DDP and of FSDP2-stack ZeRO-1/2 layouts.
DDP_BUCKET_MiB = 25.0
#: Megatron-Core's default bucket, in gradient *elements*: max(40M, 1M × dp) ("make buckets
#: larger [at large dp] to ensure that chunks used in NCCL ring-reduce implementations are
#: large enough to remain bandwidth-bound", megatron/core/distributed/
#: distributed_data_parallel.py); without --overlap-grad-reduce one bucket holds everything.
MEGATRON_BUCKET_ELEMENTS = 40e6
MEGATRON_BUCKET_ELEMENTS_PER_DP = 1e6
#: DeepSpeed's `zero_optimization.reduce_bucket_size` default, in elements (DeepSpeed
#: configuration docs, "reduce_bucket_size: 500000000").
DEEPSPEED_BUCKET_ELEMENTS = 5e8


def default_bucket_MiB(stack: Stack, dp: Any, grad_bytes: float, overlap_grad_reduce: Any) -> Any:
    """The gradient bucket a stack uses when the request names none, in MiB per layout.

    The bucket size sets how many collectives the gradient reduction pays latency for, and
    stacks differ by 30x: PyTorch DDP 25 MiB, Megatron-Core max(40M, 1M·dp) elements (160 MB
    of fp32 gradients at dp ≤ 40), DeepSpeed 5e8 elements."""
    dp = np.asarray(dp, dtype=float)
    if stack is Stack.MEGATRON:
        elements = np.maximum(MEGATRON_BUCKET_ELEMENTS, MEGATRON_BUCKET_ELEMENTS_PER_DP * dp)
        return np.where(overlap_grad_reduce, elements * grad_bytes / 2**20, np.inf)
    if stack is Stack.DEEPSPEED:
        return np.full(dp.shape, DEEPSPEED_BUCKET_ELEMENTS * grad_bytes / 2**20)
    return np.full(dp.shape, DDP_BUCKET_MiB)


def last_bucket_share(bucket_MiB: Any, grad_bytes: Any) -> Any:
    """Share of the gradients in the last bucket (1 when they fit in one)."""
    return np.minimum(1.0, bucket_MiB * 2**20 / np.maximum(grad_bytes, 1.0))


def fsdp_exposed_s(
    per_microbatch_s: Any, window_s: Any, layers_per_stage: Any, micro_batches: Any
) -> Any:
    """FSDP/ZeRO-3 per step: every micro-batch gathers weights (forward and backward) and
    reduce-scatters gradients, prefetched layer by layer behind compute; at least one layer's
    share is never hidden (Zhao et al. 2023, PyTorch FSDP)."""
    return micro_batches * np.maximum(
        per_microbatch_s - window_s, per_microbatch_s / np.maximum(layers_per_stage, 1.0)
    )


def ring_share(ranks: Any) -> Any:
    """(n-1)/n: the share of a buffer each rank sends in a ring reduce-scatter/all-gather."""
    return (ranks - 1) / ranks


#: Bytes per pseudo-gradient element on the wire by outer compression (DiLoCo reduces fp32;
#: OpenDiLoCo/INTELLECT-1 int8; Streaming DiLoCo down to 4 bits).
OUTER_BYTES = {"none": 4.0, "fp16": 2.0, "int8": 1.0, "int4": 0.5}


def outer_sync_exposed_s(
    outer_sync_s: Any, local_sgd_steps: int, inner_step_s: Any, overlap: bool
) -> Any:
    """Exposed seconds per inner step of DiLoCo's outer synchronisation, once every H steps.

    Blocking (DiLoCo, Douillard et al. 2023): the whole sync every H steps. Streaming
    (Douillard et al. 2025): fragments sync while the next H inner steps compute, so only what
    exceeds H steps of compute is exposed.
    """
    if overlap:
        return np.maximum(outer_sync_s - local_sgd_steps * inner_step_s, 0.0) / local_sgd_steps
    return outer_sync_s / local_sgd_steps


@dataclass(frozen=True)
class StackBehaviour:
    """How a training framework overlaps its data-parallel communication by default."""

    overlap_grad_reduce: bool
    """Gradients reduced bucket by bucket during the last backward."""
    overlap_param_gather: bool
    """Sharded parameters gathered bucket by bucket during the forward that needs them
    (ZeRO-1/2: after the optimizer step; ZeRO-3: prefetched layer by layer)."""
    reshard_after_forward: bool
    """ZeRO-3: gathered weights freed after forward and gathered again for backward."""
    reduce_every_microbatch: bool
    """ZeRO-3: gradients reduce-scattered after every micro-batch's backward (no local
    accumulation of full gradients)."""
    source: str
    blocking_pipeline: bool = False
    """Pipeline sends block the stage (no overlap with compute), and with TP the activations
    travel as 1/tp slices that the receiver all-gathers (`pipeline.blocking_pipeline_s`)."""
    grad_accumulate_bytes: float = 0.0
    """HBM bytes per parameter per micro-batch of a gradient accumulation that runs as its own
    kernels (ZeRO 0-2); 0 where it is fused into the weight-gradient GEMM's epilogue."""
    pipeline_all_reduce: bool = False
    """Under pipeline parallelism gradients are all-reduced even when the optimizer is sharded
    (ZeRO-1), and the updated shards then all-gathered."""
    pipeline_keeps_gathered: bool = False
    """ZeRO-3 under pipeline parallelism keeps the gathered weights between forward and
    backward and reduces gradients once, after the last micro-batch."""
    eager_kernels: bool = False
    """Kernels issued one by one (eager PyTorch) unless --compile; else fused (TransformerEngine
    and apex layers, XLA)."""
    sdpa_attention: bool = False
    """Attention through PyTorch's scaled_dot_product_attention, whose flash backend is the
    FlashAttention-2 PyTorch vendors (FA3 is a separate package): FA2 on Hopper."""
    op_level_selective: bool = False
    """`--recompute selective` is op-level selective checkpointing (every other matmul and the
    element-wise kernels rerun), not Megatron's attention core."""
    fp8_transformer_engine: bool = True
    """fp8 through TransformerEngine: weight casts cached over a step's micro-batches and the
    linears' inputs kept in fp8; otherwise (torchao float8, XLA's fp8 dot_general) weights
    are cast every micro-batch and inputs kept in bf16."""


#: The stacks' defaults; a request's overlap flags override them.
STACKS = {
    Stack.MEGATRON: StackBehaviour(
        overlap_grad_reduce=True,
        overlap_param_gather=True,
        reshard_after_forward=True,
        reduce_every_microbatch=True,
        source="NeMo 2 / Megatron-Bridge performance recipes set DistributedDataParallelConfig("
        "overlap_grad_reduce=True, overlap_param_gather=True) with the distributed optimizer "
        "(ZeRO-1); Megatron-LM's own command-line defaults are off. Megatron-FSDP (ZeRO-3) "
        "reshards after forward and reduce-scatters per micro-batch.",
    ),
    Stack.FSDP2: StackBehaviour(
        overlap_grad_reduce=True,
        overlap_param_gather=True,
        reshard_after_forward=True,
        reduce_every_microbatch=True,
        source="torchtitan parallelize: fully_shard per block with reshard_after_forward=True "
        "(its default policy without PP), FSDP2 implicit forward prefetch and one-layer "
        "backward prefetch; reduce-scatter in every backward (torchtitan/distributed). Under "
        "PP its default reshard policy keeps the gathered weights and the pipeline schedule "
        "syncs gradients after the last micro-batch (torch.distributed.pipelining). Eager "
        "PyTorch, SDPA attention, op-level selective AC, torchao float8.",
        pipeline_keeps_gathered=True,
        eager_kernels=True,
        sdpa_attention=True,
        op_level_selective=True,
        fp8_transformer_engine=False,
    ),
    Stack.MAXTEXT: StackBehaviour(
        overlap_grad_reduce=True,
        overlap_param_gather=True,
        reshard_after_forward=True,
        reduce_every_microbatch=True,
        source="MaxText on GPU shards weights, gradients and optimizer state over its 'fsdp' "
        "mesh axis (GSPMD): XLA all-gathers each scanned layer's weights in forward and again "
        "in backward and reduce-scatters its gradients, scheduled behind compute by the "
        "latency-hiding scheduler its GPU recipes enable "
        "(--xla_gpu_enable_latency_hiding_scheduler=true). Kernels fused by XLA; cuDNN flash "
        "attention (attention=cudnn_flash_te); fp8 through XLA's dot_general, weights cast "
        "inside each step. Under PP taken to keep gathered weights as torchtitan does (not "
        "checked against MaxText's pipeline_fsdp_ag_once).",
        pipeline_keeps_gathered=True,
        fp8_transformer_engine=False,
    ),
    Stack.DEEPSPEED: StackBehaviour(
        overlap_grad_reduce=False,
        overlap_param_gather=False,
        reshard_after_forward=True,
        reduce_every_microbatch=True,
        source="DeepSpeed configuration docs: zero_optimization.overlap_comm defaults to false "
        "for stages 1-2 (true for stage 3, which also prefetches parameters); stages 1-2 "
        "all-gather the updated partitions inside step(). Pipeline: deepspeed/runtime/pipe/"
        "engine.py runs TrainSchedule's 1F1B with blocking p2p.send/recv, PartitionedTensor "
        "activations (.full() all-gathers them over the TP group once in forward and twice in "
        "backward) and reduces gradients with allreduce_gradients after the last micro-batch; "
        "the bf16 optimizer (runtime/bf16_optimizer.py, update_hp_grads) adds each "
        "micro-batch's bf16 gradients into fp32 copies as separate kernels.",
        blocking_pipeline=True,
        # read the bf16 gradient (2 B), write and read its fp32 cast (4 + 4), read and write
        # the fp32 accumulator (4 + 4)
        grad_accumulate_bytes=18.0,
        pipeline_all_reduce=True,
    ),
}


def overlap_flags(
    stack: Stack,
    zero: Any,
    *,
    overlap: bool,
    grad_reduce: bool | None,
    param_gather: bool | None,
) -> tuple[Any, Any]:
    """(overlap grad reduce, overlap param gather) per layout: the request's flags, else the
    stack's defaults (DeepSpeed's depend on the ZeRO stage); `overlap=False` turns both off."""
    b = STACKS[stack]
    if stack is Stack.DEEPSPEED:
        default_grad = default_param = np.asarray(zero) >= 3
    else:
        default_grad = np.asarray(b.overlap_grad_reduce)
        default_param = np.asarray(b.overlap_param_gather)
    grad = default_grad if grad_reduce is None else np.asarray(grad_reduce)
    param = default_param if param_gather is None else np.asarray(param_gather)
    return grad & overlap, param & overlap


#: Share of a micro-batch's compute that is its forward pass.
FORWARD_SHARE = 1 / 3


def zero12_exposed_s(
    reduce_s: Any,
    gather_s: Any,
    backward_window_s: Any,
    forward_window_s: Any,
    last_bucket_share: Any,
    *,
    overlap_grad_reduce: Any,
    overlap_param_gather: Any,
) -> Any:
    """Exposed DP seconds per step of DDP (ZeRO-0: `gather_s` = 0) or a sharded optimizer
    (ZeRO-1/2). Gradients are reduced (all-reduce, or reduce-scatter when sharded) bucket by
    bucket during the last backward, so what the backward window cannot hide is exposed and
    never less than the last bucket; the updated parameters are all-gathered after the
    optimizer step, bucket by bucket during the next forward with --overlap-param-gather
    (never less than the first bucket) or all exposed (Megatron-Core distributed optimizer;
    Li et al. 2020 for DDP)."""
    grads = np.where(
        overlap_grad_reduce,
        np.maximum(reduce_s - backward_window_s, reduce_s * last_bucket_share),
        reduce_s,
    )
    params = np.where(
        overlap_param_gather,
        np.maximum(gather_s - forward_window_s, gather_s * last_bucket_share),
        gather_s,
    )
    return grads + params
