"""Rich tables: what a person reads in the terminal. No computation happens here."""

from __future__ import annotations

import csv
import sys
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.table import Table

from bandwall.catalog.models import LOW_PRECISIONS
from bandwall.planning.api import BREAKDOWN_KEYS, Plan
from bandwall.planning.request import field_flag
from bandwall.report._keyed import Column, KeyedTable
from bandwall.report.text import csv_cell, fmt_num
from bandwall.workloads import Transformer

if TYPE_CHECKING:
    from bandwall.catalog import Catalog


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


def _energy(kwh: float) -> str:
    """MWh for jobs, kWh for small runs, so a one-hour job does not print 0.0 MWh."""
    return f"{kwh / 1e3:,.1f} MWh" if kwh >= 100 else f"{kwh:,.3g} kWh"


def _co2(kg: float) -> str:
    return f"{kg / 1e3:,.1f} t" if kg >= 100 else f"{kg:,.3g} kg"


def _has_range(m: Any, key: str) -> bool:
    """Whether the plan carries a p10-p90 range for `key` (published-run residuals)."""
    lo, hi = m.get(f"{key}_p10"), m.get(f"{key}_p90")
    return lo is not None and hi is not None and lo == lo and hi == hi and lo != hi


def _range_text(m: Any, key: str) -> str:
    if not _has_range(m, key):
        return ""
    return f" (p10-p90 {format_duration(m[f'{key}_p10'])}-{format_duration(m[f'{key}_p90'])})"


def _layout_text(layout: dict[str, Any]) -> str:
    parts = [
        f"{k}={layout[k]}"
        for k in ("tp", "pp", "cp", "ep", "etp", "dp")
        if layout.get(k, 1) != 1 or k == "dp"
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
    gb = 1e9
    head = Table(
        title=f"{plan.workload.name} on {d['gpus']:,} × {cl.gpu.name} · {cl.preset}"
        + (f" · --fabric {plan.request.fabric}" if plan.request.fabric else ""),
        show_header=False,
    )
    head.add_column("what")
    head.add_column("value")
    out = d["cluster"]
    up = out["scale_up"]  # None: one GPU per node (GH200 x1), nothing to scale up over
    fabric = f"{up} ×{cl.gpus_per_node}/node" if up else f"{cl.gpus_per_node} GPU/node"
    fabric += f" + {out['scale_out']}"
    fabric += (
        f" ({out['scale_out_Gbps_per_nic']:g} Gb/s × {out['nics_per_node']:g} "
        f"{out['scale_out_transport'].upper()} NIC/node)"
    )
    if out["wan"]:
        fabric += f" + {out['wan']} between {cl.sites} sites"
    rate = (
        f"{m['tokens_per_s']:,.0f} tokens/s"
        if isinstance(plan.workload, Transformer)
        else f"{m['samples_per_s']:,.0f} samples/s"
    )
    rows = [
        ("fabric", fabric),
        ("layout", _layout_text(plan.layout)),
        ("step time", format_duration(m["step_time_s"]) + _range_text(m, "step_time_s")),
        ("communication efficiency", f"{m['comm_efficiency']:.1%} (compute / step)"),
        (
            "compute utilisation",
            f"{m['compute_utilisation']:.1%} (not waiting on data-parallel/DiLoCo sync)",
        ),
        (
            "MFU",
            f"{m['mfu']:.1%} ({m['tflops_per_gpu']:,.0f} TFLOP/s per GPU)"
            + (f"; p10-p90 {m['mfu_p10']:.1%}-{m['mfu_p90']:.1%}" if _has_range(m, "mfu") else ""),
        ),
        ("throughput", rate),
        (
            "goodput",
            f"{m['goodput']:.1%} (job MTBF {format_duration(m['mtbf_s'])}, checkpoint "
            f"every {format_duration(m['checkpoint_interval_s'])})"
            if m["mtbf_s"] != float("inf")
            else "100% (failures not modelled: --no-failures)",
        ),
        ("time to train", format_duration(m["time_to_train_s"]) + budget_text(plan)),
        (
            "GPU-hours",
            f"{m['gpu_hours']:,.0f}" if m["gpu_hours"] >= 10 else f"{m['gpu_hours']:.2g}",
        ),
        (
            "energy",
            f"{_energy(m['energy_kwh'])}, {m['joules_per_token']:,.3g} J/"
            f"{'token' if isinstance(plan.workload, Transformer) else 'sample'}, "
            f"{_co2(m['co2_kg'])} CO2 ({m['power_W_per_gpu']:,.0f} W per GPU with PUE)",
        ),
        (
            "cost",
            f"{_money(m['cost_usd'])} at ${m['price_per_gpu_hour_usd']:.2f}/GPU-h"
            + (f" incl. {_money(m['egress_usd'])} egress" if m["egress_usd"] > 0 else ""),
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
        "overlap": "compute slowed by hidden comm",
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
    # the parts add up to the total: "backward" is the backward's working set on top of what
    # is kept (a rebuilt layer, the logits, FSDP's gathered layers)
    keys = ("weights", "grads", "optimizer", "activations", "transient", "", "capacity")
    for k in keys:
        mem.add_column({"": "total", "transient": "backward"}.get(k, k), justify="right")
    mem.add_row(*(f"{m[f'memory_{k}_bytes' if k else 'memory_bytes'] / gb:,.1f}" for k in keys))
    return [head, br, mem, assumptions_table(plan)]


def assumption_rows(plan: Plan) -> list[tuple[str, str]]:
    """The inputs that decide the answer, each with where it came from (an option the user set
    or the default), so a surprising number can be traced without --json."""
    from bandwall.model.engine import CHINCHILLA_TOKENS_PER_PARAM, FINE_TUNE_TOKENS

    m, req, w = plan.metrics, plan.request, plan.workload
    given = req.model_fields_set
    gb = int(m["global_batch"])
    gb_src = "--global-batch" if "global_batch" in given else "default"
    if "global_batch" not in given:
        from bandwall.planning.api import default_global_batch

        target = default_global_batch(w, req.gpus)
        if gb != target:  # the engine rounds it so every data-parallel rank gets whole shares
            share = int(m["dp"]) * int(m["micro_batch"])
            gb_src = (
                f"the default {target:,}, rounded to a multiple of dp × micro-batch = "
                f"{int(m['dp']):,} × {int(m['micro_batch']):,} = {share:,}"
            )
    if isinstance(w, Transformer):
        batch = f"{gb:,} sequences × {w.seq_len:,} = {gb * w.seq_len:,} tokens per step ({gb_src})"
        if "tokens" in given:
            budget = f"{m['tokens']:,.0f} tokens (--tokens)"
        elif req.lora_rank:
            budget = (
                f"{FINE_TUNE_TOKENS:,.0f} tokens (a fine-tune has no compute-optimal size: "
                "priced per billion tokens; --tokens to set yours)"
            )
        else:
            budget = (
                f"{m['tokens']:,.0f} tokens ({CHINCHILLA_TOKENS_PER_PARAM} per parameter, the "
                "default; --tokens to change)"
            )
    else:
        batch = f"{gb:,} images per step ({gb_src})"
        budget = f"{m['samples']:,.0f} images ({m['samples'] / w.dataset_samples:,.3g} epochs)"
    if "gemm_efficiency" in m:  # the engine reports the efficiency it used
        gemm = f"{m['gemm_efficiency']:.3f}"
    elif req.gemm_efficiency is not None:
        gemm = f"{req.gemm_efficiency:.3f} (--gemm-efficiency)"
    else:
        from bandwall.model import calibration

        perf, fmt = plan.cluster.perf, str(req.precision)
        large = perf.large_gemm_efficiency(fmt)
        in_step = calibration.in_step_efficiency(perf.arch, str(req.stack))
        factor = calibration.FP8_GEMM_IN_STEP_EFFICIENCY
        scaled = f", {fmt} GEMMs × {factor:.3g}" if fmt in LOW_PRECISIONS else ""
        gemm = (
            f"large {fmt} GEMMs {large:.2f} of the {fmt} peak ({perf.gpu}, gpu_perf.toml), "
            f"smaller ones by shape; the step at {in_step:.3g} of the kernel model{scaled} (fitted "
            "on published runs); --gemm-efficiency"
        )
    recompute = f"{req.recompute.value} ({m['recompute_share']:.0%} of layers fully recomputed)"
    if req.recompute_modules:
        recompute = f"selective: {req.recompute_modules.replace(',', ', ')} rerun in backward"
    rows = [
        ("global batch", batch),
        ("budget", budget),
        ("GEMM efficiency", gemm),
        ("precision", f"{req.precision} compute, gradients reduced in {req.reduce_dtype}"),
        ("recompute", recompute),
    ]
    if isinstance(w, Transformer):
        rows.append(("attention", _attention_text(plan)))
        rows.append(("MFU counts", _mfu_convention_text(plan)))
    return rows


def _mfu_convention_text(plan: Plan) -> str:
    """Which FLOPs MFU counts: published MFUs differ by convention alone (12% for an 8B model
    at 8k tokens, more on longer sequences), so the other common count is printed beside it."""
    from bandwall.model.compute import full_attention_ratio
    from bandwall.model.engine import lora_trainable_fraction

    w = plan.workload
    trainable = lora_trainable_fraction(w, plan.request.lora_rank)
    full = plan.metrics["mfu"] * full_attention_ratio(w, trainable)
    return (
        "causal attention once, as Megatron-Bridge and Meta count; counting the full score "
        f"matrix (PaLM, torchtitan) it reads {full:.1%}"
    )


#: How each attention kernel is named to a user.
_KERNEL_NAMES = {"fa2": "FlashAttention-2", "fa3": "FlashAttention-3", "fa4": "FlashAttention-4"}


def _attention_text(plan: Plan) -> str:
    """The attention kernel the step was priced with, and why (the option, or the stack's)."""
    from bandwall.model.compute.rates import DEFAULT_ATTENTION_KERNEL
    from bandwall.model.engine import attention_kernel
    from bandwall.model.vocab import Stack

    req = plan.request
    if not req.flash_attention:
        return "unfused softmax (--no-flash-attention)"
    arch = plan.cluster.perf.arch
    kernel = attention_kernel(
        arch, DEFAULT_ATTENTION_KERNEL[arch], Stack(req.stack), req.attention_kernel
    )
    why = "--attention-kernel" if req.attention_kernel is not None else f"{req.stack}'s default"
    return f"{_KERNEL_NAMES[kernel]} ({why})"


def assumptions_table(plan: Plan) -> Table:
    t = Table(title="Assumptions that decide the answer", show_header=False)
    t.add_column("what", no_wrap=True)
    t.add_column("value", overflow="fold")
    for k, v in assumption_rows(plan):
        t.add_row(k, v)
    return t


def token_count(tokens: float) -> str:
    """A token count in its own unit: '15T', '2,000B', '4.2M' (3M tokens read '0B').

    >>> token_count(15e12), token_count(2e12), token_count(4.19e6), token_count(512)
    ('15.0T', '2,000B', '4.19M', '512')
    """
    if tokens >= 1e13:
        return f"{tokens / 1e12:,.1f}T"
    if tokens >= 1e9:
        return f"{tokens / 1e9:,.0f}B"
    if tokens >= 1e6:
        return f"{tokens / 1e6:,.3g}M"
    if tokens >= 1e3:
        return f"{tokens / 1e3:,.3g}K"
    return f"{tokens:,.0f}"


def budget_text(plan: Plan) -> str:
    m = plan.metrics
    if isinstance(plan.workload, Transformer):
        tokens = m["steps"] * m["global_batch"] * plan.workload.seq_len
        return f" for {token_count(tokens)} tokens"
    return f" for {m['steps'] * m['global_batch'] / plan.workload.dataset_samples:,.3g} epochs"


def _short_layout(layout: dict[str, Any]) -> str:
    """tp8 pp4 cp1 dp32 z1 v2: the layout in a narrow column."""
    parts = [
        f"{k}{layout[k]}" for k in ("tp", "pp", "cp", "ep", "dp") if layout[k] != 1 or k == "dp"
    ]
    parts.append(f"z{layout['zero']}")
    if layout["virtual_stages"] > 1:
        parts.append(f"v{layout['virtual_stages']}")
    return " ".join(parts)


def compare_tables(plans: list[Plan]) -> list[Table]:
    """One row per preset: time, then money (two tables, each within 80 columns)."""
    title = f"{plans[0].workload.name} on {plans[0].to_json()['gpus']:,} GPUs"
    width = max(len(p.cluster.preset) for p in plans)
    speed = Table(title=f"{title}: time")
    speed.add_column("preset", min_width=width, no_wrap=True)
    speed.add_column("layout", overflow="fold")
    for col in ("step", "comm eff.", "to train"):
        speed.add_column(col, justify="right", no_wrap=True)
    money = Table(title=f"{title}: cost ({plans[0].cluster.gpu.name})")
    money.add_column("preset", min_width=width, no_wrap=True)
    for col in ("$/GPU-hour", "GPU-hours", "egress", "total cost"):
        money.add_column(col, justify="right", no_wrap=True)
    unit = "token" if isinstance(plans[0].workload, Transformer) else "sample"
    energy = Table(title=f"{title}: energy")
    energy.add_column("preset", min_width=width, no_wrap=True)
    for col in ("W/GPU", "energy", f"J/{unit}", "CO2"):
        energy.add_column(col, justify="right", no_wrap=True)
    for p in plans:
        m = p.metrics
        speed.add_row(
            p.cluster.preset,
            _short_layout(p.layout),
            format_duration(m["step_time_s"]),
            f"{m['comm_efficiency']:.1%}",
            format_duration(m["time_to_train_s"]),
        )
        energy.add_row(
            p.cluster.preset,
            f"{m['power_W_per_gpu']:,.0f}",
            _energy(m["energy_kwh"]),
            f"{m['joules_per_token']:,.3g}",
            _co2(m["co2_kg"]),
        )
        money.add_row(
            p.cluster.preset,
            f"${m['price_per_gpu_hour_usd']:.2f}",
            f"{m['gpu_hours']:,.0f}",
            _money(m["egress_usd"]),
            _money(m["cost_usd"]),
        )
    return [speed, money, energy]


def scale_tables(plans: list[Plan]) -> list[Table]:
    """One row per GPU count, where scaling stops paying: speed, then failures and money."""
    p0 = plans[0]
    title = f"{p0.workload.name} · {p0.cluster.preset} · scaling"
    speed = Table(title=title)
    for col in ("GPUs", "layout", "step", "comm eff.", "MFU", "time to train"):
        speed.add_column(col, justify="left" if col == "layout" else "right")
    money = Table(title=f"{title}: failures and cost")
    for col in ("GPUs", "goodput", "job MTBF", "ckpt every", "$/M tokens", "cost"):
        money.add_column(col, justify="right")
    for p in plans:
        m = p.metrics
        per_sample = p.workload.seq_len if isinstance(p.workload, Transformer) else 1
        units = m["steps"] * m["global_batch"] * per_sample
        gpus = f"{p.to_json()['gpus']:,}"
        speed.add_row(
            gpus,
            _short_layout(p.layout),
            format_duration(m["step_time_s"]),
            f"{m['comm_efficiency']:.1%}",
            f"{m['mfu']:.1%}",
            format_duration(m["time_to_train_s"]),
        )
        money.add_row(
            gpus,
            f"{m['goodput']:.1%}",
            format_duration(m["mtbf_s"]),
            format_duration(m["checkpoint_interval_s"]),
            f"${m['cost_usd'] / units * 1e6:,.2f}",
            _money(m["cost_usd"]),
        )
    return [speed, money]


def validation_table(rows: list[dict[str, Any]], title: str) -> Table:
    """Predicted against published, one row per published run (80 columns)."""
    t = Table(title=title)
    t.add_column("run", min_width=max(len(r["id"]) for r in rows), no_wrap=True)
    t.add_column("GPUs", justify="right", no_wrap=True)
    t.add_column("layout", overflow="fold")
    for col in ("published", "model", "error"):
        t.add_column(col, justify="right", no_wrap=True)
    for r in rows:
        digits = 2 if r["unit"] == "s" else 0
        t.add_row(
            r["id"],
            f"{r['gpus']:,}",
            r["layout"],
            f"{r['published']:,.{digits}f} {r['unit']}",
            f"{r['predicted']:,.{digits}f} {r['unit']}",
            f"{r['error']:+.1%}",
        )
    return t


def catalog_table(kind: str, cat: Catalog) -> KeyedTable:
    """One kind of catalog entry with the source and date of each (keys never split)."""
    num = Column  # shorthand below: Column(header, whole=True, right=True) for numbers

    def n(header: str) -> Column:
        return num(header, whole=True, right=True)

    if kind == "gpus":
        t = KeyedTable(
            "GPUs (dense peak TFLOP/s)",
            [
                Column("name"),
                *(n(c) for c in ("fp32", "tf32", "bf16", "fp8", "fp4", "mem GB", "HBM TB/s")),
                Column("scale-up", whole=True),
                Column("source"),
                Column("as of", whole=True),
            ],
        )
        for g in cat.gpus.values():
            p = {k.value: v for k, v in g.peak_TFLOPS.items()}
            t.add_row(
                g.name,
                *(
                    fmt_num(p[k], 1) if k in p else "-"
                    for k in ("fp32", "tf32", "bf16", "fp8", "fp4")
                ),
                fmt_num(g.memory_GB, 0),
                fmt_num(g.memory_bandwidth_TBps, 2),
                g.scale_up_fabric,
                g.source,
                str(g.as_of),
            )
        return t
    if kind == "fabrics":
        t = KeyedTable(
            "Fabrics (per endpoint, per direction)",
            [
                Column("key"),
                Column("tier", whole=True),
                *(n(c) for c in ("Gb/s", "GB/s", "α µs", "jitter µs (mean/σ)", "loss")),
                Column("RDMA", whole=True),
                Column("NICs/node", whole=True),
                Column("in-net", whole=True),
                n("eff"),
                Column("source"),
                Column("as of", whole=True),
            ],
        )
        for f in cat.fabrics.values():
            t.add_row(
                f.key,
                f.tier.value,
                fmt_num(f.bandwidth_Gbps, 0),
                fmt_num(f.bandwidth_GBps, 1),
                fmt_num(f.latency_us, 1),
                f"{fmt_num(f.jitter_mean_us, 1)}/{fmt_num(f.jitter_std_us, 1)}",
                f"{f.loss_rate:g}",
                "no (GPUDirect over TCP)" if f.gpudirect_tcp else "yes" if f.rdma else "no",
                (
                    str(f.nics_per_node)
                    if f.nics_per_node is not None
                    else ("1 per GPU" if f.rdma else "1")
                )
                if f.tier.value != "scale_up"
                else "-",
                "yes" if f.in_network_reduction else "no",
                fmt_num(f.efficiency, 2),
                f.source,
                str(f.as_of),
            )
        return t
    if kind == "power":
        from bandwall.catalog.power import power_table

        t = KeyedTable(
            "Power, PUE and grid (energy model)",
            [
                Column("key"),
                Column("kind", whole=True),
                Column("values"),
                Column("source"),
                Column("as of", whole=True),
            ],
        )
        for r in power_table():
            t.add_row(r["key"], r["kind"], r["values"], r["source"], str(r["as_of"]))
        return t
    if kind == "perf":
        t = KeyedTable(
            "Achieved rates (compute model)",
            [
                Column("GPU"),
                *(n(c) for c in ("MiB", "GEMM", "attention", "HBM", "SMs")),
                Column("source"),
            ],
        )
        for perf in cat.perf.values():
            t.add_row(
                perf.gpu,
                f"{perf.memory_MiB:,}",
                f"{perf.gemm_efficiency:.2f}",
                f"{perf.attention_efficiency:.2f}",
                f"{perf.hbm_efficiency:.2f}",
                f"{perf.sm_count:,}",
                f"{perf.source} ({perf.as_of})",
            )
        return t
    if kind == "failures":
        t = KeyedTable(
            "Failure rates (per component-hour)",
            [
                Column("key"),
                *(n(c) for c in ("GPU", "node", "NIC", "link")),
                Column("source"),
                Column("as of", whole=True),
            ],
        )
        for fail in cat.failures.values():
            t.add_row(
                fail.key,
                f"{fail.gpu_per_hour:.2e}",
                f"{fail.node_per_hour:.2e}",
                f"{fail.nic_per_hour:.2e}",
                f"{fail.link_per_hour:.2e}",
                fail.source,
                str(fail.as_of),
            )
        return t
    t = KeyedTable(
        "Providers ($ per GPU-hour, on demand)",
        [
            Column("key"),
            Column("kind", whole=True),
            Column("scale-out", whole=True),
            n("virt. overhead"),
            n("egress $/GB"),
            Column("prices"),
            Column("source"),
            Column("as of", whole=True),
        ],
    )
    for prov in cat.providers.values():
        prices = "; ".join(f"{r.gpu} {r.low:.2f}-{r.high:.2f}" for r in prov.prices)
        t.add_row(
            prov.key,
            prov.kind.value,
            prov.scale_out_fabric,
            f"{prov.virtualization_overhead:.0%}",
            f"{prov.egress_usd_per_GB:.2f}",
            prices,
            prov.source,
            str(prov.as_of),
        )
    return t


def _size_cell(size_b: int) -> str:
    """`format_size`, with separators on plain byte counts (the JSON keeps the exact bytes)."""
    from bandwall.units import format_size

    text = format_size(size_b)
    return f"{size_b:,}" if text.isdigit() else text


def collective_table(rows: list[dict[str, Any]], title: str) -> Table:
    """nccl-tests-like rows of the collective model."""

    table = Table(title=title)
    # units on a second header line and no decimals past 0.1 s: the widest rows (a 7-digit
    # rank count, collnet_direct/Simple*) still fit 80 columns without cutting a cell
    for col, justify in (
        ("ranks", "right"),
        ("size", "right"),
        ("time\n(us)", "right"),
        ("algbw\n(GB/s)", "right"),
        ("busbw\n(GB/s)", "right"),
        ("algo/proto", "left"),
    ):
        # algo/proto folds onto a second line rather than be cut (halving_doubling/Simple
        # beside a million ranks and hours of time)
        table.add_column(
            col,
            justify=justify,  # type: ignore[arg-type]
            no_wrap=col != "algo/proto",
            overflow="fold" if col == "algo/proto" else "ellipsis",
        )
    for row in rows:
        size_b = int(row["size_bytes"])
        time_us = float(row["time_s"]) * 1e6
        table.add_row(
            f"{int(row['ranks']):,}",
            _size_cell(size_b),
            # whole µs with separators past 0.1 s (1 PiB printed '4.57e+09' in a µs column)
            fmt_num(time_us, 2 if time_us < 1e5 else 0),
            _bandwidth(float(row["algbw_GBps"])),
            _bandwidth(float(row["busbw_GBps"])),
            _algo_cell(str(row["algo"]), row.get("protocol")),
        )
    return table


def _algo_cell(algo: str, protocol: Any) -> str:
    """'algo/proto'; a long pair (halving_doubling/Simple) on two lines, split at the slash."""
    if not protocol:
        return algo
    text = f"{algo}/{protocol}"
    return f"{algo}/\n{protocol}" if len(text) > 18 else text


def models_table(rows: list[dict[str, Any]]) -> KeyedTable:
    t = KeyedTable(
        "Workloads",
        [
            Column("key"),
            Column("name"),
            Column("params (B)", whole=True, right=True),
            Column("active (B)", whole=True, right=True),
            Column("train GFLOP/sample", whole=True, right=True),
            Column("source"),
        ],
    )
    for r in rows:
        t.add_row(
            str(r["key"]),
            str(r["name"]),
            f"{r['params_b']:,.2f}",
            f"{r['active_params_b']:,.2f}",
            f"{r['gflops_per_sample']:,.0f}",
            str(r["source"]),
        )
    return t


def presets_table(rows: list[dict[str, Any]]) -> KeyedTable:
    t = KeyedTable(
        "Presets",
        [
            Column("key"),
            Column("provider", whole=True),
            Column("scale-out", whole=True),
            Column("NICs/node", whole=True, right=True),
            Column("sites", whole=True, right=True),
            Column("description"),
        ],
    )
    for p in rows:
        t.add_row(
            p["key"],
            p["provider"],
            p["scale_out"],
            f"{p['nics_per_node']:g}",
            str(p["sites"]),
            p["description"],
        )
    return t


def run_validation_table(rows: list[dict[str, Any]], title: str) -> Table:
    """Predicted against measured time per size of a stored bench run."""
    from bandwall.units import format_size

    t = Table(title=title)
    for col in ("op", "size", "measured (us)", "predicted (us)", "error", "counted"):
        t.add_column(col, justify="left" if col == "op" else "right")
    for r in rows:
        t.add_row(
            r["op"],
            format_size(r["size_bytes"]),
            f"{r['measured_s'] * 1e6:,.0f}",
            f"{r['predicted_s'] * 1e6:,.0f}",
            f"{r['error']:+.1%}",
            "yes" if r["used"] else "no",
        )
    return t


def sweep_table(table: dict[str, np.ndarray], axes: list[str], top: int) -> KeyedTable:
    """The `top` fastest-to-train rows of a sweep that are valid and fit, one per grid point
    (all rows: `sweep --csv` or `-o FILE`)."""
    ok = np.flatnonzero(np.asarray(table["valid"], bool) & np.asarray(table["fits"], bool))
    order = ok[np.argsort(np.asarray(table["time_to_train_s"], float)[ok], kind="stable")]
    rows = len(table["valid"])
    t = KeyedTable(
        f"Sweep: the {min(top, len(order)):,} fastest of {len(ok):,} fitting rows "
        f"({rows:,} in all; --csv or -o FILE for every row)",
        [
            Column("#", whole=True, right=True),
            Column("point"),
            Column("layout"),
            Column("step", whole=True, right=True),
            Column("MFU", whole=True, right=True),
            Column("to train", whole=True, right=True),
            Column("cost", whole=True, right=True),
        ],
    )
    for rank, i in enumerate(order[:top], start=1):
        point = " ".join(f"{field_flag(a)}={axis_value(a, table[a][i])}" for a in axes) or "-"
        layout = {k: int(table[k][i]) for k in ("tp", "pp", "cp", "ep", "dp", "zero")}
        layout["virtual_stages"] = int(table["virtual_stages"][i])
        t.add_row(
            f"{rank:,}",
            point,
            _short_layout(layout),
            format_duration(float(table["step_time_s"][i])),
            f"{float(table['mfu'][i]):.1%}",
            format_duration(float(table["time_to_train_s"][i])),
            _money(float(table["cost_usd"][i])),
        )
    return t


def _bandwidth(GBps: float) -> str:
    """GB/s with two decimals, as nccl-tests prints it, but three significant digits below
    1 GB/s: a WAN all-to-all or an 8-byte message is not 0.00."""
    if 0 < GBps < 0.995:
        return f"{GBps:#.3g}"
    return fmt_num(GBps, 2)


#: Decimal suffixes a count is written with (`units.parse_count`: 1T, 300B).
_COUNT_SUFFIXES = (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3))
#: Byte fields whose values read best with binary suffixes (`units.format_size`: 1M, 16M).
_BYTE_FIELDS = ("tcp_window_bytes",)


def axis_value(field: str, value: Any) -> str:
    """A sweep grid value as the user would write it: whole numbers without '.0', token
    counts as 1T, byte sizes as 16M, watts and dollars with their unit (fuzz round 23, C3:
    'tokens=1000000000000.0', 'power-cap-w=700.0')."""
    from bandwall.units import format_size

    text = value.item() if hasattr(value, "item") else value
    try:
        f = float(text)
    except (TypeError, ValueError):
        return str(text)
    if isinstance(text, bool) or f != f:
        return str(text)
    if field in ("tokens",):
        for suffix, scale in _COUNT_SUFFIXES:
            if f >= scale and (f / scale).is_integer():
                return f"{int(f / scale)}{suffix}"
    if field in _BYTE_FIELDS and f.is_integer():
        return format_size(f)
    shown = str(int(f)) if f.is_integer() and abs(f) < 1e15 else f"{f:g}"
    if field.endswith("_usd"):
        return f"${shown}"
    if field.lower().endswith("_w"):
        return f"{shown}W"
    return shown + _unit(field)


def _unit(field: str) -> str:
    """The unit a field's name ends in (`bandwidth_Gbps` → `Gbps`), to print after a value."""
    unit = field.rsplit("_", 1)[-1]
    return unit if "_" in field and unit in ("Gbps", "GBps", "s", "us", "ms", "MiB") else ""


def write_table(table: dict[str, np.ndarray], path: str | None) -> None:
    """CSV to a file or stdout; Parquet when the path ends in .parquet (needs pyarrow). A file
    goes through the one output writer (checked, then written atomically)."""
    from bandwall.errors import ConfigError
    from bandwall.safeio import atomic_output

    formats = (".csv", ".parquet")
    if path and path.lower().endswith(".parquet"):
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise ConfigError(
                "Parquet needs pyarrow; pip install 'bandwall[parquet]' or write .csv",
                field="output",
            ) from None
        with atomic_output(path, field="output", formats=formats, binary=True) as fh:
            pq.write_table(pa.table({k: np.asarray(v) for k, v in table.items()}), fh)
        return
    if path:
        with atomic_output(path, field="output", formats=formats) as fh:
            _write_csv(table, fh)
        return
    _write_csv(table, sys.stdout)


def _write_csv(table: dict[str, np.ndarray], fh: Any) -> None:
    writer = csv.writer(fh)
    keys = list(table)
    writer.writerow(keys)
    cols = [np.asarray(table[k]) for k in keys]
    for i in range(len(cols[0]) if cols else 0):
        writer.writerow([_cell(c[i]) for c in cols])


def _cell(value: Any) -> str:
    if isinstance(value, np.bool_ | bool):
        return str(csv_cell(bool(value)))
    if isinstance(value, str):
        return value
    f = float(value)
    if f.is_integer() and abs(f) < 1e15:
        return str(int(f))
    return repr(f)
