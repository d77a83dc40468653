"""What a GPU sustains (the roofline compute model's constants), kept apart from the
datasheet entries in `models.GpuSpec`: these are measured, achieved figures a site may refit."""

from __future__ import annotations

import csv
import datetime as dt
from functools import cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bandwall.errors import CatalogError

MIB = 2**20


class GpuPerf(BaseModel):
    """Achieved rates of one GPU model, each from a named source."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu: str = Field(description="GPU name, as in gpus.toml.")
    memory_MiB: int = Field(gt=0, description="Device memory as nvidia-smi/rocm-smi report it.")
    gemm_efficiency: float = Field(gt=0, le=1, description="Share of dense peak large GEMMs reach.")
    attention_efficiency: float = Field(
        gt=0, le=1, description="Share of dense peak FlashAttention forward+backward reaches."
    )
    hbm_efficiency: float = Field(gt=0, le=1, description="Share of peak HBM bandwidth reached.")
    sm_count: int = Field(ge=1, description="Streaming multiprocessors (AMD: compute units).")
    gemm_tile: tuple[int, int] = Field(
        description="Output tile (rows, cols) of the fastest GEMM kernels, for wave quantisation."
    )
    kernel_launch_us: float = Field(ge=0, description="CPU cost of one kernel launch.")
    arch: Literal["ampere", "ada", "hopper", "blackwell", "cdna3", "cdna4"] = Field(
        default="hopper",
        description="Architecture family: selects GEMM tiles and the FlashAttention kernel.",
    )
    gemm_large_efficiency: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Share of the bf16 peak a large GEMM's main loop reaches once the kernel "
        "model's tile, wave and K effects are taken out (bandwall.model.compute.gemm); unset: "
        "gemm_efficiency.",
    )
    fp8_gemm_large_efficiency: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="The same for fp8 GEMMs against the fp8 peak; unset: the bf16 value.",
    )
    fp4_gemm_large_efficiency: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="The same for NVFP4 GEMMs against the fp4 peak; unset: the fp8 value.",
    )
    source: str = Field(min_length=3)
    as_of: dt.date

    @property
    def memory_bytes(self) -> int:
        return self.memory_MiB * MIB

    def large_gemm_efficiency(self, fmt: str, bf16: float | None = None) -> float:
        """Large-GEMM efficiency of `fmt` (bf16, fp8, fp4) against that format's peak, each
        unset format taking the next wider one's; `bf16` overrides the bf16 value (a user's
        --gemm-efficiency), and with it what falls back to it."""
        eff = bf16 or self.gemm_large_efficiency or self.gemm_efficiency
        if fmt in ("fp8", "fp4"):
            eff = self.fp8_gemm_large_efficiency or eff
        if fmt == "fp4":
            eff = self.fp4_gemm_large_efficiency or eff
        return eff


#: Columns of catalog/data/kernel_bench.csv, the public kernel microbenchmarks the kernel model
#: is validated against (each row with its source and date).
KERNEL_BENCH_COLUMNS = (
    "id", "kind", "gpu", "kernel", "dtype", "pass", "m", "n", "k", "batch", "heads", "seq",
    "head_dim", "causal", "power_cap_W", "tdp_W", "measured", "unit", "role", "source", "as_of",
)  # fmt: skip


class KernelBenchmark(BaseModel):
    """One published kernel measurement: a GEMM, an attention kernel, a streaming kernel, a
    launch or a power-capped run, with the shape it ran at and where it was published."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=3)
    kind: Literal["gemm", "attention", "hbm", "launch", "power"]
    gpu: str
    kernel: str
    dtype: str = ""
    pass_: str = Field(default="", alias="pass")
    m: float = 0
    n: float = 0
    k: float = 0
    batch: float = 0
    heads: float = 0
    seq: float = 0
    head_dim: float = 0
    causal: bool = False
    power_cap_W: float = 0
    tdp_W: float = 0
    measured: float = Field(gt=0)
    unit: Literal["TFLOPS", "TBps", "us", "ratio"]
    role: Literal["bench", "anchor"] = Field(
        description="anchor: sets a catalog constant directly (kept out of the error figures); "
        "bench: validation, split into fit and held-out by sha256 of the id."
    )
    source: str = Field(min_length=3)
    as_of: dt.date


@cache
def kernel_benchmarks() -> tuple[KernelBenchmark, ...]:
    """The shipped kernel microbenchmark table (catalog/data/kernel_bench.csv)."""
    text = resources.files("bandwall.catalog").joinpath("data", "kernel_bench.csv").read_text()
    reader = csv.DictReader(text.splitlines())
    if tuple(reader.fieldnames or ()) != KERNEL_BENCH_COLUMNS:
        raise CatalogError(f"kernel_bench.csv: columns must be {', '.join(KERNEL_BENCH_COLUMNS)}")
    rows = []
    for raw in reader:
        clean = {k: v for k, v in raw.items() if v not in ("", None)}
        rows.append(KernelBenchmark.model_validate(clean))
    return tuple(rows)
