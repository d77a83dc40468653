"""The model's vocabulary of strategy choices, as StrEnums (no numpy: the request schema and
the CLI import these at start-up)."""

from __future__ import annotations

from enum import StrEnum


class Recompute(StrEnum):
    """Activation recomputation. AUTO keeps selective recomputation where it fits in memory
    and recomputes just enough layers fully where it does not."""

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
    """Pipeline schedule: 1F1B, or interleaved 1F1B with virtual stages (Narayanan 2021)."""

    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved"


class Stack(StrEnum):
    """Training framework whose communication overlap the model follows (`STACKS`)."""

    MEGATRON = "megatron"
    FSDP2 = "fsdp2"
    DEEPSPEED = "deepspeed"
