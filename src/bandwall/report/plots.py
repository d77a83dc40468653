"""Charts with matplotlib: static PNG/SVG that embed in a self-contained HTML report and need
no browser runtime. (Plotly would need its JavaScript bundle inlined in every report.)"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping
from typing import Any

from bandwall.errors import ConfigError

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"]


def _plt() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("needs matplotlib; pip install 'bandwall[plot]'", field="plot") from None
    return plt


def busbw_vs_size(series: list[dict[str, Any]], title: str) -> Any:
    """busbw against message size; each series {'label', 'sizes', 'busbw', 'measured': bool}."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, s in enumerate(series):
        style = (
            {"marker": "o", "linestyle": "-"}
            if s.get("measured")
            else {"marker": None, "linestyle": "--"}
        )
        ax.plot(s["sizes"], s["busbw"], label=s["label"], color=PALETTE[i % len(PALETTE)], **style)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def scaling_curves(
    curves: Mapping[str, tuple[list[int], list[float], list[float] | None]], title: str
) -> Any:
    """Communication efficiency (solid) and goodput (dashed) against GPU count, per preset."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, (label, (gpus, eff, good)) in enumerate(curves.items()):
        color = PALETTE[i % len(PALETTE)]
        ax.plot(gpus, eff, marker="o", color=color, label=f"{label} comm efficiency")
        if good is not None:
            ax.plot(gpus, good, marker="x", linestyle="--", color=color, label=f"{label} goodput")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("fraction")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def breakdown_bars(labels: list[str], breakdowns: list[dict[str, float]], title: str) -> Any:
    """Step time stacked by term, one bar per preset."""
    plt = _plt()
    keys = [
        k
        for k in ("compute", "dp", "tp", "pp", "ep", "cp", "bubble", "straggler")
        if any(b.get(k, 0) > 0 for b in breakdowns)
    ]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    bottom = [0.0] * len(labels)
    for i, k in enumerate(keys):
        vals = [b.get(k, 0.0) for b in breakdowns]
        ax.bar(labels, vals, bottom=bottom, label=k, color=PALETTE[i % len(PALETTE)])
        bottom = [a + v for a, v in zip(bottom, vals, strict=True)]
    ax.set_ylabel("seconds per step")
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    fig.tight_layout()
    return fig


def cost_vs_time(points: list[dict[str, Any]], title: str) -> Any:
    """Total cost against time to train; one point per provider/preset."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, p in enumerate(points):
        ax.scatter(
            [p["time_days"]],
            [p["cost_usd"]],
            s=60,
            color=PALETTE[i % len(PALETTE)],
            label=p["label"],
        )
        ax.annotate(
            p["label"],
            (p["time_days"], p["cost_usd"]),
            fontsize=7,
            xytext=(4, 4),
            textcoords="offset points",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("time to train (days)")
    ax.set_ylabel("cost (USD)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3, which="both")
    fig.tight_layout()
    return fig


def link_heatmap(rows: list[dict[str, Any]], world: int, title: str) -> Any:
    """Pairwise bandwidth matrix (GB/s); the slow links stand out dark."""
    plt = _plt()
    import numpy as np

    m = np.full((world, world), np.nan)
    for r in rows:
        m[r["src"], r["dst"]] = r["bw_GBps"]
    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    im = ax.imshow(m, cmap="viridis")
    fig.colorbar(im, ax=ax, label="GB/s")
    ax.set_xlabel("receiver rank")
    ax.set_ylabel("sender rank")
    ax.set_xticks(range(world))
    ax.set_yticks(range(world))
    ax.set_title(title)
    fig.tight_layout()
    return fig


def save(fig: Any, path: str) -> None:
    if not (path.endswith(".png") or path.endswith(".svg")):
        raise ConfigError(f"{path!r} must end in .png or .svg", field="output")
    fig.savefig(path, dpi=120)
    _plt().close(fig)


def png_data_uri(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    _plt().close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def png_bytes(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    _plt().close(fig)
    return buf.getvalue()
