"""The mapping layer every format shares: entries read from files, field tables as data, one
engine that turns entries into request fields with their provenance.

A reader turns a file into `Entry` rows (format, key, value, file, line). Each format declares
a `FieldTable`: for every key it knows, the request field it fills and a converter
(`Rule`), or that a derived rule consumes it (`field=None`), or why it is ignored (`IGNORE`).
The engine applies the table, lets the format derive fields that depend on several keys
(`derive`), adds the framework's own defaults, and keeps for every request field where it came
from. Precedence, lowest first: a framework default, a value a file states, an override a
launch line gives for another file's key (`--training.compile` over a TOML), then an option on
the bandwall command line. Two sources at the same level that disagree are an error naming
both files and lines; a setting the model cannot express is a `Problem`, raised unless the
command line sets that field itself.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from bandwall.errors import ConfigError

#: The error field of every `--from` problem (the CLI prints `--from: FILE:LINE: ...`).
FIELD = "from"


class Level(IntEnum):
    """Where a value comes from; a higher level wins."""

    DEFAULT = 0
    FILE = 1
    OVERRIDE = 2


@dataclass(frozen=True)
class Source:
    """One place in one file."""

    file: str
    line: int | None
    key: str
    text: str = ""

    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def describe(self) -> str:
        value = f"={self.text}" if self.text else ""
        return f"{self.where()} {self.key}{value}"


@dataclass(frozen=True)
class Entry:
    """A key and its value as a file states it."""

    fmt: str
    key: str
    value: Any
    src: Source
    level: Level = Level.FILE


@dataclass(frozen=True)
class Rule:
    """What one key of a format means for the request.

    `field` is the request field it fills (None: a `derive` rule of the format reads it);
    `convert` turns the file's value into the field's (it raises ValueError with a reason);
    `note` says what the mapping assumes, shown beside the value.
    """

    field: str | None
    convert: Callable[[Any], Any] | None = None
    note: str = ""


#: A format's keys: each maps to a Rule, or to a string saying why the model ignores it.
FieldTable = Mapping[str, "Rule | str"]


@dataclass
class Assign:
    """A request field set from one or more sources."""

    field: str
    value: Any
    sources: tuple[Source, ...]
    level: Level = Level.FILE
    note: str = ""
    fmt: str = ""


@dataclass(frozen=True)
class Ignored:
    """A key the model does not use, and why."""

    src: Source
    reason: str


@dataclass(frozen=True)
class Problem:
    """A setting the model cannot express for `field`; an error unless the command line sets
    the field."""

    field: str
    reason: str
    src: Source | None = None

    def error(self) -> ConfigError:
        where = f"{self.src.where()}: {self.src.key}: " if self.src else ""
        return ConfigError(f"{where}{self.reason}", field=FIELD)


@dataclass
class Mapped:
    """One format's result: fields, the keys it ignored, the problems it found."""

    assigns: list[Assign] = field(default_factory=list)
    ignored: list[Ignored] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class Values:
    """A format's entries by key (after precedence), with the keys a rule has used."""

    def __init__(self, entries: dict[str, Entry]) -> None:
        self.entries = entries
        self.used: set[str] = set()

    def __contains__(self, key: str) -> bool:
        return key in self.entries and self.entries[key].value is not None

    def get(self, key: str, default: Any = None) -> Any:
        e = self.entries.get(key)
        if e is None or e.value is None:
            return default
        self.used.add(key)
        return e.value

    def src(self, key: str) -> Source:
        return self.entries[key].src

    def level(self, *keys: str) -> Level:
        return max((self.entries[k].level for k in keys if k in self.entries), default=Level.FILE)

    def convert(self, key: str, convert: Callable[[Any], Any]) -> Any:
        """The key's value through `convert`, or a ConfigError naming the file and line."""
        value = self.get(key)
        if value is None:
            return None
        try:
            return convert(value)
        except (ValueError, TypeError) as exc:
            raise bad_value(self.src(key), str(exc)) from None

    def assign(
        self, field_name: str, value: Any, *keys: str, note: str = "", fmt: str = ""
    ) -> Assign:
        """An Assign whose sources are `keys` (each marked used)."""
        srcs = tuple(dict.fromkeys(self.src(k) for k in keys if k in self.entries))
        self.used.update(keys)
        return Assign(field_name, value, srcs, self.level(*keys), note, fmt)


def bad_value(src: Source, reason: str) -> ConfigError:
    return ConfigError(f"{src.where()}: {src.key}: {reason}", field=FIELD)


# --- converters: each raises ValueError with a reason a user can act on --------------------

_TRUE = {"true", "1", "yes", "on", "y"}
_FALSE = {"false", "0", "no", "off", "n", "none", "null"}
#: Largest whole number a config value may hold (every request bound is far below it).
MAX_INT = 1 << 62


def to_int(value: Any) -> int:
    """A whole number: 8, '8', '8.0', '1_000', 8.0; not 8.5, not True, not '²'."""
    if isinstance(value, bool):
        raise ValueError(f"expected a whole number, got {value!r}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise ValueError(f"expected a whole number, got {value!r}")
        number = int(value)
    else:
        text = str(value).strip().replace("_", "")
        if not text or len(text) > 24 or not text.isascii():
            raise ValueError(f"expected a whole number, got {str(value)[:40]!r}")
        try:
            number = int(text)
        except ValueError:
            real = to_float(text)
            if real != int(real):
                raise ValueError(f"expected a whole number, got {text!r}") from None
            number = int(real)
    if abs(number) > MAX_INT:
        if abs(number) < 10**15:
            shown = f"{number:,}"
        else:
            try:
                shown = f"{float(number):.3g}"
            except OverflowError:  # past ~1.8e308: a 400-digit integer was a traceback
                digits = len(str(abs(number))) if abs(number) < 10**4000 else 4000
                shown = f"a {digits:,}-digit number" + ("" if digits < 4000 else " or longer")
        raise ValueError(f"{shown} is out of range (at most {MAX_INT:,})")
    return number


def to_float(value: Any) -> float:
    """A finite number (ASCII digits only)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an integer past ~1.8e308
            raise ValueError("a number beyond any float is out of range") from None
    else:
        text = str(value).strip().replace("_", "")
        if not text or len(text) > 40 or not text.isascii():
            raise ValueError(f"expected a number, got {str(value)[:40]!r}")
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"expected a number, got {text!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"expected a finite number, got {value!r}")
    return number


def to_bool(value: Any) -> bool:
    """true/false in any of the spellings configs use (True, 'true', 1, 'yes', 'on')."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"expected true or false, got {str(value)[:40]!r}")


def positive_int(value: Any) -> int:
    number = to_int(value)
    if number < 1:
        raise ValueError(f"must be >= 1, got {number}")
    return number


def choice(mapping: Mapping[str, Any]) -> Callable[[Any], Any]:
    """A converter from the file's spelling to the field's value, case-insensitive."""

    def convert(value: Any) -> Any:
        key = str(value).strip().lower()
        if key in mapping:
            return mapping[key]
        allowed = ", ".join(sorted(mapping))
        raise ValueError(f"unknown value {str(value)[:40]!r}; allowed: {allowed}")

    return convert


def constant(value: Any) -> Callable[[Any], Any]:
    """A flag whose presence means one value (a store_true flag that is not 'false')."""

    def convert(given: Any) -> Any:
        return value if to_bool(given) else None

    return convert


# --- the engine -----------------------------------------------------------------------------


def merge_entries(
    entries: Iterable[Entry],
    table: FieldTable | None = None,
    shadowed: list[Ignored] | None = None,
) -> dict[str, Entry]:
    """One entry per key: the highest level wins; two different values at the same level are
    an error naming both places when the key matters (a key the model ignores keeps the last:
    a script may pass `--split train` to one helper and `--split valid` to another). Entries
    that lose go to `shadowed`, saying what overrides them."""
    out: dict[str, Entry] = {}
    lost = shadowed if shadowed is not None else []
    for e in entries:
        old = out.get(e.key)
        if old is None:
            out[e.key] = e
        elif e.level > old.level:
            lost.append(Ignored(old.src, f"overridden by {e.src.describe()}"))
            out[e.key] = e
        elif e.level < old.level:
            lost.append(Ignored(e.src, f"overridden by {old.src.describe()}"))
        elif same(old.value, e.value):
            lost.append(Ignored(e.src, f"repeats {old.src.describe()}"))
        elif table is not None and not isinstance(table.get(e.key), Rule):
            lost.append(Ignored(old.src, f"replaced by {e.src.describe()}"))
            out[e.key] = e
        else:
            raise ConfigError(
                f"{e.src.describe()} contradicts {old.src.describe()}; "
                "remove one of them, or give the value on the command line",
                field=FIELD,
            )
    return out


def same(a: Any, b: Any) -> bool:
    if a == b:
        return True
    try:
        return to_float(a) == to_float(b)
    except ValueError:
        return str(a).strip().lower() == str(b).strip().lower()


def unresolved(text: str, src: Source | None) -> str:
    """Why a value that still holds '$' cannot be read: a shell variable past the reader's
    length bound (shell.TOO_LONG), an OmegaConf interpolation in a YAML file, shell
    arithmetic the file does not settle, or a variable set outside the file."""
    long = re.search(r"\$\{(\w+):too-long\}", text)
    if long:
        return f"is the shell variable ${long.group(1)}, which expands past 4,096 characters"
    unsettled = re.search(r"\$\{(\w+):unsettled\}", text)
    if unsettled:
        return (
            f"is the shell variable ${unsettled.group(1)}, set in a loop or differently in the "
            "branches of an `if` the file does not decide"
        )
    yaml = src is not None and str(src.file).lower().endswith((".yaml", ".yml"))
    if yaml and re.search(r"\$\{[^}]*\}", text):
        return (
            f"is the OmegaConf interpolation {text[:40]}, which bandwall does not evaluate (a "
            "resolver, or a reference it cannot settle)"
        )
    subst = re.search(r"\$\((?!\()[^)]*\)?", text)
    if subst:
        # not a variable set outside the file (fuzz round 22, C4)
        return f"is the command substitution {subst.group(0)[:40]}, which bandwall does not run"
    expansion = re.search(r"\$\{(?:#\w+|\w+(?::[-+=?]?[^}]*|[#%/^,][^}]*))\}", text)
    if expansion and not re.fullmatch(r"\$\{\w+:-[^}]*\}", expansion.group(0)):
        return (
            f"is the shell expansion {expansion.group(0)[:40]} (a substring, length or "
            "replacement), which bandwall does not evaluate"
        )
    if "$((" in text:
        return (
            f"is the shell arithmetic {text[:40]}, which the file's own values do not settle "
            "(a variable set outside it, a division by zero or an overflow)"
        )
    return f"is the shell variable {text[:40]}, set outside the file"


def apply_table(fmt: str, table: FieldTable, values: Values, mapped: Mapped) -> None:
    """Every key through the format's table: fields set, keys left to `derive`, or ignored."""
    for key, entry in values.entries.items():
        rule = table.get(key)
        if isinstance(rule, str):
            mapped.ignored.append(Ignored(entry.src, rule))
            values.used.add(key)
            continue
        if rule is None or rule.field is None:
            continue
        if entry.value is None:
            values.used.add(key)
            continue
        if isinstance(entry.value, str) and "$" in entry.value:
            values.used.add(key)
            flag = rule.field.replace("_", "-")
            what = unresolved(entry.value, entry.src)
            mapped.problems.append(Problem(rule.field, f"{what}; give --{flag}", entry.src))
            continue
        value = values.convert(key, rule.convert) if rule.convert else values.get(key)
        values.used.add(key)
        if value is not None:
            mapped.assigns.append(
                Assign(rule.field, value, (entry.src,), entry.level, rule.note, fmt)
            )


def leftovers(
    table: FieldTable, values: Values, mapped: Mapped, reason: str | Callable[[str], str]
) -> None:
    """Keys no rule used: ignored, with the format's reason for keys it does not know."""
    for key, entry in values.entries.items():
        if key not in values.used:
            if table.get(key) is not None:
                why = "not used with the other settings of this file"
            else:
                why = reason(key) if callable(reason) else reason
            mapped.ignored.append(Ignored(entry.src, why))


@dataclass(frozen=True)
class Default:
    """A field the files leave unset, filled with the framework's default."""

    field: str
    value: Any
    why: str
    fmt: str


def combine(
    results: list[tuple[str, Mapped, list[Default]]],
) -> tuple[dict[str, Assign], list[Default]]:
    """Fields from every format: the highest level wins; two formats that set one field to
    different values at the same level are an error naming both. Defaults fill what no file
    sets (the first format's default when two disagree)."""
    chosen: dict[str, Assign] = {}
    for _, mapped, _ in results:
        for a in mapped.assigns:
            old = chosen.get(a.field)
            if old is None or a.level > old.level:
                chosen[a.field] = a
            elif a.level == old.level and same(old.value, a.value):
                old.sources += tuple(s for s in a.sources if s not in old.sources)
            elif a.level == old.level:
                raise ConfigError(
                    f"{_where(a)} gives {a.field} = {a.value!r} but {_where(old)} gives "
                    f"{old.value!r}; remove one, or give --{a.field.replace('_', '-')} on the "
                    "command line",
                    field=FIELD,
                )
    defaults: list[Default] = []
    for _, _, fmt_defaults in results:
        for d in fmt_defaults:
            if d.field not in chosen and all(x.field != d.field for x in defaults):
                defaults.append(d)
    return chosen, defaults


def _where(a: Assign) -> str:
    return ", ".join(s.describe() for s in a.sources) or a.fmt or "a file"


# --- one format: its table, its derived rules, its defaults ---------------------------------

#: Request fields other formats (and the command line) have set when a format derives its
#: own: a derived rule may need them (a torchtitan global batch is local batch × dp).
Context = dict[str, Any]


@dataclass(frozen=True)
class FormatSpec:
    """A format: its name, its field table and its derived rules.

    `derive(values, mapped, ctx)` appends the Assigns and Problems that need several keys,
    and returns the framework's defaults for what the file leaves unset.
    """

    name: str
    label: str
    table: FieldTable
    derive: Callable[[Values, Mapped, Context], list[Default]]
    unknown: str | Callable[[str], str] = "not a setting the model uses"


def map_format(
    spec: FormatSpec, entries: list[Entry], ctx: Context
) -> tuple[Mapped, list[Default]]:
    """One format's entries through its table and its derived rules."""
    values = Values(merge_entries(entries, spec.table))
    mapped = Mapped()
    apply_table(spec.name, spec.table, values, mapped)
    defaults = spec.derive(values, mapped, ctx)
    for a in mapped.assigns:
        a.fmt = a.fmt or spec.name
    leftovers(spec.table, values, mapped, spec.unknown)
    return mapped, defaults


#: Why a key the model does not use is ignored, by what its name says (first match wins).
#: Shared by every format so the same kind of setting gets the same reason.
_IGNORE_PATTERNS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("activation", "recompute"), ""),  # never ignored by pattern: the format decides
    # before the optimizer's 'eps' and logging's 'log' (fuzz round 22, C5: rms_norm_eps was an
    # optimizer hyper-parameter, final_logit_softcapping logging)
    (
        ("norm_eps", "layer_norm_eps", "epsilon"),
        "numerics of the model (dropout, initialisation, norm epsilon): no effect on the step",
    ),
    (("softcap",), "attention details with no effect on the step's cost"),
    (
        (
            "lr",
            "learning_rate",
            "adam",
            "beta",
            "eps",
            "weight_decay",
            "clip",
            "max_norm",
            "warmup",
            "decay",
            "sched",
            "optim",
            "momentum",
            "loss_scale",
            "hysteresis",
        ),
        "optimizer hyper-parameter: no effect on the step time",
    ),
    (
        ("dropout", "init_method", "init_std", "seed", "epsilon", "norm_eps", "initializer"),
        "numerics of the model (dropout, initialisation, norm epsilon): no effect on the step",
    ),
    (
        (
            "data",
            "path",
            "_dir",
            "dir_",
            "tokenizer",
            "split",
            "worker",
            "vocab_file",
            "merge_file",
            "cache",
            "prefix",
        ),
        "data loading and file paths",
    ),
    (
        ("log", "tensorboard", "wandb", "profil", "timer", "print", "trace", "metric"),
        "logging and profiling",
    ),
    (
        ("save", "load", "ckpt", "checkpoint", "resume", "export"),
        "checkpointing (its cost comes from the provider's storage, not the file)",
    ),
    (("fusion", "fused", "fuse"), "kernel fusion switch (the model prices fused kernels)"),
    (
        ("rope", "rotary", "position", "alibi", "attention_mask", "softmax"),
        "attention details with no effect on the step's cost",
    ),
)


def ignore_reason(default: str) -> Callable[[str], str]:
    """Why an unknown key is ignored, from its name; `default` when nothing matches."""

    def reason(key: str) -> str:
        name = key.lower().rsplit(".", 1)[-1]
        for words, why in _IGNORE_PATTERNS:
            if why and any(w in name for w in words):
                return why
            if not why and any(w in name for w in words):
                break
        return default

    return reason


__all__ = [
    "FIELD",
    "Assign",
    "Context",
    "Default",
    "Entry",
    "FieldTable",
    "FormatSpec",
    "Ignored",
    "Level",
    "Mapped",
    "Problem",
    "Rule",
    "Source",
    "Values",
    "apply_table",
    "bad_value",
    "choice",
    "combine",
    "constant",
    "ignore_reason",
    "leftovers",
    "map_format",
    "merge_entries",
    "positive_int",
    "same",
    "to_bool",
    "to_float",
    "to_int",
]
