"""`bandwall doctor LOG_OR_DIR...` and `calibrate --from-trace`: the CLI shell over
`bandwall.measure.doctor` (read, join with the model, print)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from bandwall.cli.options import request, with_request_options
from bandwall.errors import ConfigError
from bandwall.report.text import console, err_console, print_json

#: Request fields that describe the hardware for the nccl-tests comparison, not the job.
HARDWARE_FIELDS = ("fabric", "gpu", "gpus_per_node", "scale_up")


def _hardware(fields: dict[str, Any]) -> dict[str, Any]:
    """--fabric, --gpu and --gpus-per-node, validated by the request schema."""
    given = {k: fields[k] for k in HARDWARE_FIELDS if k in fields}
    if not given:
        return {}
    req = request(given)
    return {k: getattr(req, k) for k in given}


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1e3:,.1f} ms"


def _print_text(diag: Any) -> None:
    from rich.table import Table

    kinds = [k for i in diag.inputs for k in i.kinds]
    console.print(
        f"bandwall doctor: {len(diag.inputs)} file(s) — "
        + ", ".join(
            f"{kinds.count(k)} {k}"
            for k in ("nccl-log", "nccl-tests", "trace", "training-log")
            if k in kinds
        )
        or "nothing understood"
    )
    for i, f in enumerate(diag.findings, 1):
        cost = (
            f" — {_ms(f.cost_s)}/step"
            + (f" ({f.cost_share:.1%} of the step)" if f.cost_share is not None else "")
            if f.cost_s is not None
            else ""
        )
        console.print(f"\n{i}. [{f.severity}] {f.title}{cost}", markup=False, style="bold")
        console.print(f"   why: {f.reason}", markup=False, soft_wrap=True)
        if f.check:
            console.print("   check: " + "; ".join(f.check), markup=False, soft_wrap=True)
        if f.fix:
            console.print("   try: " + "; ".join(f.fix), markup=False, soft_wrap=True)
        for e in f.evidence[:3]:
            console.print(f"   > {e}", markup=False, style="dim", soft_wrap=True)
        if f.cost_s is None and f.cost_basis:
            console.print(f"   cost: {f.cost_basis}", markup=False, style="dim")
    if not diag.findings:
        console.print("\nno finding: the evidence shows nothing wrong")
    for log in diag.logs:
        console.print(
            f"\ntransport ({log.source}): {log.describe_transport()}", markup=False, soft_wrap=True
        )
    tests = [t for t in diag.nccl_tests if t.get("ratio") is not None]
    if tests:
        t = Table(title="nccl-tests busbw against the model (largest sizes)")
        for col in ("op", "ranks", "measured GB/s", "model GB/s", "ratio"):
            t.add_column(col, justify="right")
        for x in tests:
            t.add_row(
                x["op"],
                str(x["ranks"]),
                f"{x['measured_busbw_GBps']:,.1f}",
                f"{x['model_busbw_GBps']:,.1f}",
                f"{x['ratio']:.0%}",
            )
        console.print(t)
        for x in tests:
            console.print(f"model layout: {x['layout']}", markup=False, style="dim")
    job = diag.job
    if job is not None and job.ranks:
        t = Table(title="profiler traces: median per step")
        for col in ("rank", "host", "step", "compute", "exposed", "idle"):
            t.add_column(col, justify="right")
        for r in sorted(job.ranks, key=lambda r: (r.rank is None, r.rank or 0)):
            t.add_row(
                str(r.rank if r.rank is not None else "?"),
                (r.host or "—")[:16],
                _ms(r.median("step_s")),
                _ms(r.median("compute_s")),
                f"{_ms(r.median('exposed_s'))} {r.exposed_share:.0%}",
                _ms(r.median("idle_s")),
            )
        console.print(t)
    if diag.plan is not None:
        p = diag.plan
        console.print(
            f"model: step {_ms(p['predicted_step_s'])} (measured {_ms(p['measured_step_s'])}, "
            f"{p['step_error']:+.0%}), exposed communication {_ms(p['predicted_exposed_comm_s'])} "
            f"(measured {_ms(p['measured_exposed_comm_s'])})",
            markup=False,
        )
    for t in diag.training:
        console.print("\n" + "\n".join(t["text"]), markup=False, highlight=False)
    for i in diag.inputs:
        for n in i.notes:
            err_console.print(f"{i.path}: {n}", markup=False, soft_wrap=True)
    for n in diag.notes:
        err_console.print(f"note: {n}", markup=False, soft_wrap=True)


@with_request_options(configs=True)
def doctor(
    fields: dict[str, Any],
    paths: Annotated[
        list[str],
        typer.Argument(
            help="NCCL debug logs, nccl-tests output, torch.profiler traces (.json, .json.gz), "
            "training logs (Megatron-LM, NeMo, torchtitan, DeepSpeed, HF Trainer, Lightning), "
            "or folders of them."
        ),
    ],
    op: Annotated[
        str | None, typer.Option(help="Collective of nccl-tests blocks that do not say.")
    ] = None,
    ranks: Annotated[
        int | None, typer.Option(help="Ranks of nccl-tests blocks that do not say.")
    ] = None,
    html_out: Annotated[
        str | None, typer.Option("--html", help="Also write the report as one HTML file.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Diagnose a cluster from its own evidence: name the transport and the faults in NCCL's
    debug log, compare nccl-tests busbw with what the fabric should give, and break profiler
    traces into compute, exposed communication, idle and the straggler; findings ranked by what
    they cost per step.

    --fabric, --gpu and --gpus-per-node set the hardware the nccl-tests comparison assumes
    (default: read from the log). Plan options (--model, --gpus, --tp, ...) describe the traced
    job: give --model to compare the trace with the planner's step and exposed communication.
    """
    from bandwall.measure.doctor import diagnose

    hw = _hardware(fields)
    req = request(fields) if "model" in fields else None
    diag = diagnose(
        paths,
        fabric=hw.get("fabric"),
        gpu=hw.get("gpu"),
        gpus_per_node=hw.get("gpus_per_node"),
        op=op,
        ranks=ranks,
        request=req,
    )
    if html_out:
        from pathlib import Path

        from bandwall.measure.doctor import html_section
        from bandwall.report.html import render

        Path(html_out).write_text(
            render([html_section(diag)], "bandwall doctor", []), encoding="utf-8"
        )
        err_console.print(f"wrote {html_out}")
    if as_json:
        print_json(diag.to_json())
        return
    _print_text(diag)


def calibrate_from_trace(traces: list[str], fields: dict[str, Any], as_json: bool) -> None:
    """`bandwall calibrate --from-trace TRACE...`: the GEMM efficiency at which the planner's
    compute time per step equals the traces' (median over ranks), for the job the plan options
    describe; use it as --gemm-efficiency."""
    from bandwall.measure.doctor import analyze_job, fit_gemm_efficiency
    from bandwall.measure.doctor.diagnosis import expand

    if "model" not in fields:
        raise ConfigError(
            "give the traced job's plan options (at least --model and --gpus, and the layout: "
            "--tp, --pp, --micro-batch, --global-batch) so its compute can be compared",
            field="model",
        )
    job = analyze_job([str(p) for p in expand(traces)])
    if job.compute_s <= 0:
        raise ConfigError(
            "the traces hold no ProfilerStep with compute in it; record with torch.profiler's "
            "schedule and prof.step()",
            field="traces",
        )
    fit = fit_gemm_efficiency(job.compute_s, request(fields))
    fit["traces"] = len(job.ranks)
    fit["measured_step_s"] = job.step_s
    if as_json:
        print_json(fit)
        return
    console.print(
        f"gemm_efficiency {fit['gemm_efficiency']:.3f} "
        f"(default {fit['default_gemm_efficiency']:.3f}) "
        f"makes the model's compute {_ms(fit['predicted_compute_s'])} per step match the traces' "
        f"{_ms(fit['measured_compute_s'])} (median over {fit['traces']} rank(s)); use "
        f"--gemm-efficiency {fit['gemm_efficiency']:.3f}",
        markup=False,
    )
