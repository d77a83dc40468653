"""`bandwall infer` and `bandwall compare --infer`: serving cost, latency and energy per token.

Options come from the request schema: the plan request's model and cluster fields (training
strategy, budget and fault fields do not apply to serving and are left out) and the serving and
energy fields of `bandwall.planning.request.InferRequest`. matplotlib is imported only to draw a
chart.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

from bandwall.cli.options import with_request_options
from bandwall.cli.output import CsvOption, JsonOption
from bandwall.planning.request import PlanRequest
from bandwall.planning.rules import TRAINING_ONLY

if typing.TYPE_CHECKING:
    from rich.table import Table

    from bandwall.planning.infer import Inference


def with_infer_options(
    *, skip: tuple[str, ...] = ()
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command taking `fields: dict` one option per serving request field: the plan
    request's model and cluster fields, then the serving and energy ones."""
    from bandwall.planning.request import INFER_FIELDS

    plan_names = [n for n in PlanRequest.model_fields if n not in TRAINING_ONLY]
    return with_request_options(skip=skip, names=plan_names + list(INFER_FIELDS))


# --- rendering -------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    ms = seconds * 1e3  # seconds from 1 s on, as the other durations print
    return f"{ms:,.1f} ms" if ms < 1e3 else f"{seconds:,.2f} s"


def _rate(x: float) -> str:
    """Tokens/s with enough digits to read a Petals-class rate (0.5 tok/s)."""
    return f"{x:,.0f}" if x >= 100 else f"{x:,.3g}"


def _layout(m: dict[str, Any]) -> str:
    parts = [f"tp{int(m['tp'])}"]
    if m["pp"] > 1:
        parts.append(f"pp{int(m['pp'])}")
    parts.append(f"×{int(m['concurrency']):,}")
    return " ".join(parts)


def infer_tables(result: Inference) -> list[Table]:
    """Summary of one serving plan (fits 80 columns)."""
    from rich.table import Table

    m, cl = result.metrics, result.cluster
    t = Table(
        title=f"Serving {result.workload.name} on {int(m['replicas']):,} × "
        f"{int(m['gpus_per_replica'])} {cl.gpu.name} · {cl.preset}",
        show_header=False,
    )
    t.add_column("what")
    t.add_column("value", overflow="fold")
    gb = 1e9
    load = (
        f"server at {m['request_rate_per_s']:,.4g} requests/s ({m['utilisation']:.0%} of "
        "what its slots serve)"
        if m["scenario"] == "server"
        else "offline (maximum throughput)"
    )
    if m["scenario"] == "server":
        # the cap is what the engine may batch; Little's law gives what it holds on average,
        # in its slots and waiting for one (the sum read as more than the cap, fuzz 20, D1)
        per_s = m["request_rate_per_s"] / max(m["replicas"], 1)
        waiting = per_s * float(m.get("queue_s") or 0.0)
        serving = per_s * m["request_s"] - waiting
        layout = (
            f"{_layout(m)} sequences at most per replica; on average {serving:,.3g} in its "
            f"slots, {waiting:,.3g} waiting"
        )
    else:
        layout = f"{_layout(m)} sequences in flight per replica"
    cap = f", capped at {m['power_cap_W']:,.0f} W" if m.get("power_cap_W") else ""
    rows = [
        (
            "request",
            f"{m['dataset']}: {m['prompt_tokens']:,.0f} in / {m['output_tokens']:,.0f} out "
            f"tokens (mean), {m['weight_format']} weights, {m['runtime']}",
        ),
        ("scenario", load),
        ("layout", layout),
        (
            "time to first token",
            f"{_ms(m['ttft_s'])} mean, p50 {_ms(m['ttft_p50_s'])}, p99 {_ms(m['ttft_p99_s'])}",
        ),
        ("inter-token latency", f"{_ms(m['itl_s'])} mean, p99 {_ms(m['itl_p99_s'])}"),
        ("request latency", _ms(m["request_s"])),
        (
            "throughput",
            f"{_rate(m['tokens_per_s_per_gpu'])} tok/s per GPU, "
            f"{_rate(m['tokens_per_s_replica'])} per replica, {_rate(m['tokens_per_s'])} in all",
        ),
        (
            "cost",
            f"${m['cost_per_million_tokens_usd']:,.3f} per million output tokens "
            f"at ${m['price_per_gpu_hour_usd']:.2f}/GPU-h",
        ),
        (
            "energy",
            f"{m['joules_per_token']:,.2f} J/token, {m['tokens_per_kwh']:,.0f} tokens/kWh "
            f"(PUE {m['pue']:g}; {m['gpu_power_W']:,.0f} W per board{cap}, "
            f"{m['facility_power_W_per_gpu']:,.0f} W per GPU at the wall)",
        ),
        (
            "electricity",
            f"${m['energy_cost_per_million_tokens_usd']:,.3f} per million tokens at "
            f"${m['price_per_kWh_usd']:.3f}/kWh (owned clusters)",
        ),
        (
            "CO2",
            f"{m['co2_g_per_million_tokens']:,.0f} g per million tokens at "
            f"{m['g_co2_per_kWh']:,.0f} gCO2/kWh",
        ),
        (
            "memory per GPU",
            f"{m['memory_bytes'] / gb:,.1f} of {m['memory_capacity_bytes'] / gb:,.1f} GB "
            f"(weights {m['weights_bytes'] / gb:,.1f}, KV {m['kv_bytes_per_sequence'] / 1e6:,.0f}"
            " MB per sequence)",
        ),
    ]
    for k, v in rows:
        t.add_row(k, v)
    return [t]


def compare_infer_tables(results: list[Inference]) -> list[Table]:
    """One table per model, one row per preset: cost and latency side by side in 80 columns.
    Layout reads tp×pp/sequences in flight per replica."""
    from rich import box
    from rich.table import Table

    tables: list[Table] = []
    for key in dict.fromkeys(r.workload.key for r in results):
        mine = [r for r in results if r.workload.key == key]
        first = mine[0].metrics
        t = Table(
            title=f"Serving {mine[0].workload.name}, {first['dataset']} "
            f"({first['prompt_tokens']:,.0f} in / {first['output_tokens']:,.0f} out tokens; "
            "tok/s per GPU; layout tp x pp / sequences in flight)",
            box=box.SIMPLE_HEAD,
            padding=(0, 1),
            pad_edge=False,
            collapse_padding=True,
        )
        t.add_column("preset", no_wrap=True)
        t.add_column("layout", no_wrap=True)
        for h in ("TTFT", "ITL", "tok/s", "$/Mtok", "J/tok"):
            t.add_column(h, justify="right", no_wrap=True)
        for r in mine:
            m = r.metrics
            t.add_row(
                r.cluster.preset,
                f"{int(m['tp'])}x{int(m['pp'])}/{int(m['concurrency']):,}",
                _ms(m["ttft_s"]),
                _ms(m["itl_s"]),
                _rate(m["tokens_per_s_per_gpu"]),
                f"${m['cost_per_million_tokens_usd']:,.2f}",
                f"{m['joules_per_token']:,.2f}",
            )
        tables.append(t)
    return tables


def infer_chart(results: list[Inference], path: str) -> None:
    """Cost per million tokens and inter-token latency per preset (and model), as a PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from bandwall.errors import ConfigError

        raise ConfigError(
            "the chart needs matplotlib: pip install 'bandwall[plot]'", field="chart"
        ) from None
    labels = [
        f"{r.cluster.preset}\n{r.workload.key}"
        if len({x.workload.key for x in results}) > 1
        else r.cluster.preset
        for r in results
    ]
    cost = [r.metrics["cost_per_million_tokens_usd"] for r in results]
    itl = [r.metrics["itl_s"] * 1e3 for r in results]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    ax1.barh(labels, cost, color="#4c72b0")
    ax1.set_xlabel("USD per million output tokens")
    ax1.set_title("Cost")
    ax2.barh(labels, itl, color="#dd8452")
    ax2.set_xlabel("inter-token latency, ms")
    ax2.set_title("Latency")
    ax2.set_yticklabels([])
    fig.tight_layout()
    from bandwall.report.plots import save

    save(fig, path, field="chart")


# --- commands ------------------------------------------------------------------------------


@with_infer_options()
def infer(
    fields: dict[str, Any],
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
) -> None:
    """Serve a model: time to first token, inter-token latency, tokens/s, cost and energy per
    million tokens. Unset --tp, --pp and --concurrency are searched (cheapest per token)."""
    from bandwall.planning.infer import infer as run_infer
    from bandwall.planning.request import make_infer_request
    from bandwall.report.text import console, emit

    result = run_infer(make_infer_request(**fields))
    if emit(result.to_json(), as_json, as_csv):
        return
    for table in infer_tables(result):
        console.print(table)
    for note in result.notes:
        console.print(f"note: {note}", style="dim")


def run_compare_infer(
    fields: dict[str, Any],
    preset_keys: list[str],
    *,
    models: list[str] | None = None,
    as_json: bool = False,
    as_csv: bool = False,
    chart: str | None = None,
) -> None:
    """`compare --infer`: the serving job on each preset (and each of `models`), a table and an
    optional PNG chart."""
    from bandwall.planning.infer import compare_infer
    from bandwall.planning.request import make_infer_request
    from bandwall.report.text import console, emit, err_console

    if chart is not None:
        from bandwall.report.plots import IMAGE_FORMATS
        from bandwall.safeio import check_output

        check_output(chart, field="chart", formats=IMAGE_FORMATS)
    from bandwall.errors import ConfigError

    results = []
    left_out: list[tuple[str, ConfigError]] = []
    for model in models or [fields.get("model") or "llama3-8b"]:
        try:
            req = make_infer_request(**{**fields, "model": model, "preset": preset_keys[0]})
            results += compare_infer(req, preset_keys)
        except ConfigError as exc:
            # one model of several that does not fit leaves the others standing (as scale
            # leaves out a GPU count); a request no model can serve is still the error
            if not models or len(models) == 1:
                raise
            left_out.append((model, exc))
    if not results and left_out:
        raise left_out[0][1]
    if chart:
        infer_chart(results, chart)
    if emit([r.to_json() for r in results], as_json, as_csv):
        return
    for table in compare_infer_tables(results):
        console.print(table)
    if left_out:
        from bandwall.cli.options import print_notes
        from bandwall.cli.root import error_line

        print_notes([f"{m} left out: {error_line(exc, [])}" for m, exc in left_out])
    if chart:
        err_console.print(f"wrote {chart}")


# --- validation against published serving and energy runs -----------------------------------


def validation_table(checks: list[Any], title: str) -> Table:
    """Fit and held-out errors with the signed bias, then by source family (80 columns)."""
    from rich.table import Table

    from bandwall.measure.calibrate.serving_runs import summarize
    from bandwall.report.validation import summary_row

    t = Table(title=title)
    t.add_column("split / source", no_wrap=True)
    for col in ("rows", "median |err|", "mean |err|", "bias", "≤ 10%"):
        t.add_column(col, justify="right", no_wrap=True)
    for split, label in (("fit", "fit (tuned on)"), ("heldout", "held out")):
        part = [c for c in checks if c.split == split]
        summary_row(t, label, summarize(part))
        for fam in sorted({c.family for c in part}):
            summary_row(t, f"  {fam}", summarize([c for c in part if c.family == fam]))
    summary_row(t, "all", summarize(checks))
    return t


def published_serving() -> tuple[dict[str, Any], Callable[[Any], None]]:
    """`validate --published`'s serving and energy part: the JSON document and a printer.
    Errors are predicted / published − 1; the split is sha256(id) % 3 == 0 → fit."""
    from dataclasses import asdict

    from bandwall.measure.calibrate import serving_runs as sr

    serving, energy = sr.validate_serving(), sr.validate_energy()

    def rows(checks: list[Any]) -> list[dict[str, Any]]:
        return [asdict(c) | {"error": c.error} for c in checks]

    doc = {
        "serving": rows(serving),
        "serving_summary": sr.by_split(serving),
        "energy": rows(energy),
        "energy_summary": sr.by_split(energy),
    }

    def show(console: Any) -> None:
        console.print(
            validation_table(
                serving,
                f"Published serving runs ({len(serving)}, serving_validation.toml); "
                "error of throughput, TTFT or ITL",
            )
        )
        console.print(
            validation_table(
                energy,
                f"Published energy runs ({len(energy)}, energy_validation.toml); error of "
                "W per GPU (kWh for nameplate rows)",
            )
        )

    return doc, show
