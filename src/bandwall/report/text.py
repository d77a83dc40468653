"""Shared output helpers for the CLI: one console, JSON that never contains NaN/inf."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from rich.console import Console

#: Piped output gets a wide fixed width so tables are not folded into unreadable columns.
console = Console(highlight=False, soft_wrap=False)
err_console = Console(stderr=True, highlight=False)


def json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def print_json(data: Any) -> None:
    """Strict JSON (inf/NaN become null) on stdout, for piping into jq or a notebook."""
    sys.stdout.write(json.dumps(json_safe(data), indent=2, default=str) + "\n")


def fmt_num(value: float, digits: int = 2) -> str:
    if not math.isfinite(value):
        return "inf"
    return f"{value:,.{digits}f}"
