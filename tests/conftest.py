"""Shared fixtures: the CLI run in-process as a user types it, and the shared/ reference data."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import pytest

from bandwall.cli import main

SHARED = Path(__file__).resolve().parents[2] / "shared"


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    def _run(*args: str) -> CliResult:
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return _run


def reference_rows(name: str) -> list[dict[str, str]]:
    path = SHARED / "reference" / name
    if not path.is_file():
        pytest.skip(f"shared/reference/{name} not present beside the repo")
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))
