"""Figures from bandwall's own objects: plans, sweeps of the collective model, stored runs."""

from __future__ import annotations

from typing import Any

import numpy as np

from bandwall.catalog import load_catalog
from bandwall.measure.bench.store import Run
from bandwall.measure.calibrate.fit import MEASURED_ALGO, _single_level
from bandwall.model.collectives import Op, busbw_factor, collective_time_s, evaluate_collective
from bandwall.model.topology import Link, Topology
from bandwall.planning.api import Plan
from bandwall.report import plots
from bandwall.report.tables import format_duration
from bandwall.units import GB


def link_ceiling(topo: Topology, ranks: int) -> tuple[str, float] | None:
    """The wire rate that bounds busbw for `ranks`, in GB/s, with its label.

    busbw is normalised so that it compares with the hardware peak whatever the rank count
    (nccl-tests' PERFORMANCE.md): inside a node that is one GPU's scale-up link; across nodes
    a ring crosses each node once, so it is the node's NICs together (8 × 200 Gb/s HDR caps
    multi-node all_reduce near 200 GB/s), divided by the oversubscription; across sites, the
    site's WAN uplink. The slowest level a collective spans is the ceiling. A switch-side
    reduction (SHARP, NVLS) moves each byte once and can pass it; the label says so.
    """
    gpn = float(np.max(np.asarray(topo.gpus_per_node)))
    g = min(float(ranks), gpn)
    levels: list[tuple[str, float, bool]] = []
    if g > 1 and topo.scale_up is not None:
        up = topo.scale_up
        levels.append((up.name, float(np.min(up.bandwidth_Bps)), up.in_network))
    if ranks > gpn and topo.scale_out is not None:
        out = topo.scale_out
        nics = min(float(np.min(np.asarray(topo.nics_per_node))), g)
        oversub = float(np.max(np.asarray(topo.oversubscription)))
        name = f"{nics:g} × {out.name} per node" + (f", {oversub:g}:1" if oversub > 1 else "")
        levels.append((name, float(np.min(out.bandwidth_Bps)) * nics / oversub, out.in_network))
    wan = topo.wan
    per_site = topo.nodes_per_site
    if wan is not None and per_site is not None and ranks > float(np.max(per_site)) * gpn:
        levels.append((f"{wan.name} per site", float(np.min(wan.bandwidth_Bps)), False))
    if not levels:
        return None
    name, rate, in_network = min(levels, key=lambda item: item[1])
    note = "; in-network reduction can pass it" if in_network else ""
    return f"link rate ({name}): {rate / GB:,.3g} GB/s{note}", rate / GB


def busbw_model_figure(op: Op, ranks: int, topo: Topology, label: str) -> Any:
    sizes = np.logspace(10, 33, 24, base=2)
    res = evaluate_collective(op, sizes, ranks, topo)
    ceiling = link_ceiling(topo, ranks)
    return plots.busbw_vs_size(
        [{"label": f"model: {label}", "sizes": sizes, "busbw": res.busbw_GBps, "measured": False}],
        f"{op.value}, {ranks:,} ranks (model)",
        [ceiling] if ceiling else [],
    )


def busbw_run_figure(
    run: Run, rows: list[dict[str, Any]], fabric: str | None, bandwidth_Gbps: float | None
) -> Any:
    """Measured busbw per op, with the model's prediction on the same chart when a fabric is
    given, and the link rate (`bandwidth_Gbps`, else the fabric's) as the ceiling."""
    series: list[dict[str, Any]] = []
    ceilings: list[tuple[str, float]] = []
    if bandwidth_Gbps:
        ceilings.append(
            (
                f"link rate: {bandwidth_Gbps:,.3g} Gb/s = {bandwidth_Gbps / 8:,.3g} GB/s",
                bandwidth_Gbps / 8,
            )
        )
    elif fabric:
        spec = load_catalog().fabric(fabric)
        ceilings.append(
            (f"link rate ({fabric}): {spec.bandwidth_GBps:,.3g} GB/s", spec.bandwidth_GBps)
        )
    # bench measures out-of-place and in-place rows per size (as nccl-tests); plot the
    # out-of-place ones when both are there
    if any(not r.get("inplace") for r in rows):
        rows = [r for r in rows if not r.get("inplace")]
    for op in sorted({r["op"] for r in rows}):
        mine = sorted((r for r in rows if r["op"] == op), key=lambda r: r["size_bytes"])
        sizes = np.array([r["size_bytes"] for r in mine], dtype=float)
        series.append(
            {
                "label": f"{op} measured",
                "sizes": sizes,
                "busbw": [r["busbw_GBps"] for r in mine],
                "measured": True,
            }
        )
        if fabric:
            link = Link.from_fabric(load_catalog().fabric(fabric))
            if bandwidth_Gbps:
                link = link.with_overrides(bandwidth_Bps=bandwidth_Gbps * GB / 8)
            o = Op(op)
            t = collective_time_s(
                o, MEASURED_ALGO[o], sizes, run.world_size, _single_level(link, run.backend)
            )
            series.append(
                {
                    "label": f"{op} model ({fabric})",
                    "sizes": sizes,
                    "busbw": sizes / t / 1e9 * busbw_factor(o, run.world_size),
                    "measured": False,
                }
            )
    return plots.busbw_vs_size(
        series, f"run {run.id}: {run.world_size:,} ranks, {run.backend}", ceilings
    )


def breakdown_figure(plans: list[Plan]) -> Any:
    return plots.breakdown_bars(
        [p.cluster.preset for p in plans],
        [p.breakdown for p in plans],
        f"{plans[0].workload.name}: step time by term",
    )


def cost_figure(plans: list[Plan]) -> Any:
    return plots.cost_vs_time(
        [
            {
                "label": (
                    f"{p.cluster.preset}: {format_duration(p.metrics['time_to_train_s'])}, "
                    f"${p.metrics['cost_usd']:,.0f} "
                    f"(at ${p.metrics['price_per_gpu_hour_usd']:,.2f} per GPU-hour)"
                ),
                "time_days": p.metrics["time_to_train_s"] / 86400,
                "cost_usd": p.metrics["cost_usd"],
            }
            for p in plans
        ],
        f"{plans[0].workload.name}: cost vs time to train",
    )


def scaling_figure(curves: dict[str, list[Plan]], title: str) -> Any:
    data = {
        label: (
            [int(p.to_json()["gpus"]) for p in ps],
            [p.metrics["comm_efficiency"] for p in ps],
            [p.metrics["goodput"] for p in ps],
        )
        for label, ps in curves.items()
    }
    return plots.scaling_curves(data, title)


def links_figure(run: Run, rows: list[dict[str, Any]]) -> Any:
    return plots.link_heatmap(rows, run.world_size, f"run {run.id}: pairwise bandwidth")
