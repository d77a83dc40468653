"""The `bandwall` command line: a thin shell over the library (parse, call, render).

Errors a user can cause print one line on stderr naming the option (`--tp: ...`) and exit 2.
Heavy modules (numpy, the model, torch, matplotlib, FastAPI) are imported inside the commands
that need them, so `bandwall --help` stays fast.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from typer.exceptions import TyperException

from bandwall import __version__
from bandwall.cli import doctor, measure, show
from bandwall.cli import infer as infer_cli
from bandwall.cli.options import expand, request, with_request_options
from bandwall.cli.output import CsvOption, JsonOption
from bandwall.errors import BandwallError, ConfigError, unknown_choice
from bandwall.report.text import console, emit, err_console, print_json

app = typer.Typer(
    name="bandwall",
    help="Find and price the bandwidth wall of distributed deep-learning training.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

CATALOG_KINDS = ("gpus", "fabrics", "providers", "failures", "perf", "power")


def _version(value: bool) -> None:
    if value:
        console.print(f"bandwall {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Find and price the bandwidth wall of distributed deep-learning training."""


@app.command()
def catalog(
    kind: Annotated[
        str, typer.Argument(help="gpus, fabrics, providers or failures (default: all).")
    ] = "",
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
) -> None:
    """List the hardware catalog with the source and date of every figure."""
    from bandwall.catalog import load_catalog
    from bandwall.catalog.power import power_table
    from bandwall.report.tables import catalog_table

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
        "failures": [f.model_dump(mode="json") for f in cat.failures.values()],
        "perf": [g.model_dump(mode="json") for g in cat.perf.values()],
        "power": power_table(),
    }
    every = [{"table": k, **row} for k in CATALOG_KINDS for row in tables[k]]
    if emit(tables[kinds[0]] if kind else tables, as_json, as_csv, None if kind else every):
        return
    for k in kinds:
        console.print(catalog_table(k, cat))


def _check_ranks(text: str) -> list[int]:
    """'64', '8,16,64' or '8:1024[:x2]' into rank counts, each >= 2."""
    from bandwall.units import parse_size_range

    stripped = text.strip()
    if stripped.startswith("-") or stripped == "0" or stripped.startswith("0:"):
        raise ConfigError(f"must be >= 2, got {text!r}", field="ranks")
    try:
        values = [int(v) for v in parse_size_range(text, "ranks")]
    except ConfigError as exc:
        raise ConfigError(
            f"malformed value {text!r}; use a whole number >= 2, a list 8,16 or a range "
            f"8:1024:x2 ({exc.reason})",
            field="ranks",
        ) from None
    if any(k in text.upper() for k in "KMGT"):
        raise ConfigError(f"{text!r} must be plain numbers, without size suffixes", field="ranks")
    bad = [r for r in values if r < 2 or r > 1 << 24]
    if bad:
        raise ConfigError(f"must be >= 2 and <= {1 << 24:,}, got {bad[0]:,}", field="ranks")
    return values


@app.command()
def collective(
    op: Annotated[
        str,
        typer.Option(
            help="all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all or "
            "send_recv."
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
    gpu: Annotated[str, typer.Option(help="GPU whose scale-up fabric is the default.")] = (
        "H100-SXM"
    ),
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
    tcp_streams: Annotated[
        int | None,
        typer.Option(help="TCP connections per peer (default: what NCCL or Gloo opens)."),
    ] = None,
    algo: Annotated[
        str,
        typer.Option(
            help="auto, ring, tree, nvls, nvls_tree, collnet_direct, collnet_chain, pat, "
            "halving_doubling, hierarchical, in_network or direct."
        ),
    ] = "auto",
    protocol: Annotated[
        str | None, typer.Option(help="NCCL protocol: LL, LL128 or Simple (default: fastest).")
    ] = None,
    in_network: Annotated[
        bool | None,
        typer.Option(
            "--in-network/--no-in-network",
            help="Reduce in the switch where the hardware can (default: the fabric's).",
            show_default=False,
        ),
    ] = None,
    backend: Annotated[str, typer.Option(help="nccl or gloo.")] = "nccl",
    congestion_control: Annotated[
        str, typer.Option(help="TCP congestion control on TCP links: cubic, bbr or reno.")
    ] = "cubic",
    tcp_window: Annotated[
        str | None, typer.Option(help="Bytes in flight per TCP stream, e.g. 16M.")
    ] = None,
    qps_per_connection: Annotated[
        int | None,
        typer.Option(help="RDMA QPs per NCCL connection (NCCL_IB_QPS_PER_CONNECTION)."),
    ] = None,
    routing: Annotated[
        str | None,
        typer.Option(help="Spine load balancing: ecmp, flowlet or adaptive (default: fabric's)."),
    ] = None,
    placement: Annotated[
        str, typer.Option(help="Ring neighbours: scattered over the leaves, or packed.")
    ] = "scattered",
    rail_optimized: Annotated[
        bool,
        typer.Option(
            "--rail-optimized/--no-rail-optimized",
            help="NIC i of every node on rail leaf i (else top-of-rack leaves).",
        ),
    ] = True,
    rdma_cc: Annotated[
        str | None, typer.Option(help="RoCE congestion control: dcqcn or pfc (default: fabric's).")
    ] = None,
    sizes: Annotated[
        str, typer.Option(help="START:END[:xF|:+STEP] or a list; K/M/G are powers of 1024.")
    ] = "1K:8G",
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
) -> None:
    """Price one collective with the analytical model, as an nccl-tests-like table."""
    import numpy as np

    from bandwall.model.collectives import (
        Algo,
        evaluate_collective,
        parse_algo,
        parse_op,
        parse_protocol,
    )
    from bandwall.model.topology import collective_topology
    from bandwall.report.tables import collective_table
    from bandwall.units import parse_size, parse_size_range

    the_op, the_algo = parse_op(op), parse_algo(algo)
    the_proto = parse_protocol(protocol) if protocol else None
    window = float(parse_size(tcp_window, "tcp_window")) if tcp_window else None
    rank_counts = _check_ranks(ranks)
    size_array = parse_size_range(sizes)
    topo = collective_topology(
        max_ranks=max(rank_counts),
        gpus_per_node=gpus_per_node,
        fabric=fabric,
        scale_up=scale_up,
        gpu=gpu,
        nics_per_node=nics_per_node,
        oversubscription=oversubscription,
        wan=wan,
        nodes_per_site=nodes_per_site,
        tcp_streams=tcp_streams,
        qps_per_connection=qps_per_connection,
        load_balancing=routing,
        placement=placement,
        rail_optimized=rail_optimized,
        rdma_cc=rdma_cc,
        in_network=in_network,
        backend=backend,
        congestion_control=congestion_control,
        tcp_window_bytes=window,
    )
    size_grid, rank_grid = np.meshgrid(size_array, np.array(rank_counts, dtype=np.float64))
    result = evaluate_collective(
        the_op, size_grid.ravel(), rank_grid.ravel(), topo, the_algo, protocol=the_proto
    )
    rows = result.records()
    if emit(rows, as_json, as_csv):
        return
    up = topo.scale_up.name if topo.scale_up else "none"
    title = (
        f"{the_op.value} model · scale-up {up} × {gpus_per_node}/node · scale-out {fabric}"
        + (f" · wan {wan}" if wan else "")
        + (f" · algo {the_algo.value}" if the_algo is not Algo.AUTO else "")
    )
    console.print(collective_table(rows, title))


@app.command()
@with_request_options(configs=True)
def plan(
    fields: dict[str, Any],
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
) -> None:
    """Plan one training job: layout, step time, efficiency, MFU, time to train and cost.

    Layout options left unset (--tp, --pp, --cp, --ep, --zero, --micro-batch,
    --virtual-stages) are searched: the fastest layout that is valid and fits is chosen.
    """
    from bandwall.planning.api import plan as make_plan
    from bandwall.report.tables import plan_tables

    the_plan = make_plan(request(fields))
    if emit(the_plan.to_json(), as_json, as_csv):
        return
    for table in plan_tables(the_plan):
        console.print(table)
    for note in the_plan.notes:
        console.print(f"note: {note}", style="dim")


def _split(text: str, field: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise ConfigError("give a comma-separated list", field=field)
    return items


@app.command()
@with_request_options(skip=("preset",), configs=True)
def compare(
    fields: dict[str, Any],
    presets_: Annotated[
        str, typer.Option("--presets", help="Comma-separated presets (default: all).")
    ] = "",
    infer: Annotated[
        bool, typer.Option("--infer", help="Compare serving cost and latency per token.")
    ] = False,
    infer_models: Annotated[
        str, typer.Option(help="With --infer: models to compare, comma-separated.")
    ] = "",
    chart: Annotated[str | None, typer.Option(help="With --infer: save a PNG chart.")] = None,
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
) -> None:
    """Run one job on several infrastructures side by side (training, or serving with
    --infer)."""
    from bandwall.planning.api import compare as compare_plans
    from bandwall.planning.presets import presets
    from bandwall.report.tables import compare_tables

    keys = _split(presets_, "presets") if presets_ else list(presets())
    if infer:
        from bandwall.cli.infer import run_compare_infer

        models = _split(infer_models, "infer_models") if infer_models else None
        run_compare_infer(fields, keys, models=models, as_json=as_json, as_csv=as_csv, chart=chart)
        return
    plans = compare_plans(request(fields, preset=keys[0]), keys)
    if emit([p.to_json() for p in plans], as_json, as_csv):
        return
    for table in compare_tables(plans):
        console.print(table)


@app.command()
@with_request_options(multi=True, configs=True)
def sweep(
    fields: dict[str, Any],
    output: Annotated[
        str | None,
        typer.Option("-o", "--output", help="CSV or .parquet file (default: CSV on stdout)."),
    ] = None,
) -> None:
    """Evaluate a grid in vectorised passes: every option takes a list (a,b,c), numeric ones
    a range (64:4096:x2, 1Gbps:400Gbps:x2). Layout axes left unset are searched per row."""
    from bandwall.planning.api import sweep as run_sweep
    from bandwall.report.tables import write_table

    axes: dict[str, list[Any]] = {}
    base: dict[str, Any] = {}
    for name, text in fields.items():
        values = expand(name, text) if isinstance(text, str) else [text]
        if len(values) == 1:
            base[name] = values[0]
        else:
            axes[name] = values
    table = run_sweep(request(base), axes)
    write_table(table, output)
    if output:
        n = len(next(iter(table.values())))
        err_console.print(f"wrote {n:,} rows to {output}")


@app.command()
@with_request_options(skip=("gpus",), configs=True)
def scale(
    fields: dict[str, Any],
    gpus: Annotated[
        str, typer.Option(help="GPU counts, e.g. 1k:128k:x2 (k = 1024) or 64,128.")
    ] = "1k:16k:x2",
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
) -> None:
    """Step time, efficiency, goodput and cost per token along GPU count; layout options left
    unset are searched at each count."""
    from bandwall.planning.api import scale as scale_plans
    from bandwall.report.tables import scale_tables

    counts = [int(v) for v in expand("gpus", gpus)]
    plans = scale_plans(request(fields, gpus=counts[0]), counts)
    if emit([p.to_json() for p in plans], as_json, as_csv):
        return
    for table in scale_tables(plans):
        console.print(table)


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
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
) -> None:
    """Predicted against measured: a stored bench run (RESULTS) or published runs."""
    from bandwall.catalog import load_catalog
    from bandwall.measure.calibrate import (
        find_reference_dir,
        load_run,
        nominal_rate_Gbps,
        validate_published,
        validate_run,
    )
    from bandwall.report.tables import run_validation_table, validation_table
    from bandwall.units import parse_rate_Gbps, parse_size

    if published:
        from dataclasses import asdict

        from bandwall.measure.calibrate.runs import summarize, validate_runs
        from bandwall.report.validation import runs_table

        rows, summaries = validate_published(find_reference_dir(reference))
        runs = validate_runs()
        runs_doc = [asdict(r) | {"error": r.error} for r in runs]
        by_split = {s: summarize([r for r in runs if r.split == s]) for s in ("fit", "heldout")}
        published_doc = {
            "rows": rows,
            "summary": summaries,
            "runs": runs_doc,
            "runs_summary": by_split,
        }
        from bandwall.cli.infer import published_serving  # serving and energy sets

        serving_doc, print_serving = published_serving()
        published_doc |= serving_doc
        if emit(published_doc, as_json, as_csv, rows + runs_doc):
            return
        console.print(
            runs_table(
                runs,
                summarize,
                f"Published training runs ({len(runs)} with a measured step time, "
                "published_runs.csv); error of the step time",
            )
        )
        for name, summary in summaries.items():
            mine = [r for r in rows if r["file"] == name]
            console.print(validation_table(mine, f"{mine[0]['source']} ({name})"))
            console.print(
                f"mean |error| {summary['mean_abs_error']:.1%}, median "
                f"{summary['median_abs_error']:.1%}, max {summary['max_abs_error']:.1%} over "
                f"{summary['rows']:.0f} rows"
            )
        print_serving(console)
        return
    if results is None:
        raise ConfigError("give RESULTS (a run id, 'latest' or a JSON export) or --published")
    if fabric is None:
        raise ConfigError(
            "give --fabric, e.g. measured:NAME from `bandwall calibrate` or a catalog key",
            field="fabric",
        )
    run, rows = load_run(results, db)
    rate = parse_rate_Gbps(bandwidth, "bandwidth") if bandwidth else nominal_rate_Gbps(run)
    checked, summary = validate_run(
        run, rows, load_catalog().fabric(fabric), rate, parse_size(min_size, "min_size")
    )
    doc = {"run": run.id, "fabric": fabric, "bandwidth_Gbps": rate}
    if emit({**doc, "rows": checked, "summary": summary}, as_json, as_csv, checked):
        return
    title = f"run {run.id} ({run.world_size} ranks) vs model on {fabric}" + (
        f" at {rate:g} Gb/s" if rate else ""
    )
    console.print(run_validation_table(checked, title))
    console.print(
        f"median |error| {summary['median_abs_error']:.1%}, max "
        f"{summary['max_abs_error']:.1%} over {summary['rows']} rows >= {min_size}"
    )


@app.command()
@with_request_options(configs=True)
def calibrate(
    fields: dict[str, Any],
    results: Annotated[
        str | None, typer.Argument(help="Run id, 'latest' or an export JSON.")
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(
            help="Profile name: use it as --fabric measured:NAME (default my-fabric), or with "
            "--from-log as --profile NAME (default my-cluster)."
        ),
    ] = None,
    rate: Annotated[
        str | None, typer.Option(help="Nominal link rate (default: the lab rate the run recorded).")
    ] = None,
    min_size: Annotated[str, typer.Option(help="Smallest size used in the fit.")] = "1M",
    from_trace: Annotated[
        list[str] | None,
        typer.Option(
            "--from-trace",
            help="Profiler traces or folders: refit gemm_efficiency to them (give the job's "
            "plan options).",
        ),
    ] = None,
    from_log: Annotated[
        str | None,
        typer.Option(
            "--from-log",
            help="A training log (Megatron, NeMo, torchtitan, DeepSpeed, HF Trainer): fit "
            "the cluster's compute efficiency to it (give the job with --from CONFIG); save "
            "it for plan --profile NAME.",
        ),
    ] = None,
    db: Annotated[str | None, typer.Option(help="Results database.")] = None,
    as_json: JsonOption = False,
    from_result: Any = None,
) -> None:
    """Fit a fabric profile (latency, bandwidth per size range and op, jitter) to a stored
    bench run, the compute efficiency to profiler traces (--from-trace), or a compute profile
    to a training log (--from-log)."""
    from bandwall.measure.calibrate import fit_run, load_run, nominal_rate_Gbps, save_profile
    from bandwall.units import parse_rate_Gbps, parse_size

    if from_log:
        from bandwall.cli.from_config import calibrate_from_log

        calibrate_from_log(from_log, fields, from_result, name or "my-cluster", as_json)
        return
    name = name or "my-fabric"
    if from_trace:
        from bandwall.cli.doctor import calibrate_from_trace

        calibrate_from_trace(from_trace, fields, as_json)
        return
    if results is None:
        raise ConfigError(
            "give RESULTS (a run id, 'latest' or a JSON export) or --from-trace", field="results"
        )
    run, rows = load_run(results, db)
    nominal = parse_rate_Gbps(rate, "rate") if rate else nominal_rate_Gbps(run)
    fit = fit_run(rows, run.world_size, parse_size(min_size, "min_size"), backend=run.backend)
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
def models(as_json: JsonOption = False, as_csv: CsvOption = False) -> None:
    """List the built-in workloads with derived parameter counts and FLOPs."""
    from bandwall.report.tables import models_table
    from bandwall.workloads import Transformer, builtin_workloads

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
        for k, w in builtin_workloads().items()
    ]
    if emit(rows, as_json, as_csv):
        return
    console.print(models_table(rows))


@app.command("presets")
def presets_cmd(
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
) -> None:
    """List the infrastructure presets `plan --preset` accepts."""
    from bandwall.planning.presets import presets
    from bandwall.report.tables import presets_table

    rows = [p.model_dump() for p in presets().values()]
    if emit(rows, as_json, as_csv):
        return
    console.print(presets_table(rows))


app.add_typer(measure.bench_app, name="bench")
app.add_typer(measure.launch_app, name="launch")
app.add_typer(measure.results_app, name="results")
app.add_typer(measure.import_app, name="import")
app.add_typer(measure.lab_app, name="lab")
app.command("infer")(infer_cli.infer)
app.command("plot")(show.plot)
app.command("report")(show.report)
app.command("serve")(show.serve)
app.command("doctor")(doctor.doctor)


@app.command()
def probe(as_json: JsonOption = False) -> None:
    """This node's GPUs, NICs, RDMA ports, NUMA and the transport torch.distributed uses."""
    measure.probe_cmd(as_json)


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
    measure.monitor_cmd(iface, interval, count, prometheus, as_json)


def error_line(exc: BandwallError, args: list[str]) -> str:
    """`--flag: reason` when the error is about an option the user can type, else the
    message as it stands."""
    if exc.field is None:
        return str(exc)
    from bandwall.planning.request import PlanRequest, field_flag

    flag = field_flag(exc.field)
    typed = any(a == f"--{flag}" or a.startswith(f"--{flag}=") for a in args)
    if exc.field in PlanRequest.model_fields or typed:
        return f"--{flag}: {exc.reason}"
    return str(exc)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turning every user error into one line and exit code 2."""
    args = sys.argv[1:] if argv is None else argv
    try:
        code = app(args=args or ["--help"], standalone_mode=False, prog_name="bandwall")
    except BandwallError as exc:
        err_console.print(f"error: {error_line(exc, args)}", markup=False, soft_wrap=True)
        return 2
    except TyperException as exc:
        err_console.print(f"error: {exc.format_message()}", markup=False, soft_wrap=True)
        return 2
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except typer.Abort:
        err_console.print("error: aborted", markup=False)
        return 130
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
