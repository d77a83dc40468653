"""CLI for showing results: `plot`, `report`, `serve`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from bandwall.cli.options import expand_values, request, with_request_options
from bandwall.errors import ConfigError, unknown_choice
from bandwall.report.text import console, err_console

PLOT_KINDS = ("busbw", "scaling", "breakdown", "cost", "links")
HTML_FORMATS = (".html", ".htm")


def _presets_list(text: str | None) -> list[str]:
    """--presets as keys; not given means all, but text with no key in it ('', ' ', ',') is
    an error, as `compare` says: a typo, not every preset."""
    from bandwall.planning.presets import presets

    if text is None:
        return list(presets())
    keys = [t.strip() for t in text.split(",") if t.strip()]
    if not keys:
        raise unknown_choice("presets", text, presets())
    return keys


def _stored(ref: str, db: str | None) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]]]:
    from bandwall.measure.bench.store import Store, parse_run_ref

    run_id = parse_run_ref(ref)
    with Store.reader(db) as store:
        run = store.latest() if run_id is None else store.run(run_id)
        return run, store.results(run.id), store.links(run.id)


def _scaling_plans(fields: dict[str, Any], keys: list[str], gpus: str) -> dict[str, Any]:
    from bandwall.cli.options import check_scale_work, print_notes
    from bandwall.cli.root import error_line
    from bandwall.errors import ConfigError
    from bandwall.planning.api import scale

    notes: list[str] = []
    try:
        counts = [int(v) for v in expand_values("gpus", gpus, notes)]
        reqs = {key: request(fields, preset=key, gpus=counts[0]) for key in keys}
        # the budget is per preset: each is one `scale` (the default 8 counts × 6 presets
        # ran over it together, so `plot scaling` failed with its own defaults)
        for req in reqs.values():
            check_scale_work(req, counts, None, override=False)
        refused: list[tuple[int, Any]] = []
        plans = {key: scale(req, counts, refused) for key, req in reqs.items()}
    except ConfigError as exc:
        if exc.field != "gpus":
            raise
        # the counts come from --scaling-gpus: the error is about it
        raise type(exc)(exc.reason, field="scaling_gpus") from exc
    notes += [f"{n:,} GPUs left out: {error_line(exc, [])}" for n, exc in refused]
    print_notes(notes)  # after the engine accepted the requests: a refusal prints one line
    return plans


@with_request_options(skip=("preset",))
def plot(
    fields: dict[str, Any],
    kind: Annotated[str, typer.Argument(help="busbw, scaling, breakdown, cost or links.")],
    output: Annotated[str, typer.Option("-o", "--output", help="file.png or file.svg")],
    presets_: Annotated[
        str | None, typer.Option("--presets", help="Presets (default: all).")
    ] = None,
    results: Annotated[str | None, typer.Option(help="Stored run id for busbw/links.")] = None,
    op: Annotated[
        str | None, typer.Option(help="busbw without --results: the op to model.")
    ] = None,
    scaling_gpus: Annotated[
        str | None, typer.Option(help="scaling: GPU counts (default 64:8192:x2).")
    ] = None,
    db: Annotated[str | None, typer.Option(help="Results database.")] = None,
) -> None:
    """Draw one chart to PNG or SVG."""
    from bandwall.report import figures, plots
    from bandwall.safeio import check_output

    if kind not in PLOT_KINDS:
        raise unknown_choice("kind", kind, PLOT_KINDS)
    check_output(output, field="output", formats=plots.IMAGE_FORMATS)
    _plot_options_apply(kind, results, op, scaling_gpus)
    req = request(fields, preset=_presets_list(presets_)[0])
    keys = _presets_list(presets_)
    if kind in ("busbw", "links") and results:
        run, rows, links = _stored(results, db)
        if kind == "links":
            if not links:
                raise ConfigError(f"run {run.id} has no link matrix (bench links)", field="results")
            fig = figures.links_figure(run, links)
        else:
            if not rows:
                raise ConfigError(f"run {run.id} has no collective rows", field="results")
            from bandwall.measure.calibrate import nominal_rate_Gbps

            bw = req.bandwidth_Gbps or nominal_rate_Gbps(run)
            fig = figures.busbw_run_figure(run, rows, req.fabric, bw)
    elif kind == "links":
        raise ConfigError(
            "the link heatmap needs --results RUN_ID of a bench links run", field="results"
        )
    elif kind == "busbw":
        from bandwall.model.collectives import parse_op
        from bandwall.model.topology import build_topology

        gpn = req.gpus_per_node or 8
        fabric = req.fabric or "ib-ndr"
        topo = build_topology(gpus_per_node=gpn, scale_out=fabric, gpu=req.gpu or "H100-SXM")
        fig = figures.busbw_model_figure(
            parse_op(op or "all_reduce"), req.gpus, topo, f"{fabric}, {gpn}/node"
        )
    elif kind == "scaling":
        curves = _scaling_plans(fields, keys, scaling_gpus or "64:8192:x2")
        first = next(iter(curves.values()))
        fig = figures.scaling_figure(
            curves, f"{first[0].workload.name}: efficiency and goodput vs GPUs"
        )
    else:
        from bandwall.planning.api import compare

        plans = compare(req, keys)
        fig = figures.breakdown_figure(plans) if kind == "breakdown" else figures.cost_figure(plans)
    plots.save(fig, output)
    console.print(f"wrote {output}")


def _plot_options_apply(
    kind: str, results: str | None, op: str | None, scaling_gpus: str | None
) -> None:
    """Refuse an option the chart kind would ignore (a run id given to a cost chart was
    dropped without a word)."""
    if results is not None and kind not in ("busbw", "links"):
        raise ConfigError(f"applies to plot busbw and links, not {kind}", field="results")
    if op is not None and (kind != "busbw" or results is not None):
        raise ConfigError(
            "applies to plot busbw without --results (a stored run has its own ops)", field="op"
        )
    if scaling_gpus is not None and kind != "scaling":
        raise ConfigError(f"applies to plot scaling, not {kind}", field="scaling_gpus")


@with_request_options(skip=("preset",))
def report(
    fields: dict[str, Any],
    output: Annotated[str, typer.Option("-o", "--output", help="report.html")] = "report.html",
    presets_: Annotated[
        str | None, typer.Option("--presets", help="Presets (default: all).")
    ] = None,
    results: Annotated[list[str] | None, typer.Option(help="Stored run ids to include.")] = None,
    scaling_gpus: Annotated[
        str | None, typer.Option(help="Add scaling curves over these GPU counts, e.g. 64:4096:x2.")
    ] = None,
    no_plan: Annotated[bool, typer.Option("--no-plan", help="Only the stored runs.")] = False,
    doctor: Annotated[
        list[str] | None,
        typer.Option(help="NCCL logs, nccl-tests output or profiler traces to diagnose."),
    ] = None,
    prefer: Annotated[
        str,
        typer.Option(help="Summary's rule: recommend the cheapest or the fastest preset."),
    ] = "cheapest",
    db: Annotated[str | None, typer.Option(help="Results database.")] = None,
) -> None:
    """Write one self-contained HTML file: a summary that recommends one preset, then plans,
    bench runs, plots and assumptions."""
    from bandwall.measure.calibrate import nominal_rate_Gbps
    from bandwall.planning.api import compare
    from bandwall.report import html
    from bandwall.safeio import check_output, write_output

    if prefer not in html.RULES:
        raise unknown_choice("prefer", prefer, html.RULES)
    check_output(output, field="output", formats=HTML_FORMATS)
    req = request(fields, preset=_presets_list(presets_)[0])
    keys = _presets_list(presets_)
    sections = []
    notes: list[str] = []
    if not no_plan:
        plans = compare(req, keys)
        sections.append(html.summary_section(plans, prefer))
        sections.append(html.plans_section(plans))
        for p in plans:
            notes.extend(n for n in p.notes if n not in notes)
    if scaling_gpus:
        sections.append(html.scaling_section(_scaling_plans(fields, keys, scaling_gpus)))
    for ref in results or []:
        run, rows, links = _stored(ref, db)
        bw = req.bandwidth_Gbps or nominal_rate_Gbps(run)
        sections.append(html.results_section(run, rows, links, req.fabric, bw))
    if doctor:
        from bandwall.measure.doctor import diagnose, html_section

        sections.append(html_section(diagnose(doctor, field="doctor")))
    if not sections:
        raise ConfigError("nothing to report; drop --no-plan or add --results", field="report")
    page = html.render(sections, "bandwall report", notes)
    write_output(output, page.encode("utf-8"), field="output", formats=HTML_FORMATS)
    console.print(f"wrote {output}")


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only (127.0.0.0/8, ::1 or localhost)."""
    import ipaddress

    if host.strip().lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


#: Shortest token accepted: 16 characters of a URL-safe alphabet is ~96 bits.
MIN_TOKEN_CHARS = 16


def serve_token(host: str, allow_remote: bool, token: str | None) -> str | None:
    """The API token the server requires, or None on loopback without --token.

    A non-loopback address is refused unless --allow-remote says so; it then always needs a
    token (the one given, else a fresh random one), since the dashboard has no other login.
    """
    import secrets

    if not is_loopback(host) and not allow_remote:
        raise ConfigError(
            f"{host!r} is not a loopback address: the dashboard has no TLS and no accounts; "
            "pass --allow-remote to serve other machines (a token is then required)",
            field="host",
        )
    if token is not None:
        if len(token) < MIN_TOKEN_CHARS or not all(c.isalnum() or c in "-_." for c in token):
            raise ConfigError(
                f"give at least {MIN_TOKEN_CHARS} letters, digits, '-', '_' or '.'",
                field="token",
            )
        return token
    return None if is_loopback(host) else secrets.token_urlsafe(24)


def serve(
    host: Annotated[
        str,
        typer.Option(help="Interface to bind (loopback by default; others need --allow-remote)."),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.", min=1, max=65535)] = 8000,
    db: Annotated[str | None, typer.Option(help="Results database to show.")] = None,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="Allow a non-loopback --host; every API call then needs the token.",
        ),
    ] = False,
    token: Annotated[
        str | None,
        typer.Option(
            help="API token (Authorization: Bearer); generated and printed with --allow-remote."
        ),
    ] = None,
) -> None:
    """The local dashboard: interactive planner, stored runs, JSON API (/openapi.json)."""
    key = serve_token(host, allow_remote, token)
    try:
        import uvicorn
    except ImportError:
        raise ConfigError(
            "needs the web extra; pip install 'bandwall[web]'", field="serve"
        ) from None
    from bandwall.web import create_app

    sock = _listen(host, port)
    where = f"[{host}]" if ":" in host and not host.startswith("[") else host
    url = f"http://{where}:{port}/" + (f"?token={key}" if key else "")
    console.print(
        f"bandwall dashboard on {url} (API schema: /openapi.json)", markup=False, soft_wrap=True
    )
    if key:
        console.print(
            f"API calls need the header: Authorization: Bearer {key}", markup=False, soft_wrap=True
        )
    if not is_loopback(host):
        err_console.print(
            f"warning: serving on {host}: anyone who can reach this port and has the token can "
            "use the dashboard; traffic is plain HTTP (no TLS)",
            markup=False,
        )
    config = uvicorn.Config(create_app(db, token=key), log_level="warning")
    with sock:  # closed however the server ends
        uvicorn.Server(config).run(sockets=[sock])


def _listen(host: str, port: int) -> Any:
    """The listening socket, bound before the server starts: a port in use or a host that is
    not this machine's is one line naming the option (uvicorn would log an ERROR line and exit
    with status 3)."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (OSError, UnicodeError) as exc:
        raise ConfigError(f"cannot resolve {host[:60]!r}: {exc}", field="host") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host[:60]}:{port}: {exc.strerror}; give a free --port", field="port"
        ) from None
    return sock
