"""The `bandwall` command line: a thin shell over the library.

Errors a user can cause (a bandwall error or a usage error) print one line on stderr and exit 2.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.table import Table
from typer.exceptions import TyperException

from bandwall import _render, cli_show
from bandwall._planopts import plan_fields, with_plan_options
from bandwall._render import console, fmt_num, print_json
from bandwall.calibrate import (
    find_reference_dir,
    fit_run,
    load_run,
    nominal_rate_Gbps,
    save_profile,
    validate_published,
    validate_run,
)
from bandwall.catalog import Catalog, Tier, load_catalog
from bandwall.cli_bench import (
    bench_app,
    lab_app,
    launch_app,
    monitor_cmd,
    probe_cmd,
    results_app,
)
from bandwall.collectives import Algo, build_topology, evaluate, parse_algo, parse_op
from bandwall.errors import BandwallError, ConfigError, unknown_choice
from bandwall.plan import (
    compare_plans,
    make_plan,
    presets,
    request_from_fields,
    scale_plans,
)
from bandwall.plan.sweep import GRID_AXES, write_table
from bandwall.plan.sweep import sweep as run_sweep
from bandwall.report import compare_table, plan_tables, scale_table, validation_table
from bandwall.units import format_size, parse_rate_Gbps, parse_size, parse_size_range
from bandwall.workloads import Transformer, builtin_workloads

app = typer.Typer(
    name="bandwall",
    help="Find and price the bandwidth wall of distributed deep-learning training.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

CATALOG_KINDS = ("gpus", "fabrics", "providers")


@app.command()
def catalog(
    kind: Annotated[str, typer.Argument(help="gpus, fabrics or providers (default: all).")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the hardware catalog with the source and date of every figure."""
    kinds = CATALOG_KINDS if not kind else (kind.lower(),)
    if kinds[0] not in CATALOG_KINDS:
        raise unknown_choice("kind", kind, CATALOG_KINDS)
    cat = load_catalog()
    tables = {
        "gpus": [g.model_dump(mode="json") for g in cat.gpus.values()],
        "fabrics": [
            {**f.model_dump(mode="json"), "bandwidth_GBps": f.bandwidth_GBps}
            for f in cat.fabrics.values()
        ],
        "providers": [p.model_dump(mode="json") for p in cat.providers.values()],
    }
    if as_json:
        print_json(tables[kinds[0]] if kind else tables)
        return
    for k in kinds:
        console.print(_catalog_table(k, cat))


def _catalog_table(kind: str, cat: Catalog) -> Table:
    if kind == "gpus":
        t = Table(title="GPUs (dense peak TFLOP/s)")
        for col in (
            "name",
            "fp32",
            "tf32",
            "bf16",
            "fp8",
            "mem GB",
            "HBM TB/s",
            "scale-up",
            "source",
            "as of",
        ):
            t.add_column(col, overflow="fold")
        for g in cat.gpus.values():
            p = {k.value: v for k, v in g.peak_TFLOPS.items()}
            t.add_row(
                g.name,
                *(fmt_num(p[k], 1) if k in p else "-" for k in ("fp32", "tf32", "bf16", "fp8")),
                fmt_num(g.memory_GB, 0),
                fmt_num(g.memory_bandwidth_TBps, 2),
                g.scale_up_fabric,
                g.source,
                str(g.as_of),
            )
        return t
    if kind == "fabrics":
        t = Table(title="Fabrics (per endpoint, per direction)")
        for col in (
            "key",
            "tier",
            "Gb/s",
            "GB/s",
            "α µs",
            "jitter µs (mean/σ)",
            "loss",
            "RDMA",
            "in-net",
            "eff",
            "source",
            "as of",
        ):
            t.add_column(col, overflow="fold")
        for f in cat.fabrics.values():
            t.add_row(
                f.key,
                f.tier.value,
                fmt_num(f.bandwidth_Gbps, 0),
                fmt_num(f.bandwidth_GBps, 1),
                fmt_num(f.latency_us, 1),
                f"{fmt_num(f.jitter_mean_us, 1)}/{fmt_num(f.jitter_std_us, 1)}",
                f"{f.loss_rate:g}",
                "yes" if f.rdma else "no",
                "yes" if f.in_network_reduction else "no",
                fmt_num(f.efficiency, 2),
                f.source,
                str(f.as_of),
            )
        return t
    t = Table(title="Providers ($ per GPU-hour, on demand)")
    for col in (
        "key",
        "kind",
        "scale-out",
        "virt. overhead",
        "egress $/GB",
        "prices",
        "source",
        "as of",
    ):
        t.add_column(col, overflow="fold")
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


def parse_ranks(text: str) -> list[int]:
    """'64', '8,16,64' or '8:1024[:x2]' into rank counts, each >= 2."""
    try:
        values = [int(v) for v in parse_size_range(text, "ranks")]
    except ConfigError:
        raise ConfigError(
            f"ranks: malformed value {text!r}; use a whole number >= 2, a list 8,16 or a "
            "range 8:1024:x2"
        ) from None
    if any(k.upper() in text.upper() for k in "KMGT"):
        raise ConfigError(f"ranks: {text!r} must be plain numbers, without size suffixes")
    return values


def _check_ranks(text: str) -> list[int]:
    stripped = text.strip()
    if stripped.startswith("-") or stripped in ("0",) or stripped.startswith("0:"):
        raise ConfigError(f"ranks: must be >= 2, got {text!r}")
    ranks = parse_ranks(text)
    bad = [r for r in ranks if r < 2]
    if bad:
        raise ConfigError(f"ranks: must be >= 2, got {bad[0]}")
    return ranks


@app.command()
def collective(
    op: Annotated[
        str,
        typer.Option(
            help="all_reduce, all_gather, reduce_scatter, broadcast, "
            "reduce, all_to_all or send_recv."
        ),
    ] = "all_reduce",
    ranks: Annotated[str, typer.Option(help="Ranks: 64, a list 8,16 or a range 8:1024:x2.")] = "8",
    gpus_per_node: Annotated[int, typer.Option(help="GPUs per node (scale-up domain).")] = 8,
    fabric: Annotated[
        str, typer.Option(help="Scale-out fabric key (bandwall catalog fabrics).")
    ] = "ib-ndr",
    scale_up: Annotated[
        str | None, typer.Option(help="Scale-up fabric (default: the GPU's).")
    ] = None,
    gpu: Annotated[
        str, typer.Option(help="GPU whose scale-up fabric is the default.")
    ] = "H100-SXM",
    nics_per_node: Annotated[
        int | None,
        typer.Option(help="Scale-out NICs per node (default: one per GPU on RDMA, 1 on TCP)."),
    ] = None,
    oversubscription: Annotated[
        float, typer.Option(help="Scale-out oversubscription (>= 1).")
    ] = 1.0,
    wan: Annotated[str | None, typer.Option(help="WAN fabric between sites.")] = None,
    nodes_per_site: Annotated[
        int | None, typer.Option(help="Nodes per site (needs --wan).")
    ] = None,
    tcp_streams: Annotated[int, typer.Option(help="TCP connections per peer on TCP links.")] = 1,
    algo: Annotated[
        str,
        typer.Option(
            help="auto, ring, tree, halving_doubling, hierarchical, in_network or direct."
        ),
    ] = "auto",
    sizes: Annotated[
        str, typer.Option(help="START:END[:xF|:+STEP] or a list; K/M/G are powers of 1024.")
    ] = "1K:8G",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON rows.")] = False,
) -> None:
    """Price one collective with the analytical model, as an nccl-tests-like table."""
    the_op = parse_op(op)
    the_algo = parse_algo(algo)
    rank_counts = _check_ranks(ranks)
    size_array = parse_size_range(sizes)
    if gpus_per_node < 1:
        raise ConfigError(f"gpus-per-node: must be >= 1, got {gpus_per_node}")
    cat = load_catalog()
    out_spec = cat.fabric(fabric)
    if out_spec.tier is Tier.SCALE_UP:
        if scale_up is not None and scale_up != out_spec.key:
            raise ConfigError(
                f"fabric: {fabric!r} is a scale-up fabric and --scale-up is "
                f"{scale_up!r}; give one of them"
            )
        if max(rank_counts) > gpus_per_node:
            raise ConfigError(
                f"ranks: {max(rank_counts)} exceed one node of {gpus_per_node} GPUs and "
                f"{fabric!r} is a scale-up fabric; give a scale-out --fabric such as ib-ndr"
            )
        topo = build_topology(
            gpus_per_node=gpus_per_node,
            scale_out=None,
            scale_up=out_spec.key,
            gpu=gpu,
            tcp_streams=tcp_streams,
        )
    else:
        topo = build_topology(
            gpus_per_node=gpus_per_node,
            scale_out=fabric,
            scale_up=scale_up,
            gpu=gpu,
            nics_per_node=nics_per_node,
            oversubscription=oversubscription,
            wan=wan,
            nodes_per_site=nodes_per_site,
            tcp_streams=tcp_streams,
        )
    import numpy as np

    size_grid, rank_grid = np.meshgrid(size_array, np.array(rank_counts, dtype=np.float64))
    result = evaluate(the_op, size_grid.ravel(), rank_grid.ravel(), topo, the_algo)
    rows = result.records()
    if as_json:
        print_json(rows)
        return
    up = topo.scale_up.name if topo.scale_up else "none"
    title = (
        f"{the_op.value} model · scale-up {up} × {gpus_per_node}/node · "
        f"scale-out {fabric}"
        + (f" · wan {wan}" if wan else "")
        + (f" · algo {the_algo.value}" if the_algo is not Algo.AUTO else "")
    )
    table = Table(title=title)
    for col, justify in (
        ("ranks", "right"),
        ("size", "right"),
        ("count", "right"),
        ("type", "left"),
        ("time(us)", "right"),
        ("algbw(GB/s)", "right"),
        ("busbw(GB/s)", "right"),
        ("algo", "left"),
    ):
        table.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for row in rows:
        size_b = int(str(row["size_bytes"]))
        table.add_row(
            str(row["ranks"]),
            format_size(size_b),
            str(size_b // 4),
            "float",
            fmt_num(float(str(row["time_s"])) * 1e6, 2),
            fmt_num(float(str(row["algbw_GBps"])), 2),
            fmt_num(float(str(row["busbw_GBps"])), 2),
            str(row["algo"]),
        )
    console.print(table)


@app.command()
@with_plan_options()
def plan(
    opts: dict[str, Any],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Plan one training job: step time, efficiency, MFU, time to train and cost."""
    the_plan = make_plan(request_from_fields(**plan_fields(opts)))
    if as_json:
        print_json(the_plan.to_json())
        return
    for table in plan_tables(the_plan):
        console.print(table)
    for note in the_plan.notes:
        console.print(f"note: {note}", style="dim")


def _split(text: str, field: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise ConfigError(f"{field}: give a comma-separated list")
    return items


@app.command()
@with_plan_options(skip=("preset",))
def compare(
    opts: dict[str, Any],
    presets_: Annotated[
        str, typer.Option("--presets", help="Comma-separated presets (default: all).")
    ] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Run one job on several infrastructures side by side."""
    keys = _split(presets_, "presets") if presets_ else list(presets())
    plans = compare_plans(request_from_fields(**plan_fields(opts), preset=keys[0]), keys)
    if as_json:
        print_json([p.to_json() for p in plans])
        return
    console.print(compare_table(plans))


def _grid_values(text: str | None, field: str, *, rate: bool = False) -> list[float] | None:
    """'1,2,4', '64:4096:x2' (GPU counts) or '1Gbps:400Gbps:x2' (rates) into values."""
    if not text:
        return None
    if rate:
        if ":" in text:
            parts = text.split(":")
            lo, hi = parse_rate_Gbps(parts[0], field), parse_rate_Gbps(parts[1], field)
            factor = float(parts[2].lstrip("x*")) if len(parts) > 2 else 2.0
            if factor <= 1 or hi < lo:
                raise ConfigError(f"{field}: range {text!r} must rise with a factor > 1")
            out, v = [], lo
            while v <= hi * (1 + 1e-9):
                out.append(v)
                v *= factor
            return out
        return [parse_rate_Gbps(t, field) for t in _split(text, field)]
    values = parse_size_range(text, field)
    if any(k in text.upper() for k in "KMGT"):
        raise ConfigError(f"{field}: {text!r} must be plain numbers")
    return [float(v) for v in values]


@app.command()
@with_plan_options(skip=(*(a.removesuffix("_Gbps") for a in GRID_AXES), "auto"))
def sweep(
    opts: dict[str, Any],
    gpus: Annotated[str, typer.Option(help="GPU counts: 64,128 or 64:4096:x2.")] = "8",
    oversubscription: Annotated[
        str | None, typer.Option(help="Scale-out oversubscription ratios, e.g. 1,2,4.")
    ] = None,
    bandwidth: Annotated[
        str | None,
        typer.Option(help="Scale-out rates per NIC: 10Gbps,100Gbps or 1Gbps:400Gbps:x2."),
    ] = None,
    tp: Annotated[str, typer.Option(help="TP degrees, e.g. 1,2,4,8.")] = "1",
    pp: Annotated[str, typer.Option(help="PP degrees.")] = "1",
    cp: Annotated[str, typer.Option(help="CP degrees.")] = "1",
    ep: Annotated[str, typer.Option(help="EP degrees.")] = "1",
    zero: Annotated[str, typer.Option(help="ZeRO stages, e.g. 1,3.")] = "1",
    micro_batch: Annotated[
        str | None, typer.Option(help="Micro-batch sizes (default: as `plan`).")
    ] = None,
    virtual_stages: Annotated[
        str | None, typer.Option(help="Interleaving depths (default: as `plan`).")
    ] = None,
    output: Annotated[
        str | None,
        typer.Option("-o", "--output", help="CSV or .parquet file (default: CSV on stdout)."),
    ] = None,
) -> None:
    """Evaluate a grid of GPU counts × bandwidths × layouts in one vectorised pass."""
    grid = {
        "gpus": _grid_values(gpus, "gpus"),
        "bandwidth_Gbps": _grid_values(bandwidth, "bandwidth", rate=True),
        "oversubscription": (
            [float(v) for v in _split(oversubscription, "oversubscription")]
            if oversubscription
            else None
        ),
        "tp": _grid_values(tp, "tp"),
        "pp": _grid_values(pp, "pp"),
        "cp": _grid_values(cp, "cp"),
        "ep": _grid_values(ep, "ep"),
        "zero": _grid_values(zero, "zero"),
        "micro_batch": _grid_values(micro_batch, "micro-batch"),
        "virtual_stages": _grid_values(virtual_stages, "virtual-stages"),
    }
    grid_clean = {k: v for k, v in grid.items() if v is not None}
    first_gpus = int(grid_clean["gpus"][0])
    req = request_from_fields(**plan_fields(opts), gpus=first_gpus)
    table = run_sweep(req, grid_clean)
    write_table(table, output)
    if output:
        n = len(next(iter(table.values())))
        _render.err_console.print(f"wrote {n:,} rows to {output}")


@app.command()
@with_plan_options(skip=("gpus",))
def scale(
    opts: dict[str, Any],
    gpus: Annotated[
        str, typer.Option(help="GPU counts, e.g. 1k:128k:x2 (k = 1024).")
    ] = "1k:16k:x2",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Step time, efficiency, goodput and cost per token along GPU count.

    Without an explicit layout (--tp/--pp/--cp/--ep) each count gets its fastest fitting one.
    """
    counts = [int(v) for v in parse_size_range(gpus, "gpus")]
    fields = plan_fields(opts)
    plans = scale_plans(request_from_fields(**fields, gpus=counts[0]), counts)
    if as_json:
        print_json([p.to_json() for p in plans])
        return
    console.print(scale_table(plans))
    console.print("assumptions: " + " ".join(plans[0].to_json()["assumptions"][-3:]), style="dim")


@app.command()
def validate(
    results: Annotated[
        str | None, typer.Argument(help="Run id, 'latest' or an export JSON.")
    ] = None,
    published: Annotated[
        bool, typer.Option("--published", help="Compare with published training runs.")
    ] = False,
    reference: Annotated[
        str | None, typer.Option(help="Folder holding training_throughput.csv.")
    ] = None,
    fabric: Annotated[
        str | None, typer.Option(help="Fabric to predict with, e.g. measured:lab1g.")
    ] = None,
    bandwidth: Annotated[
        str | None,
        typer.Option(help="Link rate to predict at (default: the lab rate the run recorded)."),
    ] = None,
    min_size: Annotated[str, typer.Option(help="Smallest size counted in the error.")] = "1M",
    db: Annotated[str | None, typer.Option(help="Results database.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Predicted against measured: a stored bench run (RESULTS) or published runs."""
    if published:
        rows, summary = validate_published(find_reference_dir(reference))
        if as_json:
            print_json({"rows": rows, "summary": summary})
            return
        console.print(
            validation_table(
                rows,
                "Model vs published training throughput "
                "(one set of defaults, no per-row constants)",
            )
        )
        console.print(
            f"median |error| {summary['median_abs_error']:.1%}, max "
            f"{summary['max_abs_error']:.1%} over {summary['rows']} rows"
        )
        return
    if results is None:
        raise ConfigError(
            "validate: give RESULTS (a run id, 'latest' or a JSON export) or --published"
        )
    if fabric is None:
        raise ConfigError(
            "fabric: give --fabric, e.g. measured:NAME from `bandwall calibrate` or a catalog key"
        )
    run, rows = load_run(results, db)
    rate = parse_rate_Gbps(bandwidth, "bandwidth") if bandwidth else nominal_rate_Gbps(run)
    checked, summary = validate_run(
        run, rows, load_catalog().fabric(fabric), rate, parse_size(min_size, "min-size")
    )
    if as_json:
        print_json(
            {
                "run": run.id,
                "fabric": fabric,
                "bandwidth_Gbps": rate,
                "rows": checked,
                "summary": summary,
            }
        )
        return
    t = Table(
        title=f"run {run.id} ({run.world_size} ranks) vs model on {fabric}"
        + (f" at {rate:g} Gb/s" if rate else "")
    )
    for col in ("op", "size", "measured (us)", "predicted (us)", "error", "counted"):
        t.add_column(col, justify="right" if col not in ("op",) else "left")
    for r in checked:
        t.add_row(
            r["op"],
            format_size(r["size_bytes"]),
            f"{r['measured_s'] * 1e6:,.0f}",
            f"{r['predicted_s'] * 1e6:,.0f}",
            f"{r['error']:+.1%}",
            "yes" if r["used"] else "no",
        )
    console.print(t)
    console.print(
        f"median |error| {summary['median_abs_error']:.1%}, max "
        f"{summary['max_abs_error']:.1%} over {summary['rows']} rows >= {min_size}"
    )


@app.command()
def calibrate(
    results: Annotated[str, typer.Argument(help="Run id, 'latest' or an export JSON.")],
    name: Annotated[
        str, typer.Option(help="Profile name: use it as --fabric measured:NAME.")
    ] = "my-fabric",
    rate: Annotated[
        str | None, typer.Option(help="Nominal link rate (default: the lab rate the run recorded).")
    ] = None,
    min_size: Annotated[str, typer.Option(help="Smallest size used in the fit.")] = "1M",
    db: Annotated[str | None, typer.Option(help="Results database.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Fit latency α, bandwidth and efficiency to a stored bench run; save a fabric profile."""
    run, rows = load_run(results, db)
    nominal = parse_rate_Gbps(rate, "rate") if rate else nominal_rate_Gbps(run)
    fit = fit_run(rows, run.world_size, parse_size(min_size, "min-size"))
    path = save_profile(name, fit, run, nominal)
    fit["profile"] = str(path)
    fit["fabric"] = f"measured:{name}"
    fit["nominal_Gbps"] = nominal
    fit["efficiency"] = (fit["bandwidth_Bps"] * 8 / 1e9 / nominal) if nominal else None
    if as_json:
        print_json(fit)
        return
    eff = f", efficiency {fit['efficiency']:.3f} of {nominal:g} Gb/s" if nominal else ""
    console.print(
        f"fit over {fit['rows']} rows of run {run.id}: α = {fit['latency_s'] * 1e6:.1f} µs, "
        f"bandwidth {fit['bandwidth_Bps'] * 8 / 1e9:.4g} Gb/s{eff}; R² {fit['r2']:.4f}, "
        f"median |error| {fit['median_abs_error']:.1%}, max {fit['max_abs_error']:.1%}"
    )
    console.print(f"saved {path}: use --fabric measured:{name}")


@app.command()
def models(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List the built-in workloads with derived parameter counts and FLOPs."""
    table = builtin_workloads()
    rows = [
        {
            "key": k,
            "name": w.name,
            "params_b": w.params / 1e9,
            "active_params_b": w.active_params / 1e9,
            "gflops_per_sample": (
                w.flops_per_token * w.seq_len if isinstance(w, Transformer) else w.flops_per_sample
            )
            / 1e9,
            "source": w.source,
        }
        for k, w in table.items()
    ]
    if as_json:
        print_json(rows)
        return
    t = Table(title="Workloads")
    for col in ("key", "name", "params (B)", "active (B)", "train GFLOP/sample", "source"):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(
            str(r["key"]),
            str(r["name"]),
            f"{r['params_b']:,.2f}",
            f"{r['active_params_b']:,.2f}",
            f"{r['gflops_per_sample']:,.0f}",
            str(r["source"]),
        )
    console.print(t)


@app.command("presets")
def presets_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the infrastructure presets `plan --preset` accepts."""
    rows = [p.model_dump() for p in presets().values()]
    if as_json:
        print_json(rows)
        return
    t = Table(title="Presets")
    for col in ("key", "provider", "scale-out", "NICs/node", "sites", "description"):
        t.add_column(col, overflow="fold")
    for p in presets().values():
        t.add_row(
            p.key, p.provider, p.scale_out, f"{p.nics_per_node:g}", str(p.sites), p.description
        )
    console.print(t)


app.add_typer(bench_app, name="bench")
app.add_typer(launch_app, name="launch")
app.add_typer(results_app, name="results")
app.add_typer(lab_app, name="lab")
app.command("plot")(cli_show.plot)
app.command("report")(cli_show.report)
app.command("serve")(cli_show.serve)


@app.command()
def probe(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """This node's GPUs, NICs, RDMA ports, NUMA and the transport torch.distributed uses."""
    probe_cmd(as_json)


@app.command()
def monitor(
    iface: Annotated[list[str] | None, typer.Option(help="Interface(s) to watch.")] = None,
    interval: Annotated[float, typer.Option(help="Seconds between samples.")] = 1.0,
    count: Annotated[int | None, typer.Option(help="Stop after N samples.")] = None,
    prometheus: Annotated[
        str | None,
        typer.Option(help="Serve Prometheus metrics on [HOST]:PORT (host 127.0.0.1 if omitted)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object per sample.")
    ] = False,
) -> None:
    """Live per-interface throughput, packets, drops, errors, TCP retransmits, RDMA counters."""
    monitor_cmd(iface, interval, count, prometheus, as_json)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turning every user error into one line and exit code 2."""
    args = sys.argv[1:] if argv is None else argv
    try:
        code = app(args=args or ["--help"], standalone_mode=False)
    except BandwallError as exc:
        _render.err_console.print(f"error: {exc}", markup=False, soft_wrap=True)
        return 2
    except TyperException as exc:
        _render.err_console.print(f"error: {exc.format_message()}", markup=False, soft_wrap=True)
        return 2
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except typer.Abort:
        _render.err_console.print("error: aborted", markup=False)
        return 130
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
