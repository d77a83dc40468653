"""What a GPU sustains (the roofline compute model's constants), kept apart from the
datasheet entries in `models.GpuSpec`: these are measured, achieved figures a site may refit."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field

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
    source: str = Field(min_length=3)
    as_of: dt.date

    @property
    def memory_bytes(self) -> int:
        return self.memory_MiB * MIB
