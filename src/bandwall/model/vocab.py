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
    # MaxText's remat policies by name (MaxText layers/decoders.py get_remat_policy): the
    # matmul outputs each keeps are `memory.REMAT_POLICY_SAVES`
    MINIMAL = "minimal"
    MINIMAL_WITH_CONTEXT = "minimal_with_context"
    SAVE_DOT_WITH_CONTEXT_EXCEPT_MLP = "save_dot_with_context_except_mlp"
    SAVE_DOT_EXCEPT_MLPWI = "save_dot_except_mlpwi"
    SAVE_DOT_EXCEPT_MLP = "save_dot_except_mlp"
    SAVE_QKV_PROJ = "save_qkv_proj"
    SAVE_OUT_PROJ = "save_out_proj"


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
    MAXTEXT = "maxtext"


#: Megatron-Core's selective recomputation by submodule (--recompute-modules;
#: megatron/core/transformer/transformer_config.py `recompute_modules`): core_attn (the
#: default), layernorm (both norms), mla_up_proj (MLA's up-projections and RoPE: q, k, v),
#: mlp (the dense MLP), moe (the whole MoE layer), moe_act (the experts' activation function),
#: shared_experts. layernorm, moe_act and mla_up_proj discard their outputs and rerun them in
#: backward; the others checkpoint their input and rerun their forward (`memory.py`).
RECOMPUTE_MODULES = (
    "core_attn",
    "layernorm",
    "mla_up_proj",
    "mlp",
    "moe",
    "moe_act",
    "shared_experts",
)


def recompute_module_names(words: list[str]) -> str:
    """Module names as one spelling per set, sorted and comma-joined, each one of
    `RECOMPUTE_MODULES` (ValueError naming the first that is not, or that none was given):
    the request's field and Megatron's --recompute-modules read through this."""
    names = {w.strip().lower() for w in words if w.strip()}
    unknown = sorted(names - set(RECOMPUTE_MODULES))
    if unknown or not names:
        what = f"unknown module {unknown[0]!r}" if unknown else "no module named"
        raise ValueError(f"{what}; choose from: {', '.join(RECOMPUTE_MODULES)}")
    return ",".join(sorted(names))
