"""`bandwall doctor LOG_OR_DIR...` and `calibrate --from-trace`: the CLI shell over
`bandwall.measure.doctor` (read, diagnose, print, exit status).

Two entry points share one option table (`OPTIONS`) and one body (`run`):

- `main(argv)`, which `bandwall.cli.main` calls for `bandwall doctor ...`: argparse and the
  standard library only, so `--help` and a log run start in well under a second (no Typer,
  Pydantic, numpy or rich). Plan and hardware options (`--model`, `--gpus`, `--fabric`, ...)
  come from the request schema; when the command line has one (`needs_full_cli`),
  `bandwall.cli.main` hands the whole command to the full Typer app, which knows them.
- `doctor`, the Typer command `bandwall.cli.app` registers (built on first access, with the
  request options appended by `with_request_options`).

Exit status: 0 when no finding reaches `--fail-on` (default high), 1 when one does, 2 for bad
input (one line on stderr naming the option).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from dataclasses import dataclass
from typing import Any, NoReturn

from bandwall.errors import BandwallError, ConfigError

FAIL_ON = ("critical", "high", "medium", "low", "info", "never")

#: How errors name the positional inputs: as the help does (`PATHS`), not as an option.
PATHS = "PATHS"


@dataclass(frozen=True)
class Option:
    """One of doctor's own options (the request schema supplies the plan/hardware ones)."""

    name: str
    flag: str
    kind: type
    default: Any
    help: str
    choices: tuple[str, ...] | None = None


OPTIONS: tuple[Option, ...] = (
    Option(
        "as_json", "--json", bool, False, "Print the diagnosis as JSON (schema in docs/doctor.md)."
    ),
    Option("html_out", "--html", str, None, "Also write the report as one HTML file."),
    Option(
        "fail_on",
        "--fail-on",
        str,
        "high",
        "Exit 1 when a finding is at least this severe.",
        FAIL_ON,
    ),
    Option(
        "op",
        "--op",
        str,
        None,
        "Collective of nccl-tests blocks that do not say: all_reduce, all_gather, "
        "reduce_scatter, broadcast, reduce, all_to_all or send_recv.",
    ),
    Option("ranks", "--ranks", int, None, "Ranks of nccl-tests blocks that do not say."),
)

DESCRIPTION = (
    "Diagnose a cluster from its own evidence: NCCL debug logs (with the PyTorch watchdog and "
    "error lines around them), nccl-tests output and torch.profiler traces, given together as "
    "one job. Names the cause with the lines that show it, what it costs, how to confirm it "
    "and what to try."
)
EPILOG = (
    "Hardware for the nccl-tests comparison: --fabric, --gpu, --gpus-per-node (default: read "
    "from the logs; never assumed). The traced job, to compare with the planner: the plan "
    "options of `bandwall plan` (--model, --gpus, --tp, ...) or --from CONFIG (a training "
    "log is then compared with the model; docs/from-config.md). Exit status: 0 clean, 1 a "
    "finding at or above --fail-on, 2 bad input. See docs/doctor.md."
)


def _width() -> int:
    """The terminal's width, 80 when the output is not a terminal."""
    if sys.stdout.isatty():
        return max(40, shutil.get_terminal_size((80, 24)).columns)
    return 80


def run(
    paths: list[str],
    fields: dict[str, Any],
    *,
    as_json: bool = False,
    html_out: str | None = None,
    fail_on: str = "high",
    op: str | None = None,
    ranks: int | None = None,
) -> int:
    """Diagnose, print, and return the exit status (0 clean, 1 findings at/above fail_on)."""
    from bandwall.measure.doctor.diagnosis import diagnose
    from bandwall.measure.doctor.render import render_json, render_text
    from bandwall.measure.doctor.rules import Severity

    if fail_on not in FAIL_ON:
        raise ConfigError(
            f"unknown value {fail_on!r}; choose one of: {', '.join(FAIL_ON)}", field="fail_on"
        )
    if ranks is not None and not 1 <= ranks <= 1_000_000:
        raise ConfigError("give a rank count from 1 to 1,000,000", field="ranks")
    if op is not None:  # the model's vocabulary (numpy): loaded only when --op is given
        from bandwall.model.collectives import parse_op

        op = parse_op(op).value
    if html_out is not None:
        from bandwall.safeio import check_output

        check_output(html_out, field="html", formats=(".html", ".htm"))
    hw = _hardware(fields)
    req = None
    if set(fields) - set(HARDWARE_FIELDS):
        from bandwall.cli.options import request

        # checked as plan checks them (an invalid option exits 2), used to price a trace
        # when a model is named
        checked = request(fields)
        req = checked if "model" in fields else None
    diag = diagnose(
        paths,
        fabric=hw.get("fabric"),
        gpu=hw.get("gpu"),
        gpus_per_node=hw.get("gpus_per_node"),
        op=op,
        ranks=ranks,
        request=req,
    )
    if not diag.findings and not diag.job.understood:
        # what each file was, where doctor can tell (an archive to unpack, JSON of another kind)
        why = [
            f"{item.path} is {note.removeprefix('not understood: ')}"
            for item in diag.job.inputs
            for note in item.notes
            if note.startswith("not understood: ")
            and any(w in note for w in ("archive", "decompress", "JSON", "trace with no usable"))
        ]
        raise ConfigError(
            f"nothing in {', '.join(paths)} was understood: "
            + ("; ".join(why) + "; " if why else "")
            + "give NCCL debug logs (NCCL_DEBUG=INFO), PyTorch errors, nccl-tests output, "
            "training logs or torch.profiler traces",
            field="paths",
        )
    if html_out:
        from bandwall.measure.doctor.html import html_section
        from bandwall.report.html import render
        from bandwall.safeio import write_output

        write_output(
            html_out,
            render([html_section(diag)], "bandwall doctor", []),
            field="html",
            formats=(".html", ".htm"),
        )
        sys.stderr.write(f"wrote {html_out}\n")
    if as_json:
        sys.stdout.write(render_json(diag))
    else:
        out, err = render_text(diag, _width())
        sys.stdout.write(out)
        if err:
            sys.stderr.write(err)
    worst = diag.worst()
    if fail_on == "never" or worst is None:
        return 0
    return 1 if worst.rank >= Severity(fail_on).rank else 0


#: Request fields that describe the hardware for the nccl-tests comparison, not the job.
HARDWARE_FIELDS = ("fabric", "gpu", "gpus_per_node")


def _hardware(fields: dict[str, Any]) -> dict[str, Any]:
    """--fabric, --gpu and --gpus-per-node, validated by the request schema."""
    given = {k: fields[k] for k in HARDWARE_FIELDS if k in fields}
    if not given:
        return {}
    from bandwall.cli.options import request

    req = request(given)
    return {k: getattr(req, k) for k in given}


# --- fast path: `bandwall doctor ...` ----------------------------------------------------------


class _OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are the CLI's one line (`error: --ranks: invalid int value:
    'abc'`), not the usage block and `bandwall doctor: error: argument --ranks: ...`."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"error: {message.removeprefix('argument ')}\n")
        raise SystemExit(2)


class _WholeWordHelp(argparse.HelpFormatter):
    """Help folded between words only, not after a hyphen (`docs/from-` / `config.md`)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        return textwrap.fill(
            " ".join(text.split()),
            width,
            initial_indent=indent,
            subsequent_indent=indent,
            break_on_hyphens=False,
        )


def _parser() -> argparse.ArgumentParser:
    p = _OneLineParser(
        prog="bandwall doctor",
        usage="bandwall doctor [OPTIONS] PATHS...",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=lambda prog: _WholeWordHelp(prog, width=min(_width(), 100)),
    )
    p.add_argument(
        "paths",
        nargs="+",
        metavar=PATHS,
        help="NCCL debug logs, nccl-tests output, torch.profiler traces (.json, "
        ".json.gz), training logs (Megatron, NeMo, torchtitan, DeepSpeed, HF Trainer), or "
        "folders of them.",
    )
    for o in OPTIONS:
        if o.kind is bool:
            p.add_argument(o.flag, dest=o.name, action="store_true", help=o.help)
        else:
            shown = f"{o.help} (default: {o.default})" if o.default is not None else o.help
            p.add_argument(
                o.flag, dest=o.name, type=o.kind, default=o.default, help=shown, choices=o.choices
            )
    return p


def error_line(exc: BandwallError) -> str:
    """`--flag: reason` for an option, `PATHS: reason` for the positional inputs (as the help
    names them), the reason alone when the error names no field."""
    if exc.field is None:
        return exc.reason
    name = PATHS if exc.field == "paths" else f"--{exc.field.replace('_', '-')}"
    return f"{name}: {exc.reason}"


def needs_full_cli(argv: list[str]) -> bool:
    """Whether the command line has a plan or hardware option (the request schema's, which
    only the full Typer app knows)."""
    own = {o.flag for o in OPTIONS} | {"-h", "--help"}
    return any(a.startswith("--") and a.split("=", 1)[0] not in own for a in argv)


def main(argv: list[str]) -> int:
    """`bandwall doctor ARGS` with doctor's own options only (see `needs_full_cli`)."""
    try:
        ns = _parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2, message already printed)
        return int(exc.code or 0)
    try:
        return run(ns.paths, {}, **{o.name: getattr(ns, o.name) for o in OPTIONS})
    except BandwallError as exc:
        sys.stderr.write(f"error: {error_line(exc)}\n")
        return 2
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


# --- the Typer command (registered by bandwall.cli.app) ----------------------------------------


def _typer_command() -> Any:
    import inspect
    from typing import Annotated

    import typer

    from bandwall.cli.options import with_request_options

    def doctor(fields: dict[str, Any], paths: list[str], **own: Any) -> None:
        try:
            code = run(paths, fields, **own)
        except BandwallError as exc:
            if exc.field != "paths":
                raise
            raise ConfigError(error_line(exc)) from None  # the root prints it as it stands
        if code:
            raise typer.Exit(code)

    params = [
        inspect.Parameter("fields", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter(
            "paths",
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            annotation=Annotated[
                list[str],
                typer.Argument(
                    metavar=PATHS,
                    help="NCCL debug logs, nccl-tests output, torch.profiler traces "
                    "(.json, .json.gz), training logs (Megatron, NeMo, torchtitan, DeepSpeed, "
                    "HF Trainer), or folders of them.",
                ),
            ],
        ),
    ]
    for o in OPTIONS:
        kind = bool if o.kind is bool else (o.kind | None if o.default is None else o.kind)
        params.append(
            inspect.Parameter(
                o.name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=o.default,
                annotation=Annotated[kind, typer.Option(o.flag, help=o.help)],
            )
        )
    doctor.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    doctor.__doc__ = DESCRIPTION + "\n\n" + EPILOG
    return with_request_options(configs=True)(doctor)


def __getattr__(name: str) -> Any:
    if name == "doctor":
        cmd = _typer_command()
        globals()["doctor"] = cmd
        return cmd
    raise AttributeError(name)


def calibrate_from_trace(traces: list[str], fields: dict[str, Any], as_json: bool) -> None:
    """`bandwall calibrate --from-trace TRACE...`: the GEMM efficiency at which the planner's
    compute time per step equals the traces' (median over ranks), for the job the plan options
    describe; use it as --gemm-efficiency."""
    from bandwall.cli.options import request
    from bandwall.measure.doctor.compare import fit_gemm_efficiency
    from bandwall.measure.doctor.diagnosis import expand
    from bandwall.measure.doctor.trace import analyze_job
    from bandwall.report.text import console, print_json

    if "model" not in fields:
        raise ConfigError(
            "give the traced job's plan options (at least --model and --gpus, and the layout: "
            "--tp, --pp, --micro-batch, --global-batch) so its compute can be compared",
            field="model",
        )
    job = analyze_job([str(p) for p in expand(traces, field="from_trace")])
    if job.compute_s <= 0:
        raise ConfigError(
            "the traces hold no ProfilerStep with compute in it; record with torch.profiler's "
            "schedule and prof.step()",
            field="from_trace",
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
        f"makes the model's compute {fit['predicted_compute_s'] * 1e3:,.1f} ms per step match "
        f"the traces' {fit['measured_compute_s'] * 1e3:,.1f} ms (median over {fit['traces']} "
        f"rank(s)); use --gemm-efficiency {fit['gemm_efficiency']:.3f}",
        markup=False,
    )
