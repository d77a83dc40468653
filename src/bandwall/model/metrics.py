"""What the engine returns and what it takes besides the workload, cluster and layouts.

`Metrics` holds one array per quantity, one element per layout; `StepOptions` the strategy
settings shared by every layout of one evaluation. Kept apart from the composition in
`engine.py` so that readers of results (report, web, cli) need not import the cost terms.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from bandwall.model.layout import Mitigation, Recompute, Schedule
from bandwall.model.vocab import Stack

FloatArray = npt.NDArray[np.float64]


#: What a plan's assumptions section lists: the model's choices, one line per term.
ASSUMPTIONS = [
    "Fabric load balance: on static-ECMP fabrics each RDMA queue pair is hashed to one spine "
    "path and a synchronous collective runs at the pace of the busiest of the job's hashed "
    "links (balls into bins); adaptive routing (IB, Spectrum-X, EFA) balances; PFC-only fabrics "
    "pay head-of-line blocking in all-to-all (docs/congestion.md).",
    "Energy: GPU power linear from idle to TDP in the FLOP utilisation it achieves, waiting "
    "(exposed communication, bubbles, stragglers) at 15%; host and fat-tree network share per "
    "GPU; x PUE of the provider kind; location-based CO2 (bandwall catalog power).",
    "Compute: each layer priced kernel by kernel (GEMMs by shape and wave, FlashAttention by "
    "generation, memory-bound element-wise ops, launches by stack), times one in-step "
    "efficiency per precision fitted on a third of published runs (docs/model.md); MFU counts "
    "6 x matmul parameters + 6 x layers x heads x head_dim x seq_len FLOPs per token (causal "
    "attention counted once, as Megatron-Bridge and Meta count; PaLM appendix B counts 12 x); "
    "CNNs use measured per-sample FLOPs x 3.",
    "Rank order tp-cp-ep-dp-pp (Megatron-LM): TP inside a node, PP outermost; each group gets "
    "its share of its node's NICs.",
    "TP: 4 all-reduce-equivalents of the micro-batch activations per layer (forward and "
    "backward, sequence parallel), exposed unless tp_overlap > 0.",
    "CP: all-gather of K/V in forward and reduce-scatter of dK/dV in backward per layer, "
    "hidden behind attention compute where it fits.",
    "EP: dispatch and combine all-to-all in forward and backward per MoE layer, exposed unless "
    "ep_overlap > 0.",
    "PP: 1F1B or interleaved schedule; bubble = (pp-1)/v micro-batch slots; activations sent "
    "to the next stage overlap compute except during fill and drain.",
    "DP: gradients reduced once per step (ZeRO-1/2: reduce-scatter + all-gather; FSDP: "
    "all-gather twice and reduce-scatter per micro-batch), overlapped with the last "
    "micro-batch's backward; the last bucket is always exposed.",
    "DiLoCo/local-SGD: each data-parallel replica is a worker; the outer all-reduce happens "
    "every H steps, overlapped with the next H steps only with outer_overlap (streaming "
    "DiLoCo). Its effect on model quality is NOT modelled (DiLoCo reports "
    "parity at moderate H; check for your model).",
    "Memory: bf16 weights, grads in the reduction dtype, 12 B/param Adam state (sharded by "
    "ZeRO stage), activations 34·h bytes per token per layer with selective recomputation "
    "(Korthikanti et al. 2022), times in-flight micro-batches on the first stage, plus "
    "transients and 10% allocator overhead; device memory less 1.5 GiB usable.",
    "Stragglers: a fraction f of GPUs running x slower delays every synchronous step by x "
    "whenever at least one is in the job (probability 1-(1-f)^n); backup workers cost f/(1-f) "
    "extra compute instead; asynchronous outer steps (local SGD) cost only the mean, f*x.",
    "Failures: per-component rates (Llama 3 fleet) give the job MTBF; checkpoints of 14 B/param "
    "written at min(nodes x per-node rate, storage cap), every Daly-optimal interval, and read "
    "back at the same rate on restart; goodput by Daly's expected-wall-time formula with the "
    "provider's restart time plus that restore.",
    "Degraded fabric: failed scale-out links cut bandwidth to (L-K)/L with adaptive routing; "
    "with static ECMP hashing the most loaded survivor sets the pace (balls into bins).",
]


@dataclass(frozen=True)
class StepOptions:
    """Strategy settings shared by every layout of one evaluation."""

    global_batch: Any
    """Sequences (or images) per step; scalar or array."""
    recompute: Recompute = Recompute.AUTO
    reduce_dtype: str = "fp32"
    compression: str = "none"
    local_sgd_steps: int = 1
    overlap: bool = True
    sequence_parallel: bool = True
    tp_comm_overlap: bool = False
    pp_comm_overlap: bool = True
    flash_attention: bool = True
    ep_overlap: float = 0.0
    moe_dispatcher: str = "alltoall"
    """alltoall, or deepep: a node-deduplicating dispatch (`parallel.node_dispatch_share`)."""
    bucket_MiB: float | None = None
    """None: the stack's default (`data_parallel.default_bucket_MiB`)."""
    gemm_efficiency: float | None = None
    straggler_mitigation: Mitigation = Mitigation.NONE
    schedule: Schedule = Schedule.INTERLEAVED
    tokens: float | None = None
    epochs: float | None = None
    lora_rank: int | None = None
    offload_optimizer: bool = False
    eval_interval_steps: int | None = None
    eval_samples: int = 0
    diloco_workers: int | None = None
    outer_compression: str = "none"
    outer_overlap: bool = False
    outer_state_on_cpu: bool = False
    batch_follows_layout: bool = False
    """`global_batch` is a target: each layout rounds it to a multiple of dp × micro-batch (the
    default batch; a batch the user gives is kept and must divide)."""
    stack: Stack = Stack.MEGATRON
    overlap_grad_reduce: bool | None = None
    """None: the stack's default (`data_parallel.STACKS`)."""
    overlap_param_gather: bool | None = None
    reshard_after_forward: bool | None = None
    fp8_recipe: str | None = None
    attention_kernel: str | None = None
    """None: the stack's (`engine._attention_kernel`)."""
    fp8_weights: bool = False
    recompute_layers: int | None = None
    """Layers per model chunk fully recomputed (with Recompute.FULL); None: all."""
    recompute_modules: frozenset[str] = frozenset()
    """Megatron's recomputed submodules with Recompute.SELECTIVE (`vocab.RECOMPUTE_MODULES`);
    empty: core attention only."""
    cuda_graphs: bool = False
    compile: bool = False
    pp_first_stage_layers: int | None = None
    pp_last_stage_layers: int | None = None


#: Metrics that are whole numbers for a valid layout (printed and serialised as integers).
COUNT_FIELDS = frozenset(
    {"gpus", "tp", "pp", "cp", "ep", "etp", "dp", "zero", "micro_batch", "micro_batches"}
    | {"virtual_stages", "global_batch", "rule"}
)


@dataclass(frozen=True)
class Metrics:
    """Everything the model says about each layout; units in every name.

    The time terms compute_s + overlap_s + dp_s + tp_s + pp_s + ep_s + cp_s + bubble_s +
    straggler_s add up to step_time_s.
    """

    gpus: FloatArray
    tp: FloatArray
    pp: FloatArray
    cp: FloatArray
    ep: FloatArray
    etp: FloatArray
    dp: FloatArray
    zero: FloatArray
    micro_batch: FloatArray
    micro_batches: FloatArray
    """Micro-batches per step per pipeline (gradient-accumulation steps)."""
    virtual_stages: FloatArray
    global_batch: FloatArray
    rule: npt.NDArray[np.int64]
    """The first layout rule broken (0: valid); see `bandwall.model.layout.Rule`."""
    valid: npt.NDArray[np.bool_]
    fits: npt.NDArray[np.bool_]
    step_time_s: FloatArray
    step_time_s_p10: FloatArray
    """10th percentile of the step time: the model's error on published runs of this class
    (precision, dense/MoE; model/calibration.py). Every range below is drawn the same way."""
    step_time_s_p90: FloatArray
    compute_s: FloatArray
    exposed_comm_s: FloatArray
    dp_s: FloatArray
    tp_s: FloatArray
    pp_s: FloatArray
    ep_s: FloatArray
    cp_s: FloatArray
    bubble_s: FloatArray
    straggler_s: FloatArray
    overlap_s: FloatArray
    """Compute slowed by the communication it hides: NCCL kernels take SMs and HBM bandwidth
    from the GEMMs they overlap (compute.overlap_slowdown)."""
    comm_efficiency: FloatArray
    """compute_s / step_time_s."""
    compute_utilisation: FloatArray
    """Share of the step not spent waiting for data-parallel / DiLoCo synchronisation (the
    decentralized-training papers' metric): 1 - dp_s / step_time_s."""
    outer_sync_s: FloatArray
    """DiLoCo's outer synchronisation per inner step (inside dp_s)."""
    mfu: FloatArray
    """Model FLOPs per second over the dense peak of all GPUs, causal attention counted once
    (compute.model_flops_per_sample)."""
    mfu_p10: FloatArray
    mfu_p90: FloatArray
    tflops_per_gpu: FloatArray
    tokens_per_s: FloatArray
    samples_per_s: FloatArray
    dp_bytes_per_gpu: FloatArray
    """Bytes each GPU sends for data parallelism per step (ring-equivalent volume)."""
    memory_bytes: FloatArray
    """Bytes per GPU on the fullest (first) pipeline stage."""
    memory_weights_bytes: FloatArray
    memory_grads_bytes: FloatArray
    memory_optimizer_bytes: FloatArray
    memory_activations_bytes: FloatArray
    """Activations kept between forward and backward (micro-batches in flight)."""
    memory_transient_bytes: FloatArray
    """Alive only at the backward peak: a layer rebuilt and its gradients, logits at the loss,
    FSDP's gathered layers."""
    memory_capacity_bytes: FloatArray
    """Usable device memory."""
    recompute_share: FloatArray
    """Share of layers fully recomputed (AUTO recomputation)."""
    mtbf_s: FloatArray
    checkpoint_write_s: FloatArray
    checkpoint_interval_s: FloatArray
    restart_s: FloatArray
    goodput: FloatArray
    tokens: FloatArray
    """Training tokens in the budget (transformers; 0 for CNNs)."""
    samples: FloatArray
    """Sequences or images processed over the budget."""
    steps: FloatArray
    optimizer_s: FloatArray
    """Optimizer step per training step (inside compute_s): Adam's HBM traffic, or PCIe and
    host work when offloaded."""
    ideal_time_s: FloatArray
    """Time to train without failures."""
    eval_time_s: FloatArray
    """Evaluation passes over the whole run (included in ideal_time_s)."""
    time_to_train_s: FloatArray
    time_to_train_s_p10: FloatArray
    time_to_train_s_p90: FloatArray
    gpu_hours: FloatArray
    price_per_gpu_hour_usd: FloatArray
    gpu_cost_usd: FloatArray
    egress_bytes: FloatArray
    egress_usd: FloatArray
    cost_usd: FloatArray
    cost_usd_p10: FloatArray
    cost_usd_p90: FloatArray
    failure_cost_usd: FloatArray
    """What failures add to the cost: (time to train − ideal time) × GPUs × price."""
    power_W_per_gpu: FloatArray
    """Average facility power per GPU over a step, PUE included."""
    energy_kwh: FloatArray
    """Electricity of the whole job, failures and restarts included."""
    joules_per_token: FloatArray
    """Energy per trained token (per sample for CNNs)."""
    tokens_per_kwh: FloatArray
    energy_cost_usd: FloatArray
    """Electricity at the site's price (for owned clusters; rental prices already include it)."""
    co2_kg: FloatArray
    """Location-based CO2 of that electricity."""

    def row(self, i: int) -> dict[str, Any]:
        """One layout's metrics as plain Python numbers (whole counts as int)."""
        out: dict[str, Any] = {}
        for name in _FIELD_NAMES:
            value = np.asarray(getattr(self, name)).item(i)  # flat index, as reshape(-1)[i]
            if name in COUNT_FIELDS and isinstance(value, float) and value.is_integer():
                value = int(value)
            out[name] = value
        return out

    def take(self, index: Any) -> Metrics:
        """The rows at `index` (an integer array or a boolean mask)."""
        return Metrics(
            **{
                f.name: np.asarray(getattr(self, f.name)).reshape(-1)[index]
                for f in dataclasses.fields(self)
            }
        )

    def __len__(self) -> int:
        return int(np.size(self.step_time_s))


_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(Metrics))
