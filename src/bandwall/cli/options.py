"""CLI options generated from the request schema (`bandwall.planning.request.PlanRequest`).

`with_request_options` appends one option per schema field to a command's signature (Typer reads
`__signature__`); the command receives the raw strings as `fields` and hands them to the schema,
which parses units and names the field in any error. Nothing here lists a field by hand.
"""

from __future__ import annotations

import functools
import inspect
import math
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal

import typer
from pydantic.fields import FieldInfo

from bandwall.errors import ConfigError
from bandwall.planning.request import (
    VECTOR_FIELDS,
    PlanRequest,
    choices_for,
    field_flag,
    field_info,
    field_meta,
    make_request,
)
from bandwall.units import MAX_RANGE_VALUES, parse_size

_METAVAR = {int: "INT", float: "NUMBER", str: "TEXT"}


def _base_type(info: FieldInfo) -> Any:
    """int, float, bool, str (enums and unit types count as their base)."""
    ann = info.annotation
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        ann = next(a for a in typing.get_args(ann) if a is not type(None))
    if typing.get_origin(ann) is Annotated:
        ann = typing.get_args(ann)[0]
    if isinstance(ann, type) and issubclass(ann, str):
        return str
    return ann


def _unit_example(info: FieldInfo) -> str | None:
    ann = info.annotation
    for arg in typing.get_args(ann) or (ann,):
        for meta in getattr(arg, "__metadata__", ()):
            schema = getattr(meta, "json_schema", None)
            if isinstance(schema, dict):
                for alt in schema.get("anyOf", []):
                    if alt.get("examples"):
                        return str(alt["examples"][0])
    return None


def option_help(name: str, *, with_choices: bool = True) -> str:
    """One field's help: its docstring, the allowed values and the default."""
    info = field_info(name)
    text = (info.description or "").strip()
    meta = field_meta(name)
    if with_choices and meta.get("choices"):
        text += " Choices: " + ", ".join(choices_for(str(meta["choices"]))) + "."
    ann = _base_type(info)
    enum_values = getattr(info.annotation, "__members__", None)
    if enum_values:
        text += " Choices: " + ", ".join(v.value for v in enum_values.values()) + "."
    elif typing.get_origin(info.annotation) is Literal:
        text += " Choices: " + ", ".join(map(str, typing.get_args(info.annotation))) + "."
    if info.default is not None and ann is not bool:
        default = getattr(info.default, "value", info.default)
        text += f" [default: {default}]"
    return text


def option_parameter(name: str, multi: bool) -> inspect.Parameter:
    """The Typer parameter of one request field (a comma list/range when `multi`)."""
    info = field_info(name)
    flag = "--" + field_flag(name)
    ann = _base_type(info)
    help_text = option_help(name)
    if ann is bool and not multi:
        decls = [f"{flag}/--no-{field_flag(name)}"]
        annotation = Annotated[
            bool | None, typer.Option(*decls, help=help_text, show_default=False)
        ]
        return inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation
        )
    example = _unit_example(info)
    metavar = "VALUE" if example else _METAVAR.get(ann, "TEXT")
    if multi and name in VECTOR_FIELDS:
        metavar += "[,…|:RANGE]"
    elif multi:
        metavar += "[,…]"
    text_type: Any = Annotated[
        str | None, typer.Option(flag, help=help_text, metavar=metavar, show_default=False)
    ]
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=text_type
    )


FROM_PARAMETER = inspect.Parameter(
    "from_files",
    inspect.Parameter.KEYWORD_ONLY,
    default=None,
    annotation=Annotated[
        list[str] | None,
        typer.Option(
            "--from",
            metavar="FILE",
            help="Read the job from a framework's own files (repeatable): a Megatron-LM "
            "script or log, NeMo YAML, torchtitan TOML, DeepSpeed JSON, HuggingFace "
            "config.json, a Slurm/torchrun launch line. Options given here override them.",
            show_default=False,
        ),
    ],
)


def with_configs(files: list[str] | None, fields: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """`fields` under the settings `--from` files give (the command line wins), and what was
    read (None without files); the report of what was read, defaulted and ignored goes to
    stderr."""
    if not files:
        return fields, None
    from bandwall.planning.from_config import read_configs
    from bandwall.planning.from_config.report import render
    from bandwall.report.text import err_console

    result = read_configs(files, fields)
    for line in render(result):
        err_console.print(line, markup=False, highlight=False, soft_wrap=True)
    return result.merged(fields), result


def with_request_options(
    *,
    skip: tuple[str, ...] = (),
    multi: bool = False,
    names: list[str] | None = None,
    configs: bool = False,
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command taking `fields: dict` one option per request field (`names`, default
    every plan-request field).

    `multi` (sweep) lets every option take a comma list, and vector fields a range; `configs`
    adds `--from FILE` (framework configs merged under the options, `with_configs`; a command
    with a `from_result` parameter also gets what was read).
    """
    names = [n for n in (names or list(PlanRequest.model_fields)) if n not in skip]

    def deco(fn: Callable[..., None]) -> Callable[..., None]:
        params = inspect.signature(fn, eval_str=True).parameters
        own = [p for p in params.values() if p.name not in ("fields", "from_result")]

        @functools.wraps(fn)
        def wrapper(**kwargs: Any) -> None:
            fields = {k: kwargs.pop(k) for k in names if kwargs.get(k) is not None}
            for k in names:
                kwargs.pop(k, None)
            if configs:
                fields, result = with_configs(kwargs.pop("from_files", None), fields)
                if "from_result" in params:
                    kwargs["from_result"] = result
            fn(fields=fields, **kwargs)

        extra = [FROM_PARAMETER] if configs else []
        wrapper.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            own + extra + [option_parameter(n, multi) for n in names]
        )
        return wrapper

    return deco


def request(fields: dict[str, Any], **extra: Any) -> PlanRequest:
    """The validated request of a command's options."""
    return make_request(**{**fields, **extra})


def expand(name: str, text: str) -> list[Any]:
    """A sweep option's values: 'a,b,c', a numeric range 'START:END[:xF|:+S]', or one value.

    Range ends take the field's units (1Gbps:400Gbps:x2) or, for whole numbers, K/M suffixes
    as powers of 1024 (1k:128k:x2). The count is checked before any value is built.
    """
    text = text.strip()
    info = PlanRequest.model_fields[name]
    numeric = _base_type(info) in (int, float) or _unit_example(info) is not None
    if "," in text:
        items = [t.strip() for t in text.split(",") if t.strip()]
        if not items or len(items) > MAX_RANGE_VALUES:
            raise ConfigError(f"give 1 to {MAX_RANGE_VALUES:,} values", field=name)
        return items
    if not (numeric and ":" in text):
        return [text]
    parts = text.split(":")
    if len(parts) > 3:
        raise ConfigError(f"malformed range {text!r}; use START:END[:xFACTOR|:+STEP]", field=name)
    integer = _base_type(info) is int

    def value(t: str) -> float:
        if integer:
            return float(parse_size(t, name))
        return float(getattr(make_request(**{name: t}), name))

    lo, hi = value(parts[0]), value(parts[1])
    step = parts[2].strip() if len(parts) == 3 else "x2"
    if hi < lo:
        raise ConfigError(f"range end {parts[1]!r} is below its start {parts[0]!r}", field=name)
    try:
        amount = float(step[1:])
    except ValueError:
        amount = math.nan
    if step[:1] in ("x", "*") and amount > 1 and math.isfinite(amount):
        count = math.floor(math.log(hi / lo) / math.log(amount) + 1e-9) + 1 if lo > 0 else 0
        values = [lo * amount**i for i in range(min(count, MAX_RANGE_VALUES + 1))]
    elif step[:1] == "+" and amount > 0 and math.isfinite(amount):
        count = math.floor((hi - lo) / amount + 1e-9) + 1
        values = [lo + amount * i for i in range(min(count, MAX_RANGE_VALUES + 1))]
    else:
        raise ConfigError(f"malformed step {step!r}; use xFACTOR (e.g. x2) or +STEP", field=name)
    if count < 1 or count > MAX_RANGE_VALUES:
        raise ConfigError(
            f"range {text!r} has {count:,} values; give 1 to {MAX_RANGE_VALUES:,}", field=name
        )
    return [round(v) if integer else v for v in values]
