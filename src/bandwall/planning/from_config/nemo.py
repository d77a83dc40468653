"""NeMo YAML recipes (NeMo 1.x / NeMo-Framework-Launcher `conf/training/*.yaml`) and
Megatron-Bridge YAML overrides.

NeMo's `model:` section carries Megatron-Core's own settings under Megatron's names, so a NeMo
key is translated to the Megatron argument it sets (`model.activations_checkpoint_granularity`
is `recompute_granularity`, `trainer.precision: bf16` is `--bf16`, `model.optim.name:
distributed_fused_adam` is `--use-distributed-optimizer`) and read by the Megatron table, which
keeps the NeMo key and line as the source. `trainer.num_nodes` × `trainer.devices` are the
launch. A key neither table knows is listed as ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bandwall.planning.from_config import launch, megatron
from bandwall.planning.from_config.common import (
    Entry,
    FormatSpec,
    Mapped,
    Source,
    Values,
    choice,
    ignore_reason,
    to_bool,
)

FMT = "nemo"


def _same(value: Any) -> Any:
    return value


def _precision(value: Any) -> list[tuple[str, Any]]:
    text = str(value).strip().lower()
    if text in ("bf16", "bf16-mixed", "bf16-true", "bf16_mixed"):
        return [("bf16", True)]
    if text in ("16", "16-mixed", "fp16", "fp16-mixed", "fp16_mixed"):
        return [("fp16", True)]
    if text in ("32", "32-true", "fp32"):
        return [("bf16", False)]
    raise ValueError(f"unknown precision {value!r}; allowed: bf16, bf16-mixed, 16-mixed, 32")


def _optimizer(value: Any) -> list[tuple[str, Any]]:
    text = str(value).strip().lower()
    distributed = text in ("distributed_fused_adam", "mcore_distributed_optim")
    return [("use_distributed_optimizer", distributed)]


def _fp8(value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, str) and value.strip().lower() in ("hybrid", "e4m3"):
        return [("fp8", value.strip().lower())]
    return [("fp8", "e4m3" if to_bool(value) else None)]


def _activation(value: Any) -> list[tuple[str, Any]]:
    gated = choice(
        {
            "swiglu": True,
            "fast-swiglu": True,
            "geglu": True,
            "fast-geglu": True,
            "reglu": True,
            "fast-reglu": True,
            "gelu": False,
            "relu": False,
            "squared-relu": False,
            "openai-gelu": False,
        }
    )(value)
    return [("swiglu", gated)]


def _groups(value: Any) -> list[tuple[str, Any]]:
    return [("num_query_groups", value), ("group_query_attention", True)]


class _Key:
    """A NeMo key that is one Megatron argument under another name."""

    def __init__(self, dest: str) -> None:
        self.dests = (dest,)

    def __call__(self, value: Any) -> list[tuple[str, Any]]:
        return [(self.dests[0], value)]


def _key(dest: str) -> Callable[[Any], list[tuple[str, Any]]]:
    return _Key(dest)


def dests(convert: Callable[[Any], list[tuple[str, Any]]]) -> tuple[str, ...]:
    """The Megatron arguments a translation sets (for the docs)."""
    return getattr(convert, "dests", ())


for _fn, _dests in (
    (_precision, ("bf16", "fp16")),
    (_optimizer, ("use_distributed_optimizer",)),
    (_fp8, ("fp8",)),
    (_activation, ("swiglu",)),
    (_groups, ("num_query_groups", "group_query_attention")),
):
    _fn.dests = _dests  # type: ignore[attr-defined]

#: NeMo / Megatron-Bridge key -> the Megatron arguments it sets (destination, value).
TRANSLATE: dict[str, Callable[[Any], list[tuple[str, Any]]]] = {
    "trainer.precision": _precision,
    "mixed_precision": _precision,
    "trainer.max_steps": _key("train_iters"),
    "train.train_iters": _key("train_iters"),
    "trainer.val_check_interval": _key("eval_interval"),
    "model.optim.name": _optimizer,
    "model.optim.overlap_grad_sync": _key("overlap_grad_reduce"),
    "model.optim.overlap_param_sync": _key("overlap_param_gather"),
    "ddp.overlap_grad_reduce": _key("overlap_grad_reduce"),
    "ddp.overlap_param_gather": _key("overlap_param_gather"),
    "ddp.use_distributed_optimizer": _key("use_distributed_optimizer"),
    "optimizer.use_distributed_optimizer": _key("use_distributed_optimizer"),
    "model.encoder_seq_length": _key("seq_length"),
    "model.data.seq_length": _key("seq_length"),
    "model.num_query_groups": _groups,
    "model.activation": _activation,
    "model.gated_linear_unit": _key("swiglu"),
    "model.num_moe_experts": _key("num_experts"),
    "model.activations_checkpoint_granularity": _key("recompute_granularity"),
    "model.activations_checkpoint_method": _key("recompute_method"),
    "model.activations_checkpoint_num_layers": _key("recompute_num_layers"),
    "model.fp8": _fp8,
    "model.fp8_params": _key("fp8_param_gather"),
    "model.ub_tp_comm_overlap": _key("tp_comm_overlap"),
    "model.use_flash_attention": _key("use_flash_attn"),
    "model.tokenizer.type": _key("tokenizer_type"),
    "train.micro_batch_size": _key("micro_batch_size"),
    "train.global_batch_size": _key("global_batch_size"),
}

#: NeMo keys that are the launch: nodes and GPUs per node.
LAUNCH = {"trainer.num_nodes": "torchrun.nnodes", "trainer.devices": "torchrun.nproc_per_node"}

#: `model.X` and `train.X` keys whose X is a Megatron argument of the same name.
_PREFIXES = ("model.", "train.")


def translate(flat: dict[str, tuple[Any, int | None]], file: str) -> list[Entry]:
    """NeMo keys as Megatron, launch and NeMo entries, each with its NeMo key and line."""
    out: list[Entry] = []
    fp8_hybrid = flat.get("model.fp8_hybrid", (None, None))[0]
    for key, (value, line) in flat.items():
        text = "" if value is None else str(value)[:60]
        src = Source(file, line, key, text)
        if key in LAUNCH:
            out.append(Entry(launch.SPEC.name, LAUNCH[key], value, src))
            continue
        convert = TRANSLATE.get(key)
        if convert is not None:
            if value is None:
                out.append(Entry(FMT, key, None, src))
                continue
            try:
                pairs = convert(value)
            except ValueError as exc:
                out.append(Entry(FMT, key, _Invalid(str(exc)), src))
                continue
            for dest, v in pairs:
                if dest == "fp8" and v == "e4m3" and fp8_hybrid is not None and to_bool(fp8_hybrid):
                    v = "hybrid"
                out.append(Entry(megatron.FMT, dest, v, src))
            continue
        for prefix in _PREFIXES:
            name = key[len(prefix) :] if key.startswith(prefix) else None
            if name and "." not in name and megatron.is_megatron_key(name):
                out.append(Entry(megatron.FMT, name, value, src))
                break
        else:
            out.append(Entry(FMT, key, value, src))
    return out


class _Invalid(str):
    """A value a translation refused; the NeMo table reports it with the file and line."""


def _derive(values: Values, mapped: Mapped, ctx: dict[str, Any]) -> list[Any]:
    from bandwall.planning.from_config.common import bad_value

    for key, e in values.entries.items():
        if isinstance(e.value, _Invalid):
            raise bad_value(e.src, str(e.value))
        if key in TRANSLATE:
            values.used.add(key)  # null: NeMo's own default, which is Megatron's
    return []


_REASONS: dict[str, str] = {
    "model.fp8_hybrid": "read with model.fp8",
    "model.mcore_gpt": "Megatron-Core model class",
    "model.megatron_amp_O2": "fp32 master weights (priced with the optimizer state)",
    "model.transformer_engine": "TransformerEngine kernels (priced as the default kernels)",
    "trainer.accumulate_grad_batches": "NeMo accumulates from global_batch_size instead",
    "trainer.accelerator": "the accelerator kind",
    "model.cpu_offloading": "activation offloading: not modelled",
}

SPEC = FormatSpec(
    FMT,
    "NeMo / Megatron-Bridge YAML",
    _REASONS,
    _derive,
    ignore_reason("a NeMo option the model does not use"),
)

__all__ = ["LAUNCH", "SPEC", "TRANSLATE", "dests", "translate"]
