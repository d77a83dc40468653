"""`POST /api/from-config`: the dashboard's upload of a framework's own files (Megatron
script, NeMo YAML, torchtitan TOML, DeepSpeed JSON, HuggingFace config.json, launch line),
answered with the plan request they describe and the report of what was read, defaulted and
ignored. The form then posts the request to /api/plan like any other.

The files arrive as JSON strings (the API takes JSON only, bounded by the body limit), are
written to a private temporary folder under their base names and read by the same code as
`plan --from`; paths in answers and errors name the uploaded file, never the folder.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bandwall.errors import BandwallError, ConfigError

#: Most files one upload may hold.
MAX_FILES = 8


class ConfigFile(BaseModel):
    """One uploaded file: its name (the suffix says the format) and its text."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    content: str = Field(max_length=1 << 20)


class FromConfigBody(BaseModel):
    """Files to read, and request fields the form already sets (they win over the files)."""

    model_config = ConfigDict(extra="forbid")

    files: list[ConfigFile] = Field(min_length=1, max_length=MAX_FILES)
    overrides: dict[str, Any] = Field(default_factory=dict, max_length=128)


def request_from_files(body: FromConfigBody) -> dict[str, Any]:
    """The request the files describe under `overrides`, and the report."""
    from bandwall.planning.from_config import read_configs
    from bandwall.planning.request import make_request
    from bandwall.safeio import write_output

    names = [f.name for f in body.files]
    if len(set(names)) != len(names):
        raise ConfigError("two uploaded files have the same name", field="from")
    with tempfile.TemporaryDirectory(prefix="bandwall-from-") as folder:
        prefix = folder.rstrip("/") + "/"
        paths = []
        for f in body.files:
            path = Path(folder) / f.name
            write_output(path, f.content, field="from")
            paths.append(str(path))
        try:
            result = read_configs(paths, body.overrides)
            fields = result.merged(body.overrides)
            request = make_request(**fields)
        except BandwallError as exc:
            raise type(exc)(exc.reason.replace(prefix, ""), field=exc.field) from None
        report = result.to_json()
    _strip(report, prefix)
    return {"request": request.model_dump(mode="json", exclude_defaults=True), "from": report}


def _strip(node: Any, prefix: str) -> Any:
    """Every string in `node` without the temporary folder (in place for containers)."""
    if isinstance(node, dict):
        for k, v in node.items():
            node[k] = _strip(v, prefix)
        return node
    if isinstance(node, list):
        for i, v in enumerate(node):
            node[i] = _strip(v, prefix)
        return node
    return node.replace(prefix, "") if isinstance(node, str) else node


__all__ = ["MAX_FILES", "ConfigFile", "FromConfigBody", "request_from_files"]
