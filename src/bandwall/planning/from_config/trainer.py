"""Training-script arguments on a launch line that is not Megatron: the HuggingFace Trainer
(`TrainingArguments`), TRL/accelerate scripts and DeepSpeed-Chat (`--zero_stage`,
`--offload`, `--lora_dim`).

The global batch is per-device batch × accumulation × data-parallel ranks (the Trainer's
`train_batch_size × gradient_accumulation_steps × world_size`), so it needs the GPU count.
"""

from __future__ import annotations

from bandwall.planning.from_config.common import (
    Context,
    Default,
    FormatSpec,
    Mapped,
    Problem,
    Rule,
    Values,
    constant,
    ignore_reason,
    positive_int,
    to_bool,
    to_int,
)

FMT = "trainer"
_D = Rule(None)
_SEQ = Rule("seq_len", positive_int)

TABLE: dict[str, Rule | str] = {
    "per_device_train_batch_size": _D,
    "gradient_accumulation_steps": _D,
    "max_seq_length": _SEQ,
    "max_seq_len": _SEQ,
    "block_size": _SEQ,
    "max_length": _SEQ,
    "model_max_length": _SEQ,
    "cutoff_len": _SEQ,
    "bf16": Rule("precision", constant("bf16")),
    "fp16": Rule("precision", constant("bf16"), "fp16 priced as bf16 (same rate)"),
    "gradient_checkpointing": Rule("recompute", constant("full")),
    "torch_compile": Rule("compile", to_bool),
    "zero_stage": Rule("zero", to_int),
    "offload": Rule("offload_optimizer", to_bool),
    "lora_r": Rule("lora_rank", positive_int),
    "lora_dim": Rule("lora_rank", positive_int),
    "lora_rank": Rule("lora_rank", positive_int),
    "fsdp": _D,
    "deepspeed": "a DeepSpeed JSON file: give it as another --from",
    "deepspeed_config": "a DeepSpeed JSON file: give it as another --from",
    "model_name_or_path": "the model's config.json gives its shape: give it as another --from",
    "num_train_epochs": "epochs of a dataset whose size the file does not give",
    "max_steps": _D,
}


def derive(values: Values, mapped: Mapped, ctx: Context) -> list[Default]:
    micro = values.convert("per_device_train_batch_size", positive_int)
    accum = values.convert("gradient_accumulation_steps", positive_int) or 1
    fsdp = values.get("fsdp")
    if fsdp is not None:
        words = str(fsdp).lower().split()
        zero = (
            3
            if {"full_shard", "hybrid_shard"} & set(words)
            else 2
            if "shard_grad_op" in words
            else 0
        )
        mapped.assigns.append(values.assign("zero", zero, "fsdp"))
        mapped.assigns.append(values.assign("stack", "fsdp2", "fsdp", note="FSDP priced as FSDP2"))
    if micro is None:
        return [Default("recompute", "none", "no --gradient_checkpointing", FMT)]
    mapped.assigns.append(values.assign("micro_batch", micro, "per_device_train_batch_size"))
    gpus = ctx.get("gpus")
    model_ranks = int(ctx.get("tp") or 1) * int(ctx.get("pp") or 1)
    if gpus and int(gpus) % model_ranks == 0:
        dp = int(gpus) // model_ranks
        glob = micro * accum * dp
        mapped.assigns.append(
            values.assign(
                "global_batch",
                glob,
                "per_device_train_batch_size",
                "gradient_accumulation_steps",
                note=f"{micro} per device × {accum} accumulation × {dp:,} ranks",
            )
        )
        steps = values.convert("max_steps", positive_int)
        if steps and ctx.get("seq_len") and steps > 0:
            mapped.assigns.append(
                values.assign("tokens", float(steps * glob * int(ctx["seq_len"])), "max_steps")
            )
    elif "global_batch" not in ctx:
        mapped.problems.append(
            Problem(
                "global_batch",
                "the global batch is per-device batch × accumulation × the data-parallel ranks, "
                "which needs the GPU count; give --gpus or --global-batch",
                values.src("per_device_train_batch_size"),
            )
        )
    return [
        Default("tp", 1, "data parallelism only", FMT),
        Default("pp", 1, "data parallelism only", FMT),
        Default("recompute", "none", "no --gradient_checkpointing", FMT),
    ]


SPEC = FormatSpec(
    FMT,
    "training-script arguments",
    TABLE,
    derive,
    ignore_reason("a script option the model does not use"),
)

__all__ = ["SPEC", "TABLE"]
