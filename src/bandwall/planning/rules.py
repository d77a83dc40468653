"""The request schema's input layer and cross-field rules, declared once as data.

`apply` is the one hook `PlanRequest` (and every request that inherits it) runs around
pydantic's own validation:

1. **Inputs.** A string given to a number field (the CLI always gives strings; the web API may)
   goes through `bandwall.units`: ASCII digits only, finite, at most 32 characters, whole
   numbers with K/M/G = 1024^n (`--gpus 1k`), sizes with units for `*_bytes` fields
   (`--tcp-window-bytes 16M`). Unit-typed fields (`bandwidth_Gbps`, `latency_us`, `tokens`)
   parse their own strings.
2. **Rules.** After the fields are valid one by one, `RULES` say which options apply to which
   workload, cluster and mode, and which combinations cannot exist. A rule that fails is one
   ConfigError naming the field and the fix, in the CLI, the web API and request files alike.

Rules are data (scikit-learn's `_param_validation` declares constraints beside what they
govern and generates bad inputs from them): each carries an `example` request that breaks it,
and the tests run every example through the CLI and the API, so a rule cannot be added without
a test, and a rule that stops firing fails one.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any

from bandwall.errors import ConfigError
from bandwall.units import parse_int, parse_number, parse_size

#: Plan-request fields that describe training only: a serving request (`infer`) refuses them.
TRAINING_ONLY = (
    "cp",
    "ep",
    "zero",
    "micro_batch",
    "virtual_stages",
    "auto",
    "schedule",
    "recompute",
    "reduce_dtype",
    "compression",
    "local_sgd_steps",
    "diloco_workers",
    "outer_compression",
    "outer_overlap",
    "outer_state_on_cpu",
    "overlap",
    "sequence_parallel",
    "tp_comm_overlap",
    "pp_comm_overlap",
    "flash_attention",
    "lora_rank",
    "offload_optimizer",
    "ep_overlap",
    "moe_dispatcher",
    "bucket_MiB",
    "straggler_mitigation",
    "gemm_efficiency",
    "global_batch",
    "eval_interval_steps",
    "eval_samples",
    "tokens",
    "epochs",
    "failures",
    "straggler_fraction",
    "straggler_slowdown",
    "failed_links",
    "failed_link_fraction",
    "routing",
    "slow_link_fraction",
    "slow_link_speed",
    "checkpoint_GBps",
    "restart_s",
    "etp",
    "pp_first_stage_layers",
    "pp_last_stage_layers",
    "stack",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "reshard_after_forward",
    "fp8_recipe",
    "attention_kernel",
    "fp8_weights",
    "recompute_layers",
    "recompute_modules",
    "cuda_graphs",
    "compile",
    "profile",
)

#: The dimensions of `--model custom`; a catalog model has its own.
CUSTOM_DIMENSIONS = (
    "layers",
    "hidden",
    "heads",
    "kv_heads",
    "ffn",
    "vocab",
    "experts",
    "top_k",
    "gated_mlp",
)
#: DiLoCo's outer-loop options: they need an outer loop (`--local-sgd-steps` > 1).
DILOCO_OPTIONS = ("diloco_workers", "outer_compression", "outer_overlap", "outer_state_on_cpu")


# --- 1. inputs ------------------------------------------------------------------------------


@functools.cache
def _kind(annotation: Any) -> tuple[Any, bool]:
    return _base(annotation)


def _base(annotation: Any) -> tuple[Any, bool]:
    """(int | float | other, whether the field parses its own strings)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    own = False
    if typing.get_origin(annotation) is Annotated:
        own = True  # RateGbps, DurationUs, Count: a BeforeValidator reads units
        annotation = typing.get_args(annotation)[0]
    return annotation, own


def number_from_text(name: str, annotation: Any, value: Any) -> Any:
    """A string given to a number field, parsed by the one set of unit parsers; other values
    unchanged (pydantic checks them)."""
    if not isinstance(value, str):
        return value
    base, own = _kind(annotation)
    if own or base is bool:
        return value
    if base is int:
        return parse_int(value, name)
    if base is float:
        if name.endswith("_bytes"):
            return float(parse_size(value, name))
        return parse_number(value, name)
    return value


def normalize(model: type[Any], data: Any) -> Any:
    """The raw input with every string given to a number field parsed (see the docstring)."""
    if not isinstance(data, dict):
        return data
    if not any(isinstance(v, str | bool) for v in data.values()):
        return data
    numbers = _number_fields(model)
    for k, v in data.items():
        # pydantic's lax mode reads JSON true as 1: `{"gpus": true}` would plan one GPU
        if isinstance(v, bool) and k in numbers:
            raise ConfigError(f"{v!r} is not a number", field=k)
    # only strings given to the number fields can change (a whole request echoed back holds
    # ~100 fields, ~15 of them text: model, preset, ...)
    parsed = {
        k: number_from_text(k, numbers[k], v)
        for k, v in data.items()
        if isinstance(v, str) and k in numbers
    }
    return {**data, **parsed}


_NUMBER_FIELDS: dict[type[Any], dict[str, Any]] = {}


def _number_fields(model: type[Any]) -> dict[str, Any]:
    """The annotation of each field whose strings `number_from_text` parses (int or float,
    without a validator of its own), once per model; strings to the other fields pass
    through unchanged."""
    found = _NUMBER_FIELDS.get(model)
    if found is None:
        found = _NUMBER_FIELDS[model] = {
            name: f.annotation
            for name, f in model.model_fields.items()
            if (kind := _kind(f.annotation))[0] in (int, float) and not kind[1]
        }
    return found


# --- 2. rules -------------------------------------------------------------------------------


class Facts:
    """What the rules ask about a request, derived once and only when asked (the catalog is
    read only for the rules that need it)."""

    def __init__(self, req: Any) -> None:
        self.req = req

    def given(self, name: str) -> bool:
        """Whether the user set `name` to something other than its default (a default, or
        a whole request echoed back field by field, never breaks a rule)."""
        if name not in self.req.model_fields_set:
            return False
        value = getattr(self.req, name, None)
        return value is not None and value != type(self.req).model_fields[name].default

    @property
    def custom(self) -> bool:
        return bool(self.req.model == "custom")

    @cached_property
    def workload(self) -> Any:
        """The catalog workload, or None for `custom` (its dimensions are the request's)."""
        from bandwall.workloads import get_workload

        return None if self.custom else get_workload(self.req.model)

    @property
    def cnn(self) -> bool:
        from bandwall.workloads import Cnn

        return isinstance(self.workload, Cnn)

    @property
    def hidden(self) -> int | None:
        if self.custom:
            return typing.cast(int | None, self.req.hidden)
        return None if self.cnn else int(self.workload.hidden)

    @cached_property
    def preset(self) -> Any:
        from bandwall.planning.presets import get_preset

        return get_preset(self.req.preset)

    @cached_property
    def gpus_per_node(self) -> int:
        """GPUs per node as resolve_cluster takes them: given, the GPU's domain, the preset's."""
        if self.req.gpus_per_node:
            return int(self.req.gpus_per_node)
        if self.req.gpu:
            from bandwall.catalog import load_catalog

            return int(load_catalog().gpu(self.req.gpu).scale_up_domain)
        return int(self.preset.gpus_per_node)

    @cached_property
    def gpu_spec(self) -> Any:
        """The GPU the request runs on: given, or the preset's."""
        from bandwall.catalog import load_catalog

        return load_catalog().gpu(self.req.gpu or self.preset.gpu)

    @cached_property
    def gpu_arch(self) -> str:
        """The GPU's architecture family (catalog gpu_perf), 'unknown' without perf data."""
        from bandwall.catalog import load_catalog
        from bandwall.errors import CatalogError

        try:
            return str(load_catalog().gpu_perf(self.gpu_spec.name).arch)
        except (CatalogError, KeyError):
            return "unknown"

    @property
    def moe(self) -> bool:
        """Whether the model has routed experts (a catalog MoE, or custom with --experts)."""
        if self.custom:
            return bool(self.req.experts)
        return bool(getattr(self.workload, "is_moe", False))

    @property
    def gpu_arch_needed(self) -> str:
        return _KERNEL_ARCH.get(str(self.req.attention_kernel), "").capitalize()

    @property
    def blackwell(self) -> bool:
        return self.gpu_arch == "blackwell"

    @property
    def gpu_arch_name(self) -> str:
        return {"cdna3": "CDNA 3", "cdna4": "CDNA 4"}.get(self.gpu_arch, self.gpu_arch.capitalize())

    @property
    def whole_below(self) -> int:
        """The largest whole-node GPU count under the request's."""
        return max(int(self.req.gpus) // self.gpus_per_node, 1) * self.gpus_per_node

    @property
    def whole_above(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def nodes(self) -> int:
        return -(-int(self.req.gpus) // self.gpus_per_node)

    @property
    def sites(self) -> int:
        return int(self.req.sites or self.preset.sites)

    @property
    def serving(self) -> bool:
        return "prompt_tokens" in type(self.req).model_fields


@dataclass(frozen=True)
class Rule:
    """One cross-field rule: `broken(facts)` is True when the request breaks it; the error
    names `field` with `says` (a format string over the request's fields and `facts`).
    `example` is a request (field values) that breaks it, for the generated tests."""

    field: str
    broken: Callable[[Facts], bool]
    says: str
    example: dict[str, Any]
    serving_only: bool = False
    #: The rule can only break when one of these was given (default: `field`); the others
    #: are skipped without evaluating, which keeps validating a sweep's axis values cheap.
    triggers: tuple[str, ...] = ()

    def message(self, facts: Facts) -> str:
        values = {k: getattr(facts.req, k, None) for k in type(facts.req).model_fields}
        return self.says.format(facts=facts, **values)


#: The architecture each FlashAttention generation is written for (FA3: Hopper's wgmma and
#: TMA, Dao-AILab/flash-attention hopper/; FA4: Blackwell's tcgen05, flash_attn/cute).
_KERNEL_ARCH = {"fa3": "hopper", "fa4": "blackwell"}


def _value(x: Any) -> str:
    """An enum's value or a plain string, as text."""
    return str(getattr(x, "value", x))


def _moe_only(name: str, example: Any) -> Rule:
    return Rule(
        name,
        lambda f: f.given(name) and not f.cnn and not f.moe,
        f"applies to MoE models (routed experts); {{model}} is dense: drop {_flag_text(name)}",
        {"model": "llama3-8b", name: example},
        triggers=(name, "model", "experts"),
    )


def _custom_only(name: str, example: Any) -> Rule:
    return Rule(
        name,
        lambda f: f.given(name) and not f.custom and getattr(f.req, name) is not False,
        "applies to --model custom only; {model} has its own dimensions "
        f"(bandwall models); drop {_flag_text(name)} or use --model custom",
        {"model": "llama3-8b", name: example},
    )


def _flag_text(name: str) -> str:
    # the flag without importing request.py at import time (it imports this module)
    return "--" + name.replace("_", "-")


def _diloco(name: str, example: Any) -> Rule:
    return Rule(
        name,
        lambda f: f.given(name) and f.req.local_sgd_steps <= 1 and _set_to_something(f, name),
        "applies to DiLoCo only (an outer loop every H steps); add --local-sgd-steps H "
        f"(H > 1) or drop {_flag_text(name)}",
        {name: example},
    )


def _format_needs_units(field: str, fmt: str, says: str, example_gpu: str) -> Rule:
    """`field` set to the number format `fmt` on a GPU whose catalog entry lists no dense peak
    for it (no such tensor cores). A serving-only field makes a serving-only rule."""

    def broken(f: Facts) -> bool:
        chosen = _value(getattr(f.req, field)) == fmt
        return chosen and fmt not in {_value(k) for k in f.gpu_spec.peak_TFLOPS}

    return Rule(
        field,
        broken,
        says,
        {field: fmt, "gpu": example_gpu},
        serving_only=field == "weight_format",
        triggers=(field, "gpu", "preset"),
    )


def _set_to_something(f: Facts, name: str) -> bool:
    """A flag set to its 'off' value (`--outer-compression none`, `--no-outer-overlap`) asks
    for nothing that could not apply."""
    value = getattr(f.req, name)
    return value not in (False, "none")


RULES: tuple[Rule, ...] = (
    *(
        _custom_only(n, ex)
        for n, ex in (
            ("layers", 32),
            ("hidden", 4096),
            ("heads", 32),
            ("kv_heads", 8),
            ("ffn", 14336),
            ("vocab", 128256),
            ("experts", 8),
            ("top_k", 2),
            ("gated_mlp", True),
        )
    ),
    Rule(
        "top_k",
        lambda f: f.custom and f.given("top_k") and not f.req.experts,
        "applies to an MoE model; add --experts N (at least --top-k) or drop --top-k",
        {"model": "custom", "top_k": 2},
    ),
    Rule(
        "top_k",
        lambda f: f.custom and f.given("top_k") and f.req.top_k > (f.req.experts or 1),
        "{top_k} experts per token, but the model has {experts} routed experts; give "
        "--top-k <= --experts",
        {"model": "custom", "experts": 4, "top_k": 8},
    ),
    Rule(
        "seq_len",
        lambda f: f.given("seq_len") and not f.custom and f.cnn,
        "applies to transformers only; {model} is a CNN (images, no sequence)",
        {"model": "resnet50", "seq_len": 4096},
    ),
    Rule(
        "tokens",
        lambda f: f.given("tokens") and not f.custom and f.cnn,
        "applies to transformers only; {model} is a CNN: give --epochs",
        {"model": "resnet50", "tokens": 1e9},
    ),
    Rule(
        "epochs",
        # (serving: the training-only rule below names it)
        lambda f: f.given("epochs") and not f.serving and (f.custom or not f.cnn),
        "applies to CNNs only; {model} is a transformer trained on a token budget: give "
        "--tokens (e.g. 1T)",
        {"model": "llama3-8b", "epochs": 3},
    ),
    Rule(
        "lora_rank",
        lambda f: f.given("lora_rank") and not f.custom and f.cnn,
        "LoRA applies to transformers only; {model} is a CNN",
        {"model": "resnet50", "lora_rank": 8},
    ),
    Rule(
        "lora_rank",
        lambda f: f.given("lora_rank") and f.hidden is not None and f.req.lora_rank > f.hidden,
        "rank {lora_rank:,} is above the model's hidden size {facts.hidden:,}: a LoRA rank "
        "is at most the width it adapts",
        {"model": "llama3-8b", "lora_rank": 8192},
    ),
    *(
        _diloco(n, ex)
        for n, ex in (
            ("diloco_workers", 4),
            ("outer_compression", "int8"),
            ("outer_overlap", True),
            ("outer_state_on_cpu", True),
        )
    ),
    # options that only act in another setting were dropped without a word (fuzz round 17, E3)
    Rule(
        "fp8_recipe",
        lambda f: f.given("fp8_recipe") and _value(f.req.precision) != "fp8",
        "applies to --precision fp8 (the recipe says how fp8 GEMMs are scaled); add "
        "--precision fp8 or drop --fp8-recipe",
        {"fp8_recipe": "current"},
    ),
    Rule(
        "recompute_layers",
        lambda f: f.given("recompute_layers") and _value(f.req.recompute) != "full",
        "applies to --recompute full (Megatron's block method: that many layers of each chunk "
        "are recomputed); add --recompute full or drop --recompute-layers",
        {"recompute_layers": 4},
        triggers=("recompute_layers", "recompute"),
    ),
    Rule(
        "recompute_modules",
        lambda f: f.given("recompute_modules") and _value(f.req.recompute) != "selective",
        "applies to --recompute selective (Megatron's --recompute-modules: which submodules "
        "are rerun); add --recompute selective or drop --recompute-modules",
        {"recompute_modules": "mlp"},
        triggers=("recompute_modules", "recompute"),
    ),
    Rule(
        "reshard_after_forward",
        lambda f: f.given("reshard_after_forward") and f.given("zero") and f.req.zero < 3,
        "is FSDP's (ZeRO-3) choice; at --zero {zero} the weights are not sharded: use "
        "--zero 3 or drop it",
        {"reshard_after_forward": True, "zero": 1},
        triggers=("reshard_after_forward", "zero"),
    ),
    *(_moe_only(name, ex) for name, ex in (("moe_dispatcher", "deepep"), ("ep_overlap", 0.5))),
    Rule(
        "straggler_fraction",
        lambda f: f.given("straggler_fraction") and not f.req.straggler_slowdown,
        "has no effect without --straggler-slowdown (how much slower a straggler is); add "
        "it or drop --straggler-fraction",
        {"straggler_fraction": 0.1},
        triggers=("straggler_fraction", "straggler_slowdown"),
    ),
    Rule(
        "attention_kernel",
        lambda f: f.given("attention_kernel") and f.gpu_arch_needed.lower() not in ("", f.gpu_arch),
        "{attention_kernel} runs on {facts.gpu_arch_needed} GPUs only and "
        "{facts.gpu_spec.name} is {facts.gpu_arch_name}; use fa2, or leave it out for the GPU's "
        "best",
        {"attention_kernel": "fa4", "gpu": "H100-SXM"},
        triggers=("attention_kernel", "gpu", "preset"),
    ),
    Rule(
        "fp8_recipe",
        lambda f: f.given("fp8_recipe") and _value(f.req.fp8_recipe) == "mxfp8" and not f.blackwell,
        "mxfp8 needs Blackwell's block-scaled tensor cores and {facts.gpu_spec.name} is "
        "{facts.gpu_arch_name}; use delayed, current, blockwise or rowwise",
        {"precision": "fp8", "fp8_recipe": "mxfp8", "gpu": "H100-SXM"},
        triggers=("fp8_recipe", "gpu", "preset"),
    ),
    Rule(
        "fp8_recipe",
        lambda f: (
            f.given("fp8_recipe")
            and _value(f.req.fp8_recipe) == "rowwise"
            and _value(f.req.stack) != "fsdp2"
        ),
        "rowwise is torchao's float8 recipe, which runs under FSDP2 (torchtitan) and --stack "
        "{stack} runs TransformerEngine's; add --stack fsdp2, or use current or blockwise",
        {"precision": "fp8", "fp8_recipe": "rowwise", "stack": "megatron"},
        triggers=("fp8_recipe", "stack"),
    ),
    _format_needs_units(
        "precision",
        "fp8",
        "{facts.gpu_spec.name} has no fp8 tensor cores: fp8 compute needs Ada, Hopper or "
        "newer (TransformerEngine and TensorRT-LLM assert it); use --precision bf16 or an "
        "fp8 GPU (bandwall catalog gpus)",
        "A100-SXM-80GB",
    ),
    _format_needs_units(
        "precision",
        "fp4",
        "{facts.gpu_spec.name} has no fp4 tensor cores: NVFP4 needs Blackwell (B200, B300, "
        "GB200, GB300); use --precision fp8 or an fp4 GPU (bandwall catalog gpus)",
        "H100-SXM",
    ),
    _format_needs_units(
        "weight_format",
        "fp4",
        "fp4 is NVFP4 W4A4, which needs Blackwell's fp4 tensor cores and "
        "{facts.gpu_spec.name} has none; use int4 (weight-only) or fp8",
        "H100-SXM",
    ),
    Rule(
        "tp_comm_overlap",
        lambda f: bool(f.req.tp_comm_overlap and not f.req.sequence_parallel),
        "needs sequence parallelism (Megatron asserts it); drop --no-sequence-parallel",
        {"tp_comm_overlap": True, "sequence_parallel": False},
        triggers=("tp_comm_overlap", "sequence_parallel"),
    ),
    Rule(
        "gpus_per_node",
        lambda f: (
            # a rack-scale NVLink domain (GB200 NVL72) is several hosts: jobs take part of
            # the last rack (Megatron-Bridge's 256-GPU GB200 runs), so only hosts must be whole
            f.given("gpus_per_node")
            and f.req.gpus_per_node <= 8
            and f.req.gpus > f.req.gpus_per_node
            and f.req.gpus % f.req.gpus_per_node != 0
        ),
        "{gpus:,} GPUs do not fill whole nodes of {gpus_per_node}; give a --gpus-per-node "
        "that divides --gpus (or --gpus a multiple of it)",
        {"gpus": 64, "gpus_per_node": 7},
    ),
    Rule(
        "gpus",
        lambda f: (
            # the same for the node size the GPU or preset gives: typing the default
            # --gpus-per-node must not change the answer
            not f.given("gpus_per_node")
            and f.gpus_per_node <= 8
            and f.req.gpus > f.gpus_per_node
            and f.req.gpus % f.gpus_per_node != 0
        ),
        "{gpus:,} GPUs do not fill whole nodes of {facts.gpus_per_node}; try --gpus "
        "{facts.whole_below} or {facts.whole_above} (whole nodes), or --gpus-per-node",
        {"gpus": 12},
        triggers=("gpus", "gpu", "preset"),
    ),
    Rule(
        "sites",
        lambda f: f.given("sites") and f.sites > 1 and not (f.req.wan or f.preset.wan),
        "{sites:,} sites need a --wan fabric between them (bandwall catalog fabrics)",
        {"sites": 2},
    ),
    Rule(
        "sites",
        lambda f: f.given("sites") and f.req.sites > f.nodes,
        "{sites:,} sites need at least {sites:,} nodes; {gpus:,} GPUs at "
        "{facts.gpus_per_node} per node are {facts.nodes:,}",
        {"gpus": 8, "sites": 64, "wan": "internet-10g"},
    ),
    Rule(
        "wan",
        lambda f: f.given("wan") and f.sites <= 1,
        "a WAN joins sites, and the cluster has one; add --sites N (N > 1) or drop --wan",
        {"preset": "ai-factory-ib", "wan": "internet-10g"},
    ),
    Rule(
        "failed_links",
        lambda f: f.given("failed_links") and f.given("failed_link_fraction"),
        "give --failed-links or --failed-link-fraction, not both",
        {"failed_links": 1, "failed_link_fraction": 0.01},
    ),
    *(
        Rule(
            name,
            (lambda n: lambda f: f.serving and f.given(n))(name),
            "describes training; serving (infer) does not use it: drop it",
            {},
            serving_only=True,
        )
        for name in TRAINING_ONLY
    ),
    Rule(
        "request_rate_per_s",
        lambda f: f.serving and f.given("request_rate_per_s") and f.req.scenario == "offline",
        "the offline scenario queues every request at once; an arrival rate is the server "
        "scenario's: drop --request-rate or use --scenario server",
        {"scenario": "offline", "request_rate_per_s": 5.0},
        serving_only=True,
        triggers=("request_rate_per_s", "scenario"),
    ),
    *(
        Rule(
            name,
            (lambda n: lambda f: f.serving and f.given(n) and f.req.dataset not in (None, "fixed"))(
                name
            ),
            "applies to --dataset fixed; {dataset} gives its own lengths: drop it or use "
            "--dataset fixed",
            {"dataset": "sharegpt", name: 100},
            serving_only=True,
            triggers=(name, "dataset"),
        )
        for name in ("prompt_tokens", "output_tokens")
    ),
    Rule(
        "concurrency",
        lambda f: (
            f.serving
            and f.req.concurrency is not None
            and f.req.max_concurrency is not None
            and f.req.concurrency > f.req.max_concurrency
        ),
        "{concurrency:,} sequences in flight is above --max-concurrency {max_concurrency:,}; "
        "raise --max-concurrency or lower --concurrency",
        {"concurrency": 512, "max_concurrency": 256},
        serving_only=True,
        triggers=("concurrency", "max_concurrency"),
    ),
)


_RULES_OF: dict[type[Any], tuple[Rule, ...]] = {}


def _rules_of(model: type[Any]) -> tuple[Rule, ...]:
    """The rules about `model`'s fields (serving rules only for serving requests), cached."""
    if model not in _RULES_OF:
        serving = "prompt_tokens" in model.model_fields
        _RULES_OF[model] = tuple(
            r for r in RULES if r.field in model.model_fields and (serving or not r.serving_only)
        )
    return _RULES_OF[model]


def check(req: Any) -> None:
    """Raise the first broken rule as a ConfigError naming its field."""
    given = req.model_fields_set
    facts = Facts(req)
    for rule in _rules_of(type(req)):
        if not any(t in given for t in (rule.triggers or (rule.field,))):
            continue
        if rule.broken(facts):
            raise ConfigError(rule.message(facts), field=rule.field)


def apply(
    model: type[Any], data: Any, handler: Callable[[Any], Any], check_rules: bool = True
) -> Any:
    """The hook: parse number strings, let pydantic validate the fields, check the rules."""
    req = handler(normalize(model, data))
    if check_rules:
        check(req)
    return req


@dataclass(frozen=True)
class RuleDoc:
    """One rule as the docs and tests list it."""

    field: str
    example: dict[str, Any] = dataclasses.field(default_factory=dict)
    serving_only: bool = False


def rule_examples(model: type[Any]) -> list[RuleDoc]:
    """Every rule's breaking example, for the generated tests and docs (a serving rule's
    example is its field set to a valid value of `model` other than the default)."""
    out = []
    for r in RULES:
        example = r.example or {r.field: _other_value(model.model_fields[r.field])}
        out.append(RuleDoc(r.field, example, r.serving_only))
    return out


def _other_value(info: Any) -> Any:
    """A valid value of a field that differs from its default."""
    import enum

    base, _ = _base(info.annotation)
    if base is bool:
        return not info.default
    if typing.get_origin(base) is typing.Literal:
        return next(v for v in typing.get_args(base) if v != info.default)
    if isinstance(base, type) and issubclass(base, enum.Enum):
        return next(m.value for m in base if m != info.default)
    if base is int:
        return 2 if info.default != 2 else 3
    if base is float:
        return 0.5 if info.default != 0.5 else 0.25
    return "int8" if info.default != "int8" else "none"


def markdown(model: type[Any]) -> str:
    """The rules as a Markdown table (docs/security.md holds it; a test keeps it current)."""
    import re

    lines = ["| option | refused when | example |", "|---|---|---|"]
    seen = set()
    for r, doc in zip(RULES, rule_examples(model), strict=True):
        if r.serving_only and r.field in TRAINING_ONLY:
            continue  # one row below for all of them

        def fill(m: re.Match[str], example: dict[str, Any] = doc.example) -> str:
            key = m.group(1)
            if key in example:
                return f"{example[key]:,}" if isinstance(example[key], int) else str(example[key])
            return "<" + key.split(".")[-1].replace("_", " ") + ">"

        says = re.sub(r"\{([a-z_.]+)(?::[^}]*)?\}", fill, r.says.split("; ")[0])
        parts = []
        for k, v in doc.example.items():
            flag = "--" + k.replace("_", "-")
            if v is True:
                parts.append(flag)
            elif v is False:
                parts.append("--no-" + flag[2:])
            else:
                parts.append(f"{flag} {v:g}" if isinstance(v, float) else f"{flag} {v}")
        key = (r.field, says)
        if key not in seen:
            seen.add(key)
            lines.append(f"| `--{r.field.replace('_', '-')}` | {says} | `{' '.join(parts)}` |")
    lines.append(
        "| training options on `infer` | describes training; serving does not use it | "
        "`infer --tokens 1T` |"
    )
    return "\n".join(lines) + "\n"
