"""Power, facility and grid data for the energy model, read from ``catalog/data/power.toml``.

Kept apart from the hardware catalog (`models.py`) because a site refits these figures from its
own meters: an idle floor and a host share per GPU model, PUE and grid intensity per provider
kind, per-port network power per transport, and grid carbon intensity per region. Every entry
carries `source` and `as_of`; ``BANDWALL_CATALOG_DIR`` overlays a ``power.toml`` like the rest
of the catalog.
"""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bandwall.catalog.loader import load_catalog, validate_rows
from bandwall.errors import CatalogError, unknown_choice
from bandwall.rawdata import raw_rows


class _Entry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = Field(min_length=3, description="Where the figures come from.")
    as_of: dt.date = Field(description="Date the source describes.")


class GpuPower(_Entry):
    """What one GPU model and its share of the server draw."""

    gpu: str
    idle_W: float = Field(gt=0, description="Idle draw in P0 with the driver loaded.")
    host_W_per_gpu: float = Field(
        ge=0, description="CPUs, DRAM, switches, fans and PSU loss per GPU under load."
    )
    curve: str = Field(default="linear", description="Power curve ([[curve]] name).")


class PowerCurve(_Entry):
    """A GPU family's board power against activity: piecewise linear through measured
    points, as a share of the idle-to-TDP range."""

    name: str
    activity: list[float] = Field(min_length=2, description="Activity points, 0 to 1.")
    power_share: list[float] = Field(min_length=2, description="Share of idle-to-TDP there.")

    def points(self) -> tuple[tuple[float, float], ...]:
        return tuple(zip(self.activity, self.power_share, strict=True))


class SitePower(_Entry):
    """Facility overhead, grid and electricity price of one provider kind."""

    kind: str
    pue: float = Field(ge=1.0, le=5.0, description="Power usage effectiveness.")
    grid_region: str
    price_per_kWh_usd: float = Field(ge=0, description="Electricity price an owner pays.")


class NetworkPower(_Entry):
    """Per scale-out port of one transport: NIC, optics, switch share, and CPO optics."""

    transport: str
    nic_W: float = Field(ge=0)
    optics_W: float = Field(ge=0, description="One pluggable transceiver (a link has two).")
    switch_W_per_port: float = Field(ge=0, description="Switch ASIC and system, optics excluded.")
    cpo_optics_W: float = Field(ge=0, description="Co-packaged optics per port instead.")


class GridIntensity(_Entry):
    """Location-based carbon intensity of a region's electricity."""

    region: str
    g_co2_per_kWh: float = Field(ge=0)


@dataclass(frozen=True)
class PowerCatalog:
    gpus: dict[str, GpuPower]
    sites: dict[str, SitePower]
    networks: dict[str, NetworkPower]
    grids: dict[str, GridIntensity]
    curves: dict[str, PowerCurve]

    def gpu(self, name: str) -> GpuPower:
        found = self.gpus.get(name) or {k.lower(): v for k, v in self.gpus.items()}.get(
            name.lower()
        )
        if found is None:
            raise CatalogError(f"power.toml: no [[gpu]] entry for GPU {name!r}")
        return found

    def site(self, kind: str) -> SitePower:
        found = self.sites.get(kind)
        if found is None:
            raise CatalogError(f"power.toml: no [[site]] entry for provider kind {kind!r}")
        return found

    def network(self, transport: str) -> NetworkPower | None:
        """Scale-up transports (NVLink, PCIe) have no scale-out port: None."""
        return self.networks.get(transport)

    def curve(self, name: str) -> tuple[tuple[float, float], ...]:
        """The named power curve's (activity, share) points; linear when not listed."""
        found = self.curves.get(name)
        return found.points() if found is not None else ((0.0, 0.0), (1.0, 1.0))

    def grid(self, region: str) -> GridIntensity:
        found = self.grids.get(region.lower())
        if found is None:
            raise unknown_choice("grid_region", region, self.grids)
        return found


def _validate(model: type[Any], table: str, key: str) -> dict[str, Any]:
    rows = raw_rows("catalog", "power.toml", table)
    return validate_rows(model, [(f"power.toml [[{table}]]", row) for row in rows], key)


@cache
def load_power() -> PowerCatalog:
    """Read and cross-check power.toml once per process: every catalog GPU and provider kind
    has an entry and every site names a known grid region."""
    cat = PowerCatalog(
        gpus=_validate(GpuPower, "gpu", "gpu"),
        sites=_validate(SitePower, "site", "kind"),
        networks=_validate(NetworkPower, "network", "transport"),
        grids=_validate(GridIntensity, "grid", "region"),
        curves=_validate(PowerCurve, "curve", "name"),
    )
    hw = load_catalog()
    for name in hw.gpus:
        cat.gpu(name)
    for prov in hw.providers.values():
        cat.site(prov.kind.value)
    for c in cat.curves.values():
        xs, ys = c.activity, c.power_share
        ordered = all(a < b for a, b in itertools.pairwise(xs))
        if len(xs) != len(ys) or not ordered or xs[0] != 0 or xs[-1] != 1:
            raise CatalogError(
                f"power.toml [[curve]] {c.name!r}: activity must rise from 0 to 1 with one "
                "power_share per point"
            )
    for g in cat.gpus.values():
        if g.curve != "linear" and g.curve not in cat.curves:
            raise CatalogError(f"power.toml: GPU {g.gpu!r}: unknown curve {g.curve!r}")
    for site in cat.sites.values():
        if site.grid_region not in cat.grids:
            raise CatalogError(f"power.toml: site {site.kind!r}: unknown grid {site.grid_region!r}")
    return cat


def power_table() -> list[dict[str, Any]]:
    """Rows for `bandwall catalog power`: every figure with its source and date."""
    cat = load_power()
    rows: list[dict[str, Any]] = []
    for g in cat.gpus.values():
        tdp = load_catalog().gpu(g.gpu).tdp_W
        rows.append(
            {
                "kind": "gpu",
                "key": g.gpu,
                "values": f"idle {g.idle_W:g} W, TDP {tdp:g} W, host {g.host_W_per_gpu:g} W/GPU",
                "source": g.source,
                "as_of": g.as_of.isoformat(),
            }
        )
    for s in cat.sites.values():
        rows.append(
            {
                "kind": "site",
                "key": s.kind,
                "values": f"PUE {s.pue:g}, grid {s.grid_region}, ${s.price_per_kWh_usd:.3f}/kWh",
                "source": s.source,
                "as_of": s.as_of.isoformat(),
            }
        )
    for n in cat.networks.values():
        rows.append(
            {
                "kind": "network",
                "key": n.transport,
                "values": f"NIC {n.nic_W:g} W, optics {n.optics_W:g} W (CPO {n.cpo_optics_W:g}"
                f" W), switch {n.switch_W_per_port:g} W/port",
                "source": n.source,
                "as_of": n.as_of.isoformat(),
            }
        )
    for c in cat.curves.values():
        pts = ", ".join(f"{a:g}→{b:.2f}" for a, b in c.points())
        rows.append(
            {
                "kind": "curve",
                "key": c.name,
                "values": f"activity→power share {pts}",
                "source": c.source,
                "as_of": c.as_of.isoformat(),
            }
        )
    for r in cat.grids.values():
        rows.append(
            {
                "kind": "grid",
                "key": r.region,
                "values": f"{r.g_co2_per_kWh:,.0f} gCO2/kWh",
                "source": r.source,
                "as_of": r.as_of.isoformat(),
            }
        )
    return rows
