"""docs/options.md, generated from the request schema: `python -m bandwall.cli.docs`."""

from __future__ import annotations

import sys

from bandwall.cli.options import option_help
from bandwall.planning.request import VECTOR_FIELDS, PlanRequest, field_flag, field_meta


def options_markdown() -> str:
    """The request options as a Markdown table (docs/options.md is this text; a test checks)."""
    groups: dict[str, list[str]] = {}
    for name in PlanRequest.model_fields:
        groups.setdefault(str(field_meta(name).get("group", "other")), []).append(name)
    lines = [
        "# Request options",
        "",
        "Generated from `bandwall.planning.request.PlanRequest` by "
        "`python -m bandwall.cli.docs > docs/options.md`; a test keeps the two equal.",
        "The same fields are the CLI options of `plan`, `compare`, `sweep` (lists and ranges), "
        "`scale`, `plot` and `report`, the body of `POST /api/plan`, and the dashboard form.",
        "Layout options left unset are searched: the fastest valid layout that fits wins.",
        "",
    ]
    for group, names in groups.items():
        lines += [f"## {group}", "", "| option | field | sweep | what |", "|---|---|---|---|"]
        for name in names:
            vector = "vector" if name in VECTOR_FIELDS else "loop"
            # one table row per option: a docstring's line breaks would end the row
            text = " ".join(option_help(name).split()).replace("|", "\\|")
            lines.append(f"| `--{field_flag(name)}` | `{name}` | {vector} | {text} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(options_markdown())
