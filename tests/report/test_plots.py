"""Every plot kind, drawn from bandwall's own objects and checked the way a reader would look
at it: the PNG has the expected size and real content, size ticks read 1 KiB/1 MiB, axes that
span decades are logarithmic, the link rate is drawn on busbw charts, each axis carries one
quantity and no two labels print over each other. One PNG of each kind is saved to docs/."""

from __future__ import annotations

import io
import itertools
import re
from pathlib import Path
from typing import Any

import pytest

matplotlib = pytest.importorskip("matplotlib", reason="plots need the plot extra")
matplotlib.use("Agg")
import matplotlib.image  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from bandwall.measure.bench.store import Run  # noqa: E402
from bandwall.model.collectives import Op  # noqa: E402
from bandwall.model.topology import build_topology  # noqa: E402
from bandwall.planning.api import compare, scale  # noqa: E402
from bandwall.planning.presets import presets  # noqa: E402
from bandwall.planning.request import PlanRequest  # noqa: E402
from bandwall.report import figures, plots  # noqa: E402

SIZE_LABEL = re.compile(r"^\d[\d,.]* (B|KiB|MiB|GiB|TiB)$")


def _run(world: int) -> Run:
    return Run(1, "2025-01-01T00:00:00", "collectives", "complete", None, world, "gloo", {}, {}, {})


def _rows() -> list[dict[str, Any]]:
    rows = []
    for e in range(10, 29, 2):
        size = 2**e
        # 50 µs latency and 1.1 GB/s of busbw at best: busbw climbs over three decades
        t = 50e-6 + size * 1.5 / 1.1e9
        rows.append({"op": "all_reduce", "size_bytes": size, "busbw_GBps": size / t / 1e9 * 1.5})
    return rows


@pytest.fixture(scope="module")
def plans() -> list[Any]:
    return compare(PlanRequest(model="llama3-70b", gpus=512), list(presets()))


def _texts(fig: Any) -> list[Any]:
    """The texts a reader sees: tick labels inside the view, axis labels, titles, legends."""
    fig.canvas.draw()
    out: list[Any] = [*fig.texts]
    if fig._suptitle is not None:
        out.append(fig._suptitle)
    for legend in fig.legends:
        out += list(legend.get_texts())
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            span = (hi - lo) * 1e-9
            for tick in axis.get_major_ticks():
                if lo - span <= tick.get_loc() <= hi + span:
                    out += [tick.label1, tick.label2]
            out.append(axis.label)
        out += [ax.title, ax._left_title, ax._right_title, *ax.texts]
        legend = ax.get_legend()
        if legend is not None:
            out += list(legend.get_texts())
    return [t for t in out if t.get_visible() and t.get_text().strip()]


def overlapping_labels(fig: Any) -> list[tuple[str, str]]:
    """Pairs of visible texts whose boxes intersect (a reader sees them printed over each
    other). Texts of one legend sit in separate rows, so they count too."""
    renderer = fig.canvas.get_renderer()
    boxes = []
    for t in _texts(fig):
        bb = t.get_window_extent(renderer)
        if bb.width > 0 and bb.height > 0:
            boxes.append((t.get_text(), bb.shrunk(0.98, 0.9)))
    return [
        (a, b)
        for (a, ba), (b, bb) in itertools.combinations(boxes, 2)
        if ba.overlaps(bb) and a != b
    ]


_OUT: list[Path] = []


@pytest.fixture(autouse=True)
def _images_to(docs_out: Path) -> None:
    _OUT[:] = [docs_out]


def _png(fig: Any, name: str, most_ink: float = 0.6) -> np.ndarray:
    """Save the figure as NAME.png (docs/ with BANDWALL_WRITE_DOCS=1) and decode it back."""
    expected = (fig.get_size_inches() * 110).round().astype(int)
    data = plots.png_bytes(fig)
    (_OUT[0] / f"{name}.png").write_bytes(data)
    img = matplotlib.image.imread(io.BytesIO(data), format="png")
    assert abs(img.shape[1] - expected[0]) <= 1 and abs(img.shape[0] - expected[1]) <= 1
    rgb = img[..., :3]
    ink = (rgb.mean(axis=2) < 0.9).mean()
    colors = len(np.unique((rgb * 255).astype(np.uint8).reshape(-1, 3), axis=0))
    assert 0.01 < ink < most_ink, f"{name}: {ink:.1%} of the pixels are drawn"
    assert colors > 20, f"{name}: only {colors} colours"
    return img


def _ticks(axis: Any) -> list[str]:
    return [t.get_text() for t in axis.get_ticklabels() if t.get_visible() and t.get_text()]


def _in_view(axis: Any, ax: Any) -> list[str]:
    lo, hi = sorted(axis.get_view_interval())
    locs = axis.get_majorticklocs()
    labels = [axis.get_major_formatter()(v, i) for i, v in enumerate(locs)]
    return [lab for v, lab in zip(locs, labels, strict=True) if lo <= v <= hi and lab]


def test_busbw_model_has_binary_size_ticks_log_axis_and_link_rate() -> None:
    topo = build_topology(gpus_per_node=8, scale_out="ib-ndr")
    fig = figures.busbw_model_figure(Op.ALL_REDUCE, 64, topo, "ib-ndr, 8/node")
    ax = fig.axes[0]
    fig.canvas.draw()
    sizes = _in_view(ax.xaxis, ax)
    assert sizes and all(SIZE_LABEL.match(s) for s in sizes), sizes
    assert "1 KiB" in sizes and "1 GiB" in sizes
    assert not any("^" in t for t in sizes)
    assert ax.get_yscale() == "log"  # the model's busbw spans decades over sizes
    ceiling = [ln for ln in ax.get_lines() if ln.get_label().startswith("link rate (")]
    assert len(ceiling) == 1
    # busbw across nodes compares with the node's NICs together: 8 × 400 Gb/s = 400 GB/s
    assert ceiling[0].get_ydata()[0] == pytest.approx(400.0)
    assert "8 × ib-ndr per node" in ceiling[0].get_label()
    assert "in-network reduction can pass it" in ceiling[0].get_label()  # ib-ndr has SHARP
    assert ax.get_ylabel() == "bus bandwidth (GB/s)" and ax.get_xlabel() == "message size"
    assert overlapping_labels(fig) == []
    _png(fig, "plot-busbw")


def test_busbw_run_draws_measured_model_and_the_link_rate() -> None:
    fig = figures.busbw_run_figure(_run(4), _rows(), "eth-10g-tcp", 10.0)
    ax = fig.axes[0]
    labels = [ln.get_label() for ln in ax.get_lines()]
    assert "all_reduce measured" in labels and "all_reduce model (eth-10g-tcp)" in labels
    ceiling = [ln for ln in ax.get_lines() if ln.get_label().startswith("link rate")]
    assert ceiling[0].get_ydata()[0] == pytest.approx(1.25)  # 10 Gb/s = 1.25 GB/s
    fig.canvas.draw()
    assert all(SIZE_LABEL.match(s) for s in _in_view(ax.xaxis, ax))
    assert overlapping_labels(fig) == []
    _png(fig, "plot-busbw-run")


def test_busbw_on_a_narrow_range_stays_linear_from_zero() -> None:
    fig = plots.busbw_vs_size(
        [{"label": "x", "sizes": [2**20, 2**21], "busbw": [10.0, 12.0], "measured": True}],
        "narrow",
        [("link rate", 12.5)],
    )
    ax = fig.axes[0]
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0
    plt.close(fig)


def test_scaling_puts_efficiency_and_goodput_on_separate_axes() -> None:
    counts = [64, 128, 256, 512, 1024, 2048]
    req = PlanRequest(model="llama3-8b", gpus=64)
    curves = {
        key: scale(req.model_copy(update={"preset": key}), counts)
        for key in ("ai-factory-ib", "hyperscaler-vm", "decentralized-geo")
    }
    fig = figures.scaling_figure(curves, "llama3-8b: efficiency and goodput vs GPUs")
    assert len(fig.axes) == 2
    eff, good = fig.axes
    assert eff.get_ylabel() == "communication efficiency (%)" and good.get_ylabel() == "goodput (%)"
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == list(curves)
    for ax in fig.axes:
        assert len(ax.get_lines()) == 3
        for ln in ax.get_lines():
            assert all(0 <= y <= 100 for y in ln.get_ydata())
    fig.canvas.draw()
    assert _in_view(good.xaxis, good) == ["64", "128", "256", "512", "1,024", "2,048"]
    assert overlapping_labels(fig) == []
    _png(fig, "plot-scaling")


def test_breakdown_goes_log_when_step_times_span_decades(plans: list[Any]) -> None:
    fig = figures.breakdown_figure(plans)
    seconds, share = fig.axes[:2]
    assert share.get_xlabel() == "share of the step (%)" and share.get_xlim() == (0, 100)
    assert seconds.get_xlabel().startswith("step time (s")
    totals = [p.metrics["step_time_s"] for p in plans]
    assert (seconds.get_xscale() == "log") == (max(totals) / min(totals) > 10)
    fig.canvas.draw()
    assert [t.get_text() for t in seconds.get_yticklabels()] == [p.cluster.preset for p in plans]
    assert overlapping_labels(fig) == []
    _png(fig, "plot-breakdown")
    wide = plots.breakdown_bars(
        ["fast", "slow"], [{"compute": 1.0, "dp": 0.1}, {"compute": 1.0, "dp": 300.0}], "wide"
    )
    assert wide.axes[0].get_xscale() == "log"
    plt.close(wide)


def test_cost_labels_do_not_overlap(plans: list[Any]) -> None:
    fig = figures.cost_figure(plans)
    ax = fig.axes[0]
    (legend,) = fig.legends
    assert len(legend.get_texts()) == len(plans)
    for text, p in zip(legend.get_texts(), plans, strict=True):
        assert text.get_text().startswith(p.cluster.preset + ":")
        assert r"\$" in text.get_text() and "," in text.get_text()  # money with separators
        assert "$" not in text.get_text().replace(r"\$", "")  # no pair of $ starts mathtext
    assert [t for t in ax.texts if t.get_text()] == []  # no labels beside the points
    fig.canvas.draw()
    assert all(t.startswith("$") for t in _in_view(ax.yaxis, ax))
    assert all(t.endswith(" d") for t in _in_view(ax.xaxis, ax))
    assert overlapping_labels(fig) == []
    _png(fig, "plot-cost")


def test_link_heatmap_keeps_rank_ticks_readable() -> None:
    world = 48
    rows = [
        {"src": s, "dst": d, "bw_GBps": 1.0 if (s + d) % 7 else 0.2}
        for s in range(world)
        for d in range(world)
        if s != d
    ]
    fig = figures.links_figure(_run(world), rows)
    fig.canvas.draw()
    ax = fig.axes[0]
    assert len(_in_view(ax.xaxis, ax)) <= 13
    assert overlapping_labels(fig) == []
    _png(fig, "plot-links", most_ink=0.9)


def test_overlap_check_sees_overlapping_labels() -> None:
    fig, ax = plt.subplots()
    ax.annotate("decentralized-geo", (1, 1))
    ax.annotate("decentralized-colocated", (1, 1))
    assert overlapping_labels(fig)
    plt.close(fig)
