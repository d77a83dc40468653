"""A resolved cluster: GPUs, links, prices and fault settings as the model sees them.

Numeric fields may be numpy arrays that broadcast with the layouts being priced, so one
evaluation covers a sweep over GPU counts, bandwidths, oversubscription or prices.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from bandwall.catalog import FailureSpec, GpuSpec, Precision
from bandwall.catalog.perf import GpuPerf
from bandwall.model.congestion import prices_failures
from bandwall.model.energy import EnergyProfile
from bandwall.model.topology import Link, Numeric, Topology


@dataclass(frozen=True)
class Cluster:
    """GPUs in nodes in sites, one link type per level, prices and failure rates."""

    preset: str
    provider: str
    gpu: GpuSpec
    perf: GpuPerf
    precision: Precision
    num_gpus: Numeric
    gpus_per_node: int
    sites: int
    scale_up: Link | None
    scale_out: Link | None
    wan: Link | None
    nics_per_node: float
    oversubscription: Numeric
    tcp_streams: int | None
    price_per_gpu_hour_usd: Numeric
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
    congestion_control: str = "cubic"
    tcp_window_bytes: float | None = None
    in_network: bool | None = None
    qps_per_connection: Numeric | None = None
    placement: str = "scattered"
    rail_optimized: bool = True
    ecmp_paths: float | None = None
    rdma_cc: str | None = None
    energy: EnergyProfile | None = None
    """Power, PUE, grid and electricity price (None: energy not priced)."""
    power_cap_W: float | None = None
    """Power limit per GPU (None: the board's default limit, usually its TDP)."""

    @property
    def peak_flops(self) -> float:
        """Dense peak FLOP/s of one GPU at the cluster's precision."""
        return self.gpu.peak_flops(self.precision)

    @property
    def memory_bytes(self) -> float:
        """Device memory of one GPU in bytes, as nvidia-smi reports it (81,559 MiB for an
        "80 GB" H100), not the datasheet's decimal gigabytes."""
        return float(self.perf.memory_bytes)

    def nodes(self) -> Numeric:
        return np.ceil(np.asarray(self.num_gpus, dtype=np.float64) / self.gpus_per_node)

    def nodes_per_site(self) -> Numeric:
        return np.ceil(np.asarray(self.nodes(), dtype=np.float64) / self.sites)

    def checkpoint_write_GBps(self) -> Numeric:
        """Aggregate checkpoint write rate: every node writes its shard, up to the storage cap."""
        return np.minimum(
            np.asarray(self.nodes()) * self.checkpoint_write_GBps_per_node,
            self.checkpoint_write_cap_GBps,
        )

    def group_topology(self, stride: Numeric) -> Topology:
        """Topology seen by a parallel group whose members are `stride` ranks apart.

        Ranks fill a node, then a site. A group with stride s has G/s members per node when
        s < G (else one), and gets that share of the node's NICs, since every group on the node
        communicates at the same time. Likewise the s groups interleaved with it (at most one
        per GPU of a site) cross the site's WAN uplink at the same time and share it.
        """
        if type(stride) in (int, float, np.float64):
            key = (float(stride), 0)
        elif type(stride) is np.ndarray and stride.size == 1:
            key = (float(stride.item()), stride.ndim)
        else:
            return self._group_topology(stride)
        # one plan asks for the same few groups a dozen times: build each once per cluster
        cache: dict[tuple[float, int], Topology] = self.__dict__.setdefault("_groups", {})
        topo = cache.get(key)
        if topo is None:
            topo = cache[key] = self._group_topology(stride)
        return topo

    def hop_topology(self, stride: Numeric, span: Numeric) -> Topology:
        """Topology of the slowest hop of a chain of ranks `stride` apart that covers `span`
        ranks (a pipeline: pp stages, each `stride` ranks wide).

        A chain longer than a node crosses a node boundary somewhere however close its links
        are, and its throughput is that hop's: the pair is priced on two nodes, the `stride`
        chains interleaved with it crossing each node's NICs at once (likewise a site's WAN
        when the chain is longer than a site). `group_topology` of a 2-rank group would put a
        pair closer than a node inside one node."""
        G = self.gpus_per_node
        scalar = type(stride) in (int, float, np.float64) and type(span) in (int, float, np.float64)
        multi_site = self.sites > 1
        if scalar and (span <= G or (stride >= G and not multi_site)):
            return self.group_topology(stride)  # one plan: no arrays (microseconds each)
        cache: dict[tuple[float, float], Topology] = self.__dict__.setdefault("_hops", {})
        if scalar and (key := (float(stride), float(span))) in cache:
            return cache[key]
        s = np.maximum(np.asarray(stride, dtype=np.float64), 1.0)
        chain = np.asarray(span, dtype=np.float64)
        topo = self.group_topology(stride)
        across = (chain > G) & (s < G)
        changes: dict[str, Any] = {}
        if np.any(across):
            changes["gpus_per_node"] = np.where(across, 1.0, topo.gpus_per_node)
            changes["nics_per_node"] = np.where(
                across, self.nics_per_node / np.minimum(s, G), topo.nics_per_node
            )
        if multi_site and topo.nodes_per_site is not None:
            # the site boundary is crossed whatever the stride, as long as the chain is longer
            # than a site and its ranks are closer than one: a stride of a whole node (tp·cp·dp
            # = 8) skipped this and priced a 4-stage chain over two sites inside one site, a
            # fixed layout 10x faster than its own WAN bytes allow (fuzz round 17, C1)
            gpus_per_site = G * np.asarray(self.nodes_per_site())
            site_cross = (chain > gpus_per_site) & (s < gpus_per_site)
            if np.any(site_cross):
                changes["nodes_per_site"] = np.where(site_cross, 1.0, topo.nodes_per_site)
        if not changes:
            return topo
        hop = dataclasses.replace(topo, **changes)
        if scalar:
            cache[(float(stride), float(span))] = hop
        return hop

    def _group_topology(self, stride: Numeric) -> Topology:
        G = self.gpus_per_node
        # invalid layouts (masked later) may give fractional strides; keep them in range
        s = np.maximum(np.asarray(stride, dtype=np.float64), 1.0)
        per_node = np.where(s < G, np.maximum(np.floor(G / s), 1.0), 1.0)
        nics = self.nics_per_node * per_node / G
        nodes_per_site: Numeric | None = None
        wan = self.wan if self.sites > 1 else None
        if self.sites > 1:
            gpus_per_site = G * np.asarray(self.nodes_per_site())
            members_per_site = np.maximum(np.floor(gpus_per_site / s), 1.0)
            nodes_per_site = np.maximum(np.floor(members_per_site / per_node), 1.0)
            if wan is not None:
                sharing = np.minimum(s, gpus_per_site)
                wan = wan.with_overrides(bandwidth_Bps=np.asarray(wan.bandwidth_Bps) / sharing)
        return Topology(
            gpus_per_node=per_node,
            scale_up=self.scale_up,
            scale_out=self.scale_out,
            nics_per_node=nics,
            oversubscription=np.asarray(self.oversubscription) / np.asarray(self.fabric_health),
            nodes_per_site=nodes_per_site,
            wan=wan,
            tcp_streams=self.tcp_streams,
            in_network=self.in_network,
            congestion_control=self.congestion_control,
            tcp_window_bytes=self.tcp_window_bytes,
            # fabric congestion (model/congestion.py): the whole job hashes onto the spine at
            # once; consecutive members of this group are stride/G nodes apart
            qps_per_connection=self.qps_per_connection,
            load_balancing=self.routing,
            placement=self.placement,
            rail_optimized=self.rail_optimized,
            member_spacing_nodes=np.maximum(s / G, 1.0),
            fabric_nics=np.asarray(self.nodes(), dtype=np.float64) * self.nics_per_node,
            node_nics=self.nics_per_node,
            ecmp_paths=self.ecmp_paths,
            rdma_cc=self.rdma_cc,
            failed_uplinks=(
                self.failed_links if prices_failures(self.scale_out, self.routing) else 0.0
            ),
        )
