"""CLI options generated from the request schema (`bandwall.planning.request.PlanRequest`).

`with_request_options` appends one option per schema field to a command's signature (Typer reads
`__signature__`); the command receives the raw strings as `fields` and hands them to the schema,
which parses units and names the field in any error. Nothing here lists a field by hand.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal

import typer
from pydantic.fields import FieldInfo

from bandwall.errors import BandwallError, ConfigError
from bandwall.planning.request import (
    VECTOR_FIELDS,
    PlanRequest,
    choices_for,
    field_flag,
    field_info,
    field_meta,
    make_request,
)
from bandwall.units import MAX_RANGE_VALUES, Range, expand_range

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
        # a broken catalog overlay is reported by the command that needs it, never by --help
        with contextlib.suppress(BandwallError):
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


def field_choices(name: str) -> list[str]:
    """The values a field accepts when it is a choice (catalog keys, enums, literals), else
    none: what shell completion offers."""
    info = field_info(name)
    meta = field_meta(name)
    if meta.get("choices"):
        return choices_for(str(meta["choices"]))
    ann = info.annotation
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        ann = next(a for a in typing.get_args(ann) if a is not type(None))
    members = getattr(ann, "__members__", None)
    if members:
        return [str(v.value) for v in members.values()]
    if typing.get_origin(ann) is Literal:
        return [str(a) for a in typing.get_args(ann)]
    return []


def _completer(name: str) -> Callable[[str], list[str]]:
    """Shell completion for one field: its choices starting with what is typed (read when
    the shell asks, so building the command stays cheap)."""

    def complete(incomplete: str) -> list[str]:
        return [c for c in field_choices(name) if c.startswith(incomplete)]

    return complete


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
        str | None,
        typer.Option(
            flag,
            help=help_text,
            metavar=metavar,
            show_default=False,
            autocompletion=_completer(name),
        ),
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
    read (None without files)."""
    if not files:
        return fields, None
    from bandwall.planning.from_config import read_configs

    result = read_configs(files, fields)
    return result.merged(fields), result


def print_config_report(result: Any) -> None:
    """What `--from` read, defaulted and ignored, to stderr."""
    from bandwall.planning.from_config.report import render
    from bandwall.report.text import err_console

    for line in render(result):
        err_console.print(line, markup=False, highlight=False, soft_wrap=True)


def _from_file(exc: BaseException, result: Any) -> BaseException:
    """`exc` with the file, line and key of the value it refuses, where a `--from` file (and
    not the command line) gave that field; else `exc` itself."""
    from bandwall.errors import BandwallError

    if not isinstance(exc, BandwallError) or exc.field is None:
        return exc
    read = next((a for a in result.read if a.field == exc.field), None)
    if read is None or not read.sources or exc.field in result.overridden:
        return exc
    src = read.sources[0].describe()
    if src in exc.reason:
        return exc
    return type(exc)(f"{exc.reason} (from {src})", field=exc.field)


def _input_error(exc: BaseException) -> bool:
    """Whether an exception ends the command as bad input (exit 2): then its one line is all
    stderr holds, without the `--from` report."""
    from bandwall.errors import BandwallError

    if isinstance(exc, BandwallError):
        return True
    code = getattr(exc, "exit_code", getattr(exc, "code", None))
    return code == 2


class _RequestCommand:
    """A command whose request options are built when Typer first reads its signature.

    Building ~85 options takes tens of milliseconds; with the lazy root only the command that
    runs pays it, not every command defined beside it.
    """

    def __init__(
        self, fn: Callable[..., None], names: list[str], multi: bool, configs: bool = False
    ) -> None:
        functools.update_wrapper(self, fn)
        # a function with its own __signature__ (doctor's) must not shadow the one built here
        self.__dict__.pop("__signature__", None)
        self._fn, self._names, self._multi, self._configs = fn, names, multi, configs

    @functools.cached_property
    def _params(self) -> dict[str, inspect.Parameter]:
        return dict(inspect.signature(self._fn, eval_str=True).parameters)

    @functools.cached_property
    def __signature__(self) -> inspect.Signature:
        own = [p for p in self._params.values() if p.name not in ("fields", "from_result")]
        extra = [FROM_PARAMETER] if self._configs else []
        return inspect.Signature(
            own + extra + [option_parameter(n, self._multi) for n in self._names]
        )

    def __call__(self, **kwargs: Any) -> None:
        fields = {k: kwargs.pop(k) for k in self._names if kwargs.get(k) is not None}
        for k in self._names:
            kwargs.pop(k, None)
        result = None
        if self._configs:
            fields, result = with_configs(kwargs.pop("from_files", None), fields)
            if "from_result" in self._params:
                kwargs["from_result"] = result
        if result is None:
            self._fn(fields=fields, **kwargs)
            return
        # the report follows the answer: a request the files make invalid ends in one line,
        # which says where the refused value came from when a file gave it
        try:
            self._fn(fields=fields, **kwargs)
        except BaseException as exc:
            if not _input_error(exc):
                print_config_report(result)
                raise
            raise _from_file(exc, result) from None
        print_config_report(result)


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
    chosen = [n for n in (names or list(PlanRequest.model_fields)) if n not in skip]

    def deco(fn: Callable[..., None]) -> Callable[..., None]:
        return _RequestCommand(fn, chosen, multi, configs)

    return deco


def request(fields: dict[str, Any], **extra: Any) -> PlanRequest:
    """The validated request of a command's options."""
    return make_request(**{**fields, **extra})


def expand(name: str, text: str) -> Range:
    """A sweep option's values: 'a,b,c', a numeric range 'START:END[:xF|:+S]', or one value,
    with a note when the range stops short of its end.

    Range ends take the field's units (1Gbps:400Gbps:x2) or, for whole numbers, K/M suffixes
    as powers of 1024 (1k:128k:x2). The count is checked before any value is built.
    """
    text = text.strip()
    info = PlanRequest.model_fields[name]
    base = _base_type(info)
    numeric = base in (int, float) or _unit_example(info) is not None
    if not numeric:
        items = [t.strip() for t in text.split(",")] if "," in text else [text]
        if not all(items):  # '' or 'a,,b': a typo, not a value (an empty preset ran them all)
            raise ConfigError(f"{text!r} has an empty value", field=name)
        if len(items) > MAX_RANGE_VALUES:
            raise ConfigError(f"give 1 to {MAX_RANGE_VALUES:,} values", field=name)
        return Range(items)  # type: ignore[arg-type]
    return expand_range(text, name, number_parser(name), integer=base is int)


def number_parser(name: str) -> Callable[[str], float]:
    """One value of a numeric request field from text, in the field's units, by the same
    parsers the schema uses (no cross-field rules: a range end is not a request)."""
    from pydantic import TypeAdapter, ValidationError

    from bandwall.planning.request import config_error
    from bandwall.planning.rules import number_from_text

    info = PlanRequest.model_fields[name]
    if _unit_example(info) is None:
        return lambda t: float(number_from_text(name, info.annotation, t))
    adapter: TypeAdapter[Any] = TypeAdapter(info.annotation or float)

    def parse(t: str) -> float:
        try:
            value = adapter.validate_python(t)
        except ValidationError as exc:
            err = config_error(exc)
            raise ConfigError(err.reason, field=name) from None
        if value is None or not math.isfinite(float(value)):
            raise ConfigError(f"{t!r} is not a number", field=name)
        return float(value)

    return parse


def expand_values(name: str, text: str, notes: list[str] | None = None) -> list[Any]:
    """`expand`'s values; its note (a range stopping short of its end) is added to `notes`,
    for the command to print once its request is valid (a refused command prints one line),
    or goes to stderr now when no list is given."""
    if text.startswith("--"):
        # a plan-style flag (`--failures`) takes a value in sweep and swallowed the next option
        raise ConfigError(
            f"takes a value here (a list such as true,false or 8,16); got the option {text!r}",
            field=name,
        )
    rng = expand(name, text)
    if rng.note:
        line = f"note: --{field_flag(name)}: {rng.note}"
        if notes is None:
            print_notes([line])
        else:
            notes.append(line)
    return list(rng.values)


def print_notes(lines: list[str]) -> None:
    from bandwall.report.text import err_console

    for line in lines:
        err_console.print(line, markup=False)  # folded at the terminal's width


MaxPoints = Annotated[
    str | None,
    typer.Option(
        help="Work budget: most (grid row × layout searched) points to evaluate "
        "[default: 2,000,000, about 30 s on two cores].",
        show_default=False,
    ),
]


def parse_max_points(text: str | None) -> int | None:
    from bandwall.units import parse_int

    return None if text is None else parse_int(text, "max_points", lo=1)


def check_scale_work(
    req: PlanRequest, counts: list[int], max_points: str | None, *, override: bool = True
) -> None:
    """`scale` plans each count on its own: every count is a looped combination. `override`:
    the command has --max-points (plot and report do not)."""
    from bandwall.planning.budget import Work, check_work, layouts_searched

    work = Work(len(counts), len(counts), layouts_searched(req), len(counts))
    check_work(work, parse_max_points(max_points), "gpus", override=override)


def model_parameter(model: type[Any], name: str) -> inspect.Parameter:
    """The Typer option of one field of any request model (`bandwall.measure.requests`): the
    flag from the `flag` metadata (plus `aliases`), the help from the field's docstring with
    its choices and default, a --x/--no-x pair for booleans, a repeatable option for lists.
    Values arrive as text and are parsed by the model."""
    info: FieldInfo = model.model_fields[name]
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    flag = "--" + str(extra.get("flag") or name.replace("_", "-"))
    aliases = [str(a) for a in extra.get("aliases") or []]  # type: ignore[union-attr]
    text = (info.description or "").strip()
    ann = _base_type(info)
    if typing.get_origin(ann) is Literal:
        text += " Choices: " + ", ".join(map(str, typing.get_args(ann))) + "."
    if info.default is not None and ann is not bool and not info.is_required():
        text += f" [default: {info.default}]"
    annotation: Any
    if ann is bool:
        off = "--no-" + flag.removeprefix("--")
        annotation = Annotated[
            bool | None, typer.Option(f"{flag}/{off}", help=text, show_default=False)
        ]
    elif typing.get_origin(ann) is list:
        annotation = Annotated[
            list[str] | None, typer.Option(flag, *aliases, help=text, show_default=False)
        ]
    else:
        metavar = _METAVAR.get(ann, "TEXT")
        annotation = Annotated[
            str | None,
            typer.Option(flag, *aliases, help=text, metavar=metavar, show_default=False),
        ]
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation
    )


def with_model_options(
    model: type[Any],
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command taking `fields: dict` one option per field of `model` (fields marked
    `argument` are the command's own positional arguments); the command validates with
    `bandwall.measure.requests.build(model, **fields, ...)`."""
    names = [
        n
        for n, info in model.model_fields.items()
        if not (isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("argument"))
    ]

    def deco(fn: Callable[..., None]) -> Callable[..., None]:
        params = inspect.signature(fn, eval_str=True).parameters
        own = [p for p in params.values() if p.name not in ("fields", "from_result")]

        @functools.wraps(fn)
        def wrapper(**kwargs: Any) -> None:
            fields = {k: kwargs.pop(k) for k in names if kwargs.get(k) is not None}
            for k in names:
                kwargs.pop(k, None)
            fn(fields=fields, **kwargs)

        wrapper.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            own + [model_parameter(model, n) for n in names]
        )
        return wrapper

    return deco
