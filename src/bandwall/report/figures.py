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
from bandwall.units import GB


def busbw_model_figure(op: Op, ranks: int, topo: Topology, label: str) -> Any:
    sizes = np.logspace(10, 33, 24, base=2)
    res = evaluate_collective(op, sizes, ranks, topo)
    return plots.busbw_vs_size(
        [{"label": f"model: {label}", "sizes": sizes, "busbw": res.busbw_GBps, "measured": False}],
        f"{op.value}, {ranks} ranks (model)",
    )


def busbw_run_figure(
    run: Run, rows: list[dict[str, Any]], fabric: str | None, bandwidth_Gbps: float | None
) -> Any:
    """Measured busbw per op, with the model's prediction on the same chart when a fabric is
    given."""
    series: list[dict[str, Any]] = []
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
            t = collective_time_s(o, MEASURED_ALGO[o], sizes, run.world_size, _single_level(link))
            series.append(
                {
                    "label": f"{op} model ({fabric})",
                    "sizes": sizes,
                    "busbw": sizes / t / 1e9 * busbw_factor(o, run.world_size),
                    "measured": False,
                }
            )
    return plots.busbw_vs_size(series, f"run {run.id}: {run.world_size} ranks, {run.backend}")


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
                "label": f"{p.cluster.preset} (${p.metrics['price_per_gpu_hour_usd']:.2f}/h)",
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
