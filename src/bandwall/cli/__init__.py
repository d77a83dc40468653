"""The `bandwall` command line (Typer). Nothing in the package imports it.

`app` is the lazy root group (`bandwall.cli.root`): each command's module is imported when that
command runs. `main` sends `bandwall doctor ...` to doctor's own light entry point (argparse,
no Typer or Pydantic at start-up: on-call and CI runs start in well under a second) before the
root is imported.
"""

from __future__ import annotations

import errno
import gc
import io
import os
import sys
from typing import Any


class _ClosedStream(io.TextIOBase):
    """Stands for a stdout the shell closed (`>&-`): writing raises, so the command fails in
    one line instead of Rich printing nowhere and exiting 0."""

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "stdout is closed")


def _prepare_streams() -> None:
    """A closed stdout raises on write; a stdout that cannot encode '×' or 'µ' (LANG=C,
    PYTHONIOENCODING=ascii) prints '?' for them rather than crashing a table."""
    if sys.stdout is None:
        sys.stdout = _ClosedStream()
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            stream.reconfigure(errors="replace")


def _output_failed(exc: OSError) -> int:
    """stdout could not take the output (a full disk, a closed or vanished pipe): one line
    on stderr (none for a reader that left, as `| head` does) and exit 1, never 0. Later
    flushes go to /dev/null so Python's own exit does not print a second traceback."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.__stdout__.fileno() if sys.__stdout__ else 1)
    except (OSError, ValueError):
        pass
    if exc.errno != errno.EPIPE:
        sys.stderr.write(f"error: output: cannot write to stdout ({exc.strerror or exc})\n")
    return 1


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    _prepare_streams()
    global _COLLECT_AT_START
    collecting = gc.isenabled()
    if argv is None and collecting:  # the console script: a process of its own
        gc.disable()
        _COLLECT_AT_START = True
    try:
        code = _run(args)
        sys.stdout.flush()
    except OSError as exc:
        if exc.filename is not None:  # a file a command opened: its own error path missed it
            raise
        return _output_failed(exc)
    finally:
        _COLLECT_AT_START = False
        if collecting:
            gc.enable()
    return code


#: `main` turned the collector off for the console script's start-up (and nobody else did).
_COLLECT_AT_START = False


def started() -> None:
    """The command's modules are imported: collect garbage again from here on. Start-up
    allocates some 10⁵ objects that live as long as the process (modules, Typer's and Pydantic's
    schemas); the cyclic collector scanned them some 150 times, ~30 ms of a `plan` (measured
    with gc.callbacks, 2026-12-07). `main` turns collection off for the console script; this
    moves what start-up built out of the collector's sight (gc.freeze) and turns it back on,
    so long-running commands (serve, bench) collect as usual."""
    global _COLLECT_AT_START
    if _COLLECT_AT_START:
        _COLLECT_AT_START = False
        gc.freeze()
        gc.enable()


def _run(args: list[str]) -> int:
    if args[:1] == ["doctor"]:
        from bandwall.cli import doctor

        if not doctor.needs_full_cli(args[1:]):
            started()
            return doctor.main(args[1:])
    from bandwall.cli.root import main as root_main

    return root_main(args)


def __getattr__(name: str) -> Any:
    if name == "app":
        from bandwall.cli.root import app

        return app
    raise AttributeError(name)


__all__ = ["app", "main"]
