"""The doctor's section of `bandwall report`: an HTML fragment (an <h2> and tables) in the
report's own markup, so its stylesheet applies; every value escaped, every number with its
unit. Built with the standard library only: measure/ may not import report/."""

from __future__ import annotations

import html

from bandwall.measure.doctor.diagnosis import Diagnosis


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1e3:,.1f} ms"


def html_section(
    diag: Diagnosis, title: str = "Doctor: what the cluster's own evidence says"
) -> str:
    """One self-contained fragment for `bandwall.report.html.render`'s section list."""
    parts = [f"<h2>{html.escape(title)}</h2>"]
    if diag.findings:
        parts.append(
            _table(
                ["#", "severity", "finding", "cost / step", "share of step", "what to try"],
                [
                    [
                        str(i),
                        f.severity,
                        f"{f.title}: {f.reason}"
                        + (
                            "".join(
                                f" | {ln.source}:{ln.number}: {ln.quote()[:200]}"
                                for ln in f.evidence[:2]
                            )
                        ),
                        _ms(f.cost_s),
                        "—" if f.cost_share is None else f"{f.cost_share:.1%}",
                        "; ".join(f.fix),
                    ]
                    for i, f in enumerate(diag.findings, 1)
                ],
            )
        )
    else:
        parts.append('<p class="note">No finding: the evidence shows nothing wrong.</p>')
    if diag.logs:
        parts.append(
            _table(
                ["NCCL log", "transport", "NCCL", "ranks", "NICs / interfaces"],
                [
                    [
                        log.source,
                        log.describe_transport(),
                        ", ".join(sorted(log.versions)) or "—",
                        str(log.world_size or "—"),
                        ", ".join(sorted(log.ib_devices) or sorted(log.socket_ifaces)) or "—",
                    ]
                    for log in diag.logs
                ],
            )
        )
    tests = [t for t in diag.job.tests if t.comparison]
    if tests:
        parts.append(
            _table(
                [
                    "nccl-tests",
                    "ranks",
                    "measured busbw",
                    "model busbw",
                    "measured / model",
                    "model layout",
                ],
                [
                    [
                        str(t.op),
                        str(t.ranks),
                        f"{t.comparison['measured_busbw_GBps']:,.1f} GB/s",
                        f"{t.comparison['model_busbw_GBps']:,.1f} GB/s",
                        f"{t.comparison['ratio']:.0%}",
                        str(t.comparison["layout"]),
                    ]
                    for t in tests
                    if t.comparison is not None
                ],
            )
        )
    job = diag.job.trace
    if job is not None and job.ranks:
        parts.append(
            _table(
                ["rank", "host", "step", "compute", "comm", "overlap", "exposed comm", "idle"],
                [
                    [
                        str(r.rank if r.rank is not None else "?"),
                        r.host or "—",
                        _ms(r.median("step_s")),
                        _ms(r.median("compute_s")),
                        _ms(r.median("comm_s")),
                        _ms(r.median("overlap_s")),
                        f"{_ms(r.median('exposed_s'))} ({r.exposed_share:.0%})",
                        _ms(r.median("idle_s")),
                    ]
                    for r in sorted(job.ranks, key=lambda r: (r.rank is None, r.rank or 0))
                ],
            )
        )
    notes = [*diag.notes, *(f"{i.path}: {n}" for i in diag.inputs for n in i.notes)]
    if notes:
        parts.append('<p class="note">' + "<br>".join(html.escape(n) for n in notes[:20]) + "</p>")
    return "\n".join(parts)
