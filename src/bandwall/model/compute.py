"""Compute time of one micro-batch on one GPU.

Training FLOPs per token follow the standard accounting (Narayanan et al. 2021; PaLM
appendix B): 6 × matmul parameters a token uses + 12 × layers × heads × head_dim × seq_len for
attention. CNNs take their measured forward FLOPs × 3 (backward ≈ 2 × forward).
"""

from __future__ import annotations

from typing import Any

from bandwall.workloads import Transformer, Workload

#: Full recomputation reruns the forward pass in backward: 4 passes' worth instead of 3
#: (Korthikanti et al. 2022, §5).
FULL_RECOMPUTE_COMPUTE_FACTOR = 4 / 3


def training_flops_per_sample(w: Workload) -> float:
    """FLOPs of forward + backward for one sample (a sequence, or an image)."""
    if isinstance(w, Transformer):
        return w.flops_per_token * w.seq_len
    return w.flops_per_sample


def sustained_flops(peak_flops: float, efficiency: float, virtualization_overhead: float) -> float:
    """FLOP/s one GPU sustains: dense peak × kernel efficiency, less what a hypervisor takes."""
    return peak_flops * efficiency * (1 - virtualization_overhead)


def microbatch_compute_s(
    flops_per_sample: float,
    micro_batch: Any,
    model_parallel_ways: Any,
    sustained_flops_per_s: float,
    recompute_share: Any,
) -> Any:
    """Seconds one GPU computes one micro-batch: its 1/(tp·cp·pp) share of the FLOPs at the
    sustained rate, plus one extra forward pass over the share of layers fully recomputed."""
    base = flops_per_sample * micro_batch / model_parallel_ways / sustained_flops_per_s
    return base * (1 + recompute_share * (FULL_RECOMPUTE_COMPUTE_FACTOR - 1))
