"""One diagnosis from every file given: NCCL debug logs, nccl-tests output and profiler traces,
sniffed by content (not name), joined with the model, findings ranked by what they cost.

A finding's cost is seconds per training step, known only where the evidence measures it: a
trace gives the step, the exposed communication and the straggler's excess; an nccl-tests run
gives the busbw this fabric reaches against the model's, hence the share of communication time
a fix can remove. Without them a finding is ranked by severity and says what would price it.
"""

from __future__ import annotations

import gzip
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bandwall.errors import ConfigError
from bandwall.measure.doctor.compare import busbw_comparison, infer_layout, plan_comparison
from bandwall.measure.doctor.findings import SEVERITIES, Finding, log_findings
from bandwall.measure.doctor.nccl_log import NcclLog, parse_nccl_log
from bandwall.measure.doctor.trace import JobTrace, analyze_job

SNIFF_BYTES = 1 << 16
_NCCL_TESTS_HEADER = re.compile(r"#\s+size\s+count\s", re.IGNORECASE)
#: Findings about the communication path: fixing one speeds communication up.
COMM_FAULTS = ("socket_fallback", "gdr_off", "nic_far", "p2p_disabled", "few_channels", "busbw_low")
#: nccl-tests busbw below this share of the model's is a finding.
BUSBW_LOW = 0.7
BUSBW_HIGH = 1.3


@dataclass
class Input:
    """One file and what was made of it."""

    path: str
    kinds: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Diagnosis:
    inputs: list[Input]
    logs: list[NcclLog] = field(default_factory=list)
    nccl_tests: list[dict[str, Any]] = field(default_factory=list)
    job: JobTrace | None = None
    plan: dict[str, Any] | None = None
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    training: list[dict[str, Any]] = field(default_factory=list)
    """Training logs against the model (bandwall.measure.importers.run_compare)."""

    @property
    def step_s(self) -> float | None:
        return self.job.step_s if self.job and self.job.step_s > 0 else None

    def to_json(self) -> dict[str, Any]:
        job = self.job
        return {
            "inputs": [{"path": i.path, "kinds": i.kinds, "notes": i.notes} for i in self.inputs],
            "findings": [f.to_json() for f in self.findings],
            "nccl_logs": [
                {
                    "source": log.source,
                    "transport": log.net_transport,
                    "gdr": log.gdr,
                    "intra_node": sorted(log.intra_transports),
                    "describe": log.describe_transport(),
                    "nccl_versions": {v: sorted(h) for v, h in log.versions.items()},
                    "hosts": sorted(log.hosts),
                    "ranks": log.world_size,
                    "nics": sorted(log.ib_devices),
                    "socket_interfaces": sorted(log.socket_ifaces),
                    "channels": max([*log.coll_channels, log.ring_channels or 0]) or None,
                    "env": {k: sorted(v) for k, v in log.env.items()},
                    "records": log.records,
                    "used": log.used,
                    "not_understood": log.not_understood,
                }
                for log in self.logs
            ],
            "nccl_tests": self.nccl_tests,
            "trace": None
            if job is None
            else {
                "step_s": job.step_s,
                "compute_s": job.compute_s,
                "comm_s": job.comm_s,
                "exposed_comm_s": job.exposed_s,
                "exposed_share": job.exposed_share,
                "idle_share": job.idle_share,
                "straggler": None
                if job.straggler is None
                else {
                    "rank": job.straggler.rank,
                    "host": job.straggler.host,
                    "excess_s": job.straggler_excess_s,
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
                        "collectives_s": r.collectives,
                        "truncated": r.truncated,
                    }
                    for r in job.ranks
                ],
            },
            "plan": self.plan,
            "training": self.training,
            "notes": self.notes,
        }


#: Sidecar files skipped inside folders (a provenance note is not evidence).
SIDECARS = (".source", ".md", ".txt.source")


def expand(paths: list[str]) -> list[Path]:
    """Files under each path (folders recursively, sorted; hidden files and .source/.md
    sidecars skipped there; a file named explicitly is always read)."""
    out: list[Path] = []
    for text in paths:
        p = Path(text)
        if p.is_dir():
            out += sorted(
                f
                for f in p.rglob("*")
                if f.is_file()
                and f.suffix not in SIDECARS
                and not any(part.startswith(".") for part in f.relative_to(p).parts)
            )
        elif p.is_file():
            out.append(p)
        else:
            raise ConfigError(f"{text!r} is neither a file nor a folder", field="paths")
    if not out:
        raise ConfigError("no files to read in " + ", ".join(map(repr, paths)), field="paths")
    return out


def sniff(path: Path) -> str:
    """'trace', 'json', 'binary' or 'text' from the first 64 KiB."""
    with path.open("rb") as fh:
        head = fh.read(SNIFF_BYTES)
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as gz:
                head = gz.read(SNIFF_BYTES)
        except (OSError, EOFError):
            return "binary"
    text = head.decode("utf-8", errors="replace").lstrip()
    if '"traceEvents"' in text[:4096] or (re.match(r'\[\s*\{\s*"', text) and '"ph"' in text):
        return "trace"
    if re.match(r'\{\s*"', text):
        return "json"
    if b"\x00" in head:
        return "binary"
    return "text"


def _read_lines(path: Path) -> Any:
    with path.open("rb") as probe:
        gz = probe.read(2) == b"\x1f\x8b"
    if gz:
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return path.open(encoding="utf-8", errors="replace")


def _nccl_tests(
    path: Path, log: NcclLog | None, opts: dict[str, Any], diag: Diagnosis, item: Input
) -> None:
    """Each nccl-tests block of a file against the model (the importer's parser)."""
    from bandwall.measure.importers.nccl_tests import parse_log, resolve, store_rows

    with _read_lines(path) as fh:
        text = fh.read()
    if not _NCCL_TESTS_HEADER.search(text):
        return
    blocks = parse_log(text)
    if not blocks:
        item.notes.append("an nccl-tests header but no result rows (cut before the first row?)")
        return
    item.kinds.append("nccl-tests")
    for i, block in enumerate(blocks):
        entry: dict[str, Any] = {"source": str(path), "block": i, "first_line": block.first_line}
        try:
            op, ranks, origin = resolve(block, opts.get("op"), opts.get("ranks"))
        except ConfigError as exc:
            entry["error"] = exc.reason
            item.notes.append(f"block {i} (line {block.first_line}): {exc.reason}")
            diag.nccl_tests.append(entry)
            continue
        rows = store_rows(block, op, ranks)
        entry.update(
            {
                "op": op.value,
                "ranks": ranks,
                "op_from": origin,
                "footer_avg_busbw_GBps": block.avg_busbw_GBps,
            }
        )
        hosts = {r["hostname"] for r in block.ranks} or (log.hosts if log else set())
        try:
            layout = infer_layout(
                ranks=ranks,
                hosts=len(hosts) or None,
                device_names=[str(r["device_name"]) for r in block.ranks],
                transport=log.net_transport if log else None,
                nic_speed_GBps=max(log.nic_speed_GBps.values())
                if log and log.nic_speed_GBps
                else None,
                fabric=opts.get("fabric"),
                gpu=opts.get("gpu"),
                gpus_per_node=opts.get("gpus_per_node"),
            )
            entry.update(busbw_comparison(rows, op.value, layout))
        except ConfigError as exc:
            entry["error"] = exc.reason
            item.notes.append(f"block {i}: measured busbw only ({exc.reason})")
            entry["measured_busbw_GBps"] = max((r["busbw_GBps"] for r in rows), default=None)
        diag.nccl_tests.append(entry)
        item.notes.append(
            f"nccl-tests block {i}: {op.value} on {ranks} ranks, {len(block.rows)} sizes"
        )


def _busbw_findings(diag: Diagnosis) -> list[Finding]:
    out = []
    for t in diag.nccl_tests:
        ratio = t.get("ratio")
        if ratio is None or not math.isfinite(ratio):
            continue
        measured, model = t["measured_busbw_GBps"], t["model_busbw_GBps"]
        sizes = ", ".join(f"{s / 2**20:,.0f} MiB" for s in t["compared_sizes"][-3:])
        if ratio < BUSBW_LOW:
            out.append(
                Finding(
                    code="busbw_low",
                    title=f"{t['op']} busbw is {ratio:.0%} of what this fabric should give",
                    reason=f"nccl-tests measured {measured:,.1f} GB/s busbw at {sizes}; the model "
                    f"gives {model:,.1f} GB/s for {t['layout']}. "
                    + ("Assumed: " + "; ".join(t["assumptions"]) + "." if t["assumptions"] else ""),
                    severity="high" if ratio < 0.5 else "medium",
                    check=[
                        "the transport findings of this log (sockets, GDR, NIC placement, "
                        "channels); the assumptions above (--fabric, --gpu)"
                    ],
                    fix=[
                        "fix the path faults found, then rerun nccl-tests: busbw should approach "
                        f"{model:,.0f} GB/s"
                    ],
                    evidence=[
                        f"{t['source']}:{t['first_line']}: {t['op']} busbw {measured:,.1f} GB/s"
                    ],
                    source=t["source"],
                )
            )
        elif ratio > BUSBW_HIGH:
            out.append(
                Finding(
                    code="model_assumption",
                    title=f"{t['op']} busbw beats the assumed fabric ({ratio:.0%} of the model)",
                    reason=f"measured {measured:,.1f} GB/s against {model:,.1f} GB/s modelled for "
                    f"{t['layout']}: the real fabric is faster than assumed ("
                    + "; ".join(t["assumptions"])
                    + ").",
                    severity="info",
                    check=["--fabric, --gpus-per-node"],
                    fix=["give the real fabric to compare against"],
                    source=t["source"],
                )
            )
    return out


def _trace_findings(diag: Diagnosis) -> list[Finding]:
    job = diag.job
    if job is None or job.step_s <= 0:
        return []
    out = []
    step = job.step_s
    if job.straggler is not None:
        s = job.straggler
        others = [r for r in job.ranks if r is not s and r.steps]
        where = f"rank {s.rank}" + (f" on {s.host}" if s.host else "")
        out.append(
            Finding(
                code="straggler",
                title=f"Straggler: {where}",
                reason=f"{where} spends {s.median('outside_comm_s') * 1e3:,.1f} ms per step "
                f"outside communication, {job.straggler_excess_s * 1e3:,.1f} ms more than the "
                f"others' median; the others wait for it inside their collectives (exposed "
                f"communication "
                f"{min(r.median('exposed_s') for r in others) * 1e3:,.1f}-"
                f"{max(r.median('exposed_s') for r in others) * 1e3:,.1f} ms against "
                f"{s.median('exposed_s') * 1e3:,.1f} ms on {where}). Its own time is "
                f"{s.median('compute_s') * 1e3:,.1f} ms compute and "
                f"{s.median('idle_s') * 1e3:,.1f} ms idle per step.",
                severity="high" if job.straggler_excess_s / step > 0.2 else "medium",
                check=[
                    "that host's GPU clocks and temperature (`nvidia-smi -q -d PERFORMANCE`), "
                    "its data loader and CPU load, other jobs on it",
                    "idle on the straggler means it waits before the step (input pipeline, "
                    "host contention); compute means a slower device",
                ],
                fix=[
                    "drain or replace the host; with persistent slow hosts, backup workers "
                    "or local SGD (`bandwall plan --straggler-mitigation`)"
                ],
                evidence=[f"{s.source}: {len(s.steps)} steps"],
                cost_s=job.straggler_excess_s,
                step_s=step,
                source=s.source,
                cost_basis="the straggler's median excess over the others per step",
            )
        )
    share = job.exposed_share
    plan = diag.plan
    predicted = ""
    if plan is not None:
        predicted = (
            f" The model predicts {plan['predicted_exposed_comm_s'] * 1e3:,.1f} ms exposed and a "
            f"{plan['predicted_step_s'] * 1e3:,.1f} ms step for this job's layout "
            f"(measured step {plan['measured_step_s'] * 1e3:,.1f} ms, "
            f"{plan['step_error']:+.0%})."
        )
    exposed_own = job.exposed_s
    if job.straggler is not None:  # the wait for the straggler is priced above
        exposed_own = max(job.straggler.median("exposed_s"), 0.0)
    out.append(
        Finding(
            code="exposed_comm",
            title=f"Exposed communication: {share:.0%} of the step",
            reason=f"Per step, ranks spend {job.comm_s * 1e3:,.1f} ms in collectives, "
            f"{job.exposed_s * 1e3:,.1f} ms of it not hidden behind compute "
            f"({share:.1%} of a {step * 1e3:,.1f} ms step, mean over ranks)"
            + (" — most of it waiting for the straggler" if job.straggler is not None else "")
            + "."
            + predicted,
            severity="high" if share > 0.3 else "medium" if share > 0.1 else "info",
            check=[
                "DDP bucket size (bucket_cap_mb) and gradient accumulation (no_sync)",
                "the collectives per step in the trace (which op, how large)",
            ],
            fix=[
                "overlap more (smaller first bucket, FSDP prefetch), communicate less "
                "(larger batch per rank, bf16 reduction, compression), or a faster fabric"
            ],
            cost_s=exposed_own,
            step_s=step,
            source=", ".join(sorted({r.source for r in job.ranks}))[:200],
            cost_basis="communication left exposed per step"
            + (
                " on the straggler (the others' extra wait is the straggler's)"
                if job.straggler
                else ""
            ),
        )
    )
    if job.idle_share > 0.1 and job.straggler is None:
        out.append(
            Finding(
                code="idle",
                title=f"Ranks idle {job.idle_share:.0%} of the step",
                reason="Time with neither compute nor communication on the traced device: input "
                "pipeline stalls, host-side overhead or synchronisation.",
                severity="medium",
                check=["the data loader (num_workers, pinned memory), CPU-bound Python"],
                fix=["prefetch input, CUDA graphs / torch.compile for launch-bound steps"],
                cost_s=job.idle_share * step,
                step_s=step,
                cost_basis="idle time per step",
            )
        )
    return out


def _price(diag: Diagnosis) -> None:
    """Per-step costs of communication-path findings, where a trace and a busbw ratio allow."""
    job = diag.job
    ratios = [t["ratio"] for t in diag.nccl_tests if isinstance(t.get("ratio"), float)]
    ratio = min(ratios) if ratios else None
    for f in diag.findings:
        if f.code not in COMM_FAULTS or f.cost_s is not None:
            continue
        if job is not None and job.step_s > 0 and ratio is not None and ratio < 1:
            exposed = job.exposed_s if job.straggler is None else job.straggler.median("exposed_s")
            f.cost_s = min(exposed, job.comm_s * (1 - ratio))
            f.step_s = job.step_s
            f.cost_basis = (
                f"communication at {ratio:.0%} of the model's busbw: fixing it saves up to "
                "(1 - ratio) of the collective time, at most the exposed part"
            )
        elif job is None:
            f.cost_basis = "unpriced: add a profiler trace of the job to price it per step"
        else:
            f.cost_basis = "unpriced: add an nccl-tests log of this fabric to price it"


def rank(findings: list[Finding]) -> list[Finding]:
    """Critical first (they stop the job), then by cost per step, then by severity."""

    def key(f: Finding) -> tuple[int, float, int]:
        sev = SEVERITIES.index(f.severity) if f.severity in SEVERITIES else len(SEVERITIES)
        return (0 if f.severity == "critical" else 1, -(f.cost_s or 0.0) if f.cost_s else 1.0, sev)

    return sorted(findings, key=key)


def diagnose(
    paths: list[str],
    *,
    fabric: str | None = None,
    gpu: str | None = None,
    gpus_per_node: int | None = None,
    op: str | None = None,
    ranks: int | None = None,
    request: Any = None,
) -> Diagnosis:
    """Read every file under `paths`, join the evidence, rank the findings."""
    files = expand(paths)
    diag = Diagnosis(inputs=[])
    traces: list[Path] = []
    opts = {"fabric": fabric, "gpu": gpu, "gpus_per_node": gpus_per_node, "op": op, "ranks": ranks}
    for path in files:
        item = Input(str(path))
        diag.inputs.append(item)
        kind = sniff(path)
        if kind == "trace":
            item.kinds.append("trace")
            traces.append(path)
            continue
        if kind in ("json", "binary"):
            item.notes.append(
                "not understood: "
                + (
                    "JSON without traceEvents (not a profiler trace)"
                    if kind == "json"
                    else "a binary file"
                )
            )
            continue
        with _read_lines(path) as fh:
            log = parse_nccl_log(fh, str(path))
        found = log.records or log.timeouts or log.connections or log.errors or log.warnings
        if found:
            item.kinds.append("nccl-log")
            diag.logs.append(log)
            item.notes.append(
                f"{log.records:,} NCCL records, {log.used:,} read"
                + (f"; {len(log.timeouts):,} watchdog timeout(s)" if log.timeouts else "")
                + (f"; {len(log.connections):,} connection(s)" if log.connections else "")
                + (
                    f"; {log.not_understood:,} NCCL line(s) not understood, e.g. line "
                    f"{log.examples[0][0]}: {log.examples[0][1][:80]!r}"
                    if log.not_understood
                    else ""
                )
                + (f"; {log.foreign:,} other line(s) skipped" if log.foreign else "")
            )
        _nccl_tests(path, log if found else None, opts, diag, item)
        from bandwall.measure.importers import run_compare

        trained = run_compare.doctor_hook(path, item, request, {"gpu": gpu} if gpu else {})
        if trained is not None:
            diag.training.append(trained[0])
            if trained[1] is not None:
                diag.findings.append(Finding(**trained[1]))
        if not item.kinds:
            with _read_lines(path) as fh:
                first = next((line.strip() for line in fh if line.strip()), "")
            item.notes.append(
                "not understood: no NCCL debug lines, no nccl-tests table and no profiler "
                f"trace (first line: {first[:80]!r})"
            )
    if traces:
        diag.job = analyze_job(list(traces))
        diag.notes += diag.job.notes
        for r in diag.job.ranks:
            item = next(i for i in diag.inputs if i.path == r.source)
            item.notes.append(
                f"rank {r.rank if r.rank is not None else '?'}"
                + (f" on {r.host}" if r.host else "")
                + f", {r.device}, {r.events:,} events, {len(r.steps)} step(s)"
                + (" (trace cut short)" if r.truncated else "")
            )
        if request is not None and diag.job.step_s > 0:
            diag.plan = plan_comparison(
                diag.job.step_s, diag.job.exposed_s, diag.job.compute_s, request
            )
    for log in diag.logs:
        diag.findings += log_findings(log)
    diag.findings += _busbw_findings(diag)
    diag.findings += _trace_findings(diag)
    _price(diag)
    diag.findings = rank(diag.findings)
    if not any(i.kinds for i in diag.inputs):
        diag.notes.append("nothing in the given files was understood")
    return diag
