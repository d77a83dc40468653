"""The machine-readable output options every table command shares: `--json` and `--csv`."""

from __future__ import annotations

from typing import Annotated

import typer

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
CsvOption = Annotated[
    bool, typer.Option("--csv", help="Print CSV, one line per table row (nested fields dotted).")
]
