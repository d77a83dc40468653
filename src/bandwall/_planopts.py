"""The CLI options shared by `plan`, `compare`, `sweep` and `scale`, declared once.

`with_plan_options` appends them to a command's signature (Typer reads `__signature__`) and
hands the command one dict of raw values; `plan_fields` turns that dict into the flat fields of
`bandwall.plan.request_from_fields`, parsing units on the way.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from bandwall.units import parse_count, parse_duration_s, parse_rate_Gbps

_S = str | None
_I = int | None
_F = float | None

#: (name, type, default, help). Strings with units are parsed in `plan_fields`.
PLAN_OPTIONS: list[tuple[str, Any, Any, str]] = [
    ("model", str, "llama3-8b", "Model key (see `bandwall models`) or 'custom'."),
    ("layers", _I, None, "custom: transformer layers."),
    ("hidden", _I, None, "custom: hidden size."),
    ("heads", _I, None, "custom: attention heads."),
    ("kv_heads", _I, None, "custom: key-value heads (GQA)."),
    ("ffn", _I, None, "custom: MLP width (default 4×hidden)."),
    ("vocab", _I, None, "custom: vocabulary size."),
    ("seq_len", _I, None, "Sequence length (overrides the model's)."),
    ("experts", _I, None, "custom: routed experts (MoE)."),
    ("top_k", _I, None, "custom: experts per token."),
    ("gated_mlp", bool, False, "custom: SwiGLU MLP (3 matrices) instead of the classic GELU."),
    ("gpus", int, 8, "Total GPUs."),
    ("preset", str, "ai-factory-ib", "Infrastructure preset (see `bandwall presets`)."),
    ("gpu", _S, None, "GPU from the catalog (default: the preset's)."),
    ("gpus_per_node", _I, None, "GPUs per node (default: preset / GPU's NVLink domain)."),
    ("scale_up", _S, None, "Scale-up fabric (default: the GPU's)."),
    ("fabric", _S, None, "Scale-out fabric key (default: the preset's)."),
    ("nics_per_node", _F, None, "Scale-out NICs per node."),
    ("oversubscription", _F, None, "Scale-out oversubscription ratio (>= 1)."),
    ("sites", _I, None, "Sites the cluster is split over (needs --wan)."),
    ("wan", _S, None, "WAN fabric between sites."),
    ("bandwidth", _S, None, "Override scale-out bandwidth per NIC, e.g. 15Gbps."),
    ("latency", _S, None, "Override scale-out one-way latency, e.g. 50us."),
    ("jitter", _S, None, "Override scale-out jitter (mean = std), e.g. 200us."),
    ("loss", _F, None, "Override scale-out packet loss rate."),
    ("provider", _S, None, "Provider for prices (default: the preset's)."),
    ("price_per_gpu_hour", _F, None, "Override the price, USD per GPU-hour."),
    ("tcp_streams", int, 1, "TCP connections per peer on TCP links."),
    ("precision", str, "bf16", "bf16 or fp8 (which dense peak compute runs at)."),
    ("tp", int, 1, "Tensor-parallel degree."),
    ("pp", int, 1, "Pipeline-parallel degree."),
    ("cp", int, 1, "Context-parallel degree."),
    ("ep", int, 1, "Expert-parallel degree."),
    ("zero", int, 1, "0 DDP, 1/2 ZeRO, 3 FSDP."),
    ("micro_batch", _I, None, "Sequences (or images) per micro-batch."),
    ("schedule", str, "interleaved", "Pipeline schedule: 1f1b or interleaved."),
    ("virtual_stages", _I, None, "Model chunks per pipeline stage (interleaved)."),
    ("recompute", str, "auto", "Activation recomputation: auto, selective, full or none."),
    ("grad_dtype", str, "bf16", "Gradient reduction dtype: bf16 or fp32."),
    ("compression", str, "none", "Gradient compression: none, int8 or topk:RATIO."),
    ("local_sgd_steps", int, 1, "DiLoCo / local SGD: outer sync every H steps."),
    ("overlap", bool, True, "Overlap DP reduction with backward (--no-overlap to disable)."),
    ("tp_overlap", float, 0.0, "Share of TP communication hidden by compute."),
    ("ep_overlap", float, 0.0, "Share of EP all-to-all hidden by compute."),
    ("auto", bool, False, "Search the fastest layout that fits."),
    ("global_batch", _I, None, "Global batch in sequences (or images)."),
    ("tokens", _S, None, "Token budget, e.g. 1T or 300B (default: 20 tokens/param)."),
    ("epochs", _F, None, "Epochs for CNNs (default 90)."),
    ("compute_efficiency", _F, None, "Share of dense peak the GPUs sustain (default: model's)."),
    ("straggler_fraction", float, 0.0, "Share of GPUs that are stragglers."),
    ("straggler_slowdown", float, 0.0, "How much slower a straggler is (0.2 = 20%)."),
    ("straggler_mitigation", str, "none", "none, backup (spare workers) or async (local SGD)."),
    ("failures", bool, True, "Model failures and checkpoints (--no-failures to ignore them)."),
    ("failed_links", _I, None, "Failed scale-out links."),
    ("failed_link_fraction", _F, None, "Failed share of scale-out links, in [0, 1)."),
    ("routing", str, "auto", "After failures: adaptive, static (ECMP) or auto (the fabric's)."),
    ("slow_link_fraction", float, 0.0, "Share of scale-out links running slow, in [0, 1)."),
    ("slow_link_speed", float, 0.25, "Speed of a slow link relative to its rate."),
    ("checkpoint_GBps", _F, None, "Aggregate checkpoint write bandwidth, GB/s."),
    ("restart_s", _F, None, "Seconds to detect a failure, restart and reload."),
]


def _option(name: str, typ: Any, default: Any, help_text: str) -> inspect.Parameter:
    flag = "--" + name.replace("_", "-")
    decls = [f"{flag}/--no-{name.replace('_', '-')}"] if typ is bool and default else [flag]
    annotation = Annotated[typ, typer.Option(*decls, help=help_text)]
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


def with_plan_options(
    *, skip: tuple[str, ...] = ()
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Decorate a command taking `opts: dict` to accept every plan option on the CLI."""

    def deco(fn: Callable[..., None]) -> Callable[..., None]:
        own = [
            p for p in inspect.signature(fn, eval_str=True).parameters.values() if p.name != "opts"
        ]
        names = [o[0] for o in PLAN_OPTIONS if o[0] not in skip]
        extra = [_option(*o) for o in PLAN_OPTIONS if o[0] not in skip]

        @functools.wraps(fn)
        def wrapper(**kwargs: Any) -> None:
            opts = {k: kwargs.pop(k) for k in names}
            fn(opts=opts, **kwargs)

        wrapper.__signature__ = inspect.Signature(own + extra)  # type: ignore[attr-defined]
        return wrapper

    return deco


def plan_fields(opts: dict[str, Any]) -> dict[str, Any]:
    """Raw option values → fields for `request_from_fields` (units parsed, names mapped)."""
    f = dict(opts)
    bandwidth, latency, jitter, tokens = (
        f.pop(k, None) for k in ("bandwidth", "latency", "jitter", "tokens")
    )
    f["bandwidth_Gbps"] = parse_rate_Gbps(bandwidth, "bandwidth") if bandwidth else None
    f["latency_us"] = parse_duration_s(latency, "latency") * 1e6 if latency else None
    f["jitter_us"] = parse_duration_s(jitter, "jitter") * 1e6 if jitter else None
    f["loss_rate"] = f.pop("loss", None)
    f["tokens"] = parse_count(tokens, "tokens") if tokens else None
    return f
