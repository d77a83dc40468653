"""Shared output helpers for the CLI: one console, JSON that never contains NaN/inf."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from rich.console import Console

#: No markup: every string printed is data (a hint like `pip install 'bandwall[bench]'` must
#: keep its brackets, which Rich would read as a style tag and drop).
console = Console(highlight=False, soft_wrap=False, markup=False)
err_console = Console(stderr=True, highlight=False, markup=False)


def json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def flat_row(value: Any, prefix: str = "") -> dict[str, Any]:
    """One CSV row from a JSON object: nested objects become dotted columns, lists JSON text."""
    if not isinstance(value, dict):
        return {prefix or "value": value}
    out: dict[str, Any] = {}
    for k, v in value.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict):
            out.update(flat_row(v, key))
        elif isinstance(v, list | tuple):
            out[key] = json.dumps(json_safe(list(v)), default=str)
        else:
            out[key] = v
    return out


def print_csv(rows: Any) -> None:
    """CSV on stdout, one line per table row (a single object is one row); columns in order of
    first appearance, empty where a row lacks one, inf/NaN empty as in the JSON."""
    import csv

    items = rows if isinstance(rows, list) else [rows]
    if not items:
        return
    flat = [flat_row(json_safe(r)) for r in items]
    columns: dict[str, None] = {}
    for r in flat:
        columns.update(dict.fromkeys(r))
    writer = csv.DictWriter(sys.stdout, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for r in flat:
        writer.writerow({k: csv_cell(v) for k, v in r.items()})


def csv_cell(value: Any) -> Any:
    """Empty for None; booleans as JSON spells them (`true`), in every command's CSV (plan's
    rows here, sweep's columns in report.tables); anything else as it is."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def emit(data: Any, as_json: bool, as_csv: bool, csv_rows: Any = None) -> bool:
    """Print `data` as JSON or its rows (`csv_rows`, default `data`) as CSV; False when the
    caller should print its table instead."""
    if as_json and as_csv:
        from bandwall.errors import ConfigError

        raise ConfigError("choose one of --json and --csv", field="csv")
    if as_json:
        print_json(data)
    elif as_csv:
        print_csv(data if csv_rows is None else csv_rows)
    return as_json or as_csv


def print_json(data: Any) -> None:
    """Strict JSON (inf/NaN become null) on stdout, for piping into jq or a notebook."""
    sys.stdout.write(json.dumps(json_safe(data), indent=2, default=str) + "\n")


def fmt_num(value: float, digits: int = 2) -> str:
    if not math.isfinite(value):
        return "inf"
    return f"{value:,.{digits}f}"
