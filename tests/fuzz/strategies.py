"""Hypothesis strategies generated from the request schemas, and hostile files.

Nothing here lists a request field by hand: `option_values(model)` reads each field's type,
bounds (`ge`/`le`/`gt`/`lt`), choices (Literal, enums, the catalog lists behind `choices`) and
units (`*_bytes`, `*_Gbps`, `*_us`, `*_s`) from the model, and draws

- valid values (inside the bounds, every choice, numbers with their units), so examples get
  past validation and reach the engine;
- boundary values (the bound itself, one step past it);
- hostile text: extreme floats (subnormals, 1e308, nan, inf, -0.0), huge and Unicode digits
  ('²', '١٢', fullwidth), unit strings in the wrong unit or case (100GB as a rate), ranges
  with subnormal or overflowing steps, control characters, paths.

`hostile_files` makes the files a careless user or an attacker hands a reader: FIFOs,
/dev/zero, folders, /proc files, gzip bombs, corrupt gzip, deep JSON, NUL bytes, lines of
60,000 characters, invalid UTF-8, empty files, symlink loops.

`EXAMPLES` is the number of examples per property: small in CI (the whole fuzz stays under
90 s on two cores), `BANDWALL_FUZZ_EXAMPLES` for a long run; `HYPOTHESIS_PROFILE=explore`
draws fresh examples instead of CI's fixed ones (tests/conftest.py).
"""

from __future__ import annotations

import enum
import gzip
import math
import os
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import annotated_types
from hypothesis import strategies as st

#: Examples per property; CI's default keeps the whole fuzz within its 90 s budget.
EXAMPLES = int(os.environ.get("BANDWALL_FUZZ_EXAMPLES", "25"))

HOSTILE_TEXT = [
    "",
    " ",
    "-1",
    "0",
    "-0.0",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e999",
    "-1e999",
    "1e308",
    "1.7976931348623157e308",
    "5e-324",
    "1e-320",
    "2.2250738585072014e-308",
    "9" * 400,
    "1" + "0" * 5000,
    "99999999999999999999999",
    "9223372036854775808",
    "0x10",
    "1_000",
    "½",
    "²",
    "١٢",  # Arabic-Indic digits
    "１２",  # fullwidth digits
    "𝟙",  # mathematical bold one
    "10µs",
    "10μs",
    "15Gbps",
    "100GB",
    "100Gb",
    "100gb",
    "12.5GBps",
    "99999999tbit",
    "1k",
    "1K",
    "1T",
    "1P",
    "15 Gb/s",
    "1K:1T:x1.0000001",
    "1:1G:+1",
    "1:2:+1e-320",
    "5e-324:0.5:x2",
    "1:1e308:x1.0000001",
    "8,",
    ",,,",
    ",",
    "1:2:3:4",
    "a" * 300,
    "../../etc/passwd",
    "/dev/zero",
    "measured:../../x",
    "measured:a/b",
    "\x00",
    "\x1b[31m",
    "\ud7ff",
    "'; rm -rf / #",
    "$(reboot)",
    "true",
    "None",
    "null",
]

_DIGITS = st.sampled_from(["0", "1", "2", "7", "8", "9", "²", "٣", "７", "𝟘"])
_UNITS = st.sampled_from(
    [
        "",
        "K",
        "k",
        "M",
        "G",
        "T",
        "P",
        "B",
        "KB",
        "KiB",
        "Gb",
        "GB",
        "Gbps",
        "GBps",
        "gbit",
        "Mbit",
        "tbit",
        "b/s",
        "B/s",
        "us",
        "µs",
        "ms",
        "s",
        "ns",
        "min",
        "x2",
        "%",
    ]
)


def extreme_floats() -> st.SearchStrategy[str]:
    """Floats as people (and attackers) type them: every IEEE class, as repr and as %g."""
    f = st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True)
    return st.one_of(f.map(repr), f.map(lambda x: f"{x:g}"), f.map(lambda x: f"{x:.17e}"))


def number_text() -> st.SearchStrategy[str]:
    """Digits (some not ASCII), huge integers, signs, units."""
    digits = st.lists(_DIGITS, min_size=1, max_size=8).map("".join)
    huge = st.integers(min_value=-(10**400), max_value=10**400).map(str)
    sign = st.sampled_from(["", "-", "+"])
    return st.one_of(
        st.tuples(sign, digits, _UNITS).map("".join),
        huge,
        st.integers(min_value=-(2**70), max_value=2**70).map(str),
    )


def range_text(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Ranges and lists built from `inner` values, with hostile steps."""
    step = st.one_of(
        st.sampled_from(
            [
                "",
                ":x2",
                ":x1.0000001",
                ":+1",
                ":+1e-320",
                ":x1e308",
                ":x0",
                ":x-2",
                ":+0",
                ":xnan",
                ":+inf",
                ":y2",
                ":x1.05",
            ]
        ),
        extreme_floats().map(lambda v: ":x" + v),
        extreme_floats().map(lambda v: ":+" + v),
    )
    rng = st.tuples(inner, inner, step).map(lambda t: f"{t[0]}:{t[1]}{t[2]}")
    lst = st.lists(inner, min_size=1, max_size=4).map(",".join)
    return st.one_of(rng, lst)


def hostile() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(HOSTILE_TEXT),
        extreme_floats(),
        number_text(),
        range_text(st.one_of(number_text(), extreme_floats())),
        st.text(max_size=40),
    )


# --- from the schema -------------------------------------------------------------------------


def _annotation(info: Any) -> tuple[Any, bool]:
    """(base annotation, whether the field parses unit strings itself)."""
    ann = info.annotation
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        ann = next(a for a in typing.get_args(ann) if a is not type(None))
    own = False
    if typing.get_origin(ann) is typing.Annotated:
        own = True
        ann = typing.get_args(ann)[0]
    return ann, own


def _bounds(info: Any) -> tuple[float | None, float | None, bool, bool]:
    lo = hi = None
    lo_open = hi_open = False
    for m in info.metadata:
        if isinstance(m, annotated_types.Ge):
            lo = float(m.ge)
        elif isinstance(m, annotated_types.Gt):
            lo, lo_open = float(m.gt), True
        elif isinstance(m, annotated_types.Le):
            hi = float(m.le)
        elif isinstance(m, annotated_types.Lt):
            hi, hi_open = float(m.lt), True
    return lo, hi, lo_open, hi_open


def _choices(model: type[Any], name: str, ann: Any) -> list[str] | None:
    if typing.get_origin(ann) is Literal:
        return [str(a) for a in typing.get_args(ann)]
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return [str(m.value) for m in ann]
    extra = model.model_fields[name].json_schema_extra
    kind = extra.get("choices") if isinstance(extra, dict) else None
    if isinstance(kind, str):
        if kind == "op":
            return ["all_reduce", "all_gather", "all", "broadcast", "all_to_all"]
        from bandwall.planning.request import choices_for

        return [c for c in choices_for(kind) if c != "measured:NAME"]
    return None


def _unit_of(name: str) -> Callable[[float], str] | None:
    """How a valid number of this field is written with its unit, when it has one."""
    if name.endswith("_Gbps"):
        return lambda v: st_choice(
            v, [f"{v:g}Gbps", f"{v * 1000:g}Mbit", f"{v / 8:g}GBps", f"{v:g}Gb"]
        )
    if name.endswith("_us"):
        return lambda v: st_choice(v, [f"{v:g}us", f"{v / 1000:g}ms", f"{v:g}µs"])
    if name in ("tokens",):
        return lambda v: st_choice(v, [f"{v / 1e12:g}T", f"{v / 1e9:g}B", f"{v:g}"])
    return None


def st_choice(v: float, options: list[str]) -> str:
    """A deterministic pick among spellings of `v` (varies with the value)."""
    return options[int(abs(v) * 7919) % len(options)] if v == v else options[0]


def valid_text(model: type[Any], name: str) -> st.SearchStrategy[str] | None:
    """Values of one field that should pass its own validation (None for booleans)."""
    info = model.model_fields[name]
    ann, _own = _annotation(info)
    if ann is bool:
        return None
    choices = _choices(model, name, ann)
    if choices:
        return st.sampled_from(choices)
    lo, hi, lo_open, hi_open = _bounds(info)
    if ann is int:
        a = int(lo if lo is not None else 0) + (1 if lo_open else 0)
        b = int(hi if hi is not None else 1 << 20) - (1 if hi_open else 0)
        small = st.integers(min_value=a, max_value=min(b, a + 64))
        return st.one_of(small, st.integers(min_value=a, max_value=b), st.sampled_from([a, b])).map(
            str
        )
    if ann is float:
        a = lo if lo is not None else 0.0
        b = hi if hi is not None else 1e6
        nums = st.floats(
            min_value=a,
            max_value=b,
            exclude_min=lo_open,
            exclude_max=hi_open,
            allow_nan=False,
            allow_infinity=False,
        )
        unit = _unit_of(name)
        return nums.map(unit) if unit else nums.map(repr)
    if name == "compression":
        return st.sampled_from(["none", "int8", "topk:0.01", "topk:0.5"])
    if name in ("sizes", "size"):
        return st.sampled_from(["1K", "1K:1M", "8,1M,1G", "64K:64M:x4", "1M"])
    if name in ("rate", "spine_rate"):
        return st.sampled_from(["1gbit", "100mbit", "10Gbps"])
    if name == "bandwidth":
        return st.sampled_from(["1Gbps", "100Gb", "12.5GBps"])
    return st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12)


def option_values(model: type[Any], name: str) -> st.SearchStrategy[str]:
    """Valid, boundary and hostile text for one field's option."""
    valid = valid_text(model, name)
    parts = [hostile()] if valid is None else [valid, valid, hostile()]
    return st.one_of(*parts)


def flag_of(model: type[Any], name: str) -> str:
    extra = model.model_fields[name].json_schema_extra
    flag = extra.get("flag") if isinstance(extra, dict) else None
    return "--" + str(flag or name.replace("_", "-"))


def cli_args(model: type[Any], names: list[str], max_size: int = 4) -> st.SearchStrategy[list[str]]:
    """1..max_size options of `model` as a user types them (booleans as --x / --no-x)."""

    @st.composite
    def draw(data: st.DrawFn) -> list[str]:
        chosen = data(st.lists(st.sampled_from(names), min_size=1, max_size=max_size, unique=True))
        argv: list[str] = []
        for name in chosen:
            ann, _ = _annotation(model.model_fields[name])
            flag = flag_of(model, name)
            if ann is bool:
                argv.append(data(st.sampled_from([flag, "--no-" + flag[2:]])))
            else:
                argv += [flag, data(option_values(model, name))]
        return argv

    return draw()


def json_values(model: type[Any], name: str) -> st.SearchStrategy[Any]:
    """JSON values of one field for the web API: valid, wrong-typed, extreme."""
    valid = valid_text(model, name)
    ann, _ = _annotation(model.model_fields[name])
    typed: list[st.SearchStrategy[Any]] = [st.booleans(), st.none()]
    if valid is not None:
        typed.append(valid)
        if ann in (int, float):
            typed.append(valid.map(lambda t: _to_number(t)))
    return st.one_of(
        *typed,
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True),
        hostile(),
        st.lists(st.integers(), max_size=3),
    )


def _to_number(text: str) -> Any:
    """The number a valid option text spells, for a JSON body (JSON has no inf or nan: such
    a text stays a string)."""
    try:
        return int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            return text
        return value if math.isfinite(value) else text


# --- hostile files ---------------------------------------------------------------------------

FILE_KINDS = (
    "missing",
    "folder",
    "fifo",
    "dev_zero",
    "proc_mem",
    "empty",
    "nul_bytes",
    "long_line",
    "non_utf8",
    "gzip_bomb",
    "corrupt_gzip",
    "deep_json",
    "symlink_loop",
    "huge_number",
    "text",
)


def make_file(kind: str, folder: Path) -> str:  # noqa: C901
    """A path of the given hostile kind inside `folder` (or a system path)."""
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / f"f-{kind}"
    if kind == "missing":
        return str(p)
    if kind == "folder":
        p.mkdir(exist_ok=True)
    elif kind == "fifo":
        if not p.exists():
            os.mkfifo(p)
    elif kind == "dev_zero":
        return "/dev/zero"
    elif kind == "proc_mem":
        return "/proc/self/mem"
    elif kind == "empty":
        p.write_bytes(b"")
    elif kind == "nul_bytes":
        p.write_bytes(b"#  size  count type\n\x00\x00\x00 1024 256 float\n" * 10)
    elif kind == "long_line":
        p.write_bytes(b"# " + b"(" * 60_000 + b"\n" + b"1 " * 30_000 + b"\n")
    elif kind == "non_utf8":
        p.write_bytes(b"\xff\xfe\xfd" * 1000)
    elif kind == "gzip_bomb":
        if not p.exists():
            with gzip.open(p, "wb", compresslevel=9) as fh:
                chunk = b"\0" * (1 << 20)
                for _ in range(600):  # 600 MiB of zeros in ~600 KiB: past every cap
                    fh.write(chunk)
    elif kind == "corrupt_gzip":
        p.write_bytes(b"\x1f\x8b\x08\x00" + os.urandom(64))
    elif kind == "deep_json":
        p.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    elif kind == "symlink_loop":
        if not p.is_symlink():
            p.symlink_to(p)
    elif kind == "huge_number":
        p.write_bytes(
            b"#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
            + b"9" * 5000
            + b" 1 float sum -1 1 1 1 0 1 1 1 0\n"
        )
    else:
        p.write_text("just some text\n")
    return str(p)


def hostile_files() -> st.SearchStrategy[str]:
    return st.sampled_from(FILE_KINDS)
