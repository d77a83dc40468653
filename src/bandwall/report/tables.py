"""Rich tables: what a person reads in the terminal. No computation happens here."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from bandwall.plan import Plan
from bandwall.plan.api import BREAKDOWN_KEYS


def format_duration(seconds: float) -> str:
    """Human scale for a duration: µs to years.

    >>> format_duration(5400)
    '1.50 h'
    """
    if seconds != seconds or seconds == float("inf"):
        return "inf"
    for unit, scale in (
        ("y", 365.25 * 86400),
        ("d", 86400),
        ("h", 3600),
        ("min", 60),
        ("s", 1),
        ("ms", 1e-3),
        ("µs", 1e-6),
    ):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.2f} {unit}"
    return f"{seconds * 1e9:.0f} ns"


def _money(usd: float) -> str:
    return f"${usd:,.0f}" if usd >= 100 else f"${usd:,.2f}"


def _layout_text(layout: dict[str, Any]) -> str:
    parts = [
        f"{k}={layout[k]}" for k in ("tp", "pp", "cp", "ep", "dp") if layout[k] != 1 or k == "dp"
    ]
    parts.append(f"zero={layout['zero']}")
    if layout["pp"] > 1:
        parts.append(f"{layout['schedule']} v={layout['virtual_stages']}")
    parts.append(f"mb={layout['micro_batch']}×{layout['micro_batches']}")
    if layout["local_sgd_steps"] > 1:
        parts.append(f"DiLoCo H={layout['local_sgd_steps']}")
    if layout["compression"] != "none":
        parts.append(layout["compression"])
    return " ".join(parts)


def plan_tables(plan: Plan) -> list[Table]:
    """Summary, step breakdown and memory of one plan."""
    m, cl = plan.metrics, plan.cluster
    d = plan.to_json()
    head = Table(
        title=f"{plan.workload.name} on {d['gpus']:,} × {cl.gpu.name} · {cl.preset}",
        show_header=False,
    )
    head.add_column("what")
    head.add_column("value")
    out = d["cluster"]
    fabric = f"{out['scale_up']} ×{cl.gpus_per_node}/node + {out['scale_out']}"
    fabric += f" ({out['scale_out_Gbps_per_nic']:g} Gb/s × {out['nics_per_node']:g} NIC/node)"
    if out["wan"]:
        fabric += f" + {out['wan']} between {cl.sites} sites"
    rate = (
        f"{m['tokens_per_s']:,.0f} tokens/s"
        if plan.budget.get("tokens")
        else f"{m['samples_per_s']:,.0f} samples/s"
    )
    rows = [
        ("fabric", fabric),
        ("layout", _layout_text(plan.layout)),
        ("step time", format_duration(m["step_time_s"])),
        ("communication efficiency", f"{m['comm_efficiency']:.1%} (compute / step)"),
        ("MFU", f"{m['mfu']:.1%} ({m['tflops_per_gpu']:,.0f} TFLOP/s per GPU)"),
        ("throughput", rate),
        (
            "goodput",
            f"{m['goodput']:.1%} (job MTBF {format_duration(m['mtbf_s'])}, checkpoint "
            f"every {format_duration(m['checkpoint_interval_s'])})"
            if m["mtbf_s"] != float("inf")
            else "100% (failures not modelled: --no-failures)",
        ),
        ("time to train", format_duration(m["time_to_train_s"]) + _budget_text(plan)),
        ("GPU-hours", f"{m['gpu_hours']:,.0f}"),
        (
            "cost",
            f"{_money(m['cost_usd'])} at ${cl.price_per_gpu_hour:.2f}/GPU-h"
            + (
                f" + {_money(plan.cost['egress_usd'])} egress"
                if plan.cost["egress_usd"] > 0
                else ""
            ),
        ),
    ]
    for k, v in rows:
        head.add_row(k, v)
    br = Table(title="Step time breakdown")
    br.add_column("term")
    br.add_column("time", justify="right")
    br.add_column("share", justify="right")
    step = m["step_time_s"]
    labels = {
        "compute": "compute",
        "dp": "data-parallel comm (exposed)",
        "tp": "tensor-parallel comm",
        "pp": "pipeline send/recv (exposed)",
        "ep": "expert all-to-all",
        "cp": "context-parallel comm (exposed)",
        "bubble": "pipeline bubble",
        "straggler": "straggler wait",
    }
    for key in BREAKDOWN_KEYS:
        seconds = plan.breakdown[key]
        if seconds > 0 or key == "compute":
            br.add_row(labels[key], format_duration(seconds), f"{seconds / step:.1%}")
    br.add_row("step", format_duration(step), "100%")
    mem = Table(title="Memory per GPU (GB)")
    for k in ("weights", "grads", "optimizer", "activations", "per_gpu", "usable"):
        mem.add_column(k.replace("per_gpu", "total"), justify="right")
    mem.add_row(
        *(
            f"{plan.memory[k]:,.1f}"
            for k in ("weights", "grads", "optimizer", "activations", "per_gpu", "usable")
        )
    )
    return [head, br, mem]


def _budget_text(plan: Plan) -> str:
    b = plan.budget
    if "tokens" in b:
        return f" for {b['tokens'] / 1e9:,.0f}B tokens"
    return f" for {b['epochs']:g} epochs"


def compare_table(plans: list[Plan]) -> Table:
    """Presets side by side, one column each, as in a decision matrix."""
    t = Table(title=f"{plans[0].workload.name} on {plans[0].to_json()['gpus']:,} GPUs")
    t.add_column("")
    for p in plans:
        t.add_column(p.cluster.preset, justify="right")
    rows: list[tuple[str, Any]] = [
        ("GPU", lambda p: p.cluster.gpu.name),
        ("scale-out", lambda p: p.to_json()["cluster"]["scale_out"]),
        ("layout", lambda p: _layout_text(p.layout)),
        ("step time", lambda p: format_duration(p.metrics["step_time_s"])),
        ("compute", lambda p: format_duration(p.metrics["compute_s"])),
        ("exposed comm", lambda p: format_duration(p.metrics["exposed_comm_s"])),
        ("bubble", lambda p: format_duration(p.breakdown["bubble"])),
        ("comm efficiency", lambda p: f"{p.metrics['comm_efficiency']:.1%}"),
        ("MFU", lambda p: f"{p.metrics['mfu']:.1%}"),
        ("time to train", lambda p: format_duration(p.metrics["time_to_train_s"])),
        ("GPU-hours", lambda p: f"{p.metrics['gpu_hours']:,.0f}"),
        ("$/GPU-hour", lambda p: f"${p.cluster.price_per_gpu_hour:.2f}"),
        ("egress", lambda p: _money(p.cost["egress_usd"])),
        ("total cost", lambda p: _money(p.metrics["cost_usd"])),
    ]
    for label, fn in rows:
        t.add_row(label, *(str(fn(p)) for p in plans))
    return t


def scale_table(plans: list[Plan]) -> Table:
    """One row per GPU count: where scaling stops paying."""
    p0 = plans[0]
    t = Table(title=f"{p0.workload.name} · {p0.cluster.preset} · scaling")
    for col in (
        "GPUs",
        "layout",
        "step",
        "comm eff.",
        "MFU",
        "goodput",
        "MTBF",
        "ckpt every",
        "time to train",
        "$/M tokens",
        "cost",
    ):
        t.add_column(col, justify="left" if col == "layout" else "right")
    for p in plans:
        m, b = p.metrics, p.budget
        units = b.get("tokens", b.get("samples", 1.0))
        t.add_row(
            f"{p.to_json()['gpus']:,}",
            _layout_text(p.layout),
            format_duration(m["step_time_s"]),
            f"{m['comm_efficiency']:.1%}",
            f"{m['mfu']:.1%}",
            f"{m['goodput']:.1%}",
            format_duration(m["mtbf_s"]),
            format_duration(m["checkpoint_interval_s"]),
            format_duration(m["time_to_train_s"]),
            f"${m['cost_usd'] / units * 1e6:,.2f}",
            _money(m["cost_usd"]),
        )
    return t


def validation_table(rows: list[dict[str, Any]], title: str) -> Table:
    t = Table(title=title)
    for col in (
        "id",
        "model",
        "gpus",
        "layout",
        "measured TFLOP/s",
        "predicted",
        "error",
        "measured MFU",
        "predicted MFU",
    ):
        t.add_column(col, justify="right" if col not in ("id", "model", "layout") else "left")
    for r in rows:
        t.add_row(
            r["id"],
            r["model"],
            f"{r['gpus']:,}",
            r["layout"],
            f"{r['measured_tflops_per_gpu']:.0f}",
            f"{r['predicted_tflops_per_gpu']:.0f}",
            f"{r['error']:+.1%}",
            f"{r['measured_mfu']:.2f}",
            f"{r['predicted_mfu']:.2f}",
        )
    return t
