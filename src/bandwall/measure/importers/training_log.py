"""Read a training job's own log: the time per step and what the framework says about it.

Formats, each recognised line by line (linear-time patterns on lines safeio has capped):

- Megatron-LM / Megatron-DeepSpeed / NeMo 2 iteration lines: `iteration N/ M | ... | elapsed
  time per iteration (ms): X | throughput per GPU (TFLOP/s/GPU): X | loss scale: X | number of
  skipped iterations: N | number of nan iterations: N |` (also `(s)`, `TFLOPs: X`, `samples per
  second: X`), Megatron's `memory (MB) | ... | max allocated: X` lines, NeMo 2's
  `global_step: N | ... | train_step_timing in s: X`;
- torchtitan metrics: `step: N  loss: X  memory: X GiB(P%)  tps: N  tflops: X  mfu: P%`
  (ANSI colours stripped);
- DeepSpeed: the throughput timer (`epoch=E/micro_step=M/global_step=N, RunningAvgSamplesPerSec=X,
  CurrSamplesPerSec=X, MemAllocated=XGB, MaxMemAllocated=XGB`), `step=N, skipped=K` lines,
  loss-scale overflows, and the `wall_clock_breakdown` timers (`time (ms) | fwd: X | bwd: X |
  step: X`, kept per phase: with an overlapped optimizer step they do not add up to the step);
- HuggingFace Trainer: its header (batch sizes, total steps), tqdm progress (`X s/it`,
  `X it/s`), `{'loss': ...}` and `{'train_runtime': ...}` lines;
- PyTorch Lightning / NeMo 1 progress bars (`N/M [elapsed<left, X it/s, loss=..., ...]`).

Rank prefixes (`0: `, `[rank3]:`, `[default7]:`) are read and several ranks' lines for one step
become one step. Nothing here knows the model: `run_compare` joins a log with a plan.
"""

from __future__ import annotations

import collections
import math
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bandwall.errors import ConfigError

GIB = 1 << 30
MIB = 1 << 20
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\[(?:\d{1,3};)*\d{1,3}m")
_RANK = re.compile(r"^\s*(?:\[rank(\d{1,7})\]:|\[default(\d{1,7})\]:|(\d{1,7}):\s)")
_NUM = r"[-+]?(?:\d{1,30}(?:,\d{3}){0,10}(?:\.\d{0,30})?|\.\d{1,30})(?:[eE][-+]?\d{1,4})?"
_KV_SPLIT = re.compile(r"\s*\|\s*")
_ITER = re.compile(r"iteration\s{0,40}(\d{1,12})\s{0,5}/\s{0,40}(\d{1,12})")
_STAMP = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:[,.](\d{1,6}))?")
_TITAN = re.compile(r"\bstep:\s{0,10}(\d{1,12})\b")
_TITAN_FIELD = re.compile(
    rf"\b(loss|grad_norm|memory|tps|wps|tflops|mfu):\s{{0,10}}({_NUM})\s{{0,3}}(GiB|%)?"
)
_DS_TIMER = re.compile(
    rf"global_step=(\d{{1,12}}),\s*RunningAvgSamplesPerSec=({_NUM}),\s*"
    rf"CurrSamplesPerSec=({_NUM})(?:,\s*MemAllocated=({_NUM})GB,\s*MaxMemAllocated=({_NUM})GB)?"
)
_DS_STEP = re.compile(r"\bstep=(\d{1,12}),\s*skipped=(\d{1,12})")
_DS_SCALE = re.compile(rf"Attempted loss scale:\s*({_NUM}),\s*reducing to\s*({_NUM})")
_DS_TIMES = re.compile(r"^\s*time \(ms\)\s*\|")
_TQDM = re.compile(
    rf"(\d{{1,12}})/(\d{{1,12}})\s\[[\d:]{{1,12}}<[\d:?]{{1,12}},\s{{0,5}}({_NUM})(s/it|it/s)"
)
#: What follows a tqdm bar's description: ' 25%|##   | ' (the percentage and the bar).
_BAR_DESC = re.compile(r"\s*\d{1,3}%\|[^|]{0,200}\|\s*$")
_POSTFIX = re.compile(rf"\b([a-z_]{{1,40}})=({_NUM})")
_HF_DICT = re.compile(r"^\s*\{'(?:loss|train_runtime|eval_loss)'")
_HF_HEADER = re.compile(
    r"(Instantaneous batch size per device|Total train batch size \(w\. parallel, distributed "
    r"& accumulation\)|Total optimization steps|Gradient Accumulation steps)\s*=\s*(\d{1,12})"
)
_MEGATRON_MEM = re.compile(rf"max allocated:\s*({_NUM})")
_MICRO_BATCHES = re.compile(r"setting number of micro-batches to constant (\d{1,12})")


def _num(text: str) -> float:
    value = float(text.replace(",", ""))
    if not math.isfinite(value):
        raise ValueError(text)
    return value


@dataclass
class Step:
    """What the log says about one training step (or logging interval ending at it)."""

    step: int
    line: int
    rank: int | None = None
    step_time_s: float | None = None
    tflops_per_gpu: float | None = None
    mfu: float | None = None
    tokens_per_s_per_gpu: float | None = None
    samples_per_s: float | None = None
    memory_bytes: float | None = None
    loss: float | None = None
    loss_scale: float | None = None
    skipped: int | None = None
    """Skipped (overflow) iterations in the interval this line reports."""
    nan: int | None = None
    global_batch: int | None = None
    timestamp: float | None = None
    terms_s: dict[str, float] = field(default_factory=dict)
    """Per-phase times the framework timed (DeepSpeed wall_clock_breakdown)."""
    bar: tuple[str, int] | None = None
    """The tqdm bar this step was read from: its description and N ('desc: 25%|##| n/N')."""


@dataclass
class TrainingLog:
    path: str
    framework: str
    steps: list[Step]
    lines: int
    header: dict[str, int] = field(default_factory=dict)
    loss_scale_changes: list[tuple[int, float, float]] = field(default_factory=list)
    """(line, from, to) of each loss-scale reduction (fp16 overflow)."""
    timers_ms: dict[str, list[float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def by_step(self) -> list[Step]:
        """One record per step (ranks merged: the median of what they report), in order."""
        groups: dict[int, list[Step]] = {}
        for s in self.steps:
            groups.setdefault(s.step, []).append(s)
        out = []
        for number in sorted(groups):
            group = groups[number]
            merged = Step(number, group[0].line, None)
            for name in (
                "step_time_s",
                "tflops_per_gpu",
                "mfu",
                "tokens_per_s_per_gpu",
                "samples_per_s",
                "memory_bytes",
                "loss",
                "loss_scale",
                "timestamp",
            ):
                values = [getattr(s, name) for s in group if getattr(s, name) is not None]
                if values:
                    setattr(merged, name, statistics.median(values))
            for name in ("skipped", "nan", "global_batch"):
                ints = [getattr(s, name) for s in group if getattr(s, name) is not None]
                if ints:
                    setattr(merged, name, max(ints))
            out.append(merged)
        return out


def _stamp(line: str) -> float | None:
    m = _STAMP.search(line[:64])
    if not m:
        return None
    try:
        when = datetime.fromisoformat(m.group(1).replace(" ", "T"))
    except ValueError:
        return None
    frac = float("0." + m.group(2)) if m.group(2) else 0.0
    return when.timestamp() + frac


def _megatron(line: str, number: int, rank: int | None) -> Step | None:
    it = _ITER.search(line)
    step_number = int(it.group(1)) if it else None
    if step_number is None:
        m = re.search(r"global_step:\s{0,5}(\d{1,12})\s{0,5}\|", line)
        if not m or "train_step_timing" not in line:
            return None
        step_number = int(m.group(1))
    s = Step(step_number, number, rank, timestamp=_stamp(line))
    for part in _KV_SPLIT.split(line):
        key, sep, value = part.rpartition(":")
        if not sep:
            continue
        key = key.strip().lower()
        try:
            v = _num(value.strip())
        except ValueError:
            continue
        if key.startswith("elapsed time per iteration (ms)"):
            s.step_time_s = v / 1e3
        elif key.startswith("elapsed time per iteration (s)") or key == "train_step_timing in s":
            s.step_time_s = v
        elif key.startswith("throughput per gpu") or key == "tflops":
            s.tflops_per_gpu = v
        elif key == "samples per second":
            s.samples_per_s = v
        elif key == "loss scale":
            s.loss_scale = v
        elif key == "number of skipped iterations":
            s.skipped = int(v)
        elif key == "number of nan iterations":
            s.nan = int(v)
        elif key in ("global batch size", "global_batch_size"):
            s.global_batch = int(v)
        elif key in ("lm loss", "reduced_train_loss"):
            s.loss = v
    # a step of no or negative time is not a duration: it was fitted, and the error then blamed
    # the config (fuzz round 19, D2)
    return s if s.step_time_s is not None and s.step_time_s > 0 else None


def _torchtitan(line: str, number: int, rank: int | None) -> Step | None:
    m = _TITAN.search(line)
    if not m or ("tps:" not in line and "wps:" not in line):
        return None
    s = Step(int(m.group(1)), number, rank, timestamp=_stamp(line))
    for key, value, unit in _TITAN_FIELD.findall(line):
        v = _num(value)
        if key == "memory":
            s.memory_bytes = v * GIB if unit == "GiB" else v
        elif key in ("tps", "wps"):
            s.tokens_per_s_per_gpu = v
        elif key == "tflops":
            s.tflops_per_gpu = v
        elif key == "mfu":
            s.mfu = v / 100
        elif key == "loss":
            s.loss = v
    return s if s.tokens_per_s_per_gpu is not None else None


def _deepspeed(line: str, number: int, rank: int | None, log: TrainingLog) -> Step | None:
    m = _DS_TIMER.search(line)
    if m:
        s = Step(int(m.group(1)), number, rank, timestamp=_stamp(line))
        s.samples_per_s = _num(m.group(3))
        if m.group(5):
            s.memory_bytes = _num(m.group(5)) * GIB
        return s
    m = _DS_STEP.search(line)
    if m and "lr=" in line:
        # DeepSpeed counts skipped steps since the start; per interval after parsing
        s = Step(int(m.group(1)), number, rank, timestamp=_stamp(line))
        s.terms_s["skipped_total"] = float(m.group(2))
        return s
    m = _DS_SCALE.search(line)
    if m:
        log.loss_scale_changes.append((number, _num(m.group(1)), _num(m.group(2))))
        return None
    if _DS_TIMES.match(line):
        timers: dict[str, float] = {}
        for part in _KV_SPLIT.split(line)[1:]:
            key, sep, value = part.partition(":")
            if sep:
                try:
                    timers[key.strip()] = _num(value.strip())
                except ValueError:
                    continue
        for key, value in timers.items():
            log.timers_ms.setdefault(key, []).append(value)
    return None


def _progress(line: str, number: int, rank: int | None, log: TrainingLog) -> list[Step]:
    """tqdm / Lightning progress: the last update of each (carriage-return) segment."""
    out: list[Step] = []
    for segment in line.split("\r")[-64:]:
        m = _TQDM.search(segment)
        if not m:
            continue
        done, rate, unit = int(m.group(1)), _num(m.group(3)), m.group(4)
        if rate <= 0 or done == 0:
            continue
        # one bar across epochs: Lightning's 'Epoch 3:' is the training bar as 'Epoch 0:' was
        desc = re.sub(r"\d+", "#", _BAR_DESC.sub("", segment[: m.start()]).strip())
        s = Step(done, number, rank, bar=(desc[:80], int(m.group(2))))
        s.step_time_s = rate if unit == "s/it" else 1 / rate
        for key, value in _POSTFIX.findall(segment[m.end() :]):
            if key in ("reduced_train_loss", "loss") and s.loss is None:
                s.loss = _num(value)
            elif key == "train_step_timing":
                s.step_time_s = _num(value)
        out.append(s)
    return out


#: Most step records one log keeps (a 200 MB log of one-line steps stays bounded in memory).
MAX_STEPS = 200_000


class LogParser:
    """A streaming reader: `feed(number, line)` for every line, then `finish()` (the shape
    doctor's format registry expects)."""

    def __init__(self, path: str = "<log>") -> None:
        self.log = TrainingLog(path, "unknown", [], 0)
        self._kinds: dict[str, int] = {}
        self._unreadable = 0

    def feed(self, number: int, raw: str) -> None:
        """One line; a line holding a value past float range (an overflowed counter printed
        as 1e999 or inf) is skipped with a note, as the rest of the log still reads."""
        try:
            self._feed(number, raw)
        except ValueError as e:
            self._unreadable += 1
            if self._unreadable <= 3:
                self.log.notes.append(f"line {number}: {e} is not a finite number; line skipped")

    def _feed(self, number: int, raw: str) -> None:  # noqa: C901
        log = self.log
        log.lines = number
        line = _ANSI.sub("", raw)
        rm = _RANK.match(line)
        rank = next((int(g) for g in rm.groups() if g is not None), None) if rm else None
        found: list[Step] = []
        kind = ""
        if "iteration" in line or "train_step_timing" in line:
            s = _megatron(line, number, rank)
            if s:
                found, kind = [s], "megatron"
        if not kind and "step:" in line:
            s = _torchtitan(line, number, rank)
            if s:
                found, kind = [s], "torchtitan"
        if not kind and (
            "global_step=" in line
            or "skipped=" in line
            or "loss scale" in line
            or "time (ms)" in line
        ):
            s = _deepspeed(line, number, rank, log)
            kind = "deepspeed" if s or "time (ms)" in line or "Attempted loss scale" in line else ""
            found = [s] if s else []
        if not kind and ("/it" in line or "it/s" in line):
            found = _progress(line, number, rank, log)
            if found:
                kind = "lightning" if "Epoch " in line and "v_num" in line else "hf-trainer"
        if not kind:
            h = _HF_HEADER.search(line)
            if h:
                log.header[h.group(1)] = int(h.group(2))
                self._kinds["hf-trainer"] = self._kinds.get("hf-trainer", 0) + 1
            at = line.find("memory (MB)")
            m = _MEGATRON_MEM.search(line, at) if at >= 0 else None
            if m:
                found = [Step(-1, number, rank, memory_bytes=_num(m.group(1)) * MIB)]
            m = _MICRO_BATCHES.search(line)
            if m:
                log.header["micro-batches"] = int(m.group(1))
            if _HF_DICT.match(line):
                _hf_dict(line, number, log)
                self._kinds["hf-trainer"] = self._kinds.get("hf-trainer", 0) + 1
        if kind:
            self._kinds[kind] = self._kinds.get(kind, 0) + 1
        if found and len(log.steps) + len(found) > MAX_STEPS:
            if not any("step records" in n for n in log.notes):
                log.notes.append(f"line {number}: only the first {MAX_STEPS:,} step records kept")
            return
        log.steps += found

    def finish(self) -> TrainingLog:
        log = self.log
        _training_bar(log)
        _memory_lines(log)
        _skipped_intervals(log)
        if self._kinds:
            log.framework = max(self._kinds, key=lambda k: self._kinds[k])
        _fill_from_timestamps(log)
        return log


def parse_lines(lines: Iterable[str], path: str = "<log>") -> TrainingLog:
    """Every step a log reports, with the framework that wrote it."""
    parser = LogParser(path)
    for number, raw in enumerate(lines, 1):
        parser.feed(number, raw)
    return parser.finish()


def _training_bar(log: TrainingLog) -> None:
    """Keep the steps of the training loop's progress bar only. HF logs draw other bars
    first (tokenising, loading checkpoint shards, downloads), whose frames read as steps of
    10 ms, and the real 218 s steps were then dropped as outliers (fuzz round 21, B1). The
    training bar counts the header's 'Total optimization steps' and has no description
    (other bars name their work); without a header, it is the bar whose frames carry a
    loss, else the one with the most updates."""
    bars = [s.bar for s in log.steps if s.bar is not None]
    counts = collections.Counter(bars)
    if len(counts) < 2:
        return
    total = log.header.get("Total optimization steps")
    with_loss = {s.bar for s in log.steps if s.bar is not None and s.loss is not None}
    want = max(
        counts,
        key=lambda b: (b[1] == total, b in with_loss, not b[0], counts[b], b[1]),
    )
    others = sorted(b for b in counts if b != want)
    log.steps = [s for s in log.steps if s.bar in (None, want)]
    named = ", ".join(f"{b[0] or 'untitled'} ({b[1]:,})" for b in others[:3])
    log.notes.append(
        f"{sum(counts[b] for b in others):,} updates of other progress bars ({named}"
        f"{', ...' if len(others) > 3 else ''}) not read as steps: the training bar counts "
        f"{want[1]:,}"
    )


def _hf_dict(line: str, number: int, log: TrainingLog) -> None:
    m = re.search(rf"'train_runtime':\s*({_NUM})", line)
    total = log.header.get("Total optimization steps")
    if m and total and not any("train_runtime" in n for n in log.notes):
        runtime = _num(m.group(1))
        # an average over every step, the first slower ones included: a note, not a step
        log.notes.append(
            f"line {number}: train_runtime {runtime:,.1f} s over {total:,} steps, "
            f"{runtime / total:,.3g} s per step on average"
        )


def _skipped_intervals(log: TrainingLog) -> None:
    """DeepSpeed's cumulative skipped-step counts as counts per logging interval."""
    last = 0.0
    for s in sorted(
        (x for x in log.steps if "skipped_total" in x.terms_s), key=lambda x: (x.step, x.line)
    ):
        total = s.terms_s.pop("skipped_total")
        s.skipped = max(int(total - last), 0)
        last = total


def _memory_lines(log: TrainingLog) -> None:
    """Megatron's memory lines (step -1) onto the steps around them."""
    memory = [s for s in log.steps if s.step == -1]
    if not memory:
        return
    log.steps = [s for s in log.steps if s.step != -1]
    peak = max(s.memory_bytes or 0.0 for s in memory)
    for s in log.steps:
        if s.memory_bytes is None:
            s.memory_bytes = peak


def _fill_from_timestamps(log: TrainingLog) -> None:
    """Step times from the timestamps of consecutive steps, where the lines give rates only
    (DeepSpeed's throughput timer logs samples/s every N steps)."""
    timed = sorted(
        (
            s
            for s in log.steps
            if s.timestamp is not None and s.step_time_s is None and s.samples_per_s is not None
        ),
        key=lambda s: (s.step, s.timestamp or 0.0),
    )
    last: Step | None = None
    for s in timed:
        if last is not None and s.step > last.step and (s.timestamp or 0) > (last.timestamp or 0):
            s.step_time_s = ((s.timestamp or 0) - (last.timestamp or 0)) / (s.step - last.step)
        last = s


@dataclass(frozen=True)
class Summary:
    """The steady state of a log: medians over the steps kept, and what was dropped."""

    framework: str
    steps: int
    kept: list[int]
    step_time_s: float | None
    step_time_p10_s: float | None
    step_time_p90_s: float | None
    tflops_per_gpu: float | None
    mfu: float | None
    tokens_per_s_per_gpu: float | None
    samples_per_s: float | None
    memory_bytes: float | None
    loss_scale: float | None
    skipped: int
    nan: int
    global_batch: int | None
    dropped: list[str]
    timers_ms: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _pace(s: Step) -> float | None:
    """A number proportional to the step time: the time itself, else the inverse of a rate
    (torchtitan logs tokens/s, DeepSpeed samples/s)."""
    if s.step_time_s is not None and s.step_time_s > 0:
        return s.step_time_s
    for rate in (s.tokens_per_s_per_gpu, s.samples_per_s):
        if rate is not None and rate > 0:
            return 1 / rate
    return None


def steady_steps(log: TrainingLog) -> tuple[list[Step], list[str]]:
    """The steps that show the job's steady speed, and why the others were dropped.

    Fixed rules, decided before looking at any comparison: the first logged step goes when
    there are three or more (it includes start-up: compilation, NCCL set-up, allocator
    growth); steps that skipped an iteration (fp16 overflow: no optimizer step) go; a step
    more than 3 × the median of the rest goes (an evaluation or checkpoint inside it); a step
    that logs another global batch than the last logged one goes (Megatron's
    --rampup-batch-size: a ramp's small-batch steps were fitted as full ones, a profile 2.2×
    too efficient, fuzz round 20, B3).
    """
    steps = [s for s in log.by_step() if _pace(s) is not None]
    dropped: list[str] = []
    if len(steps) >= 3:
        dropped.append(f"step {steps[0].step} (line {steps[0].line}): the first logged step")
        steps = steps[1:]
    final = next((s.global_batch for s in reversed(steps) if s.global_batch), None)
    if final:
        other = [s for s in steps if s.global_batch and s.global_batch != final]
        for s in other:
            dropped.append(
                f"step {s.step} (line {s.line}): global batch {int(s.global_batch or 0):,}, "
                f"not the {int(final):,} the log ends at (batch ramp-up)"
            )
        steps = [s for s in steps if s not in other]
    keep = []
    for s in steps:
        if s.skipped:
            dropped.append(f"step {s.step} (line {s.line}): {s.skipped} skipped iteration(s)")
        else:
            keep.append(s)
    if len(keep) >= 3:
        median = statistics.median(_pace(s) or 0.0 for s in keep)
        slow = [s for s in keep if (_pace(s) or 0.0) > 3 * median]
        for s in slow:
            dropped.append(f"step {s.step} (line {s.line}): over 3 × the median step")
        keep = [s for s in keep if s not in slow]
    return keep, dropped


def summarize(log: TrainingLog) -> Summary:
    keep, dropped = steady_steps(log)
    if not keep and dropped:
        raise ConfigError(
            f"{log.path}: every step with a time was dropped ({'; '.join(dropped[:3])}); "
            "give a log with steady-state steps",
            field="log",
        )
    if not keep:
        raise ConfigError(
            f"{log.path}: no step times in {log.lines:,} lines (expected Megatron iteration "
            "lines, torchtitan metrics, DeepSpeed timers, or HF Trainer/Lightning progress)",
            field="log",
        )
    everything = log.by_step()

    def med(name: str, rows: list[Step]) -> float | None:
        values = [getattr(s, name) for s in rows if getattr(s, name) is not None]
        return statistics.median(values) if values else None

    times = [s.step_time_s for s in keep if s.step_time_s is not None]
    memory = [s.memory_bytes for s in everything if s.memory_bytes is not None]
    return Summary(
        framework=log.framework,
        steps=len(everything),
        kept=[s.step for s in keep],
        step_time_s=statistics.median(times) if times else None,
        step_time_p10_s=_quantile(times, 0.1) if times else None,
        step_time_p90_s=_quantile(times, 0.9) if times else None,
        tflops_per_gpu=med("tflops_per_gpu", keep),
        mfu=med("mfu", keep),
        tokens_per_s_per_gpu=med("tokens_per_s_per_gpu", keep),
        samples_per_s=med("samples_per_s", keep),
        memory_bytes=max(memory) if memory else None,
        loss_scale=med("loss_scale", keep),
        skipped=sum(s.skipped or 0 for s in everything),
        nan=sum(s.nan or 0 for s in everything),
        global_batch=next((s.global_batch for s in reversed(everything) if s.global_batch), None)
        or log.header.get("Total train batch size (w. parallel, distributed & accumulation)"),
        dropped=dropped,
        timers_ms={k: statistics.median(v) for k, v in log.timers_ms.items() if v},
    )


def read_log(path: str, *, field_name: str = "log") -> TrainingLog:
    """A training log from a file (bounded, streamed through safeio)."""
    from bandwall.safeio import archive_kind, iter_lines

    archive = archive_kind(path, field=field_name)
    if archive:
        raise ConfigError(f"{path} is {archive}", field=field_name)
    return parse_lines(iter_lines(path, field=field_name), path)


def is_training_log(head: str) -> bool:
    """Whether the first lines look like a training log this module reads."""
    sample = _ANSI.sub("", head)
    return bool(
        (_ITER.search(sample) and "elapsed time per iteration" in sample)
        or ("step:" in sample and ("tps:" in sample or "wps:" in sample))
        or _DS_TIMER.search(sample)
        or "train_step_timing" in sample
        or _HF_HEADER.search(sample)
        or ("v_num" in sample and "it/s" in sample)
        or "'train_runtime'" in sample
        or _DS_TIMES.search(sample)
    )


__all__ = [
    "MAX_STEPS",
    "LogParser",
    "Step",
    "Summary",
    "TrainingLog",
    "is_training_log",
    "parse_lines",
    "read_log",
    "steady_steps",
    "summarize",
]
