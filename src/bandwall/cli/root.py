"""The `bandwall` root command: a lazy group, so `bandwall --help` imports no command.

Each command lives in its own module and is imported only when it runs (or when completion asks
for it). The root help reads the one-line summaries in `COMMANDS`; a test
(tests/cli/test_root.py) checks each equals the command's own docstring summary, so they
cannot drift. Errors a user can cause print one line on stderr naming the option and exit 2.
"""

from __future__ import annotations

import importlib
import re
import sys
from typing import Annotated, Any

import typer
from typer import _click
from typer._click import _textwrap
from typer.core import TyperGroup
from typer.exceptions import TyperException

from bandwall import __version__
from bandwall.cli import started
from bandwall.errors import BandwallError


class _WholeWordWrapper(_textwrap.TextWrapper):
    """Help text folds between words only, not after a hyphen: the choices it lists are keys a
    user types (`ai-factory-spectrum-x` printed as `ai-factory-` / `spectrum-x`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("break_on_hyphens", False)
        super().__init__(*args, **kwargs)


# click's wrap_text imports its TextWrapper from this module at each call
_textwrap.TextWrapper = _WholeWordWrapper  # type: ignore[misc]

#: name → (module, attribute, summary). The attribute is a command function or a Typer group.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "catalog": (
        "bandwall.cli.app",
        "catalog",
        "List the hardware catalog with the source and date of every figure.",
    ),
    "collective": (
        "bandwall.cli.app",
        "collective",
        "Price one collective with the analytical model, as an nccl-tests-like table.",
    ),
    "plan": (
        "bandwall.cli.app",
        "plan",
        "Plan one training job: layout, step time, efficiency, MFU, time to train and cost.",
    ),
    "compare": (
        "bandwall.cli.app",
        "compare",
        "Run one job on several infrastructures side by side (training, or serving with --infer).",
    ),
    "sweep": (
        "bandwall.cli.app",
        "sweep",
        "Evaluate a grid in vectorised passes: every option takes a list (a,b,c), numeric ones "
        "a range (64:4096:x2, 1Gbps:400Gbps:x2).",
    ),
    "scale": (
        "bandwall.cli.app",
        "scale",
        "Step time, efficiency, goodput and cost per token along GPU count; layout options left "
        "unset are searched at each count.",
    ),
    "validate": (
        "bandwall.cli.app",
        "validate",
        "Predicted against measured: a stored bench run (RESULTS) or published runs.",
    ),
    "calibrate": (
        "bandwall.cli.app",
        "calibrate",
        "Fit a fabric profile (latency, bandwidth per size range and op, jitter) to a stored "
        "bench run, the compute efficiency to profiler traces (--from-trace), or a compute "
        "profile to a training log (--from-log).",
    ),
    "models": (
        "bandwall.cli.app",
        "models",
        "List the built-in workloads with derived parameter counts and FLOPs.",
    ),
    "presets": (
        "bandwall.cli.app",
        "presets_cmd",
        "List the infrastructure presets `plan --preset` accepts.",
    ),
    "infer": (
        "bandwall.cli.infer",
        "infer",
        "Serve a model: time to first token, inter-token latency, tokens/s, cost and energy per "
        "million tokens.",
    ),
    "plot": ("bandwall.cli.show", "plot", "Draw one chart to PNG or SVG."),
    "report": (
        "bandwall.cli.show",
        "report",
        "Write one self-contained HTML file: a summary that recommends one preset, then plans, "
        "bench runs, plots and assumptions.",
    ),
    "serve": (
        "bandwall.cli.show",
        "serve",
        "The local dashboard: interactive planner, stored runs, JSON API (/openapi.json).",
    ),
    "doctor": (
        "bandwall.cli.doctor",
        "doctor",
        "Diagnose a cluster from its own evidence: NCCL debug logs (with the PyTorch watchdog "
        "and error lines around them), nccl-tests output and torch.profiler traces, given "
        "together as one job.",
    ),
    "probe": (
        "bandwall.cli.measure",
        "probe",
        "This node's GPUs, NICs, RDMA ports, NUMA and the transport torch.distributed uses.",
    ),
    "monitor": (
        "bandwall.cli.measure",
        "monitor",
        "Live per-interface throughput, packets, drops, errors, TCP retransmits, RDMA counters.",
    ),
    "bench": (
        "bandwall.cli.measure",
        "bench_app",
        "Measure collectives and links over torch.distributed.",
    ),
    "launch": (
        "bandwall.cli.measure",
        "launch_app",
        "Print Slurm or Kubernetes launchers that call torchrun.",
    ),
    "results": ("bandwall.cli.measure", "results_app", "Stored bench runs."),
    "import": ("bandwall.cli.measure", "import_app", "Read other tools' results into the store."),
    "lab": (
        "bandwall.cli.measure",
        "lab_app",
        "An emulated cluster of network namespaces with shaped links (needs root).",
    ),
}


def load_command(name: str) -> _click.Command:
    """The click command of one root command, built from its module on first use."""
    module, attr, _ = COMMANDS[name]
    target = getattr(importlib.import_module(module), attr)
    if isinstance(target, typer.Typer):
        # as a sub-group of this root: plain help, completion options on the root only
        target.rich_markup_mode = None
        target.pretty_exceptions_enable = False
        target._add_completion = False
        cmd = typer.main.get_command(target)
    else:
        one = typer.Typer(
            rich_markup_mode=None, pretty_exceptions_enable=False, add_completion=False
        )
        one.command(name)(target)
        cmd = typer.main.get_command(one)
    cmd.name = name
    started()
    return cmd


class LazyGroup(TyperGroup):
    """A root group whose commands are imported when invoked, not when listed."""

    def list_commands(self, ctx: _click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        if cmd_name not in self.commands:
            self.commands[cmd_name] = load_command(cmd_name)
        return self.commands[cmd_name]

    def format_commands(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        # each summary whole, folded under itself: cut at the width they ended mid-sentence
        # ('List the hardware catalog with the source and date of every...')
        rows = [(name, summary) for name, (_, _, summary) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


app = typer.Typer(
    cls=LazyGroup,
    name="bandwall",
    help="Find and price the bandwidth wall of distributed deep-learning training.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        print(f"bandwall {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Find and price the bandwidth wall of distributed deep-learning training."""


def error_line(exc: BandwallError, args: list[str]) -> str:
    """`--flag: reason` when the error is about an option the user can type, else the
    message as it stands."""
    if exc.field is None:
        return str(exc)
    from bandwall.measure.requests import MODELS
    from bandwall.planning.request import field_flag, field_info

    flag = field_flag(exc.field)
    for model in MODELS:  # measurement options whose flag differs from the field name
        info = model.model_fields.get(exc.field)
        extra = info.json_schema_extra if info is not None else None
        if isinstance(extra, dict) and isinstance(extra.get("flag"), str):
            flag = str(extra["flag"])
    short = {"output": "-o"}.get(exc.field)  # the one short option: -o/--output
    typed = any(a == f"--{flag}" or a.startswith(f"--{flag}=") or a == short for a in args)
    # a plan or serving request's field is an option (infer's request_rate_per_s was named
    # 'request-rate-per-s', a flag that does not exist, fuzz round 20, C4)
    if field_info(exc.field) is not None or exc.field in _OPTION_FIELDS or typed:
        return f"--{flag}: {exc.reason}"
    return str(exc)


#: Errors about options a command takes beside the request's fields, named as flags even when
#: the user did not type them ('error: from: give the logged job's config with --from' read as
#: a field of nothing, fuzz round 19, D5).
_OPTION_FIELDS = frozenset({"from", "from_log", "from_trace"})


def _err(line: str) -> None:
    from bandwall.report.text import err_console

    err_console.print(line, markup=False, soft_wrap=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turning every user error into one line and exit code 2."""
    args = sys.argv[1:] if argv is None else argv
    try:
        code: Any = app(args=args or ["--help"], standalone_mode=False, prog_name="bandwall")
    except BandwallError as exc:
        _err(f"error: {error_line(exc, args)}")
        return 2
    except TyperException as exc:
        message = exc.format_message()
        if re.fullmatch(r"No such option: -[0-9][0-9.eE+-]*", message):
            # click reads a negative number given as an argument as an option
            message += " (a negative number where an argument was expected: none takes one)"
        _err(f"error: {message}")
        return 2
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except typer.Abort:
        _err("error: aborted")
        return 130
    return code if isinstance(code, int) else 0
