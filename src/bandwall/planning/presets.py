"""Named infrastructures (`--preset`), built only from catalog keys: a new preset is a data
change in plan/data/presets.toml."""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

from bandwall.errors import CatalogError, ConfigError, unknown_choice


class Preset(BaseModel):
    """A named infrastructure, built only from catalog keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    description: str
    provider: str
    gpu: str
    gpus_per_node: int = Field(ge=1)
    scale_out: str
    nics_per_node: float = Field(gt=0)
    oversubscription: float = Field(default=1.0, ge=1.0)
    sites: int = Field(default=1, ge=1)
    wan: str | None = None


@cache
def presets() -> dict[str, Preset]:
    text = resources.files("bandwall.planning").joinpath("data", "presets.toml").read_text()
    try:
        rows = [Preset.model_validate(r) for r in tomllib.loads(text)["preset"]]
    except Exception as exc:  # pragma: no cover - shipped data is tested
        raise CatalogError(f"plan/data/presets.toml: {exc}") from None
    return {p.key: p for p in rows}


def get_preset(key: str) -> Preset:
    found = presets().get(key)
    if found is None:
        raise unknown_choice("preset", key, presets())
    return found


def check_preset_keys(keys: list[str]) -> list[str]:
    """The keys of a compare, each a known preset (case as written in presets.toml), or one
    error naming `presets`: the first unknown one was reported as `--preset`, an option
    `compare` does not have (fuzz round 23, C4)."""
    known = presets()
    folded = {k.lower(): k for k in known}
    out = []
    for key in keys:
        if key.lower() not in folded:
            raise ConfigError(
                f"unknown preset {key[:40]!r}; choose from: {', '.join(known)}", field="presets"
            )
        out.append(folded[key.lower()])
    return out
