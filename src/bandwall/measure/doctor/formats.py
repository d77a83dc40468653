"""The input formats doctor reads, as a registry: a format is a detector (does this file look
like me?), a streaming parser and a way to attach what it parsed to the job.

Every text file is read once, line by line through `bandwall.safeio.iter_lines`, and each line
goes to every format whose detector accepted the file's start (its first 64 KiB, or 4 MiB
for a longer file; an nccl-tests run with NCCL_DEBUG=INFO is both an NCCL log and a results
table). A detector that rejected the start also sees each later 1 MiB window of lines once,
and its format starts at the window where it accepts one. Adding a format is one
`register_format` call::

    register_format(Format(
        name="training-log",
        detect=lambda sample: "iteration" in sample and "elapsed time per iteration" in sample,
        start=TrainingLogParser,          # .feed(number, line) and .finish() -> result
        attach=lambda job, result, item: job.extra.setdefault("training-log", []).append(result),
    ))

and a detector (`detectors.detector`) plus a `Rule` row that read `job.extra["training-log"]`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from bandwall.measure.doctor.job import Input, Job


class StreamParser(Protocol):
    """What a format's `start(source)` returns."""

    def feed(self, number: int, line: str) -> None: ...

    def finish(self) -> Any: ...


@dataclass(frozen=True)
class Format:
    """One input format."""

    name: str
    detect: Callable[[str], bool]
    """Given the decoded start of the file (or a later window of its lines), whether this
    format may be in it."""
    start: Callable[[str], StreamParser]
    """A fresh parser for the file named by the argument."""
    attach: Callable[[Job, Any, Input], bool]
    """Add the parser's result to the job; True when the file held this format."""


FORMATS: list[Format] = []


def register_format(fmt: Format, *, first: bool = False) -> None:
    """Add (or replace, by name) a format; `first` puts it before the others."""
    for i, existing in enumerate(FORMATS):
        if existing.name == fmt.name:
            FORMATS[i] = fmt
            return
    if first:
        FORMATS.insert(0, fmt)
    else:
        FORMATS.append(fmt)


def formats() -> list[Format]:
    """The registered formats (the built-in ones register when `diagnosis` is imported)."""
    return list(FORMATS)
