"""The planning and catalog commands: a thin shell over the library (parse, call, render).

The root group (`bandwall.cli.root`) imports this module only when one of them runs.

Errors a user can cause print one line on stderr naming the option (`--tp: ...`) and exit 2.
Heavy modules (numpy, the model, torch, matplotlib, FastAPI) are imported inside the commands
that need them, so `bandwall --help` stays fast.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from bandwall.cli.options import (
    MaxPoints,
    check_scale_work,
    expand_values,
    parse_max_points,
    print_notes,
    request,
    with_request_options,
)
from bandwall.cli.output import CsvOption, JsonOption
from bandwall.cli.root import app, error_line, main
from bandwall.errors import BandwallError, ConfigError, unknown_choice
from bandwall.report.text import console, emit, err_console, print_json

__all__ = ["app", "error_line", "main"]

CATALOG_KINDS = ("gpus", "fabrics", "providers", "failures", "perf", "power")


def catalog(
    kind: Annotated[
        str | None,
        typer.Argument(help="gpus, fabrics, providers, failures, perf or power (default: all)."),
    ] = None,
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
) -> None:
    """List the hardware catalog with the source and date of every figure."""
    from bandwall.catalog import load_catalog
    from bandwall.catalog.power import power_table
    from bandwall.report.tables import catalog_table

    kinds = CATALOG_KINDS if kind is None else (kind.lower(),)
    if kinds[0] not in CATALOG_KINDS:  # '' included: an empty kind is a typo, not "all"
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
    one = kind is not None
    if emit(tables[kinds[0]] if one else tables, as_json, as_csv, None if one else every):
        return
    for k in kinds:
        console.print(catalog_table(k, cat))


def _check_ranks(text: str) -> list[int]:
    """'64', '8,16,64', '1k' or '8:1024[:x2]' into rank counts, each >= 2 (K = 1,024, as
    --gpus everywhere)."""
    from bandwall.units import parse_size_range

    stripped = text.strip()
    if stripped.startswith("-") or stripped == "0" or stripped.startswith("0:"):
        raise ConfigError(f"must be >= 2, got {text!r}", field="ranks")
    if "B" in stripped.upper():
        raise ConfigError(f"{text!r} must be counts (K = 1,024), not bytes", field="ranks")
    try:
        values = [int(v) for v in parse_size_range(text, "ranks")]
    except ConfigError as exc:
        # the size parser's own words ("malformed size", "over 1 PiB") would talk of bytes
        why = "" if "size" in exc.reason or "PiB" in exc.reason else f" ({exc.reason})"
        raise ConfigError(
            f"malformed value {text[:40]!r}; use a whole number from 2 to {1 << 24:,}, a list "
            f"8,16 or a range 8:1024:x2{why}",
            field="ranks",
        ) from None
    bad = [r for r in values if r < 2 or r > 1 << 24]
    if bad:
        raise ConfigError(f"must be >= 2 and <= {1 << 24:,}, got {bad[0]:,}", field="ranks")
    return values


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
        str | None,
        typer.Option(help="RoCE congestion control: auto, dcqcn or pfc (default: fabric's)."),
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
    from bandwall.model.collectives.options import check_forced
    from bandwall.model.topology import check_whole_nodes, collective_topology
    from bandwall.planning.budget import check_collective
    from bandwall.planning.request import check_fields
    from bandwall.report.tables import collective_table
    from bandwall.units import parse_size, parse_size_range

    # the options `plan` shares take the request schema's bounds (a 400-digit --gpus-per-node
    # overflowed float64 in the topology)
    # ... and --scale-up and --wan against their own tier, so an unknown one is named as
    # itself with its own choices, not as --fabric with every fabric (--fabric itself may be a
    # scale-up fabric here: one node's collective)
    check_fields(
        gpus_per_node=gpus_per_node,
        nics_per_node=nics_per_node,
        oversubscription=oversubscription,
        tcp_streams=tcp_streams,
        qps_per_connection=qps_per_connection,
        scale_up=scale_up,
        wan=wan,
        rdma_cc=rdma_cc,
    )
    if rdma_cc == "auto":
        rdma_cc = None  # the fabric's own, as `plan --rdma-cc auto`
    the_op, the_algo = parse_op(op), parse_algo(algo)
    the_proto = parse_protocol(protocol) if protocol else None
    window = float(parse_size(tcp_window, "tcp_window")) if tcp_window else None
    rank_counts = _check_ranks(ranks)
    check_whole_nodes(rank_counts, gpus_per_node)
    size_array = parse_size_range(sizes)
    check_collective(len(size_array), len(rank_counts))
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
    if wan and nodes_per_site:
        nodes = -(-max(rank_counts) // int(topo.gpus_per_node))
        if nodes <= nodes_per_site:
            raise ConfigError(
                f"{nodes_per_site:,} nodes per site hold all {nodes:,} nodes of "
                f"{max(rank_counts):,} ranks: the WAN is never crossed (plan says the same of "
                "one site); give fewer nodes per site or more ranks",
                field="nodes_per_site",
            )
    check_forced(the_op, the_algo, np.array(rank_counts, dtype=np.float64), topo, the_proto)
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
    # rows whose price departs from the cheapest option or steps with the NIC rate carry a
    # mark; what it means is said once per group below the table
    marked = [r | {"protocol": f"{r['protocol']}*"} if r["note"] else r for r in rows]
    console.print(collective_table(marked, title))
    for line in result.summary_notes():
        console.print(f"* {line}", style="dim")
    out = topo.scale_out
    tcp_opts = [
        flag
        for flag, given in (
            ("--tcp-window", tcp_window),
            ("--tcp-streams", tcp_streams),
            ("--congestion-control", None if congestion_control == "cubic" else congestion_control),
        )
        if given is not None
    ]
    if out is not None and not out.tcp and tcp_opts and max(rank_counts) > topo.gpus_per_node:
        # as plan says it (fuzz round 17, E3): a TCP setting on RDMA was dropped without a word
        console.print(
            f"note: {', '.join(tcp_opts)} {'is' if len(tcp_opts) == 1 else 'are'} not priced: "
            f"{out.name} is RDMA; TCP settings apply to TCP links (e.g. --fabric eth-25g-tcp)."
        )


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
    items = [t.strip() for t in text.split(",")]
    if not all(items):  # '' or 'a,,b' is a typo: not "every preset"
        raise ConfigError(f"{text!r} has an empty value; give a comma-separated list", field=field)
    return items


def _compare_fields() -> list[str]:
    """compare's options: the training request's, then the serving ones `--infer` uses (the
    same spellings as `bandwall infer`)."""
    from bandwall.planning.request import INFER_FIELDS, PlanRequest

    return [*PlanRequest.model_fields, *INFER_FIELDS]


@with_request_options(skip=("preset",), configs=True, names=_compare_fields())
def compare(
    fields: dict[str, Any],
    presets_: Annotated[
        str | None, typer.Option("--presets", help="Comma-separated presets (default: all).")
    ] = None,
    infer: Annotated[
        bool, typer.Option("--infer", help="Compare serving cost and latency per token.")
    ] = False,
    infer_models: Annotated[
        str | None, typer.Option(help="With --infer: models to compare, comma-separated.")
    ] = None,
    chart: Annotated[str | None, typer.Option(help="With --infer: save a PNG chart.")] = None,
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
) -> None:
    """Run one job on several infrastructures side by side (training, or serving with
    --infer)."""
    from bandwall.planning.api import compare as compare_plans
    from bandwall.planning.presets import check_preset_keys, presets
    from bandwall.report.tables import compare_tables

    if not infer:  # serving-only options on a training comparison would be ignored
        from bandwall.planning.request import INFER_FIELDS

        serving = {"infer_models": infer_models, "chart": chart} | {
            k: v for k, v in fields.items() if k in INFER_FIELDS
        }
        for name, value in serving.items():
            if value is not None:
                raise ConfigError("applies to serving only; add --infer", field=name)
    keys = (
        check_preset_keys(_split(presets_, "presets")) if presets_ is not None else list(presets())
    )
    if infer:
        from bandwall.cli.infer import run_compare_infer

        models = _split(infer_models, "infer_models") if infer_models is not None else None
        if models is not None and "model" in fields:
            raise ConfigError(
                "--infer-models names the models to compare; drop --model (or give it as the "
                "one model of --infer-models)",
                field="model",
            )
        run_compare_infer(fields, keys, models=models, as_json=as_json, as_csv=as_csv, chart=chart)
        return
    plans = compare_plans(request(fields, preset=keys[0]), keys)
    if emit([p.to_json() for p in plans], as_json, as_csv):
        return
    for table in compare_tables(plans):
        console.print(table)


@with_request_options(multi=True, configs=True)
def sweep(
    fields: dict[str, Any],
    output: Annotated[
        str | None,
        typer.Option("-o", "--output", help="Write every row to a CSV or .parquet file."),
    ] = None,
    max_points: MaxPoints = None,
    as_csv: Annotated[
        bool, typer.Option("--csv", help="Print every row as CSV instead of the top table.")
    ] = False,
    top: Annotated[
        int, typer.Option(help="Rows in the table: the fastest to train that fit.", min=1)
    ] = 10,
) -> None:
    """Evaluate a grid in vectorised passes: every option takes a list (a,b,c), numeric ones
    a range (64:4096:x2, 1Gbps:400Gbps:x2). Layout axes left unset are searched per row."""
    from bandwall.planning.api import sweep as run_sweep
    from bandwall.planning.budget import check_work, sweep_work
    from bandwall.report.tables import sweep_table, write_table
    from bandwall.safeio import check_output

    if output is not None:
        check_output(output, field="output", formats=(".csv", ".parquet"))
        if output.lower().endswith(".parquet"):
            import importlib.util

            if importlib.util.find_spec("pyarrow") is None:  # before the sweep, not after it
                raise ConfigError(
                    "Parquet needs pyarrow; pip install 'bandwall[parquet]' or write .csv",
                    field="output",
                )

    axes: dict[str, list[Any]] = {}
    base: dict[str, Any] = {}
    notes: list[str] = []
    for name, text in fields.items():
        values = expand_values(name, text, notes) if isinstance(text, str) else [text]
        if len(values) == 1:
            base[name] = values[0]
        else:
            axes[name] = values
    req = _sweep_base(base, axes)
    largest = max(axes, key=lambda k: len(axes[k])) if axes else "gpus"
    check_work(sweep_work(req, axes), parse_max_points(max_points), largest)
    import numpy as np

    table = run_sweep(req, axes)
    print_notes(notes)  # after the engine accepted the request: a refusal prints one line
    usable = np.asarray(table["valid"], bool) & np.asarray(table["fits"], bool)
    if not usable.all():
        _explain_dropped(base, axes, table, usable, every_row=bool(as_csv or output))
    if as_csv or output:
        write_table(table, output)
    if output:
        n = len(next(iter(table.values())))
        err_console.print(f"wrote {n:,} rows to {output}")
    elif not as_csv:
        console.print(sweep_table(table, list(axes), top))


def _sweep_base(base: dict[str, Any], axes: dict[str, list[Any]]) -> Any:
    """The request a sweep varies: the fixed options with the first combination of axis values
    the cross-field rules accept (`--wan a,b --sites 2` needs a WAN from its axis; `--layers
    2,4` is what `--model custom` lacks on its own). No combination accepted: the first one's
    error."""
    import itertools

    first: BandwallError | None = None
    names = list(axes)
    for combo in itertools.islice(itertools.product(*(axes[k] for k in names)), 256):
        try:
            return request({**base, **dict(zip(names, combo, strict=True))})
        except BandwallError as exc:
            first = first or exc
    if first is not None:
        raise first
    return request(base)


def _explain_dropped(
    base: dict[str, Any],
    axes: dict[str, list[Any]],
    table: dict[str, Any],
    usable: Any,
    *,
    every_row: bool,
) -> None:
    """Say why rows were dropped, one group per layout rule (0: over the GPU's memory), each
    with an example `plan` gives; no row at all is an error (exit 2) unless every row was
    asked for (--csv, -o). Only the first dropped row was explained: when `plan` priced that
    one, 32 other dropped rows went unmentioned (fuzz round 23, C1)."""
    import numpy as np

    from bandwall.planning.request import field_flag
    from bandwall.report.tables import axis_value

    dropped = np.flatnonzero(~usable)
    rules = np.asarray(table.get("rule", np.zeros(usable.shape)), dtype=np.int64)
    groups: dict[int, list[int]] = {}
    for i in dropped:
        groups.setdefault(int(rules[i]), []).append(int(i))
    parts: list[tuple[int, str]] = []
    first: BandwallError | None = None
    for rule, rows in groups.items():
        reason = None
        for row in rows[:3]:
            reason = _row_refusal(base, {a: table[a][row] for a in axes})
            if reason is not None:
                break
        first = first or reason
        point = ", ".join(f"--{field_flag(a)} {axis_value(a, table[a][rows[0]])}" for a in axes)
        why = (
            error_line(reason, [])  # worded as the root prints an error (--bandwidth)
            if reason is not None
            else "over the GPU's memory ("
            + (f"e.g. {point}; " if point else "")
            + "plan prices it as given, with a note)"
            if rule == 0
            else "an invalid layout" + (f" (e.g. {point})" if point else "")
        )
        parts.append((len(rows), f"e.g. {why}" if reason is not None else why))
    said = (
        f", {parts[0][1]}"
        if len(parts) == 1
        else ": " + "; ".join(f"{n:,} {why}" for n, why in parts)
    )
    if not usable.any() and not every_row:
        if first is not None:
            raise first
        raise ConfigError(
            f"no row of {usable.size:,} fits{said}",
            field=max(axes, key=lambda k: len(axes[k])) if axes else "gpus",
        )
    print_notes([f"{dropped.size:,} of {usable.size:,} rows are refused{said}"])


def _row_refusal(base: dict[str, Any], point: dict[str, Any]) -> BandwallError | None:
    """Why `plan` refuses one sweep row (its grid point over the fixed options), or None."""
    from bandwall.planning.api import plan as make_plan

    def plain(v: Any) -> Any:  # a whole number back as an int, a name as it is
        if isinstance(v, str | bool) or float(v) != float(v):
            return v
        return int(v) if float(v).is_integer() else float(v)

    values = {k: plain(v.item() if hasattr(v, "item") else v) for k, v in point.items()}
    try:
        make_plan(request({**base, **values}))
    except BandwallError as exc:
        return exc
    return None


@with_request_options(skip=("gpus",), configs=True)
def scale(
    fields: dict[str, Any],
    gpus: Annotated[
        str, typer.Option(help="GPU counts, e.g. 1k:128k:x2 (k = 1024) or 64,128.")
    ] = "1k:16k:x2",
    max_points: MaxPoints = None,
    as_json: JsonOption = False,
    as_csv: CsvOption = False,
) -> None:
    """Step time, efficiency, goodput and cost per token along GPU count; layout options left
    unset are searched at each count."""
    from bandwall.planning.api import scale as scale_plans
    from bandwall.report.tables import scale_tables

    notes: list[str] = []
    counts = [int(v) for v in expand_values("gpus", gpus, notes)]
    req = request(fields, gpus=counts[0])
    check_scale_work(req, counts, max_points)
    refused: list[tuple[int, BandwallError]] = []
    plans = scale_plans(req, counts, refused)
    notes += [f"{n:,} GPUs left out: {error_line(exc, [])}" for n, exc in refused]
    print_notes(notes)  # after the engine accepted the request: a refusal prints one line
    if emit([p.to_json() for p in plans], as_json, as_csv):
        return
    for table in scale_tables(plans):
        console.print(table)


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
        str | None,
        typer.Option(help="Fabric to predict with, e.g. measured:lab1g (needed with RESULTS)."),
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
    run, rows = load_run(results, db)  # what is wrong with RESULTS first: it is given first
    if fabric is None:
        raise ConfigError(
            "give --fabric, e.g. measured:NAME from `bandwall calibrate` or a catalog key",
            field="fabric",
        )
    rate = parse_rate_Gbps(bandwidth, "bandwidth") if bandwidth else nominal_rate_Gbps(run)
    spec = load_catalog().fabric(fabric)
    _check_run_fits_fabric(run, spec)
    checked, summary = validate_run(run, rows, spec, rate, parse_size(min_size, "min_size"))
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


def _check_run_fits_fabric(run: Any, spec: Any) -> None:
    """A scale-up fabric prices a run only inside one node: a run on several hosts, or of
    more ranks than any GPU's domain on that fabric, is refused as `collective` refuses it
    (fuzz round 23, C7)."""
    from bandwall.catalog import Tier, load_catalog

    if spec.tier is not Tier.SCALE_UP:
        return
    hosts = len(set(run.host.get("hosts") or []))
    domain = max(
        (g.scale_up_domain for g in load_catalog().gpus.values() if g.scale_up_fabric == spec.key),
        default=8,
    )
    if hosts > 1 or run.world_size > domain:
        where = f"{hosts} hosts" if hosts > 1 else f"{run.world_size} ranks (a node holds {domain})"
        raise ConfigError(
            f"run {run.id} spans {where}; {spec.key!r} is a scale-up fabric, inside one node: "
            "give the scale-out fabric it ran on, e.g. ib-ndr",
            field="fabric",
        )


#: The slowest link a profile may claim (as --bandwidth's floor).
MIN_RATE_GBPS = 0.001


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
    from bandwall.measure.calibrate.fit import check_one_rank_per_host
    from bandwall.units import parse_rate_Gbps, parse_size

    if from_log:
        from bandwall.cli.from_config import calibrate_from_log

        calibrate_from_log(from_log, fields, from_result, name or "my-cluster", as_json)
        return
    if name is not None and not name.strip():
        # an empty name is a typo: the default replaced it and overwrote my-fabric.toml
        raise ConfigError(
            "an empty name; give one, or leave --name out for my-fabric", field="name"
        )
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
    if run.kind != "collectives":  # 'found 0 rows' said nothing of what the run is
        raise ConfigError(
            f"run {run.id} is a bench {run.kind} run; calibrate fits a collectives run "
            "(bench collectives or import nccl-tests)",
            field="results",
        )
    if not rows and run.status != "complete":
        raise ConfigError(
            f"run {run.id} {run.status} before any measurement"
            + (f" ({run.error[:80]})" if run.error else "")
            + "; calibrate needs its rows",
            field="results",
        )
    check_one_rank_per_host(run)
    nominal = parse_rate_Gbps(rate, "rate") if rate else nominal_rate_Gbps(run)
    if nominal is not None and nominal < MIN_RATE_GBPS:
        raise ConfigError(f"must be at least {MIN_RATE_GBPS:g} Gb/s, got {rate}", field="rate")
    fit = fit_run(
        rows,
        run.world_size,
        parse_size(min_size, "min_size"),
        backend=run.backend,
        max_bandwidth_Bps=nominal * 1e9 / 8 if nominal else None,
    )
    # fit_run refuses rows faster than the rate and holds a fit above it at the rate
    fit["efficiency"] = min(fit["bandwidth_Bps"] * 8 / 1e9 / nominal, 1.0) if nominal else None
    path = save_profile(name, fit, run, nominal)
    fit["profile"] = str(path)
    fit["fabric"] = f"measured:{name}"
    fit["nominal_Gbps"] = nominal
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
