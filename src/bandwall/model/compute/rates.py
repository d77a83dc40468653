"""What one GPU sustains, as the kernel model needs it: `GpuRates` and `gpu_rates`.

Peaks come from the datasheet (`catalog.GpuSpec`), achieved rates from measurements
(`catalog.GpuPerf`, catalog/data/gpu_perf.toml), and the clock a GPU sustains under a power cap
from a DVFS power model whose two constants are fitted on the power-cap rows of
catalog/data/kernel_bench.csv (fit third only; `python benchmarks/kernel_model.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import numpy as np

from bandwall.catalog.models import GpuSpec, Precision
from bandwall.catalog.perf import GpuPerf


class LaunchMode(StrEnum):
    """How the framework issues kernels: what each costs the CPU and how many there are."""

    EAGER = "eager"
    """PyTorch eager: unfused norms/RoPE/activations, one CPU launch per op."""
    FUSED = "fused"
    """Fused kernels (Megatron-LM/TransformerEngine, torch.compile), launched by the CPU."""
    GRAPHS = "graphs"
    """Fused kernels replayed from CUDA graphs: no CPU cost per kernel."""


#: CPU time per kernel launch by mode. Eager: PyTorch's dispatcher + cudaLaunchKernel, 2-7 µs
#: per op (pytorch/pytorch#41383; catalog `kernel_launch_us`); fused: the same launch path with
#: fewer, larger kernels; CUDA graphs: the whole graph is one launch (NVIDIA, "Getting Started
#: with CUDA Graphs", 2019: per-kernel overhead disappears from the CPU side).
GRAPH_HOST_S = 0.0
#: GPU time of an empty kernel: a one-element Triton kernel on H100 takes 2 µs in a trace
#: (pytorch/ao torchao/testing/training/roofline_utils.py, KERNEL_LAUNCH_OVERHEAD_SEC, 2026).
#: Every kernel pays it on top of its work: small kernels are latency-bound.
KERNEL_GPU_S = 2.0e-6

#: DVFS power model (see `sustained_clock_factor`): the share of the power limit that does not
#: scale with the SM clock (leakage, HBM, board), and the voltage floor as a share of the
#: voltage at the top clock. Fitted on the power-cap rows of kernel_bench.csv (fit third; the
#: held-out rows are printed by benchmarks/kernel_model.py).
STATIC_POWER_SHARE = 0.30
VOLTAGE_FLOOR = 0.70
#: Lowest clock factor a deep cap leaves: the RTX 3090 rows measure 0.14 at 29% of its power
#: limit (llmgarage.ai); below ~40% of TDP the DVFS model above does not hold.
MIN_CLOCK_FACTOR = 0.10

#: GEMM tiles cuBLAS/CUTLASS choose from, per architecture (CUTLASS profiler tile names; NVIDIA
#: "Matrix Multiplication Background User's Guide" §4: 256x128 and 128x256 are the largest on
#: Ampere/Hopper; Blackwell's 2-SM MMA pairs keep 128x256 per SM; hipBLASLt macro tiles of 256x256
#: on CDNA3, ROCm blog "measuring max achievable FLOPs").
GEMM_TILES: dict[str, tuple[tuple[int, int], ...]] = {
    "ampere": ((256, 128), (128, 256), (128, 128), (128, 64), (64, 128), (64, 64)),
    "ada": ((256, 128), (128, 256), (128, 128), (128, 64), (64, 128), (64, 64)),
    "hopper": ((128, 256), (256, 128), (128, 128), (128, 64), (64, 256), (64, 128)),
    "blackwell": ((128, 256), (256, 128), (128, 128), (128, 64), (64, 128)),
    "cdna3": ((256, 256), (256, 128), (128, 128), (128, 64)),
    # CDNA4 keeps 256x256 output tiles for its fastest GEMMs (HipKittens, arXiv 2511.08083)
    "cdna4": ((256, 256), (256, 128), (128, 128), (128, 64)),
}
#: The FlashAttention generation each architecture runs by default (FA2 on Ampere/Ada/CDNA via
#: CK, FA3 on Hopper, FA4 on Blackwell: Dao-AILab/flash-attention README).
DEFAULT_ATTENTION_KERNEL = {
    "ampere": "fa2",
    "ada": "fa2",
    "cdna3": "fa2",
    "cdna4": "fa2",
    "hopper": "fa3",
    "blackwell": "fa4",
}
#: Catalog attention_efficiency of the GPU each FlashAttention kernel's constants were measured
#: on (A100 for FA2, H100 for FA3, B200 for FA4): other GPUs scale by their own value over it.
REFERENCE_ATTENTION_EFFICIENCY = {"fa2": 0.58, "fa3": 0.50, "fa4": 0.50}


@dataclass(frozen=True)
class GpuRates:
    """What one GPU sustains: peaks, achieved efficiencies, clocks and launch costs.

    The first nine fields are the roofline constants the legacy `layer_times` reads; the rest
    feed the kernel model and default to values that keep the legacy behaviour.
    """

    peak_flops: float
    """Dense peak FLOP/s at the training precision (legacy path)."""
    gemm_efficiency: float
    """Share of peak large GEMMs reach (legacy path: with TRAINING_GEMM_FACTOR)."""
    attention_efficiency: float
    """Share of peak FlashAttention forward + backward reaches (legacy path)."""
    hbm_Bps: float
    """Achieved HBM bandwidth, bytes/s (STREAM triad)."""
    sm_count: int
    tile_m: int
    """Largest output tile (legacy wave quantisation)."""
    tile_n: int
    kernel_launch_s: float
    """CPU time per kernel launch."""
    virtualization_overhead: float = 0.0
    arch: str = "hopper"
    """Architecture family: ampere, ada, hopper, blackwell, cdna3, cdna4 (tiles, attention)."""
    bf16_peak_flops: float = 0.0
    """Dense bf16 peak; 0 means `peak_flops`."""
    fp8_peak_flops: float = 0.0
    """Dense fp8 peak; 0 means no fp8 units (fp8 GEMMs run at the bf16 peak)."""
    gemm_large_efficiency: float = 0.0
    """Share of the bf16 peak a large GEMM's main loop reaches with the kernel model's tile,
    wave and K effects taken out (0: `gemm_efficiency`)."""
    fp8_gemm_efficiency: float = 0.0
    """The same for fp8 GEMMs against the fp8 peak (0: the bf16 value)."""
    fp4_peak_flops: float = 0.0
    """Dense NVFP4 peak; 0 means no fp4 units (fp4 GEMMs run at the fp8 rate)."""
    fp4_gemm_efficiency: float = 0.0
    """The same for NVFP4 GEMMs against the fp4 peak (0: the fp8 value)."""
    clock_factor: float = 1.0
    """Sustained SM clock under the power cap relative to the default limit."""
    kernel_gpu_s: float = KERNEL_GPU_S
    """GPU time every kernel costs beyond its work (launch latency, ramp, tail)."""
    launch_mode: str = LaunchMode.FUSED.value
    attention_kernel: str = "fa3"
    attention_scale: float = 1.0
    """This GPU's FlashAttention efficiency relative to the reference GPU of its kernel."""
    tdp_W: float = 0.0
    power_cap_W: float = 0.0
    """0: the default power limit (TDP)."""

    @property
    def gemm_flops(self) -> float:
        """Legacy large-GEMM rate: peak × efficiency, less virtualisation."""
        return self.peak_flops * self.gemm_efficiency * (1 - self.virtualization_overhead)

    @property
    def bf16_flops(self) -> float:
        return self.bf16_peak_flops or self.peak_flops

    @property
    def host_launch_s(self) -> float:
        """CPU time per kernel in this launch mode."""
        return GRAPH_HOST_S if self.launch_mode == LaunchMode.GRAPHS else self.kernel_launch_s

    def gemm_rate(self, fp8: bool | int) -> float:
        """FLOP/s a large GEMM's main loop sustains (clock and virtualisation included), by
        operand format code (`gemm.FORMAT_CODE`): 0 bf16, 1 (or True) fp8, 2 NVFP4."""
        eff_bf16 = self.gemm_large_efficiency or self.gemm_efficiency
        eff_fp8 = self.fp8_gemm_efficiency or eff_bf16
        if fp8 >= 2 and self.fp4_peak_flops:
            rate = self.fp4_peak_flops * (self.fp4_gemm_efficiency or eff_fp8)
        elif fp8 and self.fp8_peak_flops:
            rate = self.fp8_peak_flops * eff_fp8
        else:
            rate = self.bf16_flops * eff_bf16
        return rate * self.clock_factor * (1 - self.virtualization_overhead)

    @property
    def stream_Bps(self) -> float:
        """HBM bytes/s a streaming kernel sustains (HBM clocks do not follow the SM clock)."""
        return self.hbm_Bps * (1 - self.virtualization_overhead)

    def with_(self, **changes: Any) -> GpuRates:
        return replace(self, **changes)


def sustained_clock_factor(power_cap_W: Any, tdp_W: float) -> Any:
    """SM clock (hence compute throughput) sustained under `power_cap_W`, relative to the
    clock at the default limit `tdp_W`, for compute-bound kernels that run at the limit.

    Dynamic power is P ∝ f·V², with V ∝ f above a floor V_min and V = V_min below it
    (DVFS; e.g. NVIDIA's V-F curves). A share STATIC_POWER_SHARE of the limit does not scale
    with f. Inverting P(f) = cap gives f/f_max = p^(1/3) while V is above its floor, and
    p / v0² below it, where p = (cap − static) / (TDP − static) and v0 = VOLTAGE_FLOOR.
    Measured: RTX 3090 prefill loses 6% at 86% of its limit, 15% at 71%, 40% at 57%
    (llmgarage.ai, 2026); GB300 at 500 of 1,400 W runs cuBLAS at ~1/3 of its throughput (triton
    PR 2023). The model holds within ~2% for caps of 70-100% of TDP (MLPerf MaxQ range) and is
    optimistic below ~60% (+21% at 57%, ×2 at 36%), where clocks collapse faster than DVFS.
    The constants were chosen from the DVFS argument and checked on these six rows (too few
    for a fit third): they are reported as checked, not held out.

    >>> float(sustained_clock_factor(700.0, 700.0))
    1.0
    """
    cap = np.asarray(power_cap_W, dtype=np.float64)
    static = STATIC_POWER_SHARE * tdp_W
    p = np.clip((cap - static) / (tdp_W - static), 0.0, 1.0)
    v0 = VOLTAGE_FLOOR
    return np.maximum(np.where(p >= v0**3, np.cbrt(p), p / v0**2), MIN_CLOCK_FACTOR)


def gpu_rates(
    perf: GpuPerf,
    gpu: GpuSpec,
    *,
    precision: Precision | str,
    power_cap_W: float | None = None,
    virtualization_overhead: float = 0.0,
    gemm_efficiency: float | None = None,
    launch_mode: LaunchMode | str = LaunchMode.FUSED,
) -> GpuRates:
    """Everything the kernel model needs for one GPU model.

    `precision` sets `peak_flops` (the legacy path's one peak); the kernel model reads the bf16,
    fp8 and fp4 peaks separately and runs in fp8 (fp4) only what its recipe runs in it.
    `gemm_efficiency` overrides the large-GEMM efficiency (a user's own measurement).
    """
    prec = Precision(precision)
    bf16 = gpu.peak_flops(Precision.BF16)
    fp8 = gpu.peak_TFLOPS.get(Precision.FP8, 0.0) * 1e12
    fp4 = gpu.peak_TFLOPS.get(Precision.FP4, 0.0) * 1e12
    cap = float(power_cap_W) if power_cap_W else 0.0
    clock = float(sustained_clock_factor(cap, gpu.tdp_W)) if 0 < cap < gpu.tdp_W else 1.0
    arch = perf.arch
    kernel = DEFAULT_ATTENTION_KERNEL[arch]
    large = perf.large_gemm_efficiency("bf16", gemm_efficiency)
    return GpuRates(
        peak_flops=gpu.peak_flops(prec),
        gemm_efficiency=gemm_efficiency or perf.gemm_efficiency,
        attention_efficiency=perf.attention_efficiency,
        hbm_Bps=gpu.memory_bandwidth_TBps * 1e12 * perf.hbm_efficiency,
        sm_count=perf.sm_count,
        tile_m=perf.gemm_tile[0],
        tile_n=perf.gemm_tile[1],
        kernel_launch_s=perf.kernel_launch_us * 1e-6,
        virtualization_overhead=virtualization_overhead,
        arch=arch,
        bf16_peak_flops=bf16,
        fp8_peak_flops=fp8,
        gemm_large_efficiency=large,
        fp8_gemm_efficiency=perf.large_gemm_efficiency("fp8", gemm_efficiency),
        fp4_peak_flops=fp4,
        fp4_gemm_efficiency=perf.large_gemm_efficiency("fp4", gemm_efficiency),
        clock_factor=clock,
        launch_mode=LaunchMode(launch_mode).value,
        attention_kernel=kernel,
        attention_scale=perf.attention_efficiency / REFERENCE_ATTENTION_EFFICIENCY[kernel],
        tdp_W=gpu.tdp_W,
        power_cap_W=cap,
    )
