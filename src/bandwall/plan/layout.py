"""Parallel layout and training strategy: user input, validation, and the array form."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, field_validator

IntArray = npt.NDArray[np.int64]


class Recompute(StrEnum):
    """Activation recomputation. AUTO keeps selective recomputation where it fits in memory
    and falls back to full recomputation (one extra forward pass) where it does not."""

    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"
    AUTO = "auto"


class Mitigation(StrEnum):
    """What a synchronous job does about stragglers."""

    NONE = "none"
    BACKUP = "backup"
    ASYNC = "async"


class Schedule(StrEnum):
    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved"


class Strategy(BaseModel):
    """How the job is parallelised and synchronised (user input)."""

    model_config = ConfigDict(extra="forbid")

    tp: int = Field(default=1, ge=1, description="Tensor-parallel degree (inside a node).")
    pp: int = Field(default=1, ge=1, description="Pipeline-parallel degree.")
    cp: int = Field(default=1, ge=1, description="Context-parallel degree.")
    ep: int = Field(default=1, ge=1, description="Expert-parallel degree (within DP).")
    zero: int = Field(default=1, ge=0, le=3, description="0 DDP, 1/2 ZeRO, 3 FSDP.")
    micro_batch: int | None = Field(default=None, ge=1, description="Sequences per micro-batch.")
    schedule: Schedule = Schedule.INTERLEAVED
    virtual_stages: int | None = Field(default=None, ge=1)
    recompute: Recompute = Recompute.AUTO
    grad_dtype: str = Field(default="bf16", description="fp32 or bf16 gradient reduction.")
    compression: str = Field(default="none", description="none, int8 or topk:RATIO.")
    local_sgd_steps: int = Field(default=1, ge=1, description="DiLoCo outer sync every H steps.")
    overlap: bool = Field(default=True, description="Overlap DP reduction with backward.")
    tp_overlap: float = Field(default=0.0, ge=0, le=1)
    ep_overlap: float = Field(default=0.0, ge=0, le=1)
    bucket_MiB: float = Field(default=25.0, gt=0, description="DDP gradient bucket size.")
    straggler_mitigation: Mitigation = Field(
        default=Mitigation.NONE,
        description="backup: spare workers, the slowest gradients dropped (Chen et al. 2016); "
        "async: asynchronous outer steps under local SGD, stragglers delay only themselves.",
    )

    @field_validator("grad_dtype")
    @classmethod
    def _grad_dtype(cls, v: str) -> str:
        if v not in ("fp32", "bf16"):
            raise ValueError(f"must be fp32 or bf16, got {v!r}")
        return v

    @field_validator("compression")
    @classmethod
    def _compression(cls, v: str) -> str:
        parse_compression(v)
        return v


def parse_compression(text: str) -> tuple[str, float]:
    """'none' | 'int8' | 'topk:0.01' → (kind, ratio of bytes kept per gradient element)."""
    if text in ("none", "bf16", "fp32"):
        return "none", 1.0
    if text == "int8":
        return "int8", 1.0
    if text.startswith("topk:"):
        try:
            ratio = float(text.split(":", 1)[1])
        except ValueError:
            ratio = -1.0
        if not 0 < ratio < 1:
            raise ValueError(f"topk ratio must be in (0, 1), got {text!r}")
        return "topk", ratio
    raise ValueError(f"must be none, int8 or topk:RATIO, got {text!r}")


@dataclass(frozen=True)
class LayoutArrays:
    """A batch of layouts to evaluate at once; every field broadcasts with the others."""

    tp: IntArray
    pp: IntArray
    cp: IntArray
    ep: IntArray
    zero: IntArray
    micro_batch: IntArray
    virtual_stages: IntArray

    @classmethod
    def single(cls, s: Strategy, micro_batch: int, virtual_stages: int) -> LayoutArrays:
        def a(v: int) -> IntArray:
            return np.asarray(v, dtype=np.int64)

        return cls(a(s.tp), a(s.pp), a(s.cp), a(s.ep), a(s.zero), a(micro_batch), a(virtual_stages))

    def broadcast(self, *others: Any) -> tuple[IntArray, ...]:
        return tuple(
            np.broadcast_arrays(
                self.tp,
                self.pp,
                self.cp,
                self.ep,
                self.zero,
                self.micro_batch,
                self.virtual_stages,
                *others,
            )
        )
