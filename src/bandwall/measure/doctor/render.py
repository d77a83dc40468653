"""Doctor's text and JSON output, with the standard library only (so a log run starts fast).

Text is wrapped at `width` columns (the terminal's, 80 in pipes); a quoted log line is cut to
fit its line with '...' after it (the quote before the cut is still a prefix of the input line).
Numbers carry units and thousands separators.
"""

from __future__ import annotations

import json
import math
import textwrap
from typing import Any

from bandwall.measure.doctor import training
from bandwall.measure.doctor.diagnosis import Diagnosis, Finding


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:,.1f} ms"


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    return textwrap.wrap(
        text,
        width=max(width, 40),
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=True,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def _short(name: str, most: int) -> str:
    """A file name cut in the middle, so that a quote keeps room for the line it quotes."""
    if len(name) <= most:
        return name
    half = (most - 3) // 2
    return name[:half] + "..." + name[-(most - 3 - half) :]


def _quote(prefix: str, text: str, width: int, max_lines: int = 3) -> list[str]:
    """A quoted line, folded at `width` (continuation lines indented), at most `max_lines`;
    what is cut is marked with '...'. Each piece is a substring of the input line with its
    tabs expanded (a pasted `show_gids` table): a terminal shows a tab as up to 8 columns, so
    the width is only right once they are spaces."""
    text = text.expandtabs()
    pad = " " * len(prefix) if len(prefix) < width // 2 else "     "

    def cut(s: str, room: int) -> int:
        """Where to fold: after the last space that leaves the piece at least half full."""
        if len(s) <= room:
            return len(s)
        space = s.rfind(" ", 0, room)
        return space + 1 if space >= room // 2 else room

    room = max(width - len(prefix), 20)
    at = cut(text, room)
    out = [prefix + text[:at]]
    rest = text[at:]
    cont = max(width - len(pad), 20)
    while rest and len(out) < max_lines:
        at = cut(rest, cont)
        out.append(pad + rest[:at])
        rest = rest[at:]
    if rest:
        out[-1] = out[-1][: width - 3] + "..."
    return [line.rstrip() for line in out]


def _finding(i: int, f: Finding, width: int) -> list[str]:
    cost = ""
    if f.cost_s is not None:
        cost = f" - {_ms(f.cost_s)}/step" + (
            f" ({f.cost_share:.1%} of the step)" if f.cost_share is not None else ""
        )
    out = _wrap(f"{i}. [{f.severity}] {f.title}{cost}", width, "", "   ")
    out += _wrap(f"why: {f.reason}.".replace("..", "."), width, "   ", "        ")
    if f.impact:
        out += _wrap(f"impact: {f.impact} ({f.impact_source})", width, "   ", "           ")
    for ln in f.evidence[:3]:
        name = ln.source.rsplit("/", 1)[-1]
        if len(name) <= 24:
            out += _quote(f"   > {name}:{ln.number}: ", ln.quote(), width)
        else:  # a long file name on its own line, whole when it fits, the quote below
            out.append(f"   > {_short(name, width - 16)}:{ln.number}:")
            out += _quote("     ", ln.quote(), width)
    if f.partial:
        out += _wrap(f"note: {f.partial}", width, "   ", "         ")
    if f.check:
        out += _wrap("check: " + "; ".join(f.check), width, "   ", "          ")
    if f.fix:
        out += _wrap("try: " + "; ".join(f.fix), width, "   ", "        ")
    if f.cost_s is None and f.cost_basis:
        out += _wrap(f"cost: {f.cost_basis}", width, "   ", "         ")
    return out


def _table(headers: list[str], rows: list[list[str]], width: int) -> list[str]:
    cols = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(h.rjust(c) for h, c in zip(headers, cols, strict=True))
    out = [line[:width]]
    for r in rows:
        out.append("  ".join(v.rjust(c) for v, c in zip(r, cols, strict=True))[:width])
    return out


def render_text(diag: Diagnosis, width: int = 80) -> tuple[str, str]:
    """(stdout, stderr) text of a diagnosis, every line at most `width` columns."""
    job = diag.job
    kinds = [k for i in job.inputs for k in i.kinds]
    summary = (
        ", ".join(f"{kinds.count(k)} {k}" for k in dict.fromkeys(kinds)) or "nothing understood"
    )
    out = _wrap(f"bandwall doctor: {len(job.inputs)} file(s) - {summary}", width, "", "  ")
    shown = [f for f in diag.findings]
    for i, f in enumerate(shown, 1):
        out.append("")
        out += _finding(i, f, width)
    if not diag.findings:
        out += ["", "no finding: the evidence shows nothing wrong"]
    hw = job.hardware()
    out.append("")
    out += _wrap(f"hardware read from the evidence: {hw.describe()}", width, "", "  ")
    for log in job.logs:
        out += _wrap(
            f"transport ({log.source.rsplit('/', 1)[-1]}): {log.describe_transport()}",
            width,
            "",
            "  ",
        )
    compared = [t for t in job.tests if t.comparison]
    if compared:
        out += ["", "nccl-tests busbw against the model (median over the largest sizes):"]
        rows = []
        for t in compared:
            c = t.comparison or {}
            rows.append(
                [
                    str(t.op),
                    str(t.ranks),
                    f"{c['measured_busbw_GBps']:,.1f}",
                    f"{c['model_busbw_GBps']:,.1f}",
                    f"{c['ratio']:.0%}",
                ]
            )
        out += _table(["op", "ranks", "measured GB/s", "model GB/s", "ratio"], rows, width)
        for t in compared:
            out += _wrap(f"model layout: {(t.comparison or {})['layout']}", width, "", "  ")
    tr = job.trace
    if tr is not None and tr.ranks:
        out += ["", "profiler traces: median per step"]
        rows = [
            [
                str(r.rank if r.rank is not None else "?"),
                (r.host or "-")[:16],
                _ms(r.median("step_s")),
                _ms(r.median("compute_s")),
                f"{_ms(r.median('exposed_s'))} {r.exposed_share:.0%}",
                _ms(r.median("idle_s")),
            ]
            for r in sorted(tr.ranks, key=lambda r: (r.rank is None, r.rank or 0))
        ]
        out += _table(["rank", "host", "step", "compute", "exposed", "idle"], rows, width)
    if job.plan is not None:
        p = job.plan
        out += _wrap(
            f"model: step {_ms(p['predicted_step_s'])} (measured {_ms(p['measured_step_s'])}, "
            f"{p['step_error']:+.0%}), exposed communication "
            f"{_ms(p['predicted_exposed_comm_s'])} (measured {_ms(p['measured_exposed_comm_s'])})",
            width,
            "",
            "  ",
        )
    out += training.render_lines(job, width)
    err: list[str] = []
    for item in job.inputs:
        for n in item.notes:
            err += _wrap(f"{item.path}: {n}", width, "", "  ")
    for n in job.notes:
        err += _wrap(f"note: {n}", width, "", "  ")
    return "\n".join(out) + "\n", ("\n".join(err) + "\n") if err else ""


def _safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_safe(v) for v in value]
    return value


def render_json(diag: Diagnosis) -> str:
    """The JSON document (no NaN or inf: they become null)."""
    return json.dumps(_safe(diag.to_json()), indent=2, default=str) + "\n"
