"""Compute profiles: one compute-efficiency constant fitted to a cluster's own training log
(`bandwall calibrate --from-log LOG --from CONFIG --name NAME`), applied by `plan --profile
NAME` in place of the catalog's GEMM efficiency.

A profile is a TOML file `NAME.toml` in `compute/` under the fabric-profile folder
($BANDWALL_PROFILE_DIR, else $XDG_CONFIG_HOME/bandwall/fabrics). Its `[profile]` table holds
the constant, its p10-p90 range, the GPU it was fitted on, the fit and held-out errors and the
files it came from; a profile is only applied to plans on the GPU it was fitted on.
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bandwall.catalog.loader import check_profile_name, profile_dir
from bandwall.errors import ConfigError

KIND = "compute"


class ComputeProfile(BaseModel):
    """What `calibrate --from-log` fitted; the plan uses `gemm_efficiency` on `gpu`."""

    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)

    name: str = Field(max_length=64)
    kind: str = KIND
    gpu: str = Field(max_length=64)
    """The GPU the run used; the profile applies to plans on it only."""
    gemm_efficiency: float = Field(gt=0, le=1)
    """Share of the dense peak the model's GEMMs must reach for its step to match the run."""
    gemm_efficiency_p10: float = Field(gt=0, le=1)
    gemm_efficiency_p90: float = Field(gt=0, le=1)
    catalog_gemm_efficiency: float = Field(gt=0, le=1)
    fitted_steps: int = Field(ge=1)
    held_out_steps: int = Field(ge=1)
    fit_median_abs_error: float = Field(ge=0)
    held_out_median_abs_error: float = Field(ge=0)
    held_out_bias: float
    """Mean signed error (model - measured) / measured over the held-out steps."""


def compute_profile_dir() -> Path:
    return profile_dir() / "compute"


def profile_path(name: str) -> Path:
    return compute_profile_dir() / f"{check_profile_name(name, 'profile')}.toml"


@functools.lru_cache(maxsize=32)
def _load(path: str, mtime_ns: int) -> ComputeProfile:
    from bandwall.safeio import read_text

    text = read_text(path, field="profile", max_bytes=1 << 20)
    try:
        doc = tomllib.loads(text)
        return ComputeProfile.model_validate(doc.get("profile", {}))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not a TOML compute profile ({exc})", field="profile") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or "profile"
        raise ConfigError(f"{path}: {where}: {err.get('msg')}", field="profile") from None


def load_profile(name: str) -> ComputeProfile:
    """The compute profile NAME, or an error listing the ones there are."""
    path = profile_path(name)
    if not path.is_file():
        folder = compute_profile_dir()
        known = sorted(p.stem for p in folder.glob("*.toml")) if folder.is_dir() else []
        raise ConfigError(
            f"no compute profile {name!r} in {str(folder)!r}; known: "
            f"{', '.join(known) or 'none'} (make one with bandwall calibrate --from-log LOG "
            "--from CONFIG --name NAME)",
            field="profile",
        )
    return _load(str(path), path.stat().st_mtime_ns)


def gemm_efficiency(req: Any) -> float | None:
    """The GEMM efficiency a plan uses: the request's own, else its profile's (checked to be
    for the plan's GPU), else None (the catalog's)."""
    if req.gemm_efficiency is not None or not req.profile:
        return req.gemm_efficiency  # type: ignore[no-any-return]
    from bandwall.planning.presets import get_preset

    profile = load_profile(req.profile)
    gpu = req.gpu or get_preset(req.preset).gpu
    if gpu.lower() != profile.gpu.lower():
        raise ConfigError(
            f"profile {profile.name!r} was fitted on {profile.gpu}; this plan runs on {gpu}: "
            f"give --gpu {profile.gpu} or fit a profile on {gpu}",
            field="profile",
        )
    return profile.gemm_efficiency


__all__ = [
    "KIND",
    "ComputeProfile",
    "compute_profile_dir",
    "gemm_efficiency",
    "load_profile",
    "profile_path",
]
