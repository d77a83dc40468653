"""Charts with matplotlib: static PNG/SVG that embed in a self-contained HTML report and need
no browser runtime. (Plotly would need its JavaScript bundle inlined in every report.)

Rules every chart follows, so a reader can trust it at a glance:

- one quantity per axis (efficiency and goodput get a panel each, not a shared "fraction");
- sizes on binary-prefixed ticks (1 KiB, 1 MiB, like nccl-tests' size column), never 2^20;
- a log axis where the values span more than about a decade, linear from zero otherwise;
- the physical ceiling (the link rate) drawn on bandwidth charts, so the gap to it shows;
- labels in legends or beside bars, never on top of each other; numbers with units and
  thousands separators.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bandwall.errors import ConfigError

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#7f7f7f"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
TERMS = ("compute", "dp", "tp", "pp", "ep", "cp", "bubble", "straggler")
TERM_COLORS = dict(zip(TERMS, PALETTE, strict=True))
#: Values spanning more than this ratio get a log axis.
LOG_SPAN = 20.0
_BINARY = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B"))


def _plt() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("needs matplotlib; pip install 'bandwall[plot]'", field="plot") from None
    return plt


def _ticker() -> Any:
    import matplotlib.ticker as ticker

    return ticker


def tex_safe(text: str) -> str:
    """Text matplotlib prints as given: a pair of '$' would start mathtext ("$11,359 (at $3")."""
    return text.replace("$", r"\$")


def binary_size_label(num_bytes: float) -> str:
    """'1 KiB', '64 MiB', '512 B': sizes as people say them.

    >>> binary_size_label(2**20), binary_size_label(3 * 2**30), binary_size_label(512)
    ('1 MiB', '3 GiB', '512 B')
    """
    for scale, unit in _BINARY:
        if num_bytes >= scale:
            return f"{num_bytes / scale:,.3g} {unit}"
    return f"{num_bytes:g} B"


def number_label(value: float) -> str:
    """Tick text: thousands separators for large values, no float noise for small ones.

    >>> number_label(8192.0), number_label(0.05), number_label(2.5)
    ('8,192', '0.05', '2.5')
    """
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def spans_decades(values: Iterable[float], ratio: float = LOG_SPAN) -> bool:
    """Whether the positive finite values span more than `ratio` (then an axis goes log)."""
    good = [v for v in values if v > 0 and math.isfinite(v)]
    return bool(good) and max(good) / min(good) > ratio


def _finite(values: Iterable[Any]) -> list[float]:
    out = []
    for v in values:
        f = float(v)
        if math.isfinite(f):
            out.append(f)
    return out


def size_axis(ax: Any, lo: float, hi: float) -> None:
    """Log-2 size axis with binary-prefixed labels, at most ~8 of them."""
    ticker = _ticker()
    ax.set_xscale("log", base=2)
    e0 = math.floor(math.log2(max(lo, 1.0)))
    e1 = math.ceil(math.log2(max(hi, 1.0)))
    step = next(s for s in (1, 2, 5, 10, 20) if (e1 - e0) / s <= 8)
    first = math.ceil(e0 / step) * step
    ax.xaxis.set_major_locator(ticker.FixedLocator([2.0**e for e in range(first, e1 + 1, step)]))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: binary_size_label(v)))
    ax.xaxis.set_minor_locator(ticker.FixedLocator([2.0**e for e in range(e0, e1 + 1)]))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlim(2.0**e0 / 1.4, 2.0**e1 * 1.4)


def value_axis(ax: Any, values: Sequence[float], which: str = "y", money: bool = False) -> None:
    """Log when the values span decades (plain-number ticks), else linear from zero."""
    ticker = _ticker()
    axis = ax.yaxis if which == "y" else ax.xaxis
    fmt = (lambda v, _: "$" + number_label(v)) if money else (lambda v, _: number_label(v))
    good = _finite(values)
    if spans_decades(good):
        (ax.set_yscale if which == "y" else ax.set_xscale)("log")
        lo, hi = min(v for v in good if v > 0), max(good)
        subs = (1.0,) if hi / lo > 100 else (1.0, 2.0, 5.0)
        axis.set_major_locator(ticker.LogLocator(base=10, subs=subs))
        axis.set_minor_locator(ticker.LogLocator(base=10, subs=tuple(range(1, 10))))
        axis.set_minor_formatter(ticker.NullFormatter())
        (ax.set_ylim if which == "y" else ax.set_xlim)(lo / 1.6, hi * 1.6)
    else:
        top = max(good) if good else 1.0
        (ax.set_ylim if which == "y" else ax.set_xlim)(0, top * 1.15 or 1.0)
    axis.set_major_formatter(ticker.FuncFormatter(fmt))


def _count_axis(ax: Any, counts: Sequence[int]) -> None:
    """GPU counts on a log-2 axis, labelled as whole numbers (8,192, not 2^13)."""
    ticker = _ticker()
    ax.set_xscale("log", base=2)
    shown = sorted({int(c) for c in counts})
    while len(shown) > 9:
        shown = shown[::2]
    ax.xaxis.set_major_locator(ticker.FixedLocator(shown))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: number_label(v)))
    ax.xaxis.set_minor_locator(ticker.NullLocator())


def _positive_sizes(s: dict[str, Any]) -> dict[str, Any]:
    """The series without its rows of size 0 or less."""
    keep = [i for i, size in enumerate(s["sizes"]) if float(size) > 0]
    if len(keep) == len(s["sizes"]):
        return s
    return {**s, "sizes": [s["sizes"][i] for i in keep], "busbw": [s["busbw"][i] for i in keep]}


def busbw_vs_size(
    series: list[dict[str, Any]],
    title: str,
    ceilings: Sequence[tuple[str, float]] = (),
) -> Any:
    """busbw against message size; each series {'label', 'sizes', 'busbw', 'measured': bool}.

    `ceilings` are (label, GB/s) link rates drawn as horizontal lines: busbw cannot pass the
    wire rate of the slowest link a byte crosses (in-network reduction aside).
    """
    # a log size axis cannot place a 0-byte row (nccl-tests prints one for -b 0)
    series = [_positive_sizes(s) for s in series]
    if series and not any(len(s["sizes"]) for s in series):
        from bandwall.errors import ConfigError

        raise ConfigError("the run has no rows above 0 bytes to plot", field="results")
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    sizes: list[float] = []
    values: list[float] = []
    for i, s in enumerate(series):
        style = (
            {"marker": "o", "linestyle": "-", "markersize": 4}
            if s.get("measured")
            else {"marker": None, "linestyle": "--"}
        )
        color = PALETTE[i % len(PALETTE)]
        ax.plot(s["sizes"], s["busbw"], label=tex_safe(s["label"]), color=color, **style)
        sizes += _finite(s["sizes"])
        values += _finite(s["busbw"])
    for label, rate in ceilings:
        ax.axhline(rate, color="#333333", linestyle=":", linewidth=1.4, label=tex_safe(label))
        values.append(rate)
    if sizes:
        size_axis(ax, min(sizes), max(sizes))
    value_axis(ax, values)
    ax.set_xlabel("message size")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(tex_safe(title))
    ax.grid(True, alpha=0.3, which="major")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def scaling_curves(
    curves: Mapping[str, tuple[list[int], list[float], list[float] | None]], title: str
) -> Any:
    """Communication efficiency and goodput against GPU count, one panel each (both in %)."""
    plt = _plt()
    ticker = _ticker()
    has_goodput = any(good is not None for _, _, good in curves.values())
    rows = 2 if has_goodput else 1
    fig, axes = plt.subplots(
        rows, 1, figsize=(7.5, 2.9 + 2.4 * rows), sharex=True, squeeze=False, layout="constrained"
    )
    eff_ax = axes[0][0]
    good_ax = axes[1][0] if has_goodput else None
    counts: list[int] = []
    for i, (label, (gpus, eff, good)) in enumerate(curves.items()):
        color = PALETTE[i % len(PALETTE)]
        marker = MARKERS[i % len(MARKERS)]
        eff_ax.plot(gpus, [100 * e for e in eff], marker=marker, color=color, label=tex_safe(label))
        if good is not None and good_ax is not None:
            good_ax.plot(gpus, [100 * g for g in good], marker=marker, color=color)
        counts += [int(g) for g in gpus]
    panels = [(eff_ax, "communication efficiency (%)")]
    if good_ax is not None:
        panels.append((good_ax, "goodput (%)"))
    for ax, ylabel in panels:
        ax.set_ylim(0, 105)
        ax.set_ylabel(ylabel)
        ax.yaxis.set_major_locator(ticker.MultipleLocator(25))
        ax.grid(True, alpha=0.3)
    _count_axis(panels[-1][0], counts)
    panels[-1][0].set_xlabel("GPUs")
    fig.suptitle(tex_safe(title))
    fig.legend(loc="outside lower center", ncol=min(len(curves), 3), fontsize=8, frameon=False)
    return fig


def breakdown_bars(labels: list[str], breakdowns: list[dict[str, float]], title: str) -> Any:
    """Step time per preset (left, seconds) and its split by term (right, % of the step).

    Totals that span decades go on a log axis; stacking on a log axis would distort the
    terms, so then the left panel shows totals and the right panel carries the split.
    """
    plt = _plt()
    ticker = _ticker()
    keys = [k for k in TERMS if any(b.get(k, 0) > 0 for b in breakdowns)]
    totals = [sum(max(b.get(k, 0.0), 0.0) for k in keys) for b in breakdowns]
    log = spans_decades(totals, 10.0)
    height = 1.6 + 0.45 * len(labels)
    fig, (abs_ax, share_ax) = plt.subplots(
        1,
        2,
        figsize=(9.5, height + 1.0),
        sharey=True,
        gridspec_kw={"width_ratios": [1.1, 1]},
        layout="constrained",
    )
    y = list(range(len(labels)))
    left_abs = [0.0] * len(labels)
    left_share = [0.0] * len(labels)
    for k in keys:
        secs = [max(b.get(k, 0.0), 0.0) for b in breakdowns]
        share = [100 * s / t if t > 0 else 0.0 for s, t in zip(secs, totals, strict=True)]
        color = TERM_COLORS[k]
        if not log:
            abs_ax.barh(y, secs, left=left_abs, color=color)
            left_abs = [a + s for a, s in zip(left_abs, secs, strict=True)]
        share_ax.barh(y, share, left=left_share, color=color, label=k)
        left_share = [a + s for a, s in zip(left_share, share, strict=True)]
    if log:
        abs_ax.barh(y, totals, color="#4a4a4a")
        abs_ax.set_xscale("log")
        positive = [t for t in totals if t > 0] or [1.0]
        abs_ax.set_xlim(min(positive) / 3, max(positive) * 8)
        abs_ax.set_xlabel("step time (s, log scale)")
    else:
        abs_ax.set_xlim(0, max([*totals, 1e-9]) * 1.35)
        abs_ax.set_xlabel("step time (s)")
    abs_ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: number_label(v)))
    for yi, t in zip(y, totals, strict=True):
        abs_ax.annotate(
            _seconds(t), (t, yi), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8
        )
    abs_ax.set_yticks(y, [tex_safe(label) for label in labels], fontsize=8)
    abs_ax.invert_yaxis()
    share_ax.set_xlim(0, 100)
    share_ax.set_xlabel("share of the step (%)")
    share_ax.xaxis.set_major_locator(ticker.MultipleLocator(25))
    fig.legend(loc="outside lower center", ncol=max(len(keys), 1), fontsize=8, frameon=False)
    fig.suptitle(tex_safe(title))
    return fig


def _seconds(value: float) -> str:
    for unit, scale in (("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3)):
        if value >= scale:
            return f"{value / scale:,.3g} {unit}"
    return f"{value * 1e6:,.3g} µs"


def cost_vs_time(points: list[dict[str, Any]], title: str) -> Any:
    """Total cost against time to train, one marker per preset; names in the legend (below the
    chart), not beside the points, where nearby presets would print over each other."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.2 + 0.22 * len(points)), layout="constrained")
    for i, p in enumerate(points):
        ax.scatter(
            [p["time_days"]],
            [p["cost_usd"]],
            s=70,
            color=PALETTE[i % len(PALETTE)],
            marker=MARKERS[i % len(MARKERS)],
            label=tex_safe(p["label"]),
            alpha=0.85,
            zorder=3,
        )
    value_axis(ax, [p["time_days"] for p in points], which="x")
    value_axis(ax, [p["cost_usd"] for p in points], which="y", money=True)
    ticker = _ticker()
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: number_label(v) + " d"))
    ax.set_xlabel("time to train (days)")
    ax.set_ylabel("total cost (USD)")
    ax.set_title(tex_safe(title))
    ax.grid(True, alpha=0.3, which="major")
    fig.legend(loc="outside lower center", fontsize=8, ncol=1, frameon=False)
    return fig


def link_heatmap(rows: list[dict[str, Any]], world: int, title: str) -> Any:
    """Pairwise bandwidth matrix (GB/s); the slow links stand out dark."""
    plt = _plt()
    ticker = _ticker()
    import numpy as np

    m = np.full((world, world), np.nan)
    for r in rows:
        m[r["src"], r["dst"]] = r["bw_GBps"]
    fig, ax = plt.subplots(figsize=(5.8, 4.8))
    im = ax.imshow(m, cmap="viridis")
    fig.colorbar(im, ax=ax, label="bandwidth (GB/s)")
    ax.set_xlabel("receiver rank")
    ax.set_ylabel("sender rank")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(ticker.MaxNLocator(nbins=12, integer=True))
    ax.set_title(tex_safe(title))
    fig.tight_layout()
    return fig


#: The image formats charts are written in.
IMAGE_FORMATS = (".png", ".svg")


def save(fig: Any, path: str, field: str = "output") -> None:
    """Write a chart through the one output writer: the target is checked (folder exists,
    not a folder or device, .png or .svg), the image rendered in memory, then written
    atomically, so a full disk or a bad path never leaves half a file."""
    from bandwall.safeio import check_output, write_output

    target = check_output(path, field=field, formats=IMAGE_FORMATS)
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format=target.suffix.lower().lstrip("."), dpi=120)
    finally:
        _plt().close(fig)
    write_output(target, buf.getvalue(), field=field, formats=IMAGE_FORMATS)


def png_data_uri(fig: Any) -> str:
    return "data:image/png;base64," + base64.b64encode(png_bytes(fig)).decode()


def png_bytes(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    _plt().close(fig)
    return buf.getvalue()
