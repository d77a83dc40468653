"""One self-contained HTML report: a summary that recommends one option, then tables, plots
(inline PNG data URIs) and the assumptions behind every number. It references nothing outside
itself, so it opens with the network off. Every number is printed with its unit and thousands
separators; no raw float reaches the page."""

from __future__ import annotations

import datetime as dt
import html
from typing import Any

from bandwall import __version__
from bandwall.errors import unknown_choice
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
.summary{background:#f3f7fb;border:1px solid #c9d8e6;border-radius:6px;padding:.6rem 1rem}
.summary p{margin:.4rem 0}
"""

#: Costs closer than this share are reported as a tie, not as "$0.00 more".
TIE_SHARE = 0.01
#: How the summary picks its recommendation.
RULES = {
    "cheapest": "the lowest total cost (GPU time, failures and egress included)",
    "fastest": "the shortest time to train",
}


def money(usd: float) -> str:
    """'$1,234,567'; cents below $100.

    >>> money(1234567.4), money(2.5)
    ('$1,234,567', '$2.50')
    """
    return f"${usd:,.0f}" if abs(usd) >= 100 else f"${usd:,.2f}"


def percent(share: float) -> str:
    """A share as a percentage with one decimal.

    >>> percent(0.4567)
    '45.7%'
    """
    return f"{share:.1%}"


def size(num_bytes: float) -> str:
    """Binary-prefixed bytes, as the plots' size axes.

    >>> size(4 * 2**20), size(512)
    ('4 MiB', '512 B')
    """
    return plots.binary_size_label(num_bytes)


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _img(fig: Any, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="{plots.png_data_uri(fig)}">'


def recommend(plans: list[Plan], rule: str) -> Plan:
    """The plan the rule picks (ties: the first given)."""
    if rule not in RULES:
        raise unknown_choice("prefer", rule, RULES)
    metric = "cost_usd" if rule == "cheapest" else "time_to_train_s"
    return min(plans, key=lambda p: p.metrics[metric])


def summary_section(plans: list[Plan], rule: str = "cheapest") -> str:
    """What to pick and why, in two sentences, with the cost: the report's first section."""
    best = recommend(plans, rule)
    m = best.metrics
    c = best.cluster
    gpus = int(best.to_json()["gpus"])
    lead = (
        f"<strong>Recommended: {html.escape(c.preset)}</strong> &mdash; "
        f"{html.escape(best.workload.name)} on {gpus:,} × {html.escape(c.gpu.name)} trains in "
        f"{format_duration(m['time_to_train_s'])} for <strong>{money(m['cost_usd'])}</strong> "
        f"({m['gpu_hours']:,.0f} GPU-hours at {money(m['price_per_gpu_hour_usd'])} per GPU-hour)."
    )
    why = [
        f"Rule: {rule} &mdash; of the {len(plans):,} presets compared it has {RULES[rule]}.",
        f"Its step takes {format_duration(m['step_time_s'])} with "
        f"{percent(m['comm_efficiency'])} communication efficiency, {percent(m['mfu'])} MFU "
        f"and {percent(m['goodput'])} goodput.",
    ]
    others = [p for p in plans if p is not best]
    if others:
        if rule == "cheapest":
            fast = min(others, key=lambda p: p.metrics["time_to_train_s"])
            if fast.metrics["time_to_train_s"] < m["time_to_train_s"]:
                extra = fast.metrics["cost_usd"] - m["cost_usd"]
                why.append(
                    f"The fastest, {html.escape(fast.cluster.preset)}, finishes in "
                    f"{format_duration(fast.metrics['time_to_train_s'])} for {money(extra)} more."
                )
            else:
                runner = min(others, key=lambda p: p.metrics["cost_usd"])
                gap = runner.metrics["cost_usd"] - m["cost_usd"]
                name = html.escape(runner.cluster.preset)
                why.append(
                    f"It is also the fastest; the next cheapest, {name}, costs {money(gap)} more."
                    if gap >= TIE_SHARE * m["cost_usd"]
                    else f"It is also the fastest; {name} costs the same within "
                    f"{TIE_SHARE:.0%} ({money(runner.metrics['cost_usd'])})."
                )
        else:
            cheap = min(others, key=lambda p: p.metrics["cost_usd"])
            if cheap.metrics["cost_usd"] < m["cost_usd"]:
                saved = m["cost_usd"] - cheap.metrics["cost_usd"]
                why.append(
                    f"The cheapest, {html.escape(cheap.cluster.preset)}, saves {money(saved)} "
                    f"but takes {format_duration(cheap.metrics['time_to_train_s'])}."
                )
            else:
                why.append("It is also the cheapest.")
    return f'<h2>Summary</h2><div class="summary"><p>{lead}</p><p>{" ".join(why)}</p></div>'


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
                " ".join(f"{k}={p.layout[k]:,}" for k in ("tp", "pp", "cp", "ep", "dp")),
                format_duration(m["step_time_s"]),
                percent(m["comm_efficiency"]),
                percent(m["mfu"]),
                percent(m["goodput"]),
                format_duration(m["time_to_train_s"]),
                f"{m['gpu_hours']:,.0f}",
                money(m["price_per_gpu_hour_usd"]),
                money(m["cost_usd"]),
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
                "per GPU-hour",
                "cost",
            ],
            rows,
        ),
    ]
    brk = [
        [p.cluster.preset, *(format_duration(v) if v > 0 else "0 s" for v in p.breakdown.values())]
        for p in plans
    ]
    out.append("<p>Step time by term:</p>")
    out.append(_table(["preset", *p0.breakdown], brk))
    out.append(_img(figures.breakdown_figure(plans), "step-time breakdown per preset"))
    out.append(_img(figures.cost_figure(plans), "cost vs time to train"))
    what = budget_text(p0).removeprefix(" for ")
    out.append(
        f'<p class="note">Budget: {html.escape(what)}; global batch '
        f"{p0.layout['global_batch']:,} per step.</p>"
    )
    return "\n".join(out)


def scaling_section(curves: dict[str, list[Plan]]) -> str:
    first = next(iter(curves.values()))
    rows = [
        [
            preset,
            f"{int(p.to_json()['gpus']):,}",
            percent(p.metrics["comm_efficiency"]),
            percent(p.metrics["goodput"]),
            format_duration(p.metrics["time_to_train_s"]),
            money(p.metrics["cost_usd"]),
        ]
        for preset, plans in curves.items()
        for p in plans
    ]
    return "\n".join(
        [
            "<h2>Scaling</h2>",
            _img(
                figures.scaling_figure(
                    curves, f"{first[0].workload.name}: efficiency and goodput vs GPUs"
                ),
                "scaling curves",
            ),
            _table(["preset", "GPUs", "comm efficiency", "goodput", "time to train", "cost"], rows),
        ]
    )


def _versions(versions: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in versions.items()) or "not recorded"


def results_section(
    run: Run,
    rows: list[dict[str, Any]],
    links: list[dict[str, Any]],
    fabric: str | None,
    bandwidth_Gbps: float | None,
) -> str:
    out = [
        f"<h2>Bench run {run.id}: {html.escape(run.kind)}, {run.world_size:,} ranks, "
        f"{html.escape(run.backend)}, {html.escape(run.status)}</h2>",
        f'<p class="note">Host {html.escape(str(run.host.get("hostname")))}; '
        f"{html.escape(_versions(run.versions))}; created {html.escape(run.created_at)}.</p>",
    ]
    if rows:
        out.append(
            _table(
                ["op", "size", "median", "p90", "algbw", "busbw", "wrong results"],
                [
                    [
                        r["op"],
                        size(r["size_bytes"]),
                        format_duration(r["time_median_s"]),
                        format_duration(r["time_p90_s"]),
                        f"{r['algbw_GBps']:,.2f} GB/s",
                        f"{r['busbw_GBps']:,.2f} GB/s",
                        f"{r['wrong']:,}",
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
                ["sender", "receiver", "bandwidth", "latency p50", "latency p99"],
                [
                    [
                        f"{r['src']:,}",
                        f"{r['dst']:,}",
                        f"{r['bw_GBps']:,.2f} GB/s",
                        format_duration(r["latency_p50_s"]),
                        format_duration(r["latency_p99_s"]),
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
