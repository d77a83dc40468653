"""Infrastructure for a plan: presets, user overrides, and the topology of each parallel group."""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from bandwall.catalog import FailureSpec, GpuSpec, Precision, Tier, load_catalog
from bandwall.collectives import Link, Topology
from bandwall.collectives.topology import Numeric
from bandwall.errors import CatalogError, ConfigError, unknown_choice
from bandwall.plan.faults import Routing, degraded_bandwidth_factor, slow_link_factor
from bandwall.units import GB, US


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
    text = resources.files("bandwall.plan").joinpath("data", "presets.toml").read_text()
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


@dataclass(frozen=True)
class Cluster:
    """A resolved cluster: GPUs, links, prices. Numeric fields may be arrays (sweeps)."""

    preset: str
    provider: str
    gpu: GpuSpec
    precision: Precision
    num_gpus: Numeric
    gpus_per_node: int
    sites: int
    scale_up: Link | None
    scale_out: Link | None
    wan: Link | None
    nics_per_node: float
    oversubscription: Numeric
    tcp_streams: int
    price_per_gpu_hour: float
    virtualization_overhead: float
    egress_usd_per_GB: float
    straggler_fraction: float = 0.0
    straggler_slowdown: float = 0.0
    failures: FailureSpec | None = None
    checkpoint_write_GBps_per_node: float = 10.0
    checkpoint_write_cap_GBps: float = 2000.0
    restart_s: float = 600.0
    fabric_health: Numeric = 1.0
    """Share of scale-out bandwidth left after failed or slow links (1 = healthy)."""
    failed_links: Numeric = 0
    routing: str = "adaptive"

    @property
    def peak_flops(self) -> float:
        return self.gpu.peak_flops(self.precision)

    def checkpoint_write_GBps(self) -> Numeric:
        """Aggregate checkpoint write rate: every node writes its shard, up to the storage cap."""
        return np.minimum(
            np.asarray(self.nodes()) * self.checkpoint_write_GBps_per_node,
            self.checkpoint_write_cap_GBps,
        )

    def nodes(self) -> Numeric:
        return np.ceil(np.asarray(self.num_gpus, dtype=np.float64) / self.gpus_per_node)

    def nodes_per_site(self) -> Numeric:
        return np.ceil(np.asarray(self.nodes(), dtype=np.float64) / self.sites)

    def group_topology(self, stride: Numeric) -> Topology:
        """Topology seen by a parallel group whose members are `stride` ranks apart.

        Ranks fill a node, then a site. A group with stride s has G/s members per node when
        s < G (else one), and gets that share of the node's NICs, since every group on the node
        communicates at the same time.
        """
        G = self.gpus_per_node
        s = np.asarray(stride, dtype=np.float64)
        per_node = np.where(s < G, np.maximum(np.floor(G / s), 1.0), 1.0)
        nics = self.nics_per_node * per_node / G
        nodes_per_site: Numeric | None = None
        if self.sites > 1:
            members_per_site = np.maximum(np.floor(G * np.asarray(self.nodes_per_site()) / s), 1.0)
            nodes_per_site = np.maximum(np.floor(members_per_site / per_node), 1.0)
        return Topology(
            gpus_per_node=per_node,
            scale_up=self.scale_up,
            scale_out=self.scale_out,
            nics_per_node=nics,
            oversubscription=np.asarray(self.oversubscription) / np.asarray(self.fabric_health),
            nodes_per_site=nodes_per_site,
            wan=self.wan if self.sites > 1 else None,
            tcp_streams=self.tcp_streams,
        )


class ClusterSpec(BaseModel):
    """User input for the infrastructure: a preset plus any overrides."""

    model_config = ConfigDict(extra="forbid")

    preset: str = "ai-factory-ib"
    gpus: int = Field(ge=1, description="Total GPUs.")
    gpu: str | None = None
    gpus_per_node: int | None = Field(default=None, ge=1)
    scale_up: str | None = None
    fabric: str | None = Field(default=None, description="Scale-out fabric key.")
    nics_per_node: float | None = Field(default=None, gt=0)
    oversubscription: float | None = Field(default=None, ge=1.0)
    sites: int | None = Field(default=None, ge=1)
    wan: str | None = None
    bandwidth_Gbps: float | None = Field(default=None, gt=0, description="Per-NIC override.")
    latency_us: float | None = Field(default=None, ge=0)
    jitter_us: float | None = Field(default=None, ge=0, description="Mean = std of jitter.")
    loss_rate: float | None = Field(default=None, ge=0, lt=1)
    provider: str | None = None
    price_per_gpu_hour: float | None = Field(default=None, gt=0)
    tcp_streams: int = Field(default=1, ge=1)
    precision: Precision = Precision.BF16
    straggler_fraction: float = Field(default=0.0, ge=0, lt=1)
    straggler_slowdown: float = Field(default=0.0, ge=0)
    failures: bool = Field(default=True, description="Model failures, checkpoints, restarts.")
    failed_links: int | None = Field(default=None, ge=0)
    failed_link_fraction: float | None = Field(default=None, ge=0, lt=1)
    routing: Routing = Routing.AUTO
    slow_link_fraction: float = Field(default=0.0, ge=0, lt=1)
    slow_link_speed: float = Field(default=0.25, gt=0, le=1)
    checkpoint_GBps: float | None = Field(default=None, gt=0, description="Aggregate write.")
    restart_s: float | None = Field(default=None, ge=0)


def resolve_cluster(
    spec: ClusterSpec,
    *,
    num_gpus: Numeric | None = None,
    bandwidth_Gbps: Numeric | None = None,
    oversubscription: Numeric | None = None,
) -> Cluster:
    """Turn a ClusterSpec into a Cluster; `num_gpus`/`bandwidth_Gbps` arrays serve sweeps."""
    cat = load_catalog()
    preset = get_preset(spec.preset)
    gpu = cat.gpu(spec.gpu or preset.gpu)
    provider = cat.provider(spec.provider or preset.provider)
    gpn = spec.gpus_per_node or (gpu.scale_up_domain if spec.gpu else preset.gpus_per_node)
    gpn = min(gpn, spec.gpus)
    up_spec = cat.fabric(spec.scale_up or gpu.scale_up_fabric)
    if up_spec.tier is not Tier.SCALE_UP:
        raise ConfigError(
            f"scale_up: {up_spec.key!r} is a {up_spec.tier.value} fabric, not "
            "a scale-up fabric (nvlink4, pcie5, ...)"
        )
    out_spec = cat.fabric(spec.fabric or preset.scale_out)
    if out_spec.tier is Tier.SCALE_UP:
        raise ConfigError(
            f"fabric: {out_spec.key!r} is a scale-up fabric; give a scale-out "
            "fabric such as ib-ndr, or --scale-up for the node"
        )
    out = Link.from_fabric(out_spec)
    bw = bandwidth_Gbps if bandwidth_Gbps is not None else spec.bandwidth_Gbps
    jitter = spec.jitter_us * US if spec.jitter_us is not None else None
    out = out.with_overrides(
        bandwidth_Bps=None if bw is None else np.asarray(bw, dtype=np.float64) * GB / 8,
        latency_s=None if spec.latency_us is None else spec.latency_us * US,
        jitter_mean_s=jitter,
        jitter_std_s=jitter,
        loss_rate=spec.loss_rate,
    )
    sites = spec.sites or preset.sites
    wan_key = spec.wan or preset.wan
    if sites > 1 and wan_key is None:
        raise ConfigError(f"sites: {sites} sites need a --wan fabric between them")
    wan = Link.from_fabric(cat.fabric(wan_key)) if (wan_key and sites > 1) else None
    price = spec.price_per_gpu_hour
    if price is None:
        listed = provider.price(gpu.name)
        if listed is None:
            raise ConfigError(
                f"price-per-gpu-hour: provider {provider.key!r} lists no price for {gpu.name}; "
                f"it lists {', '.join(p.gpu for p in provider.prices)}; pass --price-per-gpu-hour"
            )
        price = listed.typical
    nics = spec.nics_per_node or (
        preset.nics_per_node if not spec.fabric else (gpn if out_spec.rdma else 1.0)
    )
    nics = float(min(nics, gpn))
    n_gpus = spec.gpus if num_gpus is None else num_gpus
    routing = spec.routing
    if routing is Routing.AUTO:
        routing = Routing.ADAPTIVE if out_spec.adaptive_routing else Routing.STATIC
    health, failed = _fabric_health(spec, n_gpus, gpn, nics, routing)
    cap = spec.checkpoint_GBps or provider.checkpoint_write_cap_GBps
    return Cluster(
        preset=preset.key,
        provider=provider.key,
        gpu=gpu,
        precision=spec.precision,
        num_gpus=n_gpus,
        gpus_per_node=gpn,
        sites=sites,
        scale_up=Link.from_fabric(up_spec) if gpn > 1 else None,
        scale_out=out,
        wan=wan,
        nics_per_node=nics,
        oversubscription=(
            oversubscription
            if oversubscription is not None
            else spec.oversubscription or preset.oversubscription
        ),
        tcp_streams=spec.tcp_streams,
        price_per_gpu_hour=price,
        virtualization_overhead=provider.virtualization_overhead,
        egress_usd_per_GB=provider.egress_usd_per_GB,
        straggler_fraction=spec.straggler_fraction,
        straggler_slowdown=spec.straggler_slowdown,
        failures=cat.failure_profile(provider.failure_profile) if spec.failures else None,
        checkpoint_write_GBps_per_node=(
            math.inf if spec.checkpoint_GBps else provider.checkpoint_write_GBps_per_node
        ),
        checkpoint_write_cap_GBps=cap,
        restart_s=provider.restart_s if spec.restart_s is None else spec.restart_s,
        fabric_health=health,
        failed_links=failed,
        routing=routing.value,
    )


def _fabric_health(
    spec: ClusterSpec, gpus: Numeric, gpn: int, nics: float, routing: Routing
) -> tuple[Numeric, Numeric]:
    """Scale-out bandwidth share left by failed links (rerouted or rehashed) and slow links.

    The scale-out tier is taken as a non-blocking fat tree or rail-optimized tree with one
    uplink per NIC: L = nodes × NICs links.
    """
    if spec.failed_links is not None and spec.failed_link_fraction is not None:
        raise ConfigError("failed-links: give --failed-links or --failed-link-fraction, not both")
    nodes = np.ceil(np.asarray(gpus, dtype=np.float64) / gpn)
    links = np.maximum(np.round(nodes * nics), 1.0)

    def one(n_links: float) -> tuple[float, float]:
        k = (
            spec.failed_links
            if spec.failed_links is not None
            else round((spec.failed_link_fraction or 0.0) * n_links)
        )
        return degraded_bandwidth_factor(int(n_links), int(k), routing), float(k)

    pairs = [one(float(x)) for x in np.ravel(links)]
    factor = np.array([p[0] for p in pairs]).reshape(np.shape(links))
    failed = np.array([p[1] for p in pairs]).reshape(np.shape(links))
    slow = slow_link_factor(links, spec.slow_link_fraction, spec.slow_link_speed)
    health = factor * slow
    if np.ndim(health) == 0:
        return float(health), float(failed)
    return health, failed


def describe_cluster(cl: Cluster) -> dict[str, Any]:
    """What a plan's assumptions section prints about the infrastructure."""
    out = cl.scale_out
    return {
        "preset": cl.preset,
        "provider": cl.provider,
        "gpu": cl.gpu.name,
        "precision": cl.precision.value,
        "gpus_per_node": cl.gpus_per_node,
        "sites": cl.sites,
        "scale_up": cl.scale_up.name if cl.scale_up else None,
        "scale_out": out.name if out else None,
        "scale_out_Gbps_per_nic": (float(np.max(out.bandwidth_Bps)) * 8 / GB) if out else None,
        "nics_per_node": cl.nics_per_node,
        "oversubscription": float(np.max(cl.oversubscription)),
        "wan": cl.wan.name if cl.wan else None,
        "price_per_gpu_hour_usd": cl.price_per_gpu_hour,
        "virtualization_overhead": cl.virtualization_overhead,
        "egress_usd_per_GB": cl.egress_usd_per_GB,
        "peak_TFLOPS": cl.peak_flops / 1e12,
        "jitter_mean_us": float(np.max(out.jitter_mean_s)) / US if out else None,
        "routing": cl.routing,
        "failed_links": float(np.max(cl.failed_links)),
        "fabric_health": float(np.min(cl.fabric_health)),
    }
