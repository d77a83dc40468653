"""The `--from` report: what was read (with file and line), what took the framework's
default, what was ignored and why, in lines that fit 80 columns."""

from __future__ import annotations

import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

from bandwall.planning.from_config import FromConfig
from bandwall.planning.from_config.common import Source
from bandwall.safeio import printable

WIDTH = 80


def _flag(field: str) -> str:
    from bandwall.planning.request import field_flag

    return "--" + field_flag(field)


def _typed(field: str, value: Any) -> str:
    """The option as a user types it, so a line can be pasted back onto the command line:
    no thousands separators (`,` separates a sweep's values), a boolean as its flag pair."""
    flag = _flag(field)
    if isinstance(value, bool):
        return flag if value else "--no-" + flag[2:]
    if isinstance(value, float) and value.is_integer():
        return f"{flag} {value:.0f}"
    if isinstance(value, float):
        return f"{flag} {value:g}"
    return f"{flag} {value}"


def _where(sources: tuple[Source, ...]) -> str:
    parts = []
    last_file = None
    for s in sources:
        name = Path(s.file).name
        at = f":{s.line}" if s.line else ""
        prefix = name if name != last_file else ""
        parts.append(f"{prefix}{at} {s.key}" if prefix or at else s.key)
        last_file = name
    return ", ".join(parts)


def _wrap(head: str, text: str, indent: int = 4) -> list[str]:
    return textwrap.wrap(
        f"{head}{text}",
        WIDTH,
        subsequent_indent=" " * indent,
        break_long_words=True,
        break_on_hyphens=False,
    ) or [head.rstrip()]


def render(result: FromConfig) -> list[str]:
    """The report as lines (each at most 80 characters)."""
    lines: list[str] = []
    for path, label in result.files:
        lines += _wrap("from ", f"{path} ({label})")
    if result.read:
        lines.append("read:")
        for a in result.read:
            note = f" ({a.note})" if a.note else ""
            lines += _wrap(f"  {_typed(a.field, a.value)} <- ", _where(a.sources) + note)
    if result.defaulted:
        lines.append("not in the files, the framework's default:")
        for d in result.defaulted:
            lines += _wrap(f"  {_typed(d.field, d.value)}", f" ({d.why})" if d.why else "")
    if result.overridden:
        lines += _wrap(
            "the command line overrides: ", ", ".join(_flag(f) for f in result.overridden)
        )
    if result.ignored:
        lines.append(f"ignored ({len(result.ignored):,} settings the model does not use):")
        groups: dict[str, list[Source]] = defaultdict(list)
        for i in result.ignored:
            groups[i.reason].append(i.src)
        for reason, srcs in groups.items():
            keys = []
            last_file = None
            for s in srcs:
                name = Path(s.file).name
                at = f"{name if name != last_file else ''}:{s.line}" if s.line else name
                keys.append(f"{at} {s.key}")
                last_file = name
            lines += _wrap(f"  {reason}: ", ", ".join(keys))
    for note in result.notes:
        lines += _wrap("note: ", note, 6)
    return [printable(line) for line in lines]


__all__ = ["render"]


def mapping_markdown() -> str:
    """Every format's field table as Markdown (docs/from-config.md holds this verbatim; a test
    checks they match, so the docs come from the declarations)."""
    from bandwall.planning.from_config import FORMATS
    from bandwall.planning.from_config.common import Rule
    from bandwall.planning.from_config.nemo import LAUNCH, TRANSLATE, dests

    out: list[str] = []
    for spec in FORMATS:
        out += [f"### {spec.label} (`{spec.name}`)", "", "| key | request field | note |"]
        out.append("|---|---|---|")
        for key, rule in spec.table.items():
            if isinstance(rule, Rule):
                target = f"`--{rule.field.replace('_', '-')}`" if rule.field else "(derived)"
                note = rule.note
            else:
                target, note = "ignored", rule
            out.append(f"| `{key}` | {target} | {note} |")
        out.append("")
    out += ["### NeMo keys read as Megatron arguments", "", "| NeMo key | read as |", "|---|---|"]
    out += [f"| `{k}` | launch `{v}` |" for k, v in LAUNCH.items()]
    out += [
        f"| `{k}` | Megatron {', '.join(f'`{d}`' for d in dests(v))} |"
        for k, v in TRANSLATE.items()
    ]
    out.append("| `model.X`, `train.X` (X a Megatron argument) | Megatron `X` |")
    out.append("")
    return "\n".join(out)
