"""Request models of the measurement commands: bench, monitor, lab and import.

The same conventions as the plan request (`bandwall.planning.request`): one typed field per
option, units in the names, a docstring per field (its help), `json_schema_extra` metadata
(`group`, `flag` when the option name differs, `choices`, `argument` for a positional one).
The CLI builds its options from these models (`bandwall.cli.options.with_model_options`), and
every value is checked here, in the parent process, BEFORE anything is spawned, shaped or
written: `bench --backend mpi`, `bench train --fabric nope`, `bench --ops ,`, `lab up --rate
99999999tbit`, `lab run --timeout -1`, `monitor --interval nan` and `--count -1` are one line
naming the option, not a failed rank after torch started or a traceback.

Number strings go through `bandwall.units` (ASCII digits, finite, bounded); durations in
seconds (`*_s`) also take a unit (`--timeout 5m` is not a unit bandwall knows; `300`, `300s`
and `500ms` are).
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bandwall.docfields import DocumentedModel
from bandwall.errors import ConfigError, unknown_choice
from bandwall.planning.rules import number_from_text
from bandwall.units import (
    MAX_RANGE_VALUES,
    parse_duration_s,
    parse_number,
    parse_rate_Gbps,
    parse_size,
    size_range,
)

#: Most ranks `--local` spawns on one machine.
MAX_LOCAL_RANKS = 256
#: Longest a bench or lab run may be told to wait (a day).
MAX_TIMEOUT_S = 86_400.0
#: Fastest link the lab shapes: veth pairs and tc's token bucket top out well below this.
MAX_LAB_RATE_GBPS = 100.0
#: Collectives `bench collectives --ops` takes (as bandwall.model.collectives.Op spells them).
OPS = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "all_to_all",
    "send_recv",
)
_IFACE_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")


def _meta(group: str, **extra: Any) -> dict[str, Any]:
    return {"group": group, **extra}


class MeasureRequest(DocumentedModel):
    """Shared configuration: strict, frozen, finite, every string to a number parsed by the
    one set of unit parsers."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        allow_inf_nan=False,
        str_max_length=4096,
        # validators are built on first use, after DocumentedModel has filled the field
        # descriptions (so the JSON schema carries them)
        defer_build=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _numbers(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out = {}
        for k, v in data.items():
            info = cls.model_fields.get(k)
            if info is not None and isinstance(v, str) and k.endswith("_s"):
                v = _seconds(v, k)
            elif info is not None:
                v = number_from_text(k, info.annotation, v)
            out[k] = v
        return out


def _seconds(text: str, field: str) -> float:
    """A duration in seconds: a plain number, or one with a unit (500ms, 2s)."""
    try:
        return parse_number(text, field)
    except ConfigError:
        return parse_duration_s(text, field, max_s=MAX_TIMEOUT_S)


_M = TypeVar("_M", bound=BaseModel)


def build(model: type[_M], /, **fields: Any) -> _M:
    """A validated request from option values (None means unset); the first error is one
    ConfigError naming the option."""
    try:
        return model.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(p) for p in err.get("loc", ())]
        msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        value = err.get("input")
        field = loc[0] if loc else None
        if err.get("type") == "literal_error" and field is not None:
            allowed = typing.get_args(_base_annotation(model, field))
            raise unknown_choice(field, value, [str(a) for a in allowed]) from None
        if err.get("type") not in ("value_error", "missing", "extra_forbidden"):
            msg = f"{msg} (got {value!r:.60})"
        raise ConfigError(msg, field=field) from None


def _base_annotation(model: type[BaseModel], name: str) -> Any:
    ann = model.model_fields[name].annotation
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        ann = next(a for a in typing.get_args(ann) if a is not type(None))
    return ann


# --- bench ------------------------------------------------------------------------------------


class BenchCommon(MeasureRequest):
    backend: Literal["auto", "nccl", "gloo"] = Field(
        default="auto", json_schema_extra=_meta("bench")
    )
    """auto (nccl on CUDA, else gloo), nccl or gloo."""
    timeout_s: float = Field(
        default=300.0, gt=0, le=MAX_TIMEOUT_S, json_schema_extra=_meta("bench", flag="timeout")
    )
    """Seconds before a collective counts as hung."""
    local: int | None = Field(
        default=None, ge=2, le=MAX_LOCAL_RANKS, json_schema_extra=_meta("bench")
    )
    """Spawn N ranks on this machine."""
    db: str | None = Field(default=None, json_schema_extra=_meta("bench"))
    """Results database (default: $BANDWALL_DB or ~/.local/share/bandwall/results.db)."""
    debug: bool = Field(default=False, json_schema_extra=_meta("bench"))
    """Show every rank's traceback and torch's launcher logs on failure."""


#: Bytes per element of each `--dtype` (what the buffers are counted in, as nccl-tests does).
DTYPE_BYTES = {"float32": 4, "float64": 8, "bfloat16": 2, "float16": 2, "int32": 4}


class BenchCollectives(BenchCommon):
    """`bench collectives`: an nccl-tests-style sweep of sizes for each op."""

    ops: str = Field(
        default="all_reduce", json_schema_extra=_meta("bench", aliases=["--op"], choices="op")
    )
    """Comma list of collectives, or 'all'."""
    sizes: str = Field(default="1K:64M", json_schema_extra=_meta("bench"))
    """START:END[:xF] or a list; K/M/G = 1024^n."""
    warmup: int = Field(default=5, ge=0, le=100_000, json_schema_extra=_meta("bench"))
    """Untimed iterations per size."""
    iters: int = Field(default=20, ge=1, le=1_000_000, json_schema_extra=_meta("bench"))
    """Timed iterations per size."""
    dtype: Literal["float32", "float64", "bfloat16", "float16", "int32"] = Field(
        default="float32", json_schema_extra=_meta("bench")
    )
    """Element type of the buffers."""
    inplace: bool | None = Field(default=None, json_schema_extra=_meta("bench"))
    """Only in-place (--inplace) or only out-of-place (--no-inplace) buffers; default both,
    as nccl-tests' two column groups."""
    check: bool = Field(default=True, json_schema_extra=_meta("bench"))
    """Verify results (#wrong)."""

    @field_validator("ops")
    @classmethod
    def _ops(cls, value: str) -> str:
        if value.strip() == "all":
            return ",".join(OPS)
        items = [t.strip().lower() for t in value.split(",") if t.strip()]
        if not items:
            raise ValueError(f"{value!r} names no collective; choose from: all, {', '.join(OPS)}")
        for t in items:
            if t not in OPS:
                raise ValueError(f"unknown collective {t!r}; choose from: all, {', '.join(OPS)}")
        return ",".join(dict.fromkeys(items))

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, value: str) -> str:
        size_range(value, "sizes")  # refused here (count, units, order), before any spawn
        return value

    @model_validator(mode="after")
    def _whole_elements(self) -> BenchCollectives:
        """A size below one element was measured as one element: `--sizes 1,2,3,5` gave four
        identical 4-byte rows that fits then counted as four samples (fuzz round 18, D1)."""
        elem = DTYPE_BYTES[self.dtype]
        small = [int(v) for v in size_range(self.sizes, "sizes").values if v < elem]
        if small:  # a ConfigError passes pydantic through: the option is named, --sizes
            raise ConfigError(
                f"{small[0]:,} B is less than one {self.dtype} element ({elem} B); "
                f"give sizes of at least {elem} B",
                field="sizes",
            )
        return self

    @property
    def op_list(self) -> tuple[str, ...]:
        return tuple(self.ops.split(","))

    @property
    def size_list(self) -> tuple[int, ...]:
        """The sizes as measured, whole elements (nccl-tests' count = bytes / element size),
        each once: 5 and 6 bytes of float32 are both the 4-byte row."""
        elem = DTYPE_BYTES[self.dtype]
        snapped = (int(v) // elem * elem for v in size_range(self.sizes, "sizes").values)
        return tuple(dict.fromkeys(snapped))


class BenchLinks(BenchCommon):
    """`bench links`: pairwise bandwidth and latency."""

    size: str = Field(default="16M", json_schema_extra=_meta("bench"))
    """Bulk message size for bandwidth."""
    iters: int = Field(default=10, ge=1, le=100_000, json_schema_extra=_meta("bench"))
    """Bulk transfers per pair."""

    @field_validator("size")
    @classmethod
    def _size(cls, value: str) -> str:
        size = parse_size(value, "size")
        if size > 1 << 34:
            raise ValueError("at most 16G per message")
        if size < 4 or size % 4:
            # the buffer is float32: 3 B was measured as 4 B and 5-7 B too (fuzz round 23, D2)
            raise ValueError(
                f"{size:,} B is not a whole number of float32 elements (4 B each); "
                f"give a multiple of 4 B, e.g. {max(size // 4, 1) * 4:,}"
            )
        return value


class BenchTrain(BenchCommon):
    """`bench train`: real DDP steps."""

    model: Literal["mlp", "resnet-tiny", "gpt-tiny"] = Field(
        default="mlp", json_schema_extra=_meta("bench")
    )
    """Model to train."""
    warmup: int = Field(default=2, ge=0, le=10_000, json_schema_extra=_meta("bench"))
    """Untimed step pairs."""
    iters: int = Field(default=8, ge=1, le=100_000, json_schema_extra=_meta("bench"))
    """Timed step pairs (DDP step + no_sync step)."""
    fabric: str | None = Field(default=None, json_schema_extra=_meta("bench", choices="fabric"))
    """Also predict with this fabric, e.g. measured:lab1g."""
    bandwidth: str | None = Field(default=None, json_schema_extra=_meta("bench"))
    """Link rate for the prediction (default: the lab's), e.g. 1Gbps."""

    @field_validator("fabric")
    @classmethod
    def _fabric(cls, value: str | None) -> str | None:
        if value is None:
            return value
        from bandwall.catalog import load_catalog

        load_catalog().fabric(value)  # unknown keys and missing profiles refused here
        return value

    @field_validator("bandwidth")
    @classmethod
    def _bandwidth(cls, value: str | None) -> str | None:
        if value is not None:
            parse_rate_Gbps(value, "bandwidth")
        return value

    @model_validator(mode="after")
    def _bandwidth_needs_fabric(self) -> BenchTrain:
        if self.bandwidth is not None and self.fabric is None:
            raise ConfigError("is the rate of the prediction; give --fabric too", field="bandwidth")
        return self


# --- monitor ----------------------------------------------------------------------------------


class Monitor(MeasureRequest):
    """`monitor`: NIC counters sampled every interval."""

    iface: list[str] | None = Field(default=None, max_length=64, json_schema_extra=_meta("monitor"))
    """Interface(s) to watch."""
    interval_s: float = Field(
        default=1.0, ge=0.01, le=3600, json_schema_extra=_meta("monitor", flag="interval")
    )
    """Seconds between samples."""
    count: int | None = Field(default=None, ge=1, le=1 << 40, json_schema_extra=_meta("monitor"))
    """Stop after N samples."""
    prometheus: str | None = Field(default=None, json_schema_extra=_meta("monitor"))
    """Serve Prometheus metrics on [HOST]:PORT (host 127.0.0.1 if omitted; other hosts need
    --allow-remote)."""
    allow_remote: bool = Field(default=False, json_schema_extra=_meta("monitor"))
    """Allow --prometheus on a non-loopback address (the counters name interfaces and
    hosts)."""

    @field_validator("iface")
    @classmethod
    def _iface(cls, value: list[str] | None) -> list[str] | None:
        for name in value or []:
            if not _IFACE_RE.match(name):
                raise ValueError(
                    f"{name[:40]!r} is not an interface name (1-15 of A-Z a-z 0-9 _ . : @ -)"
                )
        return value

    @field_validator("prometheus")
    @classmethod
    def _listen(cls, value: str | None) -> str | None:
        if value is not None:
            prometheus_address(value)
        return value

    @model_validator(mode="after")
    def _remote(self) -> Monitor:
        if self.prometheus is not None:
            host, _ = prometheus_address(self.prometheus)
            if not _loopback(host) and not self.allow_remote:
                raise ConfigError(
                    f"{host!r} is not a loopback address: the metrics name this machine's "
                    "interfaces and have no access control; pass --allow-remote to serve "
                    "other machines",
                    field="prometheus",
                )
        return self


def prometheus_address(text: str) -> tuple[str, int]:
    """(host, port) of '[HOST]:PORT'; the host is 127.0.0.1 when omitted."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()) or not 0 < int(port[:6]) < 65536:
        raise ValueError(f"{text[:40]!r} must be [HOST]:PORT with a port 1-65535, e.g. :9100")
    host = host.strip("[]") or "127.0.0.1"
    if not re.match(r"^[A-Za-z0-9_.:-]{1,253}$", host):
        raise ValueError(f"{host[:40]!r} is not a host name or address")
    return host, int(port)


def _loopback(host: str) -> bool:
    import ipaddress

    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# --- lab --------------------------------------------------------------------------------------


class LabUp(MeasureRequest):
    """`lab up`: the emulated cluster's shape, checked before anything is created."""

    hosts: int = Field(default=4, ge=2, le=64, json_schema_extra=_meta("lab"))
    """Hosts (one rank each)."""
    rate: str = Field(default="1gbit", json_schema_extra=_meta("lab"))
    """Link rate of every host, e.g. 1gbit."""
    rates: str | None = Field(default=None, json_schema_extra=_meta("lab"))
    """Per-host rates, e.g. 1gbit,1gbit,250mbit."""
    name: str = Field(default="lab", json_schema_extra=_meta("lab"))
    """Lab name (1-8 lowercase letters/digits)."""
    delay: str | None = Field(default=None, json_schema_extra=_meta("lab"))
    """One-way delay between hosts, e.g. 5ms (RTT 10 ms), via a userspace delay line."""
    jitter: str | None = Field(default=None, json_schema_extra=_meta("lab"))
    """Extra one-way delay per packet, exponential with this mean, e.g. 0.5ms."""
    cc: str | None = Field(default=None, json_schema_extra=_meta("lab"))
    """TCP congestion control in the lab, e.g. reno (default: the machine's)."""
    loss: str | None = Field(default=None, json_schema_extra=_meta("lab"))
    """Packet loss per path, e.g. 0.1% (links up to 200 Mbit/s)."""
    spines: int | None = Field(default=None, ge=1, le=64, json_schema_extra=_meta("lab"))
    """Two leaves joined by this many ECMP spine paths (docs/lab-ecmp.md)."""
    spine_rate: str | None = Field(default=None, json_schema_extra=_meta("lab"))
    """Rate of each spine path (default: --rate)."""
    layout: Literal["alternate", "packed"] | None = Field(
        default=None, json_schema_extra=_meta("lab")
    )
    """With --spines: hosts on the leaves alternate (default) or packed."""

    @field_validator("rate", "spine_rate")
    @classmethod
    def _rate(cls, value: str | None, info: Any) -> str | None:
        if value is not None:
            parse_rate_Gbps(value, info.field_name, max_Gbps=MAX_LAB_RATE_GBPS)
        return value

    @field_validator("rates")
    @classmethod
    def _rates(cls, value: str | None) -> str | None:
        if value is not None:
            items = value.split(",")
            if len(items) > 64:
                raise ValueError("at most 64 rates (one per host)")
            for r in items:
                parse_rate_Gbps(r.strip(), "rates", max_Gbps=MAX_LAB_RATE_GBPS)
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        from bandwall.measure.lab.netns import check_name

        check_name(value)
        return value

    @field_validator("delay", "jitter")
    @classmethod
    def _duration(cls, value: str | None, info: Any) -> str | None:
        if value is not None:
            parse_duration_s(value, info.field_name, max_s=1.0)
        return value

    @field_validator("loss")
    @classmethod
    def _loss(cls, value: str | None) -> str | None:
        if value is not None:
            from bandwall.measure.lab.netns import parse_loss

            text = value.strip()
            number = text[:-1] if text.endswith("%") else text
            parse_number(number, "loss", lo=0)
            parse_loss(value)
        return value

    @field_validator("cc")
    @classmethod
    def _cc(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[a-z][a-z0-9_]{0,15}", value):
            raise ValueError(f"{value[:40]!r} is not a congestion control name (e.g. reno, cubic)")
        return value

    @model_validator(mode="after")
    def _spine_options(self) -> LabUp:
        if self.spines is not None:
            for name in ("rates", "delay", "jitter", "loss"):
                if getattr(self, name) is not None:
                    raise ConfigError(
                        "not available with --spines (shaped veth links only)", field=name
                    )
        else:
            for name in ("spine_rate", "layout"):
                if getattr(self, name) is not None:
                    raise ConfigError("needs --spines", field=name)
        if self.rates is not None and len(self.rates.split(",")) != self.hosts:
            raise ConfigError(
                f"{len(self.rates.split(','))} rates given for {self.hosts} hosts; give one "
                "per host",
                field="rates",
            )
        return self


class LabRun(MeasureRequest):
    """`lab run NAME -- CMD`."""

    name: str = Field(json_schema_extra=_meta("lab", argument=True))
    """Lab name."""
    straggler: str | None = Field(default=None, json_schema_extra=_meta("lab"))
    """Delay ranks, e.g. 2:0.05 (seconds per step)."""
    timeout_s: float | None = Field(
        default=None, gt=0, le=MAX_TIMEOUT_S, json_schema_extra=_meta("lab", flag="timeout")
    )
    """Kill the run after this many seconds."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        from bandwall.measure.lab.netns import check_name

        check_name(value)
        return value

    @field_validator("straggler")
    @classmethod
    def _straggler(cls, value: str | None) -> str | None:
        if value is None:
            return value
        for item in value.split(","):
            rank, sep, delay = item.partition(":")
            if not sep or not (rank.isascii() and rank.isdigit()) or len(rank) > 3:
                raise ValueError(f"{item[:40]!r} must be RANK:SECONDS, e.g. 2:0.05")
            parse_number(delay, "straggler", lo=0, hi=60)
        return value


# --- import -----------------------------------------------------------------------------------


class ImportNcclTests(MeasureRequest):
    """`import nccl-tests LOG`."""

    log: str = Field(json_schema_extra=_meta("import", argument=True))
    """nccl-tests output (stdout of *_perf), '-' = stdin."""
    op: str | None = Field(default=None, json_schema_extra=_meta("import", choices="op"))
    """Collective, when the log does not say (e.g. all_gather)."""
    ranks: int | None = Field(default=None, ge=2, le=1 << 24, json_schema_extra=_meta("import"))
    """Ranks, when the log has no '# Using devices'."""
    db: str | None = Field(default=None, json_schema_extra=_meta("import"))
    """Results database (default: $BANDWALL_DB or ~/.local/share/bandwall/results.db)."""

    @field_validator("op")
    @classmethod
    def _op(cls, value: str | None) -> str | None:
        if value is not None and value.strip().lower() not in OPS:
            raise ValueError(f"unknown collective {value[:40]!r}; choose from: {', '.join(OPS)}")
        return None if value is None else value.strip().lower()


#: Every measurement request model, for the fuzz and the docs.
MODELS: tuple[type[MeasureRequest], ...] = (
    BenchCollectives,
    BenchLinks,
    BenchTrain,
    Monitor,
    LabUp,
    LabRun,
    ImportNcclTests,
)

__all__ = [
    "MAX_RANGE_VALUES",
    "MODELS",
    "BenchCollectives",
    "BenchLinks",
    "BenchTrain",
    "ImportNcclTests",
    "LabRun",
    "LabUp",
    "MeasureRequest",
    "Monitor",
    "build",
]
