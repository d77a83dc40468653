"""GEMM and GEMV time from the shape one GPU runs: tiles, waves, K depth and bytes.

A GEMM C[m×n] = A[m×k]·B[k×n] is cut into output tiles; each tile is one CTA on one SM and the
CTAs run in waves of one per SM (NVIDIA, "Matrix Multiplication Background User's Guide" §3-4).
For each candidate tile (`rates.GEMM_TILES`) and split-K factor the model prices

    waves × (k/split + K0) × 2·tm·tn / (per-SM rate × tile_efficiency(tm, tn))

and keeps the fastest, as cuBLAS's heuristics pick among several kernels: a tail wave costs a
whole wave (wave quantisation), a partly empty tile costs a whole tile (tile quantisation), and
each CTA pays its pipeline fill and epilogue, K0 reduction steps (shallow K). Smaller tiles
reuse less data per FLOP: tile_efficiency = I/(I + I0) normalised to the largest tile, with the
tile's arithmetic intensity I = tm·tn/(tm + tn). A GEMM is never faster than streaming A, B and
C through HBM (the roofline), and every kernel pays `rates.kernel_gpu_s`.

K0 and I0 are the model's two GEMM constants, fitted on the fit third of the GEMM rows of
catalog/data/kernel_bench.csv (benchmarks/kernel_model.py prints fit and held-out errors).
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import numpy as np

from bandwall.model.compute.rates import GEMM_TILES, GpuRates
from bandwall.model.distinct import distinct_broadcast

#: Reduction steps (in K elements) each CTA spends outside its steady main loop: filling the
#: multistage pipeline and writing the tile back. Fitted (see module docstring).
GEMM_K0 = 512.0
#: Arithmetic intensity (tm·tn/(tm+tn)) at which a tile reaches half the tensor-core rate its
#: shared-memory feed allows. Fitted (see module docstring).
GEMM_TILE_I0 = 16.0
#: Split-K factors cuBLAS may use when the output has too few tiles to fill the SMs.
SPLIT_K = (1.0, 2.0, 4.0)
#: Bytes per element of the partial sums a split-K GEMM writes and reduces (fp32).
SPLIT_K_PARTIAL_BYTES = 4.0

#: Share of the STREAM bandwidth a weight-streaming GEMV reaches, by weight format. bf16/fp8:
#: cuBLAS GEMV streams like a triad. int4: Marlin reaches ~3.87x of fp16 at batch 1-16 for a
#: 4x smaller weight (Frantar et al. 2024, "MARLIN", fig. 1) → 0.97. int8 weight-only:
#: TensorRT-LLM's kernels are taken at the same share (no public microbenchmark found; an
#: estimate, to revisit with serving's validation).
#: NVFP4 (fp4): taken at int4's share (a 4-bit weight expanded in registers; no public NVFP4
#: GEMV microbenchmark found: an estimate).
WEIGHT_STREAM_SHARE = {
    "bf16": 1.0,
    "fp16": 1.0,
    "fp8": 1.0,
    "fp4": 0.97,
    "int8": 0.97,
    "int4": 0.97,
}
#: Rows below which a GEMM runs as a memory-bound GEMV kernel (cuBLAS gemv / TensorRT-LLM
#: weight-only GEMV for batch < 16; Marlin's batch 1-16 plateau).
GEMV_MAX_M = 16
#: Bytes per weight element. NVFP4: a 4-bit e2m1 value plus one e4m3 scale per 16 elements
#: (0.5 + 1/16; NVIDIA, "Introducing NVFP4", 2025-06; the per-tensor fp32 scale is negligible).
NVFP4_BYTES = 0.5 + 1.0 / 16.0
WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp4": NVFP4_BYTES, "int8": 1.0, "int4": 0.5}
#: GEMM operand formats as the numeric codes the kernel model's flag arrays carry (a boolean
#: fp8 flag is code 1): the tensor-core rate and the operand bytes follow the code.
FORMAT_CODE = {"bf16": 0, "fp8": 1, "fp4": 2}


@cache
def _candidates(arch: str, i0: float, k0: float) -> tuple[np.ndarray, ...]:
    """Per kernel choice (tile × split-K), flat arrays: tm, tn, split, the seconds-per-FLOP
    coefficient 2·tm·tn/efficiency, and the split-K partial-sum bytes per output element."""
    tiles = GEMM_TILES[arch]
    intensity = np.array([tm * tn / (tm + tn) for tm, tn in tiles])
    rel = intensity / (intensity + i0)
    rel = rel / rel.max()
    rows = [(a, b, s, e) for (a, b), e in zip(tiles, rel, strict=True) for s in SPLIT_K]
    tm, tn, split, eff = (np.array(c, dtype=np.float64) for c in zip(*rows, strict=True))
    work = 2.0 * tm * tn / eff
    partial = np.where(split > 1, 2.0 * SPLIT_K_PARTIAL_BYTES * split, 0.0)
    return tm, tn, split, work, partial, np.full_like(split, k0)


def gemm_compute_s(
    m: Any, n: Any, k: Any, rates: GpuRates, *, fp8: Any, count: Any = 1.0, spread: Any = 0.0
) -> Any:
    """Tensor-core time of `count` m×n×k GEMMs run as one (grouped) kernel, best tile.
    `fp8` is the operand format code (`FORMAT_CODE`: 0 bf16, 1 or True fp8, 2 NVFP4) and may be
    an array (one per GEMM) so a whole layer's GEMMs price in one call.
    `spread`: the standard deviation of the rows around `m` across the group (a MoE layer's
    tokens per expert under real routing), so each group pads its own row count to whole
    tiles (`expected_tiles`); 0 prices every group at exactly `m` rows."""
    columns = [np.asarray(x, dtype=np.float64) for x in (m, n, k, count, fp8, spread)]
    shape = np.broadcast(*columns).shape  # (np.broadcast_shapes costs microseconds)
    size = math.prod(shape)
    if size > DEDUPE_ABOVE:
        # a layout search repeats few shapes many times: price each distinct shape once
        found = distinct_broadcast(columns, shape, share=0.75, decline=0.75, sample=4096)
        if found is not None:
            u, inverse = found
            t = _gemm_compute_s(u[0], u[1], u[2], rates, fp8=u[4], count=u[3], spread=u[5])
            return t[inverse].reshape(shape)
    return _gemm_compute_s(m, n, k, rates, fp8=fp8, count=count, spread=spread)


def expected_tiles(m: Any, tile: Any, spread: Any) -> Any:
    """Expected whole tiles E[ceil(X / tile)] for X ~ Normal(m, spread²) rows: the boundary
    below m and the one above it each shift a share of the groups by one tile (a logistic
    approximation of the normal CDF, Bowling et al. 2009: Φ(z) ≈ 1/(1 + e^(-1.702 z))). With
    no spread, ceil(m / tile). Tokens routed to experts vary from expert to expert, so a
    grouped GEMM's padding is the average of each group's, not that of the mean group:
    pricing every expert at the mean made serving throughput fall 10% from 870 to 880 slots
    (Mixtral 8x7B, the mean crossing a tile edge) and rise again after."""
    x = np.asarray(m, dtype=np.float64) / tile
    exact = np.ceil(x)
    s = np.asarray(spread, dtype=np.float64) / tile
    if not np.any(s > 0):
        return exact
    j0 = np.floor(x)
    safe = np.maximum(s, 1e-9)
    below = 1.0 / (1.0 + np.exp(np.clip(-1.702 * (j0 - x) / safe, -60, 60)))
    above = 1.0 / (1.0 + np.exp(np.clip(-1.702 * (x - j0 - 1) / safe, -60, 60)))
    smooth = j0 + 1.0 - below + above
    return np.where(s > 0, np.maximum(smooth, np.minimum(exact, 1.0)), exact)


#: Elements above which gemm_compute_s prices distinct shapes only.
DEDUPE_ABOVE = 4096


def _gemm_compute_s(
    m: Any, n: Any, k: Any, rates: GpuRates, *, fp8: Any, count: Any, spread: Any = 0.0
) -> Any:
    tm, tn, split, work, partial, k0 = _candidates(rates.arch, GEMM_TILE_I0, GEMM_K0)
    m_ = np.asarray(m, dtype=np.float64)[..., None]
    n_ = np.asarray(n, dtype=np.float64)[..., None]
    k_ = np.asarray(k, dtype=np.float64)[..., None]
    c_ = np.asarray(count, dtype=np.float64)[..., None]
    rate = _rate(fp8, rates)
    per_sm = np.asarray(rate)[..., None] / rates.sm_count
    s_ = np.asarray(spread, dtype=np.float64)
    rows = np.ceil(m_ / tm) if not np.any(s_ > 0) else expected_tiles(m_, tm, s_[..., None])
    waves = np.ceil(rows * np.ceil(n_ / tn) * (split * c_) / rates.sm_count)
    t = waves * (np.ceil(k_ / split) + k0) * work / per_sm
    t = t + (m_ * n_ * c_ / rates.stream_Bps) * partial
    return t.min(axis=-1)


def _rate(fp8: Any, rates: GpuRates) -> Any:
    """Main-loop FLOP/s by format code; any non-zero code is fp8's rate on a GPU without fp4
    units (most layouts priced: the one-select path keeps the sweep at its speed)."""
    low, wide = rates.gemm_rate(1), rates.gemm_rate(0)
    if not rates.fp4_peak_flops:
        return np.where(fp8, low, wide)
    code = np.asarray(fp8, dtype=np.float64)
    return np.where(code >= 2, rates.gemm_rate(2), np.where(code >= 1, low, wide))


def gemm_bytes(m: Any, n: Any, k: Any, *, in_bytes: Any, out_bytes: Any, count: Any = 1.0) -> Any:
    """HBM bytes of A, B and C (C read too when out_bytes counts an accumulate)."""
    return count * (in_bytes * (m * k + k * n) + out_bytes * m * n)


def gemm_time_s(
    m: Any,
    n: Any,
    k: Any,
    rates: GpuRates,
    *,
    fp8: Any = False,
    count: Any = 1.0,
    out_bytes: Any = 2.0,
) -> Any:
    """Seconds of `count` m×n×k GEMMs in one kernel (a grouped GEMM when count > 1): the
    slower of the tensor-core time and streaming the operands, plus the kernel's fixed cost.
    `out_bytes` 8 prices a weight-gradient GEMM accumulating into fp32 main grads (read and
    write; Megatron/TE gradient-accumulation fusion)."""
    in_bytes = operand_bytes(np.asarray(fp8), rates)
    compute = gemm_compute_s(m, n, k, rates, fp8=fp8, count=count)
    stream = gemm_bytes(m, n, k, in_bytes=in_bytes, out_bytes=out_bytes, count=count)
    return np.maximum(compute, stream / rates.stream_Bps) + rates.kernel_gpu_s


def operand_bytes(code: Any, rates: GpuRates) -> Any:
    """Bytes per input element of a GEMM of format `code` on this GPU: a format without its
    tensor cores runs (and reads) as the next wider one."""
    if not rates.fp4_peak_flops:
        return np.where(code, 1.0, 2.0) if rates.fp8_peak_flops else 2.0
    return np.where(code >= 2, NVFP4_BYTES, np.where(code >= 1, 1.0, 2.0))


def gemm_tflops(m: Any, n: Any, k: Any, rates: GpuRates, *, fp8: bool | int = False) -> Any:
    """What a microbenchmark of one m×n×k GEMM would report, TFLOP/s."""
    return 2.0 * m * n * k / gemm_time_s(m, n, k, rates, fp8=fp8) / 1e12


def gemv_time_s(
    m: Any,
    n: Any,
    k: Any,
    rates: GpuRates,
    *,
    weights: str = "bf16",
    count: Any = 1.0,
    spread: Any = 0.0,
) -> Any:
    """Decode-shaped GEMM: m (small: the batch) rows against a k×n weight stored as `weights`
    (bf16, fp8, NVFP4, int8 or int4 weight-only). Streaming the weight bounds it at small m;
    the tensor cores (bf16 after dequantisation, fp8 and NVFP4 natively) take over as m
    grows."""
    wb = WEIGHT_BYTES[weights]
    stream = count * (wb * k * n + 2.0 * m * (k + n))
    bw = rates.stream_Bps * WEIGHT_STREAM_SHARE[weights]
    # below GEMV_MAX_M rows cuBLAS/TRT-LLM run CUDA-core GEMV kernels, not padded MMA tiles
    code = FORMAT_CODE.get(weights, 0)  # weight-only int8/int4 dequantise to bf16
    tiles = gemm_compute_s(m, n, k, rates, fp8=code, count=count, spread=spread)
    compute = np.where(np.asarray(m) < GEMV_MAX_M, 0.0, tiles)
    return np.maximum(compute, stream / bw) + rates.kernel_gpu_s
