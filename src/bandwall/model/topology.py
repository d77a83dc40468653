"""Links and the three-level hierarchy (scale-up, scale-out, WAN) a collective runs over."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from bandwall.catalog import FabricSpec, Transport
from bandwall.errors import ConfigError
from bandwall.units import GB, US

#: A scalar or an array broadcast against the sizes and rank counts being priced: sweeps vary
#: link bandwidths, group shapes and NIC shares per element.
Numeric = float | npt.NDArray[Any]

#: Mathis et al. (1997) constant for Reno-style TCP with delayed ACKs off: sqrt(3/2).
MATHIS_C = math.sqrt(1.5)
#: IPv4 + TCP headers without options, subtracted from the MTU to get the MSS.
TCP_IP_HEADER_BYTES = 40


@dataclass(frozen=True)
class Link:
    """One level's link as the cost model sees it: per endpoint, per direction.

    `bandwidth_Bps` is the raw wire rate in bytes/s; what a collective reaches is
    :meth:`effective_Bps`, which applies the efficiency factor, any per-flow cap and, on lossy
    TCP links, the Mathis throughput bound.
    """

    name: str
    bandwidth_Bps: Numeric
    latency_s: Numeric
    jitter_mean_s: Numeric = 0.0
    jitter_std_s: Numeric = 0.0
    efficiency: float = 1.0
    in_network: bool = False
    in_network_efficiency: float = 1.0
    tcp: bool = False
    loss_rate: float = 0.0
    mss_bytes: float = 1460.0
    per_flow_limit_Bps: float | None = None

    @classmethod
    def from_fabric(cls, spec: FabricSpec) -> Link:
        return cls(
            name=spec.key,
            bandwidth_Bps=spec.bandwidth_GBps * GB,
            latency_s=spec.latency_us * US,
            jitter_mean_s=spec.jitter_mean_us * US,
            jitter_std_s=spec.jitter_std_us * US,
            efficiency=spec.efficiency,
            in_network=spec.in_network_reduction,
            in_network_efficiency=spec.in_network_efficiency or 1.0,
            tcp=spec.transport is Transport.TCP,
            loss_rate=spec.loss_rate,
            mss_bytes=float(spec.mtu_bytes - TCP_IP_HEADER_BYTES),
            per_flow_limit_Bps=(
                spec.per_flow_limit_Gbps * GB / 8 if spec.per_flow_limit_Gbps else None
            ),
        )

    def with_overrides(
        self,
        *,
        bandwidth_Bps: Numeric | None = None,
        latency_s: Numeric | None = None,
        jitter_mean_s: Numeric | None = None,
        jitter_std_s: Numeric | None = None,
        loss_rate: float | None = None,
    ) -> Link:
        """A copy with measured or what-if values replacing the catalog's."""
        return replace(
            self,
            bandwidth_Bps=self.bandwidth_Bps if bandwidth_Bps is None else bandwidth_Bps,
            latency_s=self.latency_s if latency_s is None else latency_s,
            jitter_mean_s=self.jitter_mean_s if jitter_mean_s is None else jitter_mean_s,
            jitter_std_s=self.jitter_std_s if jitter_std_s is None else jitter_std_s,
            loss_rate=self.loss_rate if loss_rate is None else loss_rate,
        )

    def mathis_Bps(self, streams: int) -> Numeric:
        """TCP throughput bound MSS·C / (RTT·sqrt(p)) per stream (Mathis et al. 1997).

        RTT is taken as twice the one-way latency. Infinite on loss-free or non-TCP links.
        """
        if not self.tcp or self.loss_rate <= 0:
            return math.inf
        rtt = 2 * np.asarray(self.latency_s, dtype=np.float64)
        with np.errstate(divide="ignore"):
            bound = streams * self.mss_bytes * MATHIS_C / (rtt * math.sqrt(self.loss_rate))
        return np.where(rtt > 0, bound, np.inf)

    def effective_Bps(self, streams: int = 1) -> Numeric:
        """Bandwidth a large-message collective reaches on one endpoint of this link."""
        bw: Numeric = self.bandwidth_Bps * self.efficiency
        if self.tcp and self.per_flow_limit_Bps is not None:
            bw = np.minimum(bw, streams * self.per_flow_limit_Bps)
        return np.minimum(bw, self.mathis_Bps(streams))

    def in_network_Bps(self) -> Numeric:
        """Bandwidth of a switch-side (SHARP/NVLS) reduction on this link."""
        return self.bandwidth_Bps * self.in_network_efficiency


@dataclass(frozen=True)
class Topology:
    """GPUs per node × nodes per site × sites, with one link type per level.

    Ranks fill the hierarchy in order: a node first, then the nodes of a site, then sites. The
    scale-out link is per NIC and a node has `nics_per_node` of them (rail-optimized clusters
    have one per GPU); the WAN link is one uplink per site. `oversubscription` divides the
    scale-out bandwidth (≥1; 1 = non-blocking fat tree). `tcp_streams` is how many TCP
    connections a rank opens per peer (NCCL_SOCKET_NTHREADS × NCCL_NSOCKS_PERTHREAD; 1 by
    default), which matters only on TCP links.
    """

    gpus_per_node: Numeric
    scale_up: Link | None
    scale_out: Link | None
    nics_per_node: Numeric = 1.0
    oversubscription: Numeric = 1.0
    nodes_per_site: Numeric | None = None
    wan: Link | None = None
    tcp_streams: int = 1

    def __post_init__(self) -> None:
        g = np.asarray(self.gpus_per_node)
        if np.any(g < 1):
            raise ConfigError(f"must be >= 1, got {self.gpus_per_node}", field="gpus_per_node")
        if np.any(g > 1) and self.scale_up is None:
            raise ConfigError(
                "a node with more than one GPU needs a scale-up fabric", field="scale_up"
            )
        if np.any(np.asarray(self.nics_per_node) <= 0):
            raise ConfigError(f"must be > 0, got {self.nics_per_node}", field="nics_per_node")
        if np.any(np.asarray(self.oversubscription) < 1):
            raise ConfigError(
                f"must be >= 1 (1 = non-blocking), got {self.oversubscription}",
                field="oversubscription",
            )
        if self.nodes_per_site is not None and np.any(np.asarray(self.nodes_per_site) < 1):
            raise ConfigError(f"must be >= 1, got {self.nodes_per_site}", field="nodes_per_site")
        if self.nodes_per_site is not None and self.wan is None:
            raise ConfigError(
                "nodes_per_site is set but no WAN fabric joins the sites", field="wan"
            )
        if self.tcp_streams < 1:
            raise ConfigError(f"must be >= 1, got {self.tcp_streams}", field="tcp_streams")


def build_topology(
    *,
    gpus_per_node: int,
    scale_out: str | None,
    scale_up: str | None = None,
    gpu: str = "H100-SXM",
    nics_per_node: float | None = None,
    oversubscription: float = 1.0,
    wan: str | None = None,
    nodes_per_site: int | None = None,
    tcp_streams: int = 1,
    scale_out_overrides: dict[str, float] | None = None,
) -> Topology:
    """Assemble a Topology from catalog keys.

    The scale-up fabric defaults to the GPU's own (NVLink for H100). NICs per node default to
    one per GPU on RDMA fabrics (rail-optimized) and one per node on TCP fabrics.
    """
    from bandwall.catalog import Tier, load_catalog

    cat = load_catalog()
    up_spec = cat.fabric(scale_up or cat.gpu(gpu).scale_up_fabric)
    if up_spec.tier is not Tier.SCALE_UP:
        raise ConfigError(
            f"{up_spec.key!r} is a {up_spec.tier.value} fabric; choose one of: "
            + ", ".join(sorted(k for k, f in cat.fabrics.items() if f.tier is Tier.SCALE_UP)),
            field="scale_up",
        )
    out_link: Link | None = None
    if scale_out is not None:
        out_spec = cat.fabric(scale_out)
        if out_spec.tier is Tier.SCALE_UP:
            raise ConfigError(
                f"{out_spec.key!r} is a scale-up fabric; pass it as --scale-up and give "
                "a scale-out or WAN fabric here, e.g. ib-ndr",
                field="fabric",
            )
        out_link = Link.from_fabric(out_spec)
        if scale_out_overrides:
            out_link = out_link.with_overrides(**scale_out_overrides)
        if nics_per_node is None:
            nics_per_node = gpus_per_node if out_spec.rdma else 1
    wan_link = Link.from_fabric(cat.fabric(wan)) if wan is not None else None
    return Topology(
        gpus_per_node=gpus_per_node,
        scale_up=Link.from_fabric(up_spec) if gpus_per_node > 1 else None,
        scale_out=out_link,
        nics_per_node=nics_per_node or 1.0,
        oversubscription=oversubscription,
        nodes_per_site=nodes_per_site,
        wan=wan_link,
        tcp_streams=tcp_streams,
    )


def collective_topology(
    *,
    max_ranks: int,
    gpus_per_node: int,
    fabric: str,
    scale_up: str | None = None,
    gpu: str = "H100-SXM",
    nics_per_node: int | None = None,
    oversubscription: float = 1.0,
    wan: str | None = None,
    nodes_per_site: int | None = None,
    tcp_streams: int = 1,
) -> Topology:
    """The topology `bandwall collective` prices on: `fabric` may be a scale-out fabric, or a
    scale-up one when every rank count fits in one node."""
    from bandwall.catalog import Tier, load_catalog

    if gpus_per_node < 1:
        raise ConfigError(f"must be >= 1, got {gpus_per_node}", field="gpus_per_node")
    if oversubscription < 1:
        raise ConfigError(
            f"must be >= 1 (1 = non-blocking), got {oversubscription}", field="oversubscription"
        )
    out_spec = load_catalog().fabric(fabric)
    if out_spec.tier is not Tier.SCALE_UP:
        return build_topology(
            gpus_per_node=gpus_per_node,
            scale_out=fabric,
            scale_up=scale_up,
            gpu=gpu,
            nics_per_node=nics_per_node,
            oversubscription=oversubscription,
            wan=wan,
            nodes_per_site=nodes_per_site,
            tcp_streams=tcp_streams,
        )
    if scale_up is not None and scale_up != out_spec.key:
        raise ConfigError(
            f"{fabric!r} is a scale-up fabric and --scale-up is {scale_up!r}; give one of them",
            field="fabric",
        )
    if max_ranks > gpus_per_node:
        raise ConfigError(
            f"{max_ranks} exceed one node of {gpus_per_node} GPUs and {fabric!r} is a scale-up "
            "fabric; give a scale-out --fabric such as ib-ndr",
            field="ranks",
        )
    return build_topology(
        gpus_per_node=gpus_per_node,
        scale_out=None,
        scale_up=out_spec.key,
        gpu=gpu,
        tcp_streams=tcp_streams,
    )
