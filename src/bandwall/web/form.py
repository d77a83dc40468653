"""The planner form, described from the request schema (`PlanRequest.model_json_schema()`).

The dashboard builds every input from this document, so a field added to the schema appears
in the form without touching the page. Each property keeps its JSON-schema keys and gains:

- ``choices``: the catalog values it accepts (``choices_for`` of the schema's choices key, or
  the enum's members); ``patterns``: free-form choices such as ``measured:NAME``;
- ``x-kind``: ``integer``, ``number``, ``quantity`` (a number or a string with a unit, e.g.
  ``15Gbps``), ``boolean``, ``choice`` or ``string``;
- ``x-nullable``: unset (null) is allowed: the engine picks the value (layout fields: the
  search) or takes the preset's;
- ``x-example``: an example value with its unit, for quantities.

Pure data, no FastAPI: tests read it directly.
"""

from __future__ import annotations

import functools
import re
from typing import Any

#: A choice that is a template rather than a value (``measured:NAME``): the form takes text.
_PATTERN = re.compile(r":[A-Z][A-Z_]*$")


def _branch(prop: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The non-null alternative of an optional property, and whether null is allowed."""
    alts = prop.get("anyOf")
    if not isinstance(alts, list):
        return prop, False
    rest = [a for a in alts if a.get("type") != "null"]
    nullable = len(rest) < len(alts)
    if len(rest) == 1:
        return rest[0], nullable
    return {"anyOf": rest}, nullable


def _kind(branch: dict[str, Any], defs: dict[str, Any]) -> tuple[str, list[str], str | None]:
    """(kind, enum members, example) of one property's non-null branch."""
    if "$ref" in branch:
        target = defs.get(str(branch["$ref"]).rsplit("/", 1)[-1], {})
        return _kind(target, defs)
    if "enum" in branch:
        return "choice", [str(v) for v in branch["enum"]], None
    alts = branch.get("anyOf")
    if isinstance(alts, list):
        types = {a.get("type") for a in alts}
        example = next((str(a["examples"][0]) for a in alts if a.get("examples")), None)
        if "string" in types and types & {"number", "integer"}:
            return "quantity", [], example
        inner = [a for a in alts if a.get("type") != "null"]
        if len(inner) == 1:
            return _kind(inner[0], defs)
        return "string", [], example
    kind = str(branch.get("type", "string"))
    return (kind if kind in ("integer", "number", "boolean") else "string"), [], None


@functools.cache
def form_schema() -> dict[str, Any]:
    """The request schema with choices resolved and a kind per field (see the module doc)."""
    from bandwall.planning.request import PlanRequest, choices_for

    schema = PlanRequest.model_json_schema()
    defs = schema.get("$defs", {})
    groups: list[str] = []
    for prop in schema["properties"].values():
        branch, nullable = _branch(prop)
        kind, members, example = _kind(branch, defs)
        key = prop.get("choices")
        if isinstance(key, str):
            members = choices_for(key)
            kind = "choice"
        if members:
            prop["choices"] = [m for m in members if not _PATTERN.search(m)]
            prop["patterns"] = [m for m in members if _PATTERN.search(m)]
            kind = "choice"
        for bound in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if bound in branch and bound not in prop:
                prop[bound] = branch[bound]
        prop["x-kind"] = kind
        prop["x-nullable"] = nullable
        if example is not None:
            prop["x-example"] = example
        group = str(prop.get("group", "other"))
        if group not in groups:
            groups.append(group)
    schema["x-groups"] = groups
    return schema
