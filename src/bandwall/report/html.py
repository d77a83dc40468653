"""One self-contained HTML report: tables, plots (inline PNG data URIs) and the assumptions
behind every number. It references nothing outside itself, so it opens with the network off."""

from __future__ import annotations

import datetime as dt
import html
from typing import Any

from bandwall import __version__
from bandwall.measure.bench.store import Run
from bandwall.model.engine import ASSUMPTIONS
from bandwall.planning.api import Plan
from bandwall.report import figures, plots
from bandwall.report.tables import budget_text, format_duration

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:72rem;
color:#222;line-height:1.4}
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.9rem}
th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:right}
th:first-child,td:first-child{text-align:left}
img{max-width:100%;border:1px solid #eee;margin:.5rem 0}
.note{color:#555;font-size:.85rem}
"""


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _img(fig: Any, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="{plots.png_data_uri(fig)}">'


def plans_section(plans: list[Plan]) -> str:
    p0 = plans[0]
    rows = []
    for p in plans:
        m = p.metrics
        rows.append(
            [
                p.cluster.preset,
                p.cluster.gpu.name,
                p.to_json()["cluster"]["scale_out"],
                " ".join(f"{k}={p.layout[k]}" for k in ("tp", "pp", "cp", "ep", "dp")),
                format_duration(m["step_time_s"]),
                f"{m['comm_efficiency']:.1%}",
                f"{m['mfu']:.1%}",
                f"{m['goodput']:.1%}",
                format_duration(m["time_to_train_s"]),
                f"{m['gpu_hours']:,.0f}",
                f"${p.metrics['price_per_gpu_hour_usd']:.2f}",
                f"${m['cost_usd']:,.0f}",
            ]
        )
    out = [
        f"<h2>{html.escape(p0.workload.name)} on {int(p0.to_json()['gpus']):,} GPUs</h2>",
        _table(
            [
                "preset",
                "GPU",
                "scale-out",
                "layout",
                "step",
                "comm efficiency",
                "MFU",
                "goodput",
                "time to train",
                "GPU-hours",
                "$/GPU-h",
                "cost",
            ],
            rows,
        ),
    ]
    brk = [[p.cluster.preset, *(f"{p.breakdown[k]:.4g}" for k in p.breakdown)] for p in plans]
    out.append("<p>Step time by term (seconds):</p>")
    out.append(_table(["preset", *p0.breakdown], brk))
    out.append(_img(figures.breakdown_figure(plans), "step-time breakdown per preset"))
    out.append(_img(figures.cost_figure(plans), "cost vs time to train"))
    what = budget_text(p0).removeprefix(" for ")
    out.append(f'<p class="note">Budget: {what}; global batch {p0.layout["global_batch"]}.</p>')
    return "\n".join(out)


def scaling_section(curves: dict[str, list[Plan]]) -> str:
    first = next(iter(curves.values()))
    return "\n".join(
        [
            "<h2>Scaling</h2>",
            _img(
                figures.scaling_figure(
                    curves, f"{first[0].workload.name}: efficiency and goodput vs GPUs"
                ),
                "scaling curves",
            ),
        ]
    )


def results_section(
    run: Run,
    rows: list[dict[str, Any]],
    links: list[dict[str, Any]],
    fabric: str | None,
    bandwidth_Gbps: float | None,
) -> str:
    out = [
        f"<h2>Bench run {run.id}: {html.escape(run.kind)}, {run.world_size} ranks, "
        f"{html.escape(run.backend)}, {html.escape(run.status)}</h2>",
        f'<p class="note">Host {html.escape(str(run.host.get("hostname")))}, versions '
        f"{html.escape(str(run.versions))}, created {html.escape(run.created_at)}.</p>",
    ]
    if rows:
        out.append(
            _table(
                ["op", "size (B)", "median (µs)", "p90 (µs)", "algbw GB/s", "busbw GB/s", "#wrong"],
                [
                    [
                        r["op"],
                        r["size_bytes"],
                        f"{r['time_median_s'] * 1e6:,.1f}",
                        f"{r['time_p90_s'] * 1e6:,.1f}",
                        f"{r['algbw_GBps']:.4f}",
                        f"{r['busbw_GBps']:.4f}",
                        r["wrong"],
                    ]
                    for r in rows
                ],
            )
        )
        out.append(
            _img(
                figures.busbw_run_figure(run, rows, fabric, bandwidth_Gbps),
                f"busbw vs size, run {run.id}",
            )
        )
    if links:
        out.append(
            _table(
                ["src", "dst", "GB/s", "p50 µs", "p99 µs"],
                [
                    [
                        r["src"],
                        r["dst"],
                        f"{r['bw_GBps']:.4f}",
                        f"{r['latency_p50_s'] * 1e6:.1f}",
                        f"{r['latency_p99_s'] * 1e6:.1f}",
                    ]
                    for r in links
                ],
            )
        )
        out.append(_img(figures.links_figure(run, links), f"link matrix, run {run.id}"))
    return "\n".join(out)


def render(sections: list[str], title: str, extra_assumptions: list[str]) -> str:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    assumptions = "".join(f"<li>{html.escape(a)}</li>" for a in [*ASSUMPTIONS, *extra_assumptions])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{html.escape(title)}</title><style>{CSS}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p class="note">bandwall {__version__}, generated {now}. Every hardware figure comes from the
catalog with its source (<code>bandwall catalog</code>).</p>
{"".join(sections)}
<h2>Assumptions</h2>
<ul>{assumptions}</ul>
</body></html>
"""
