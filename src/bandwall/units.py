"""Named unit constants and the one parser of numbers, sizes, rates, durations, counts and
ranges that every command and the web API share.

Conventions (as in nccl-tests): message sizes use binary suffixes (1K = 1024 bytes), bandwidths
reported as GB/s use decimal gigabytes (1 GB = 1e9 bytes), and link rates in Gb/s are bits.
Whole-number options (GPUs, ranks, hidden size, batch) take K/M/G as powers of 1024 (`--gpus
1k` is 1,024 GPUs, `--seq-len 8k` 8,192 tokens); token and sample budgets take decimal K/M/B/T
(`--tokens 15T`).

Every parser here is strict in the same way, because each was once the way in for a crash:

- ASCII digits only (`str.isdigit()` takes '²' and '١', which `int()` then refuses or reads
  as 12), at most `MAX_NUMBER_CHARS` characters (a 400-digit size overflowed `float`);
- finite and within the caller's bounds (`nan`, `inf`, `1e999` are refused, never compared);
- bits and bytes explicit in rates: `100Gb`, `100Gbit`, `100Gbps` are bits per second,
  `12.5GBps` and `12.5GB/s` bytes per second, and a bare `100GB` (a size) is refused with the
  two spellings it could have meant; a size written `100GB` is refused the same way (binary
  `100G`/`100GiB` as nccl-tests, or `100e9` bytes);
- ranges count their values before building any, and say when the last value stops short of
  the end (`10Gbps:800Gbps:x4` ends at 640 Gb/s).

Errors are :class:`~bandwall.errors.ConfigError` naming the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bandwall.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

KiB = 1024
MiB = 1024**2
GiB = 1024**3
TiB = 1024**4
PiB = 1024**5
GB = 1e9
BITS_PER_BYTE = 8
US = 1e-6
MS = 1e-3

#: Longest numeric literal accepted (digits, point, exponent): no real input needs more, and a
#: 5,000-digit number is an attack on `int()` and `float()`, not a value.
MAX_NUMBER_CHARS = 32
#: Largest message or buffer size (1 PiB): beyond any buffer a collective or a file holds.
MAX_SIZE_BYTES = PiB
#: Fastest rate a link may be given (1 Pb/s): a thousand times today's fastest NIC.
MAX_RATE_GBPS = 1e6
#: Longest duration a field may be given unless it says otherwise (about 115 days).
MAX_DURATION_S = 1e7
#: Largest count (tokens, samples) any field takes.
MAX_COUNT = 1e18

# ASCII only: `re.ASCII` keeps `\s` from matching exotic spaces; digits are spelled [0-9].
_NUM = r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?"
_PLAIN_RE = re.compile(rf"^\s*([+-]?(?:{_NUM}))\s*$", re.ASCII)


def _finite(text: str, field: str) -> float:
    """The float a numeric literal (already matched as ASCII) spells, refusing overflow."""
    if len(text) > MAX_NUMBER_CHARS:
        raise ConfigError(
            f"{text[:12]}… has {len(text):,} characters; numbers take at most {MAX_NUMBER_CHARS}",
            field=field,
        )
    value = float(text)
    if not math.isfinite(value):
        raise ConfigError(f"{text!r} is out of range", field=field)
    return value


def _bounded(value: float, text: str, field: str, lo: float | None, hi: float | None) -> None:
    if lo is not None and value < lo:
        raise ConfigError(f"must be >= {lo:,g}, got {text.strip()!r}", field=field)
    if hi is not None and value > hi:
        raise ConfigError(f"must be <= {hi:,g}, got {text.strip()!r}", field=field)


def parse_number(
    text: str, field: str = "value", *, lo: float | None = None, hi: float | None = None
) -> float:
    """A plain finite number in ASCII ('0.25', '1e-3'), optionally bounded.

    >>> parse_number("1e-3")
    0.001
    """
    m = _PLAIN_RE.match(text)
    if not m:
        raise ConfigError(f"{text[:40]!r} is not a number", field=field)
    value = _finite(m.group(1), field)
    _bounded(value, text, field, lo, hi)
    return value


_INT_RE = re.compile(rf"^\s*([+-]?(?:{_NUM}))\s*([kKmMgG]?)\s*$", re.ASCII)
_INT_SUFFIX = {"": 1, "k": KiB, "m": MiB, "g": GiB}


def parse_int(
    text: str, field: str = "value", *, lo: int | None = None, hi: int | None = None
) -> int:
    """A whole number: ASCII digits, optional K/M/G = 1024^n (as scale's GPU ranges), or a
    whole-valued exponent form ('1e3').

    >>> parse_int("1k"), parse_int("8K"), parse_int("1e3")
    (1024, 8192, 1000)
    """
    m = _INT_RE.match(text)
    if not m:
        raise ConfigError(
            f"{text[:40]!r} is not a whole number (digits, optionally K/M/G = 1024^n, or 1e3)",
            field=field,
        )
    number, scale = m.group(1), _INT_SUFFIX[m.group(2).lower()]
    if number.lstrip("+-").isdigit():  # digits only: exact (float would round past 2**53)
        if len(number) > MAX_NUMBER_CHARS:
            _finite(number, field)  # the same 'too many characters' error
        exact = int(number) * scale
    else:
        value = _finite(number, field) * scale
        if not math.isfinite(value) or value != math.floor(value):
            raise ConfigError(f"{text.strip()!r} is not a whole number", field=field)
        exact = int(value)
    _bounded(exact, text, field, lo, hi)
    if abs(exact) > 2**63:
        raise ConfigError(f"{text.strip()!r} is out of range", field=field)
    return exact


_SIZE_SUFFIX = {"": 1, "B": 1, "K": KiB, "M": MiB, "G": GiB, "T": TiB, "P": PiB}
_DECIMAL_EXP = {"K": 3, "M": 6, "G": 9, "T": 12, "P": 15}
_SIZE_RE = re.compile(rf"^\s*({_NUM})\s*([KMGTP]?)(I?B)?\s*$", re.IGNORECASE | re.ASCII)


def parse_size(text: str, field: str = "size") -> int:
    """Parse '1K', '8M', '2G' or plain bytes into bytes (binary suffixes, like nccl-tests).

    >>> parse_size("4K")
    4096
    """
    m = _SIZE_RE.match(text)
    if not m:
        raise ConfigError(
            f"malformed size {text[:40]!r}; use bytes or a K/M/G/T/P suffix, e.g. 64K", field=field
        )
    prefix, unit = m.group(2).upper(), (m.group(3) or "").upper()
    if prefix and unit == "B":
        # '100GB' reads as 1e11 bytes to most people and as 100 GiB to nccl-tests users:
        # refused rather than guessed, like a bare '100GB' bandwidth
        raise ConfigError(
            f"size {text.strip()[:40]!r} is ambiguous: write {m.group(1)}{prefix} or "
            f"{m.group(1)}{prefix}iB for binary (as nccl-tests), or plain bytes such as "
            f"{m.group(1)}e{_DECIMAL_EXP[prefix]}",
            field=field,
        )
    value = _finite(m.group(1), field) * _SIZE_SUFFIX[prefix]
    if value < 1 or value != math.floor(value):
        raise ConfigError(f"size {text!r} must be a whole number of bytes >= 1", field=field)
    if value > MAX_SIZE_BYTES:
        raise ConfigError(f"size {text!r} is over 1 PiB", field=field)
    return int(value)


#: Most values a size or count range may expand to (each becomes a priced or measured row).
MAX_RANGE_VALUES = 10_000


#: A range whose last value is within this share of its end is taken as reaching it (no note).
NOTE_SHORTFALL = 0.01


@dataclass(frozen=True)
class Range:
    """The values a range or list expands to, and a note when the range's last value stops
    short of the end the user wrote (the CLI prints it; silence would read as "reached")."""

    values: list[float]
    note: str | None = None


def expand_range(
    text: str,
    field: str,
    parse_one: Callable[[str], float],
    *,
    integer: bool = False,
    default_step: str = "x2",
    max_values: int = MAX_RANGE_VALUES,
    show: Callable[[float], str] | None = None,
) -> Range:
    """'START:END[:xFACTOR|:+STEP]', a comma list, or one value, each end read by `parse_one`.

    The number of values is computed before any is built, in floating point that cannot
    overflow (a step of 1e-320 is a count over the limit, not an OverflowError), so a hostile
    range is refused without allocating it.

    >>> expand_range("1:8", "gpus", float).values
    [1.0, 2.0, 4.0, 8.0]
    >>> expand_range("1:10:x4", "gpus", float).note
    "range '1:10:x4' stops at 4, short of its end 10 (the next value, 16, is past it)"
    """
    show = show or (lambda v: f"{v:,.6g}")
    text = text.strip()
    if "," in text:
        items = [p.strip() for p in text.split(",")]
        if not any(items):
            raise ConfigError(f"{text!r} lists no values", field=field)
        if not all(items):  # '8,,16' is a typo, not two values
            raise ConfigError(f"{text!r} has an empty value between commas", field=field)
        if len(items) > max_values:
            raise ConfigError(f"{len(items):,} values; at most {max_values:,}", field=field)
        return Range([_whole(parse_one(p), p, field, integer) for p in items])
    parts = text.split(":")
    if len(parts) == 1:
        return Range([_whole(parse_one(text), text, field, integer)])
    if len(parts) > 3:
        raise ConfigError(f"malformed range {text!r}; use START:END[:xFACTOR|:+STEP]", field=field)
    lo, hi = parse_one(parts[0]), parse_one(parts[1])
    if hi < lo:
        raise ConfigError(f"range end {parts[1]!r} is below its start {parts[0]!r}", field=field)
    step = parts[2].strip() if len(parts) == 3 else default_step
    kind, amount_text = step[:1], step[1:]
    if kind in ("x", "*"):
        factor = _step_amount(amount_text, step, field)
        if not factor > 1:
            raise ConfigError(f"step factor {step!r} must be a number > 1, e.g. x2", field=field)
        if lo <= 0:
            raise ConfigError(f"a x{amount_text} range needs a start > 0", field=field)
        span = (math.log(hi) - math.log(lo)) / math.log(factor)
        _check_count(span, text, field, max_values)
        count = math.floor(span + 1e-9) + 1
        values = [_geometric(lo, factor, i) for i in range(count)]
        next_value = _geometric(lo, factor, count)
    elif kind == "+":
        inc = _step_amount(amount_text, step, field, parse_one)
        if not inc > 0:
            raise ConfigError(f"step {step!r} must be > 0, e.g. +8", field=field)
        span = (hi - lo) / inc
        _check_count(span, text, field, max_values)
        count = math.floor(span + 1e-9) + 1
        values = [lo + inc * i for i in range(count)]
        next_value = lo + inc * count
    else:
        raise ConfigError(f"malformed step {step!r}; use xFACTOR (e.g. x2) or +STEP", field=field)
    values = [_whole(v, text, field, integer, rounded=True) for v in values]
    note = None
    last = values[-1]
    if last < hi * (1 - NOTE_SHORTFALL):
        note = (
            f"range {text!r} stops at {show(last)}, short of its end {show(hi)} (the next "
            f"value, {show(next_value)}, is past it)"
        )
    if integer:  # x1.01 from 1 rounds to 1, 1, 1, ...: each whole number once
        values = list(dict.fromkeys(values))
    return Range(values, note)


def _geometric(lo: float, factor: float, i: int) -> float:
    """lo·factor^i without overflow in the power (5e-324 · 2^1074 is 0.5, but 2^1074 alone
    is out of float range); inf when the value itself is."""
    try:
        return lo * factor**i
    except OverflowError:
        try:
            return math.exp(math.log(lo) + i * math.log(factor))
        except OverflowError:
            return math.inf


def _step_amount(
    text: str, step: str, field: str, parse_one: Callable[[str], float] | None = None
) -> float:
    try:
        if parse_one is not None and not _PLAIN_RE.match(text):
            return parse_one(text)  # '+1K', '+5Gbps': the step in the ends' units
        return parse_number(text, field)
    except ConfigError:
        raise ConfigError(
            f"malformed step {step!r}; use xFACTOR (e.g. x2) or +STEP", field=field
        ) from None


def _whole(value: float, text: str, field: str, integer: bool, rounded: bool = False) -> float:
    if not integer:
        return value
    if rounded:
        return float(round(value))
    if value != math.floor(value):
        raise ConfigError(f"{text!r} is not a whole number", field=field)
    return value


def _check_count(span: float, text: str, field: str, max_values: int = MAX_RANGE_VALUES) -> None:
    """`span` is (values - 1), computed in floating point: inf or nan means 'too many'."""
    if not (math.isfinite(span) and span + 1 <= max_values):
        count = f"{math.floor(span) + 1:,}" if math.isfinite(span) else "too many"
        raise ConfigError(f"range {text!r} has {count} values; at most {max_values:,}", field=field)


def parse_size_range(text: str, field: str = "sizes") -> npt.NDArray[np.float64]:
    """Parse 'START:END[:xF|:+STEP]' or a comma list into an array of byte sizes.

    The default step is a factor of 2, as `nccl-tests -f 2`. The number of values is computed
    before any is built, so a hostile range is refused without allocating it.

    >>> parse_size_range("1K:8K").tolist()
    [1024.0, 2048.0, 4096.0, 8192.0]
    """
    import numpy as np

    return np.array(size_range(text, field).values, dtype=np.float64)


def size_range(text: str, field: str = "sizes") -> Range:
    """`parse_size_range` with the note when the range stops short of its end."""
    return expand_range(
        text, field, lambda t: float(parse_size(t, field)), integer=True, show=format_size
    )


_RATE_RE = re.compile(
    rf"^\s*({_NUM})\s*([kKmMgGtT]?)(bit/s|bits/s|bits|bit|bps|b/s|b|Bps|B/s|B|)\s*$", re.ASCII
)
_RATE_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_BYTE_UNITS = {"Bps", "B/s"}


def parse_rate_Gbps(
    text: str, field: str = "bandwidth", *, max_Gbps: float = MAX_RATE_GBPS
) -> float:
    """Parse a link rate into Gb/s: '100Gb', '400gbit', '15Gbps', '200Mbit', '1gbit' are bits
    per second; '50GBps' and '50GB/s' bytes per second. '100GB' is a size, not a rate, and is
    refused with both readings spelled out.

    >>> parse_rate_Gbps("50GBps"), parse_rate_Gbps("100Gb")
    (400.0, 100.0)
    """
    m = _RATE_RE.match(text)
    if not m or not (m.group(2) or m.group(3)):
        raise ConfigError(
            f"malformed rate {text[:40]!r}; use a number with a unit, e.g. 15Gbps, 100Gb or "
            "200Mbit (bits per second), 50GBps (bytes per second)",
            field=field,
        )
    number, prefix, unit = m.group(1), m.group(2), m.group(3)
    if unit == "B":
        bits = _finite(number, field) * BITS_PER_BYTE
        raise ConfigError(
            f"{text.strip()!r} is a size in bytes, not a rate: write {bits:g}{prefix}bps "
            f"(bits per second) or {number}{prefix}Bps (bytes per second)",
            field=field,
        )
    bits = _finite(number, field) * _RATE_PREFIX[prefix.lower()]
    if unit in _BYTE_UNITS:
        bits *= BITS_PER_BYTE
    if bits <= 0:
        raise ConfigError(f"rate {text!r} must be positive", field=field)
    if bits / 1e9 > max_Gbps:
        raise ConfigError(f"rate {text!r} is over {max_Gbps:,g} Gb/s", field=field)
    return bits / 1e9


_TIME_RE = re.compile(rf"^\s*({_NUM})\s*(ns|us|µs|μs|ms|s)\s*$", re.IGNORECASE)
#: "µs" is the micro sign (U+00B5) and "μs" the Greek mu (U+03BC): people type both.
_TIME_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0}


def parse_duration_s(text: str, field: str = "duration", *, max_s: float = MAX_DURATION_S) -> float:
    """Parse '200us', '5ms', '1.5s' into seconds (finite, >= 0, at most `max_s`).

    >>> parse_duration_s("5ms")
    0.005
    """
    m = _TIME_RE.match(text)
    if not m:
        raise ConfigError(
            f"malformed duration {text[:40]!r}; use e.g. 200us, 5ms or 1s", field=field
        )
    value = _finite(m.group(1), field) * _TIME_UNIT[m.group(2).lower()]
    if value > max_s:
        raise ConfigError(f"duration {text!r} is over {max_s:,g} s", field=field)
    return value


_COUNT_RE = re.compile(rf"^\s*({_NUM})\s*([kmbt]?)\s*$", re.IGNORECASE | re.ASCII)
_COUNT_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def parse_count(text: str, field: str = "count") -> float:
    """Parse '1T', '300B', '2.5M' token or sample counts (decimal suffixes).

    >>> parse_count("15T")
    15000000000000.0
    """
    m = _COUNT_RE.match(text)
    if not m:
        raise ConfigError(
            f"malformed count {text[:40]!r}; use a number with K/M/B/T, e.g. 1T", field=field
        )
    value = _finite(m.group(1), field) * _COUNT_SUFFIX[m.group(2).lower()]
    if value <= 0:
        raise ConfigError(f"count {text!r} must be positive", field=field)
    if value > MAX_COUNT:
        raise ConfigError(f"count {text!r} is over {MAX_COUNT:,.0e}", field=field)
    return value


def format_size(num_bytes: float) -> str:
    """Render a byte count with binary suffixes, as nccl-tests' size arguments are written:
    exact (and so parseable back) where it is a whole number of units under 100,000 of them;
    a size that is not (2e12 bytes, not 1953125000K) gets one decimal of the largest unit."""
    units = (("P", PiB), ("T", TiB), ("G", GiB), ("M", MiB), ("K", KiB))
    for suffix, scale in units:
        if num_bytes >= scale and num_bytes % scale == 0 and num_bytes // scale < 100_000:
            return f"{int(num_bytes // scale)}{suffix}"
    if num_bytes < 100_000:
        return f"{int(num_bytes)}"
    for suffix, scale in units:
        if num_bytes >= scale:
            return f"{num_bytes / scale:,.1f}{suffix}"
    return f"{int(num_bytes)}"  # pragma: no cover - KiB <= 100,000 bytes
