"""Load and validate the catalog shipped in ``bandwall/catalog/data``.

Extra TOML files can be layered on top by pointing ``BANDWALL_CATALOG_DIR`` at a folder holding
``gpus.toml``/``fabrics.toml``/``providers.toml`` in the same format: entries with a new key are
added, entries with an existing key replace the shipped one.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from bandwall.catalog.models import FabricSpec, FailureSpec, GpuSpec, ProviderSpec
from bandwall.catalog.perf import GpuPerf
from bandwall.errors import CatalogError, ConfigError, unknown_choice
from bandwall.rawdata import raw_rows as raw_rows  # re-exported: the catalog's raw reader
from bandwall.rawdata import read_tables as _read_tables
from bandwall.safeio import checked_path

_M = TypeVar("_M", bound=BaseModel)


def validate_rows(
    model: type[_M], rows: Iterable[tuple[str, dict[str, Any]]], key: str
) -> dict[str, _M]:
    """Rows (origin, table row) as `model`s by `key`; the first bad row is one CatalogError
    naming its file, entry, field and why (every catalog file reads through here)."""
    out: dict[str, _M] = {}
    for origin, row in rows:
        try:
            entry = model.model_validate(row)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise CatalogError(
                f"{origin}: entry {row.get(key, '?')!r}: {loc}: {err['msg']}"
            ) from None
        out[getattr(entry, key)] = entry
    return out


@dataclass(frozen=True)
class Catalog:
    """The validated catalog: look-ups raise a ConfigError listing the valid names."""

    gpus: Mapping[str, GpuSpec]
    fabrics: Mapping[str, FabricSpec]
    providers: Mapping[str, ProviderSpec]
    failures: Mapping[str, FailureSpec]
    perf: Mapping[str, GpuPerf]

    def gpu(self, name: str) -> GpuSpec:
        found = _lookup(self.gpus, name)
        if found is None:
            raise unknown_choice("gpu", name, self.gpus)
        return found

    def fabric(self, key: str) -> FabricSpec:
        if key.startswith("measured:"):
            return measured_fabric(key)
        found = _lookup(self.fabrics, key)
        if found is None:
            raise unknown_choice("fabric", key, self.fabrics)
        return found

    def gpu_perf(self, name: str) -> GpuPerf:
        """The achieved rates of a catalog GPU (every GPU must have an entry)."""
        found = _lookup(self.perf, self.gpu(name).name)
        if found is None:
            raise CatalogError(f"gpu_perf.toml: no entry for GPU {name!r}")
        return found

    def failure_profile(self, key: str) -> FailureSpec:
        found = _lookup(self.failures, key)
        if found is None:
            raise unknown_choice("failure_profile", key, self.failures)
        return found

    def provider(self, key: str) -> ProviderSpec:
        found = _lookup(self.providers, key)
        if found is None:
            raise unknown_choice("provider", key, self.providers)
        return found


def _lookup(table: Mapping[str, _M], name: str) -> _M | None:
    """Exact match first, then case-insensitive, so 'h100-sxm' finds 'H100-SXM'."""
    if name in table:
        return table[name]
    folded = {k.lower(): v for k, v in table.items()}
    return folded.get(name.lower())


def _check_references(cat: Catalog) -> None:
    for name in cat.perf:
        if name not in cat.gpus:
            raise CatalogError(f"gpu_perf.toml: entry for unknown gpu {name!r}")
    for gpu in cat.gpus.values():
        if gpu.scale_up_fabric not in cat.fabrics:
            raise CatalogError(f"gpu {gpu.name!r}: unknown scale_up_fabric {gpu.scale_up_fabric!r}")
    for prov in cat.providers.values():
        for ref in (prov.scale_out_fabric, prov.wan_fabric):
            if ref is not None and ref not in cat.fabrics:
                raise CatalogError(f"provider {prov.key!r}: unknown fabric {ref!r}")
        if prov.failure_profile not in cat.failures:
            raise CatalogError(
                f"provider {prov.key!r}: unknown failure_profile {prov.failure_profile!r}"
            )
        for price in prov.prices:
            if price.gpu not in cat.gpus:
                raise CatalogError(f"provider {prov.key!r}: price for unknown gpu {price.gpu!r}")


#: A measured profile's name: letters, digits, '-' and '_' only, so it can never name a path
#: outside the profile folder.
PROFILE_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def profile_dir() -> Path:
    """Where `bandwall calibrate` writes fabric profiles ($BANDWALL_PROFILE_DIR, else
    $XDG_CONFIG_HOME/bandwall/fabrics)."""
    env = os.environ.get("BANDWALL_PROFILE_DIR")
    if env:
        try:
            return checked_path(env, field="profile_dir")
        except ConfigError as exc:  # not an option: the message names the variable
            raise ConfigError(f"$BANDWALL_PROFILE_DIR: {exc.reason}") from None
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "bandwall" / "fabrics"


def check_profile_name(name: str, field: str = "name") -> str:
    if not PROFILE_NAME_RE.match(name):
        raise ConfigError(
            f"profile name {name!r} must be 1-64 letters, digits, '-' or '_'", field=field
        )
    return name


def measured_fabric(key: str) -> FabricSpec:
    """A profile written by `bandwall calibrate --name NAME`, read when asked for."""
    name = check_profile_name(key.split(":", 1)[1], "fabric")
    path = profile_dir() / f"{name}.toml"
    if not path.is_file():
        known = (
            sorted(p.stem for p in profile_dir().glob("*.toml")) if profile_dir().is_dir() else []
        )
        raise ConfigError(
            f"no measured profile {name!r} in {str(profile_dir())!r}; known: "
            f"{', '.join(known) or 'none'} (make one with bandwall calibrate RESULTS --name NAME)",
            field="fabric",
        )
    try:
        rows = tomllib.loads(path.read_text(encoding="utf-8")).get("fabric", [])
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
        raise CatalogError(f"{path}: not a readable TOML profile: {exc}") from None
    found = validate_rows(FabricSpec, [(str(path), r) for r in rows], "key")
    if key not in found:
        raise CatalogError(f"{path}: holds no fabric with key {key!r}")
    return found[key]


@cache
def load_catalog() -> Catalog:
    """Read, validate and cross-check the catalog once per process."""
    cat = Catalog(
        gpus=validate_rows(GpuSpec, _read_tables("gpus.toml", "gpu"), "name"),
        fabrics=validate_rows(FabricSpec, _read_tables("fabrics.toml", "fabric"), "key"),
        providers=validate_rows(ProviderSpec, _read_tables("providers.toml", "provider"), "key"),
        failures=validate_rows(FailureSpec, _read_tables("failures.toml", "failures"), "key"),
        perf=validate_rows(GpuPerf, _read_tables("gpu_perf.toml", "perf"), "gpu"),
    )
    _check_references(cat)
    return cat
