"""The kernel model against published kernel microbenchmarks (catalog/data/kernel_bench.csv).

Rows are split before any fitting by a fixed rule: a row is in the fit set when
int(sha256(id)) % 3 == 0 (about a third), else held out. The model's fitted constants
(GEMM K0 and tile I0, attention η/d0/s0, the power model's two constants) were set on fit rows
only; `anchor` rows set a catalog constant directly (a GPU's large-GEMM efficiency, HBM triad)
and are reported apart. `benchmarks/kernel_model.py` prints the table; a test pins the
held-out errors within tolerances.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache

import numpy as np

from bandwall.catalog import load_catalog
from bandwall.catalog.models import Precision
from bandwall.catalog.perf import KernelBenchmark, kernel_benchmarks
from bandwall.model.compute.attention import BACKWARD_FLOPS_RATIO, flash_attention_flops
from bandwall.model.compute.attention import flash_attention_s as _flash
from bandwall.model.compute.gemm import FORMAT_CODE, gemm_tflops
from bandwall.model.compute.rates import GpuRates, gpu_rates, sustained_clock_factor


def in_fit_set(row_id: str) -> bool:
    """The fixed split: a third of the rows, by the hash of their id."""
    return int(hashlib.sha256(row_id.encode()).hexdigest(), 16) % 3 == 0


def split_of(row: KernelBenchmark) -> str:
    """anchor, checked (power rows: too few to hold a third out; constants set by hand), fit
    or held_out."""
    if row.role == "anchor":
        return "anchor"
    if row.kind == "power":
        return "checked"
    return "fit" if in_fit_set(row.id) else "held_out"


@cache
def rates_for(gpu: str) -> GpuRates:
    cat = load_catalog()
    return gpu_rates(cat.gpu_perf(gpu), cat.gpu(gpu), precision=Precision.BF16)


def _attention_tflops(row: KernelBenchmark, rates: GpuRates) -> float:
    args = (row.batch, row.heads, row.seq, row.seq, row.head_dim, rates)
    kw = dict(causal=row.causal, kernel=row.kernel, arch=rates.arch)
    flops = flash_attention_flops(*args[:5], causal=row.causal)
    if row.pass_ == "fwd_bwd":
        t = _flash(*args, pass_="fwd", **kw) + _flash(*args, pass_="bwd", **kw)  # type: ignore[arg-type]
        flops = flops * (1 + BACKWARD_FLOPS_RATIO)
    else:
        t = _flash(*args, pass_=row.pass_, **kw)  # type: ignore[arg-type]
        if row.pass_ == "bwd":
            flops = flops * BACKWARD_FLOPS_RATIO
    return float(flops / t / 1e12)


def predict(row: KernelBenchmark) -> float:
    """What the kernel model says the row's benchmark measures, in the row's unit."""
    if row.kind == "power":
        return float(sustained_clock_factor(row.power_cap_W, row.tdp_W))
    rates = rates_for(row.gpu)
    if row.kind == "gemm":
        return float(gemm_tflops(row.m, row.n, row.k, rates, fp8=FORMAT_CODE.get(row.dtype, 0)))
    if row.kind == "attention":
        return _attention_tflops(row, rates)
    if row.kind == "hbm":
        return rates.stream_Bps / 1e12
    return rates.kernel_gpu_s * 1e6  # launch


@dataclass(frozen=True)
class Residual:
    row: KernelBenchmark
    predicted: float
    split: str

    @property
    def error(self) -> float:
        """Signed relative error, predicted / measured − 1."""
        return self.predicted / self.row.measured - 1.0


def residuals() -> list[Residual]:
    return [Residual(r, predict(r), split_of(r)) for r in kernel_benchmarks()]


@dataclass(frozen=True)
class ErrorSummary:
    kind: str
    split: str
    rows: int
    median_abs: float
    mean_signed: float
    max_abs: float


def summarise(res: list[Residual]) -> list[ErrorSummary]:
    """Median |error|, signed bias and max |error| per kind and split (anchors apart)."""
    out = []
    kinds = sorted({r.row.kind for r in res})
    for kind in [*kinds, "all"]:
        for split in ("fit", "held_out", "checked", "anchor"):
            errs = np.array(
                [r.error for r in res if r.split == split and kind in (r.row.kind, "all")]
            )
            if errs.size == 0:
                continue
            out.append(
                ErrorSummary(
                    kind,
                    split,
                    int(errs.size),
                    float(np.median(np.abs(errs))),
                    float(errs.mean()),
                    float(np.abs(errs).max()),
                )
            )
    return out
