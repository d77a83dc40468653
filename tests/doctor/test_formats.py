"""Formats are a registry: a new one (here a toy training log) is one `register_format` call and
its result reaches the job, next to the built-in NCCL log and nccl-tests formats."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bandwall.measure.doctor import diagnose
from bandwall.measure.doctor import diagnosis as _registers  # noqa: F401
from bandwall.measure.doctor.formats import FORMATS, Format, formats, register_format
from bandwall.measure.doctor.job import Input, Job


class _Iterations:
    def __init__(self, source: str) -> None:
        self.times: list[float] = []

    def feed(self, number: int, line: str) -> None:
        if "elapsed time per iteration (ms):" in line:
            self.times.append(float(line.split("(ms):")[1].split("|")[0]))

    def finish(self) -> list[float]:
        return self.times


def _attach(job: Job, result: list[float], item: Input) -> bool:
    if not result:
        return False
    job.extra.setdefault("iteration-times", []).append(result)
    return True


@pytest.fixture
def training_format() -> Iterator[None]:
    before = list(FORMATS)
    register_format(
        Format(
            name="iteration-times",
            detect=lambda sample: "elapsed time per iteration" in sample,
            start=_Iterations,
            attach=_attach,
        )
    )
    yield
    FORMATS[:] = before


def test_builtin_formats_are_registered() -> None:
    assert [f.name for f in formats()][:2] == ["nccl-log", "nccl-tests"]


def test_a_new_format_is_one_entry(tmp_path: Path, training_format: None) -> None:
    log = tmp_path / "train.log"
    log.write_text(
        " iteration       10/  100 | elapsed time per iteration (ms): 812.5 | lr: 1e-4\n"
        " iteration       20/  100 | elapsed time per iteration (ms): 790.0 | lr: 1e-4\n"
        "node1:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
    )
    diag = diagnose([str(log)])
    # the built-in training-log format reads the Megatron lines too; the new one comes last
    assert diag.inputs[0].kinds == ["nccl-log", "training-log", "iteration-times"]
    assert diag.job.extra["iteration-times"] == [[812.5, 790.0]]
    other = tmp_path / "other.log"
    other.write_text("node1:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n")
    assert diagnose([str(other)]).inputs[0].kinds == ["nccl-log"]
