"""Named unit constants and parsers for sizes, rates and durations.

Conventions (as in nccl-tests): message sizes use binary suffixes (1K = 1024 bytes), bandwidths
reported as GB/s use decimal gigabytes (1 GB = 1e9 bytes), and link rates in Gb/s are bits.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from bandwall.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

KiB = 1024
MiB = 1024**2
GiB = 1024**3
TiB = 1024**4
GB = 1e9
BITS_PER_BYTE = 8
US = 1e-6
MS = 1e-3

_SIZE_SUFFIX = {"": 1, "B": 1, "K": KiB, "M": MiB, "G": GiB, "T": TiB}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str, field: str = "size") -> int:
    """Parse '1K', '8M', '2G' or plain bytes into bytes (binary suffixes, like nccl-tests).

    >>> parse_size("4K")
    4096
    """
    m = _SIZE_RE.match(text)
    if not m:
        raise ConfigError(
            f"malformed size {text!r}; use bytes or a K/M/G/T suffix, e.g. 64K", field=field
        )
    value = float(m.group(1)) * _SIZE_SUFFIX[m.group(2).upper()]
    if value < 1 or value != int(value):
        raise ConfigError(f"size {text!r} must be a whole number of bytes >= 1", field=field)
    return int(value)


#: Most values a size or count range may expand to (each becomes a priced or measured row).
MAX_RANGE_VALUES = 10_000


def parse_size_range(text: str, field: str = "sizes") -> npt.NDArray[np.float64]:
    """Parse 'START:END[:xF|:+STEP]' or a comma list into an array of byte sizes.

    The default step is a factor of 2, as `nccl-tests -f 2`. The number of values is computed
    before any is built, so a hostile range is refused without allocating it.

    >>> parse_size_range("1K:8K").tolist()
    [1024.0, 2048.0, 4096.0, 8192.0]
    """
    import numpy as np

    text = text.strip()
    if "," in text:
        items = text.split(",")
        if len(items) > MAX_RANGE_VALUES:
            raise ConfigError(f"{len(items):,} values; at most {MAX_RANGE_VALUES:,}", field=field)
        return np.array([parse_size(p, field) for p in items], dtype=np.float64)
    parts = text.split(":")
    if len(parts) == 1:
        return np.array([parse_size(parts[0], field)], dtype=np.float64)
    if len(parts) > 3:
        raise ConfigError(f"malformed range {text!r}; use START:END[:xFACTOR|:+STEP]", field=field)
    start, end = parse_size(parts[0], field), parse_size(parts[1], field)
    if end < start:
        raise ConfigError(f"range end {parts[1]!r} is below its start {parts[0]!r}", field=field)
    step = parts[2].strip() if len(parts) == 3 else "x2"
    if step[:1] in ("x", "*"):
        try:
            factor = float(step[1:])
        except ValueError:
            factor = 0.0
        if not (factor > 1 and math.isfinite(factor)):
            raise ConfigError(f"step factor {step!r} must be a number > 1, e.g. x2", field=field)
        count = math.floor(math.log(end / start) / math.log(factor) + 1e-9) + 1
        _check_count(count, text, field)
        out = [round(start * factor**i) for i in range(count)]
    elif step[:1] == "+":
        inc = parse_size(step[1:], field)
        _check_count((end - start) // inc + 1, text, field)
        out = list(range(start, end + 1, inc))
    else:
        raise ConfigError(f"malformed step {step!r}; use xFACTOR (e.g. x2) or +STEP", field=field)
    return np.array(out, dtype=np.float64)


def _check_count(count: int, text: str, field: str) -> None:
    if count > MAX_RANGE_VALUES:
        raise ConfigError(
            f"range {text!r} has {count:,} values; at most {MAX_RANGE_VALUES:,}", field=field
        )


_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT])(bit|bps|b/s|Bps|B/s|B)?\s*$")
_RATE_PREFIX = {"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_BYTE_UNITS = {"Bps", "B/s", "B"}


def parse_rate_Gbps(text: str, field: str = "bandwidth") -> float:
    """Parse '15Gbps', '400gbit', '100Mbit' (bits) or '50GBps' (bytes) into Gb/s.

    >>> parse_rate_Gbps("50GBps")
    400.0
    """
    m = _RATE_RE.match(text)
    if not m:
        raise ConfigError(
            f"malformed rate {text!r}; use a number with a unit, e.g. 15Gbps or 200Mbit",
            field=field,
        )
    bits = float(m.group(1)) * _RATE_PREFIX[m.group(2).lower()]
    if m.group(3) in _BYTE_UNITS:
        bits *= BITS_PER_BYTE
    if bits <= 0:
        raise ConfigError(f"rate {text!r} must be positive", field=field)
    return bits / 1e9


_TIME_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|μs|ms|s)\s*$", re.IGNORECASE)
#: "µs" is the micro sign (U+00B5) and "μs" the Greek mu (U+03BC): people type both.
_TIME_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0}


def parse_duration_s(text: str, field: str = "duration") -> float:
    """Parse '200us', '5ms', '1.5s' into seconds."""
    m = _TIME_RE.match(text)
    if not m:
        raise ConfigError(f"malformed duration {text!r}; use e.g. 200us, 5ms or 1s", field=field)
    return float(m.group(1)) * _TIME_UNIT[m.group(2).lower()]


_COUNT_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmbt]?)\s*$", re.IGNORECASE)
_COUNT_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def parse_count(text: str, field: str = "count") -> float:
    """Parse '1T', '300B', '2.5M' token or sample counts (decimal suffixes)."""
    m = _COUNT_RE.match(text)
    if not m:
        raise ConfigError(
            f"malformed count {text!r}; use a number with K/M/B/T, e.g. 1T", field=field
        )
    value = float(m.group(1)) * _COUNT_SUFFIX[m.group(2).lower()]
    if value <= 0:
        raise ConfigError(f"count {text!r} must be positive", field=field)
    return value


def format_size(num_bytes: float) -> str:
    """Render a byte count with binary suffixes, as nccl-tests does in its size column."""
    for suffix, scale in (("T", TiB), ("G", GiB), ("M", MiB), ("K", KiB)):
        if num_bytes >= scale and num_bytes % scale == 0:
            return f"{int(num_bytes // scale)}{suffix}"
    return f"{int(num_bytes)}"
