"""The `bandwall` command line: a thin shell over the library.

Errors a user can cause (a bandwall error or a usage error) print one line on stderr and exit 2.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.table import Table
from typer.exceptions import TyperException

from bandwall import _render
from bandwall._render import console, fmt_num, print_json
from bandwall.catalog import Catalog, Tier, load_catalog
from bandwall.collectives import Algo, build_topology, evaluate, parse_algo, parse_op
from bandwall.errors import BandwallError, ConfigError, unknown_choice
from bandwall.units import format_size, parse_size_range

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


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turning every user error into one line and exit code 2."""
    args = sys.argv[1:] if argv is None else argv
    try:
        app(args=args or ["--help"], standalone_mode=False)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
