"""One diagnosis from every file given: read each input once (through `bandwall.safeio`), parse
it with every registered format, join the logs, nccl-tests tables and traces into one job,
infer the hardware (or say it is unknown), run every detector, and rank the findings.

    read inputs -> parse (formats) -> join (job, hardware, tests vs model, traces, plan)
                -> detect (one detector per rule) -> connect (same-job evidence) -> rank

A finding's cost is seconds per training step, known only where the evidence measures it: a
trace gives the step, the exposed communication and the straggler; an nccl-tests run gives the
busbw this fabric reaches against the model's. Without them a finding is ranked by how directly
the evidence names it, then by severity.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bandwall.errors import ConfigError
from bandwall.measure.doctor import (
    builtin_formats,  # noqa: F401  (registers the built-in formats)
    training,  # registers training logs (run_compare)
)
from bandwall.measure.doctor.detectors import DETECTORS, leftovers
from bandwall.measure.doctor.evidence import Confidence, Hit, Line
from bandwall.measure.doctor.formats import Format, formats
from bandwall.measure.doctor.job import MAX_BUSBW_GBPS, Input, Job, TestBlock
from bandwall.measure.doctor.nccl_log import NcclLog
from bandwall.measure.doctor.rules import BY_CODE, RULES, Severity
from bandwall.safeio import (
    archive_kind,
    check_input,
    checked_path,
    iter_lines,
    read_head,
)

SNIFF_BYTES = 1 << 16
#: Findings about the communication path: fixing one speeds communication up.
COMM_FAULTS = ("socket_fallback", "gdr_off", "nic_far", "p2p_disabled", "few_channels", "busbw_low")
_RULE_ORDER = {r.code: i for i, r in enumerate(RULES)}
#: An input with fewer lines than this is an excerpt: findings say what is missing.
EXCERPT_LINES = 20
SIDECARS = (".source", ".md")
#: Files a folder is not read for: program sources, documents and images hold the messages
#: the rules look for as string literals, not as evidence of a run (a folder of NCCL's own
#: sources read as logs raised hundreds of findings). Named explicitly, they are still read.
NOT_EVIDENCE = frozenset(
    (  # noqa: SIM905 (one line per family reads better than 34)
        ".py .pyi .pyx .pxd .ipynb .pyc .c .h .cc .cpp .cxx .hpp .hh .cu .cuh .rs .go .java .js "
        ".ts .rst .tex .html .css .png .jpg .jpeg .gif .svg .pdf .so .o .a .whl"
    ).split()
)


@dataclass
class Finding:
    """One thing wrong (or worth knowing): the rule, the case, the evidence."""

    code: str
    title: str
    severity: str
    reason: str
    mechanism: str = ""
    confidence: str = "likely"
    impact: str = ""
    impact_source: str = ""
    check: list[str] = field(default_factory=list)
    fix: list[str] = field(default_factory=list)
    evidence: list[Line] = field(default_factory=list)
    partial: str = ""
    """Empty when the evidence is complete; else what is missing and the command that tells."""
    cost_s: float | None = None
    step_s: float | None = None
    cost_basis: str = ""
    source: str = ""

    @property
    def cost_share(self) -> float | None:
        if self.cost_s is None or not self.step_s:
            return None
        return self.cost_s / self.step_s

    @property
    def severity_rank(self) -> int:
        return Severity(self.severity).rank

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "title": self.title,
            "severity": self.severity,
            "confidence": self.confidence,
            "mechanism": self.mechanism,
            "reason": self.reason,
            "impact": self.impact,
            "impact_source": self.impact_source,
            "check": list(self.check),
            "fix": list(self.fix),
            "evidence": [ln.to_json() for ln in self.evidence],
            "partial": self.partial,
            "cost_s": _finite(self.cost_s),
            "step_s": _finite(self.step_s),
            "cost_share": _finite(self.cost_share),
            "cost_basis": self.cost_basis,
            "source": self.source,
        }


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


@dataclass
class Diagnosis:
    job: Job
    findings: list[Finding] = field(default_factory=list)

    @property
    def inputs(self) -> list[Input]:
        return self.job.inputs

    @property
    def logs(self) -> list[NcclLog]:
        return self.job.logs

    @property
    def notes(self) -> list[str]:
        return self.job.notes

    def worst(self) -> Severity | None:
        """The most severe finding's severity (None when there is none)."""
        if not self.findings:
            return None
        return max((Severity(f.severity) for f in self.findings), key=lambda s: s.rank)

    def to_json(self) -> dict[str, Any]:
        """The stable JSON document (schema in docs/doctor.md)."""
        job = self.job
        hw = job.hardware()
        tr = job.trace
        return {
            "schema": "bandwall.doctor/1",
            "inputs": [{"path": i.path, "kinds": i.kinds, "notes": i.notes} for i in job.inputs],
            "findings": [f.to_json() for f in self.findings],
            "hardware": {
                "gpu": hw.gpu,
                "gpu_name": hw.gpu_name,
                "nic_link": hw.nic_link,
                "nics": hw.nics,
                "nic_speed_GBps": hw.nic_speed_GBps,
                "describe": hw.describe(),
            },
            "nccl_logs": [
                {
                    "source": log.source,
                    "transport": log.net_transport,
                    "gdr": log.gdr,
                    "intra_node": sorted(log.intra_transports),
                    "describe": log.describe_transport(),
                    "nccl_versions": {
                        v: sorted({ln.host or "?" for ln in ls}) for v, ls in log.versions.items()
                    },
                    "hosts": sorted(log.hosts),
                    "ranks": log.world_size,
                    "nics": sorted(log.ib_devices),
                    "socket_interfaces": sorted(log.socket_ifaces),
                    "env": {k: sorted({v for v, _ in vs}) for k, vs in log.env.items()},
                    "lines": log.lines,
                    "records": log.records,
                    "used": log.matched,
                    "not_understood": log.not_understood,
                }
                for log in job.logs
            ],
            "nccl_tests": [_test_json(t) for t in job.tests],
            "trace": None if tr is None else _trace_json(tr),
            "plan": job.plan,
            "training": training.to_json(job),
            "notes": job.notes,
        }


def _test_json(t: TestBlock) -> dict[str, Any]:
    c = t.comparison or {}
    return {
        "source": t.source,
        "first_line": t.first_line,
        "op": t.op,
        "ranks": t.ranks,
        "devices": sorted(set(t.devices)),
        "hosts": t.hosts,
        "best_busbw_GBps": t.best_busbw_GBps,
        "compared": bool(c),
        "not_compared": t.not_compared,
        "measured_busbw_GBps": c.get("measured_busbw_GBps"),
        "model_busbw_GBps": c.get("model_busbw_GBps"),
        "ratio": _finite(c.get("ratio")),
        "compared_sizes": c.get("compared_sizes", []),
        "layout": c.get("layout"),
        "assumptions": c.get("assumptions", []),
    }


def _trace_json(tr: Any) -> dict[str, Any]:
    return {
        "step_s": tr.step_s,
        "compute_s": tr.compute_s,
        "comm_s": tr.comm_s,
        "exposed_comm_s": tr.exposed_s,
        "exposed_share": tr.exposed_share,
        "idle_share": tr.idle_share,
        "straggler": None
        if tr.straggler is None
        else {
            "rank": tr.straggler.rank,
            "host": tr.straggler.host,
            "excess_s": tr.straggler_excess_s,
        },
        "ranks": [
            {
                "rank": r.rank,
                "host": r.host,
                "source": r.source,
                "device": r.device,
                "steps": len(r.steps),
                "step_s": r.median("step_s"),
                "compute_s": r.median("compute_s"),
                "comm_s": r.median("comm_s"),
                "overlap_s": r.median("overlap_s"),
                "exposed_comm_s": r.median("exposed_s"),
                "idle_s": r.median("idle_s"),
                "exposed_share": r.exposed_share,
                # per step, as step_s and comm_s beside it (a 5-step total read 100 ms
                # beside comm_s 20 ms, fuzz round 19, C2)
                "collectives_s": {k: v / max(len(r.steps), 1) for k, v in r.collectives.items()},
                "truncated": r.truncated,
            }
            for r in tr.ranks
        ],
    }


# --- 1. inputs ----------------------------------------------------------------------------------


def expand(
    paths: list[str], skipped: list[Path] | None = None, *, field: str = "paths"
) -> list[Path]:
    """Files under each path (folders recursively, sorted; hidden files, .source/.md sidecars
    and NOT_EVIDENCE files skipped there, appended to `skipped`; a file named explicitly is
    always read, after safeio's checks). Errors name `field`, the option the paths came
    from."""
    out: list[Path] = []
    for text in paths:
        if not text.strip():  # Path("") is the current folder: never read what was not named
            raise ConfigError(
                "an empty path; give NCCL logs, nccl-tests output or profiler traces "
                "(files or folders)",
                field=field,
            )
        p = checked_path(text, field=field)
        if p.is_dir():  # a link named on the command line is followed; links inside are not
            found = sorted(
                f
                for f in p.rglob("*")
                if f.is_file()
                and not f.is_symlink()
                and f.suffix not in SIDECARS
                and not any(part.startswith(".") for part in f.relative_to(p).parts)
            )
            out += [f for f in found if f.suffix.lower() not in NOT_EVIDENCE]
            if skipped is not None:
                skipped += [f for f in found if f.suffix.lower() in NOT_EVIDENCE]
        elif p.exists() or p.is_symlink():
            out.append(check_input(p, field=field))
        else:
            raise ConfigError(f"{text!r} is neither a file nor a folder", field=field)
    if not out:
        what = ", ".join(map(repr, paths))
        if skipped:
            raise ConfigError(
                f"no logs in {what}: {len(skipped):,} source, document or image file(s) "
                "skipped; name a file to read it anyway",
                field=field,
            )
        raise ConfigError("no files to read in " + what, field=field)
    return out


#: Lines parsed in full per file (~8 s at ~130,000 lines/s on one core); past them only lines
#: with a failure word are. A 466 KB gzip of 20 M lines ran past 30 s and the 512 MiB input
#: cap allowed ~6 min (fuzz round 17, B1).
FULL_READ_LINES = 1_000_000
#: ... and no file is read past this line (~15 s in all).
MAX_READ_LINES = 10_000_000
_FAILURE_WORDS = re.compile(r"WARN|ERROR|rror|fail|Fail|timeout|Timeout|abort|Abort|refused")


_KINETO_KEYS = re.compile(r'^\{\s*"(schemaVersion|deviceProperties|distributedInfo|traceName)"\s*:')


def sniff(path: Path) -> tuple[str, str]:
    """('trace'|'json'|'binary'|'text', the decoded first 64 KiB). One NUL byte does not make
    a log binary: only a file whose start is mostly control bytes is."""
    head = read_head(path, SNIFF_BYTES, field="paths")
    text = head.decode("utf-8", errors="replace")
    start = text.lstrip()
    # Kineto writes schemaVersion, deviceProperties (one entry per GPU) and distributedInfo
    # (every process group's ranks) before traceEvents: past 4 KiB on a multi-node job (fuzz
    # round 21, C1), past the whole head on a large one
    if (
        '"traceEvents"' in start
        or (start.startswith("{") and _KINETO_KEYS.search(start[:4096]))
        or (re.match(r'\[\s*\{\s*"', start) and '"ph"' in start)
    ):
        return "trace", text
    if start.startswith("{") and "NCCL" not in start[:4096]:
        return "json", text
    if head:
        control = sum(1 for b in head if b < 9 or 13 < b < 32)
        if control > 0.3 * len(head):
            return "binary", text
    return "text", text


#: How much of a text file the formats look at to recognise it: Megatron and NeMo logs print
#: their argument dump, model build and data-loader lines before iteration 1, often past 64 KiB
#: (a 79 KB preamble was "nothing understood", fuzz round 19, C1).
DETECT_BYTES = 4 << 20


def _detect_sample(path: Path) -> tuple[str, bool]:
    """The decoded first DETECT_BYTES, and whether the file goes on past them."""
    head = read_head(path, DETECT_BYTES, field="paths")
    return head.decode("utf-8", errors="replace"), len(head) >= DETECT_BYTES


class LateDetection:
    """Shows windows of a file's later lines to the detectors that rejected its sample; a
    format found in a window starts there, fed that window's lines first. One detector call
    per window (1 MiB), so the cost stays per byte, not per line."""

    WINDOW_CHARS = 1 << 20

    def __init__(self, candidates: list[Format], source: str) -> None:
        self.formats = list(candidates)
        self._source = source
        self._lines: list[tuple[int, str]] = []
        self._chars = 0

    def feed(self, number: int, line: str) -> list[tuple[Format, Any]]:
        self._lines.append((number, line))
        self._chars += len(line)
        return self.flush() if self._chars >= self.WINDOW_CHARS else []

    def flush(self) -> list[tuple[Format, Any]]:
        window, lines = "".join(t for _, t in self._lines), self._lines
        self._lines, self._chars = [], 0
        found = []
        for fmt in [f for f in self.formats if f.detect(window)]:
            parser = fmt.start(self._source)
            for n, t in lines:
                parser.feed(n, t)
            found.append((fmt, parser))
            self.formats.remove(fmt)
        return found


def _read(path: Path, job: Job) -> None:
    item = Input(str(path))
    job.inputs.append(item)
    kind, sample = sniff(path)
    if kind == "trace":
        item.kinds.append("trace")
        job.trace_paths.append(str(path))
        return
    # an archive doctor does not open (gzip it reads): say what to do, not "a binary file"
    archive = archive_kind(path, field="paths")
    if archive is not None:
        item.notes.append(f"not understood: {archive}")
        return
    if kind in ("json", "binary"):
        item.notes.append(
            "not understood: "
            + (
                "JSON without traceEvents (not a profiler trace)"
                if kind == "json"
                else "a binary file"
            )
        )
        return
    longer = False
    if len(sample.encode("utf-8", errors="replace")) >= SNIFF_BYTES:
        sample, longer = _detect_sample(path)
    active = [(fmt, fmt.start(str(path))) for fmt in formats() if fmt.detect(sample)]
    # a format its detector did not see in the sample may start later in a long file (a
    # Megatron job's NCCL INFO and data-loader lines can pass 4 MiB before iteration 1;
    # fuzz round 20, C1): each later window of lines is shown to those detectors once
    named = {fmt.name for fmt, _ in active}
    late = LateDetection([f for f in formats() if longer and f.name not in named], str(path))
    first_line, skipped = _stream(path, item, active, late)
    if skipped:
        item.notes.append(
            f"past line {FULL_READ_LINES:,} only failure lines were read ({skipped:,} others "
            "skipped): give the part of the log around the failure for a full reading"
        )
    for fmt, parser in active:
        if fmt.attach(job, parser.finish(), item):
            item.kinds.append(fmt.name)
    if not item.kinds:
        item.notes.append(
            "not understood: no NCCL debug lines, no nccl-tests table and no profiler trace "
            f"(first line: {first_line[:80]!r})"
        )


def _stream(
    path: Path, item: Input, active: list[tuple[Format, Any]], late: LateDetection
) -> tuple[str, int]:
    """Every line to every active parser, within the line budgets; returns the first
    non-blank line and how many lines past the full-read budget were skipped."""
    first_line = ""
    skipped = 0
    for number, line in enumerate(iter_lines(path, field="paths"), 1):
        if number > MAX_READ_LINES:  # failure lines too: 20 M WARN lines are a time bomb
            item.notes.append(f"read stopped at line {MAX_READ_LINES:,}")
            break
        if not first_line and line.strip():
            first_line = line.strip()
        if number > FULL_READ_LINES and not _FAILURE_WORDS.search(line):
            skipped += 1  # past the budget only lines that report a failure are parsed
            continue
        for _, parser in active:
            parser.feed(number, line)
        if late.formats:
            active += late.feed(number, line)
    if late.formats:
        active += late.flush()
    return first_line, skipped


# --- 2. join ------------------------------------------------------------------------------------


def _compare_tests(job: Job) -> None:
    """Each nccl-tests block against the model, only where the hardware is known."""
    hw = job.hardware()
    opts = job.options
    for t in job.tests:
        if t.op is None or t.ranks is None:
            t.not_compared = (
                t.not_compared or "collective or rank count unknown (give --op/--ranks)"
            )
            continue
        rows = [
            r
            for r in t.rows
            if isinstance(r.get("busbw_GBps"), (int, float))
            and math.isfinite(r["busbw_GBps"])
            and 0 <= r["busbw_GBps"] <= MAX_BUSBW_GBPS
            and int(r.get("size_bytes", 0)) > 0
        ]
        if not rows:
            garbage = [
                r["busbw_GBps"]
                for r in t.rows
                if isinstance(r.get("busbw_GBps"), (int, float))
                and r["busbw_GBps"] > MAX_BUSBW_GBPS
            ]
            t.not_compared = (
                f"{len(garbage)} row(s) report up to {max(garbage):,.0f} GB/s of busbw, beyond "
                f"any GPU's links (> {MAX_BUSBW_GBPS:,.0f} GB/s): corrupt figures, not a table "
                "to compare"
                if garbage
                else "no valid result rows"
            )
            job.notes.append(
                f"{t.source}:{t.first_line}: nccl-tests not compared with a model: {t.not_compared}"
            )
            continue
        why = _layout_or_reason(t, hw, opts)
        if isinstance(why, str):
            t.not_compared = why
            job.notes.append(
                f"{t.source}:{t.first_line}: nccl-tests not compared with a model: {why}"
            )
            continue
        from bandwall.measure.doctor.compare import busbw_comparison

        try:
            cmp = busbw_comparison(rows, t.op, why)
        except ConfigError as exc:
            t.not_compared = exc.reason
            continue
        if not (math.isfinite(cmp["ratio"]) and cmp["ratio"] > 0):
            t.not_compared = "the model gave no usable figure for this block"
            continue
        t.comparison = cmp


def _layout_or_reason(t: TestBlock, hw: Any, opts: dict[str, Any]) -> Any:
    """The Layout to price a block on, or the sentence saying what is unknown."""
    from bandwall.measure.doctor.compare import FABRIC_BY_TRANSPORT, Layout

    assert t.ranks is not None
    notes: list[str] = []
    gpu = opts.get("gpu") or hw.gpu
    if gpu is None:
        return (
            "GPU unknown"
            + (f" ({hw.gpu_name!r} is not in the catalog)" if hw.gpu_name else " (no device names)")
            + ": give --gpu"
        )
    if not opts.get("gpu"):
        notes.append(f"GPU {gpu} from the device name {hw.gpu_name!r}")
    gpn = opts.get("gpus_per_node")
    if gpn is None:
        if t.hosts:
            gpn = max(1, t.ranks // len(t.hosts))
            notes.append(f"{gpn} GPU(s) per node: {t.ranks} ranks on {len(t.hosts)} host(s)")
        else:
            return "the number of nodes is unknown (no host names): give --gpus-per-node"
    fabric = opts.get("fabric")
    if t.ranks > gpn and fabric is None:
        link, speed = hw.nic_link, hw.nic_speed_GBps
        choices = FABRIC_BY_TRANSPORT.get(link or "", ())
        if not link or not speed or not choices:
            return (
                "the inter-node network is unknown"
                + (f" ({link} seen, its speed not in the log)" if link else "")
                + ": give --fabric"
            )
        fabric = min(choices, key=lambda c: abs(c[0] - speed))[1]
        notes.append(f"fabric {fabric}: {link} NICs at {speed:g} GB/s in the log")
    return Layout(t.ranks, gpn, gpu, None if t.ranks <= gpn else fabric, notes)


def _traces(job: Job) -> None:
    if not job.trace_paths:
        return
    from bandwall.measure.doctor.trace import MAX_STEPS, analyze_job

    tr = analyze_job(list(job.trace_paths))
    job.notes.extend(tr.notes)
    for r in tr.empty:  # an empty or cut-short trace is no evidence: a note, not a clean run
        item = next((i for i in job.inputs if i.path == r.source), None)
        if item is not None:
            item.kinds = [k for k in item.kinds if k != "trace"]
            item.notes.append(
                f"not understood: a profiler trace with no usable event ({r.events:,} "
                "event(s) read"
                + (f", {r.unusable:,} with an impossible time" if r.unusable else "")
                + (", the file is cut short" if r.truncated else "")
                + ")"
            )
    if not tr.ranks:
        return
    job.trace = tr
    for r in tr.ranks:
        item = next((i for i in job.inputs if i.path == r.source), None)
        if item is not None:
            item.notes.append(
                f"rank {r.rank if r.rank is not None else '?'}"
                + (f" on {r.host}" if r.host else "")
                + f", {r.device}, {r.events:,} events, {len(r.steps):,} step(s)"
                + (
                    f" (the first {MAX_STEPS:,} of {r.steps_found:,} analysed)"
                    if r.steps_found > MAX_STEPS
                    else ""
                )
                + (" (trace cut short)" if r.truncated else "")
            )


# --- 3. detect, connect, rank -------------------------------------------------------------------


def _connect(job: Job, hits: list[Hit]) -> None:
    """Evidence from other files of the same job: a path fault and the busbw it costs."""
    tests = [t for t in job.tests if t.best_busbw_GBps is not None]
    if not tests:
        return
    low = [t for t in tests if t.comparison and t.comparison["ratio"] < 0.7]
    for h in hits:
        if h.code not in COMM_FAULTS or h.code == "busbw_low":
            continue
        if low:
            t = low[0]
            c = t.comparison or {}
            h.reason += (
                f". The same job's nccl-tests ({t.source}) reach {c['measured_busbw_GBps']:,.1f} "
                f"GB/s busbw, {c['ratio']:.0%} of the model: this fault is the likely reason"
            )
            if c["ratio"] < 0.5:
                h.severity = "critical" if h.code == "socket_fallback" else "high"
                h.confidence = max(h.confidence, Confidence.LIKELY)
        else:
            t = tests[0]
            h.reason += (
                f". The same job's nccl-tests ({t.source}) measured at most "
                f"{t.best_busbw_GBps:,.1f} GB/s busbw"
            )
    names = {h.code for h in hits if h.code in COMM_FAULTS and h.code != "busbw_low"}
    for h in hits:
        if h.code == "busbw_low" and names:
            h.reason += ". The same job's logs show " + ", ".join(
                BY_CODE[c].title.lower() for c in sorted(names)
            )
    for h in hits:
        if h.code == "socket_transport" and low and low[0].comparison["ratio"] < 0.5:  # type: ignore[index]
            h.code = "socket_fallback"
            h.severity = "critical"
            h.confidence = Confidence.LIKELY
            h.reason += (
                f"; nccl-tests of the same job reach {low[0].comparison['ratio']:.0%} of the "  # type: ignore[index]
                "model: TCP is not what these nodes are built for"
            )


def _finding(h: Hit, job: Job) -> Finding:
    r = BY_CODE[h.code]
    sev = h.severity or r.severity.value
    partial = h.missing
    sizes = [log.lines for log in job.logs if log.source in {ln.source for ln in h.lines}]
    if sizes and max(sizes) < EXCERPT_LINES and not job.tests and job.trace is None:
        excerpt = f"the input is an excerpt of {max(sizes)} line(s)"
        partial = f"{partial}; {excerpt}" if partial else excerpt
    if partial:
        partial = f"evidence is partial ({partial}); to confirm: {r.confirm}"
    reason = h.reason or r.when
    return Finding(
        code=h.code,
        title=h.title or r.title,
        severity=sev,
        reason=reason[:1].upper() + reason[1:] if reason else "",
        mechanism=r.mechanism.value,
        confidence=h.confidence.name.lower(),
        impact=r.impact,
        impact_source=r.impact_source,
        check=list(r.checks),
        fix=list(r.fixes),
        evidence=list(h.lines),
        partial=partial,
        cost_s=_finite(h.cost_s),
        step_s=_finite(h.step_s),
        cost_basis=h.cost_basis,
        source=h.source,
    )


def _price(job: Job, findings: list[Finding]) -> None:
    """Per-step costs of communication-path findings, where a trace and a busbw ratio allow."""
    tr = job.trace
    ratios = [t.comparison["ratio"] for t in job.tests if t.comparison]
    ratio = min(ratios) if ratios else None
    for f in findings:
        if f.code not in COMM_FAULTS or f.cost_s is not None:
            continue
        if tr is not None and tr.step_s > 0 and ratio is not None and ratio < 1:
            exposed = tr.exposed_s if tr.straggler is None else tr.straggler.median("exposed_s")
            f.cost_s = max(0.0, min(exposed, tr.comm_s * (1 - ratio)))
            f.step_s = tr.step_s
            f.cost_basis = (
                f"communication at {ratio:.0%} of the model's busbw: fixing it saves up to "
                "(1 - ratio) of the collective time, at most the exposed part"
            )
        elif tr is None:
            f.cost_basis = "unpriced: add a profiler trace of the job to price it per step"
        else:
            f.cost_basis = "unpriced: add an nccl-tests log of this fabric to price it"


def rank(findings: list[Finding], confidence: dict[int, int] | None = None) -> list[Finding]:
    """Causes before their consequences, failures before slowdowns, then how directly the
    evidence names the cause, then severity, then cost per step.

    A consequence (a watchdog timeout, a dead peer, unexplained warnings) is stated with
    certainty but says nothing of why: beside a critical cause (an IB retry error, an Xid, a
    full /dev/shm) it comes after it, whatever its own confidence."""
    conf = {"certain": 3, "likely": 2, "possible": 1}

    def stopped_job(f: Finding) -> bool:
        """Critical and at least likely: what stopped the job."""
        return f.severity == Severity.CRITICAL.value and conf.get(f.confidence, 0) >= conf["likely"]

    has_cause = any(
        stopped_job(f) and not BY_CODE[f.code].consequence for f in findings if f.code in BY_CODE
    )

    def key(f: Finding) -> tuple[int, int, int, int, float, int]:
        later = has_cause and f.code in BY_CODE and BY_CODE[f.code].consequence
        # what stopped the job (critical, likely or certain) before what slows it, however
        # certain the slowdown is: GDR off does not explain an IB retry error beside it
        return (
            int(later),
            -int(stopped_job(f)),
            -conf.get(f.confidence, 0),
            -f.severity_rank,
            -(f.cost_s or 0.0),
            _RULE_ORDER.get(f.code, 999),
        )

    return sorted(findings, key=key)


def _demote_alternatives(hits: list[Hit]) -> None:
    """A possible cause read from the very lines a more confident finding already explains is
    an alternative to check, not another alarm: at most medium (one IB retry error used to
    raise three critical findings)."""
    for h in hits:
        if h.confidence != Confidence.POSSIBLE or not h.lines:
            continue
        mine = {(ln.source, ln.number) for ln in h.lines}
        covered = any(
            g is not h
            and g.confidence > h.confidence
            and mine <= {(ln.source, ln.number) for ln in g.lines}
            for g in hits
        )
        rule_rank = BY_CODE[h.code].severity.rank
        if covered and rule_rank > Severity.MEDIUM.rank:
            h.severity = Severity.MEDIUM.value


def _dedupe(hits: list[Hit]) -> list[Hit]:
    """One hit per rule: the most confident (several logs of one job are one diagnosis)."""
    best: dict[str, Hit] = {}
    for h in hits:
        cur = best.get(h.code)
        if cur is None or h.confidence > cur.confidence:
            best[h.code] = h
        elif h.confidence == cur.confidence and len(cur.lines) < 4:
            cur.lines += [ln for ln in h.lines if ln not in cur.lines][: 4 - len(cur.lines)]
    return list(best.values())


def diagnose(
    paths: list[str],
    *,
    fabric: str | None = None,
    gpu: str | None = None,
    gpus_per_node: int | None = None,
    op: str | None = None,
    ranks: int | None = None,
    request: Any = None,
    field: str = "paths",
) -> Diagnosis:
    """Read every file under `paths`, join the evidence, run the rules, rank the findings;
    a path that cannot be read is an error naming `field` (`report --doctor`'s paths)."""
    job = Job(
        options={
            "fabric": fabric,
            "gpu": gpu,
            "gpus_per_node": gpus_per_node,
            "op": op,
            "ranks": ranks,
        }
    )
    skipped: list[Path] = []
    for path in expand(paths, skipped, field=field):
        _read(path, job)
    if skipped:
        job.notes.append(
            f"{len(skipped):,} source, document or image file(s) in the folder(s) not read "
            f"(e.g. {skipped[0].name}); name a file to read it anyway"
        )
    for log in job.logs:
        if log.pg_not_destroyed:
            ln = log.pg_not_destroyed[0]
            job.notes.append(
                f"{log.source}:{ln.number}: 'process group has NOT been destroyed' is PyTorch's "
                "exit warning (2.4+) when destroy_process_group() was not called: harmless "
                "after a normal exit (it only matters when a rank exits while others still "
                "wait in a collective)"
            )
    _traces(job)
    _compare_tests(job)
    training.compare(job, request, {"gpu": gpu} if gpu else {})
    if request is not None and job.trace is not None and job.trace.step_s > 0:
        from bandwall.measure.doctor.compare import plan_comparison

        tr = job.trace
        job.plan = plan_comparison(tr.step_s, tr.exposed_s, tr.compute_s, request)
    hits: list[Hit] = []
    for code, detect in DETECTORS.items():
        if code != "nccl_errors":
            hits += detect(job)
    hits = _dedupe(hits)
    hits += leftovers(job, hits)
    _connect(job, hits)
    _demote_alternatives(hits)
    findings = [_finding(h, job) for h in hits]
    _price(job, findings)
    if not job.understood:
        job.notes.append("nothing in the given files was understood")
    return Diagnosis(job=job, findings=rank(findings))
