"""Links and the three-level hierarchy (scale-up, scale-out, WAN) a collective runs over.

A :class:`Link` is one level's link type as the cost model sees it, per endpoint and per
direction; a :class:`Topology` says how many GPUs share a node, nodes a site, how many NICs a
node has, and which software (NCCL or Gloo) and TCP settings drive the links. Every numeric
field may be a numpy array that broadcasts with the sizes and rank counts being priced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from bandwall.catalog import FabricSpec, Transport
from bandwall.errors import ConfigError, parse_choice, unknown_choice
from bandwall.model import tcp
from bandwall.model.tcp import CongestionControl, parse_congestion_control
from bandwall.units import GB, US

#: A scalar or an array broadcast against the sizes and rank counts being priced: sweeps vary
#: link bandwidths, group shapes and NIC shares per element.
Numeric = float | npt.NDArray[Any]
FloatArray = npt.NDArray[np.float64]

#: Mathis et al. (1997) constant for Reno-style TCP with delayed ACKs off: sqrt(3/2).
MATHIS_C = tcp.MATHIS_C
#: IPv4 + TCP headers without options, subtracted from the MTU to get the MSS.
TCP_IP_HEADER_BYTES = 40


class Backend(StrEnum):
    """The collective library: NCCL on GPUs (its tuner picks algorithm and protocol), or
    PyTorch's Gloo on CPUs over TCP (fixed algorithms)."""

    NCCL = "nccl"
    GLOO = "gloo"


class GpuArch(StrEnum):
    """NCCL's compute-capability classes (src/graph/tuning.cc, compCapIndex)."""

    VOLTA = "volta"
    AMPERE = "ampere"
    HOPPER = "hopper"
    BLACKWELL = "blackwell"

    @classmethod
    def from_compute_capability(cls, cc: float) -> GpuArch:
        """NCCL 2.30.7 tuning.cc: >= 10 Blackwell, >= 9 Hopper, >= 8 Ampere, else Volta."""
        if cc >= 10:
            return cls.BLACKWELL
        if cc >= 9:
            return cls.HOPPER
        if cc >= 8:
            return cls.AMPERE
        return cls.VOLTA


class Routing(StrEnum):
    """How the scale-out fabric spreads flows over equal-cost spine paths: the one
    vocabulary of `--routing` (plan, collective, infer), the topology and the failure model.
    """

    AUTO = "auto"
    """The fabric's own (catalog `adaptive_routing`: adaptive, else ecmp)."""
    ADAPTIVE = "adaptive"
    """Per-packet adaptive routing or spraying: near-ideal balance at the fabric's
    `adaptive_efficiency` (reordering handled by the NIC); failed links leave (L − K)/L."""
    ECMP = "ecmp"
    """Static per-flow hashing (RoCE: 5-tuple, the UDP source port derived from the QP):
    flow collisions on the spine, and rehashing after a link fails."""
    FLOWLET = "flowlet"
    """Re-hash at flowlet gaps. A bandwidth-bound NCCL transfer keeps its pipe full, so each
    gap draws a fresh random placement: the same expected busiest link as ECMP, a smaller
    spread. Congestion-aware schemes that pick the least-loaded path are `adaptive`."""
    STATIC = "ecmp"
    """The former name of :attr:`ECMP` (an alias: the same member)."""


#: Former spellings still accepted: `plan --routing static` named static hashing before
#: `plan` and `collective` shared one vocabulary.
ROUTING_ALIASES = {"static": Routing.ECMP}

#: The name this enum had in the collective model (values unchanged).
LoadBalancing = Routing


class Placement(StrEnum):
    """Where a job's ring neighbours sit relative to the leaf switches."""

    SCATTERED = "scattered"
    """Rank order unrelated to the cabling: a ring neighbour is a random other node of the
    job's leaves. NCCL orders rings by rank, not by switch, and a shared cluster hands out
    fragmented allocations (Meta, SIGCOMM 2024)."""
    PACKED = "packed"
    """Rank order follows the cabling (topology-aware block scheduling): only the hop at a
    leaf boundary leaves the leaf."""


class FabricCC(StrEnum):
    """Flow and congestion control of an RDMA fabric, as far as incast is concerned."""

    CREDIT = "credit"
    """InfiniBand: credit-based link flow control plus IB congestion control."""
    DCQCN = "dcqcn"
    """RoCE with PFC and ECN-driven DCQCN (ConnectX default)."""
    PFC = "pfc"
    """RoCE with PFC only: pauses spread, head-of-line blocking."""
    TELEMETRY = "telemetry"
    """Spectrum-X: switch telemetry drives the SuperNIC's per-flow rate."""
    SRD = "srd"
    """AWS EFA Scalable Reliable Datagram: sender-side multipath congestion control."""
    TCP = "tcp"
    """Host TCP (priced by model/tcp.py)."""
    NONE = "none"
    """Not a switched RDMA fabric (NVLink, PCIe)."""


def parse_routing(text: str) -> Routing:
    """`text` as a :class:`Routing` (its former spelling `static` is `ecmp`)."""
    alias = ROUTING_ALIASES.get(text.strip().lower())
    return alias if alias is not None else parse_choice(Routing, text, "routing")


parse_load_balancing = parse_routing


def parse_placement(text: str) -> Placement:
    return parse_choice(Placement, text, "placement")


def parse_fabric_cc(text: str) -> FabricCC:
    return parse_choice(FabricCC, text, "rdma_cc")


#: NCCL_IB_QPS_PER_CONNECTION default (NCCL 2.30.7 src/transport/net_ib: IbQpsPerConn = 1).
NCCL_QPS_PER_CONNECTION = 1
#: Most nodes one site may hold in `bandwall collective` (a GPU per node at the planner's
#: largest cluster, 2**21 GPUs): a bigger integer overflows float64 in the site terms.
MAX_NODES_PER_SITE = 1 << 21


def parse_backend(text: str) -> Backend:
    return parse_choice(Backend, text, "backend")


def parse_gpu_arch(text: str) -> GpuArch:
    return parse_choice(GpuArch, text, "gpu_arch")


@dataclass(frozen=True)
class Link:
    """One level's link as the cost model sees it: per endpoint, per direction.

    `bandwidth_Bps` is the wire rate in bytes/s and `latency_s` the one-way network latency
    per message; `efficiency` is the share of the wire rate collectives reach (for NVLink:
    NCCL's own per-link rate over the nominal one). `in_network` says the hardware can reduce
    in the switch (NVLS on NVSwitch, SHARP on InfiniBand) and `in_network_default` whether
    the software uses it unless told otherwise. On TCP links :meth:`effective_Bps` applies the
    congestion-control, window, per-flow and host limits of :mod:`bandwall.model.tcp`.
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
    loss_rate: Numeric = 0.0
    mss_bytes: float = 1460.0
    per_flow_limit_Bps: float | None = None
    in_network_default: bool = True
    transport: str = ""
    """Catalog transport (nvlink, pcie, infiniband, roce, efa, tcp); '' for a generic link."""
    host_Bps: Numeric = math.inf
    """GPU-to-NIC host path as NCCL rates it; caps one scale-out channel."""
    gpu_arch: str | None = None
    socket_streams: int = 1
    """Sockets NCCL opens per connection on this NIC by default."""
    small_message_bytes: float = 0.0
    """Calibrated profiles: below this size `small_latency_s`/`small_efficiency` apply."""
    small_latency_s: Numeric | None = None
    small_efficiency: float | None = None
    op_time_factors: tuple[tuple[str, float], ...] = field(default=())
    """Calibrated profiles: (op, factor) multiplying the bandwidth term of that op."""
    load_balancing: str = LoadBalancing.ADAPTIVE.value
    """How the switches spread flows (ecmp, flowlet, adaptive); a generic link is balanced."""
    adaptive_efficiency: float = 1.0
    """Share of balanced bandwidth adaptive routing reaches when switched on here."""
    switch_Bps: float | None = None
    """Leaf switch capacity, bytes/s (None: a 64-port leaf at the link's rate)."""
    switch_port_Bps: float | None = None
    """Rate of one switch port (uplinks run at it; hosts may use breakouts)."""
    layout_Bps: Numeric | None = None
    """The NIC rate the leaf was laid out for: the catalog's, kept when a what-if replaces
    `bandwidth_Bps` (a faster NIC does not re-cable the switch; None: `bandwidth_Bps`)."""
    congestion_control: str = FabricCC.NONE.value
    """Flow and congestion control as incast sees it (model/congestion.py FabricCC)."""
    call_overhead_s: float | None = None
    """Per call across nodes beyond NCCL's step latencies (None: the transport's)."""

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
            in_network_default=spec.in_network_on_by_default,
            transport=spec.transport.value,
            host_Bps=spec.host_interface_GBps * GB if spec.host_interface_GBps else math.inf,
            gpu_arch=spec.gpu_arch,
            socket_streams=spec.socket_streams,
            small_message_bytes=float(spec.small_message_bytes or 0),
            small_latency_s=(
                spec.small_latency_us * US if spec.small_latency_us is not None else None
            ),
            small_efficiency=spec.small_efficiency,
            op_time_factors=tuple(sorted(spec.op_time_factors.items())),
            load_balancing=(
                LoadBalancing.ADAPTIVE.value if spec.adaptive_routing else LoadBalancing.ECMP.value
            ),
            adaptive_efficiency=spec.adaptive_efficiency,
            switch_Bps=spec.switch.capacity_Tbps * 1e12 / 8 if spec.switch else None,
            switch_port_Bps=spec.switch.port_Gbps * GB / 8 if spec.switch else None,
            congestion_control=spec.fabric_cc,
            call_overhead_s=(
                spec.call_overhead_us * US if spec.call_overhead_us is not None else None
            ),
        )

    def with_overrides(
        self,
        *,
        bandwidth_Bps: Numeric | None = None,
        latency_s: Numeric | None = None,
        jitter_mean_s: Numeric | None = None,
        jitter_std_s: Numeric | None = None,
        loss_rate: Numeric | None = None,
    ) -> Link:
        """A copy with measured or what-if values replacing the catalog's."""
        layout = self.bandwidth_Bps if self.layout_Bps is None else self.layout_Bps
        return replace(
            self,
            bandwidth_Bps=self.bandwidth_Bps if bandwidth_Bps is None else bandwidth_Bps,
            layout_Bps=self.layout_Bps if bandwidth_Bps is None else layout,
            latency_s=self.latency_s if latency_s is None else latency_s,
            jitter_mean_s=self.jitter_mean_s if jitter_mean_s is None else jitter_mean_s,
            jitter_std_s=self.jitter_std_s if jitter_std_s is None else jitter_std_s,
            loss_rate=self.loss_rate if loss_rate is None else loss_rate,
        )

    @property
    def rtt_s(self) -> Numeric:
        """Round-trip time: twice the one-way latency."""
        return 2 * np.asarray(self.latency_s, dtype=np.float64)

    @property
    def nvlink(self) -> bool:
        """NVLink-class scale-up (NCCL's NVLINK latencies, LL128 allowed)."""
        return self.transport in ("", Transport.NVLINK.value, Transport.XGMI.value)

    @property
    def nvswitch(self) -> bool:
        """GPUs joined by a switch (every catalog NVLink fabric is an HGX/NVL baseboard)."""
        return self.transport in ("", Transport.NVLINK.value)

    @property
    def gpudirect_tcp(self) -> bool:
        """TCP into GPU memory (catalog FabricSpec.gpudirect_tcp: Google's TCPX/TCPXO)."""
        return not self.tcp and self.congestion_control == "tcp"

    @property
    def gpudirect(self) -> bool:
        """RDMA with GPUDirect (NCCL's typeInter <= PXN); sockets go through host memory."""
        return not self.tcp and self.transport != Transport.PCIE.value

    def op_factor(self, op: str) -> float:
        """Calibrated multiplier on the bandwidth term of `op` (1 when none was fitted)."""
        return dict(self.op_time_factors).get(op, 1.0)

    def small_variant(self) -> Link:
        """The link as calibrated for messages below `small_message_bytes`."""
        return replace(
            self,
            latency_s=self.latency_s if self.small_latency_s is None else self.small_latency_s,
            efficiency=self.efficiency if self.small_efficiency is None else self.small_efficiency,
            small_message_bytes=0.0,
        )

    def mathis_Bps(self, streams: Numeric) -> Numeric:
        """Reno's loss bound MSS·C / (RTT·√p) per stream × streams (Mathis et al. 1997);
        infinite on loss-free or non-TCP links."""
        if not self.tcp:
            return math.inf
        return np.asarray(streams, dtype=np.float64) * tcp.mathis_Bps(
            self.mss_bytes, self.rtt_s, self.loss_rate
        )

    def effective_Bps(
        self,
        streams: Numeric = 1,
        *,
        congestion_control: CongestionControl = CongestionControl.CUBIC,
        window_bytes: Numeric | None = None,
    ) -> Numeric:
        """Bandwidth one endpoint of this link sustains with `streams` parallel TCP streams
        (ignored on RDMA links): min(wire × efficiency, TCP limits)."""
        bw: Numeric = np.asarray(self.bandwidth_Bps, dtype=np.float64) * self.efficiency
        if not self.tcp:
            return bw
        return tcp.tcp_Bps(
            congestion_control,
            streams=streams,
            link_Bps=bw,
            mss_bytes=self.mss_bytes,
            rtt_s=self.rtt_s,
            loss=self.loss_rate,
            window_bytes=tcp.AUTOTUNED_WINDOW_BYTES if window_bytes is None else window_bytes,
            per_flow_limit_Bps=(
                math.inf if self.per_flow_limit_Bps is None else self.per_flow_limit_Bps
            ),
        )

    def in_network_Bps(self) -> Numeric:
        """Bandwidth of a switch-side (SHARP/NVLS) reduction on this link."""
        return np.asarray(self.bandwidth_Bps, dtype=np.float64) * self.in_network_efficiency


def _shown(value: Any) -> str:
    """A value for a one-line error: itself, or the offending extreme of an array (an error
    names the field and what is wrong, never a numpy dump)."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0 or arr.size == 1:
        return f"{float(arr.reshape(-1)[0]):g}"
    return f"{float(np.min(arr)):g} (smallest of {arr.size:,})"


@dataclass(frozen=True)
class Topology:
    """GPUs per node × nodes per site × sites, with one link type per level.

    Ranks fill the hierarchy in order: a node first, then the nodes of a site, then sites. The
    scale-out link is per NIC and a node has `nics_per_node` of them (rail-optimized clusters
    have one per GPU); the WAN link is one uplink per site. `oversubscription` divides the
    scale-out bandwidth (≥1; 1 = non-blocking fat tree).

    Software and host settings: `backend` (NCCL picks algorithm and protocol; Gloo runs
    PyTorch's fixed algorithms); `in_network` (None: each fabric's default — NVLS on,
    InfiniBand SHARP off; True: use it wherever the hardware has it; False: never);
    `tcp_streams` (TCP connections per peer; None: what the library opens — NCCL two channels
    × the NIC's socket count, Gloo one); `congestion_control`; `tcp_window_bytes` (bytes in
    flight per stream; None: autotuned 6 MiB for NCCL, Gloo's 425,984 B fixed send buffer);
    `gpu_arch` (None: from the scale-up fabric, else Hopper); `host_cpu` (NCCL's
    per-step network overhead is 1 µs on Intel, 2 µs on AMD).

    Fabric congestion (model/congestion.py): `qps_per_connection` (NCCL_IB_QPS_PER_CONNECTION;
    None: NCCL's 1); `load_balancing` (a :class:`Routing`: ecmp, flowlet, adaptive; None or
    auto: the scale-out fabric's);
    `placement` (scattered: ring neighbours on other leaves; packed: rank order follows the
    cabling); `rail_optimized` (NIC i of every node on rail leaf i, else top-of-rack leaves);
    `member_spacing_nodes` (nodes between consecutive group members in rank order: 1 for a
    data-parallel ring with TP inside the node, dp·cp for pipeline neighbours);
    `fabric_nics` (NICs communicating at once across the job; None: this group's);
    `node_nics` (physical NICs per node; None: `nics_per_node`); `rdma_cc` (dcqcn, pfc, ...;
    None: the fabric's); `fabric_tiers` (2 or 3 switch layers; None: 2 while one spine layer
    of the leaf's switch joins the job's NICs); `leaf_ports` and `ecmp_paths` (host ports
    and equal-cost uplinks per leaf; None: the fabric's switch split by `oversubscription`).
    """

    gpus_per_node: Numeric
    scale_up: Link | None
    scale_out: Link | None
    nics_per_node: Numeric = 1.0
    oversubscription: Numeric = 1.0
    nodes_per_site: Numeric | None = None
    wan: Link | None = None
    tcp_streams: Numeric | None = None
    in_network: bool | None = None
    backend: str = Backend.NCCL.value
    congestion_control: str = CongestionControl.CUBIC.value
    tcp_window_bytes: Numeric | None = None
    gpu_arch: str | None = None
    host_cpu: str = "intel"
    qps_per_connection: Numeric | None = None
    load_balancing: str | None = None
    placement: str = Placement.SCATTERED.value
    rail_optimized: bool = True
    member_spacing_nodes: Numeric = 1.0
    fabric_nics: Numeric | None = None
    node_nics: Numeric | None = None
    rdma_cc: str | None = None
    fabric_tiers: int | None = None
    leaf_ports: Numeric | None = None
    ecmp_paths: Numeric | None = None
    failed_uplinks: Numeric = 0.0
    """Scale-out links down where the collision model prices them (congestion
    .prices_failures): spine paths lost, on every leaf and most on the worst one."""
    hash_dispersion: Numeric | None = None
    """Busiest hashed link above an even spread, as a share of uniform random hashing's
    excess (1: independent uniform draws, as the lab's socket hash; None: the switch value
    fitted in model/congestion.py)."""

    def __post_init__(self) -> None:  # noqa: C901
        g = np.asarray(self.gpus_per_node)
        if np.any(g < 1):
            raise ConfigError(
                f"must be >= 1, got {_shown(self.gpus_per_node)}", field="gpus_per_node"
            )
        if np.any(g > 1) and self.scale_up is None:
            raise ConfigError(
                "a node with more than one GPU needs a scale-up fabric", field="scale_up"
            )
        if np.any(np.asarray(self.nics_per_node) <= 0):
            raise ConfigError(
                f"must be > 0, got {_shown(self.nics_per_node)}", field="nics_per_node"
            )
        if np.any(np.asarray(self.oversubscription) < 1):
            raise ConfigError(
                f"must be >= 1 (1 = non-blocking), got {_shown(self.oversubscription)}",
                field="oversubscription",
            )
        if self.nodes_per_site is not None and np.any(np.asarray(self.nodes_per_site) < 1):
            raise ConfigError(
                f"must be >= 1, got {_shown(self.nodes_per_site)}", field="nodes_per_site"
            )
        if self.nodes_per_site is not None and self.wan is None:
            raise ConfigError(
                "nodes_per_site is set but no WAN fabric joins the sites", field="wan"
            )
        if self.tcp_streams is not None and np.any(np.asarray(self.tcp_streams) < 1):
            raise ConfigError(f"must be >= 1, got {_shown(self.tcp_streams)}", field="tcp_streams")
        if self.tcp_window_bytes is not None and np.any(np.asarray(self.tcp_window_bytes) <= 0):
            raise ConfigError(
                f"must be > 0, got {_shown(self.tcp_window_bytes)}", field="tcp_window_bytes"
            )
        parse_backend(self.backend)
        parse_congestion_control(self.congestion_control)
        if self.gpu_arch is not None:
            parse_gpu_arch(self.gpu_arch)
        if self.host_cpu not in ("intel", "amd"):
            raise unknown_choice("host_cpu", self.host_cpu, ["intel", "amd"])
        if self.qps_per_connection is not None and np.any(np.asarray(self.qps_per_connection) < 1):
            raise ConfigError(
                f"must be >= 1, got {_shown(self.qps_per_connection)}", field="qps_per_connection"
            )
        if self.load_balancing is not None:
            # one spelling from here on: auto is the fabric's own, static is ecmp
            routing = parse_routing(self.load_balancing)
            object.__setattr__(
                self, "load_balancing", None if routing is Routing.AUTO else routing.value
            )
        parse_placement(self.placement)
        if self.rdma_cc is not None:
            parse_fabric_cc(self.rdma_cc)
        if self.fabric_tiers is not None and self.fabric_tiers not in (2, 3):
            raise ConfigError(f"must be 2 or 3, got {self.fabric_tiers}", field="fabric_tiers")
        for name in (
            "member_spacing_nodes",
            "fabric_nics",
            "node_nics",
            "leaf_ports",
            "ecmp_paths",
        ):
            value = getattr(self, name)
            if value is not None and np.any(np.asarray(value) <= 0):
                raise ConfigError(f"must be > 0, got {_shown(value)}", field=name)

    def qps(self) -> Numeric:
        """Queue pairs per NCCL connection (each one a hashed flow on RoCE)."""
        if self.qps_per_connection is None:
            return float(NCCL_QPS_PER_CONNECTION)
        return np.asarray(self.qps_per_connection, dtype=np.float64)

    @property
    def backend_kind(self) -> Backend:
        return Backend(self.backend)

    @property
    def cc(self) -> CongestionControl:
        return CongestionControl(self.congestion_control)

    @property
    def arch(self) -> GpuArch:
        """The GPU architecture NCCL's constants are taken for."""
        if self.gpu_arch is not None:
            return GpuArch(self.gpu_arch)
        if self.scale_up is not None and self.scale_up.gpu_arch:
            return GpuArch(self.scale_up.gpu_arch)
        return GpuArch.HOPPER

    def window_bytes(self) -> Numeric:
        """Bytes one TCP stream may have in flight."""
        if self.tcp_window_bytes is not None:
            return self.tcp_window_bytes
        if self.backend_kind is Backend.GLOO:
            return tcp.GLOO_WINDOW_BYTES
        return tcp.AUTOTUNED_WINDOW_BYTES

    def streams_per_peer(self, link: Link | None) -> Numeric:
        """TCP connections between two ranks over `link`: the explicit `tcp_streams`, else
        Gloo's one pair per peer (gloo/transport/tcp/context.cc) or NCCL's two executed
        channels (connect.cc duplicates the searched one) × the NIC's sockets per connection
        (net_socket.cc auto-detection)."""
        if self.tcp_streams is not None:
            return self.tcp_streams
        if self.backend_kind is Backend.GLOO or link is None:
            return 1.0
        return 2.0 * link.socket_streams

    def in_network_on(self, link: Link | None) -> bool:
        """Whether `link`'s switch reduction is used under this topology's setting."""
        if link is None or not link.in_network:
            return False
        if self.in_network is None:
            return link.in_network_default
        return self.in_network

    def link_Bps(self, link: Link, flows: Numeric = 1.0) -> Numeric:
        """What one endpoint of `link` sustains when `flows` TCP streams share it."""
        return link.effective_Bps(
            flows, congestion_control=self.cc, window_bytes=self.window_bytes()
        )


@dataclass(frozen=True)
class GroupShape:
    """Where a group of ranks sits on a topology, per element: the one placement vocabulary
    of the collective models (``collectives`` and ``nccl``).

    Ranks fill a node, then the nodes of a site, then sites (:class:`Topology`). Every field
    broadcasts to the shape of the rank counts and the topology's array fields.
    """

    num_ranks: FloatArray
    """Ranks in the group (n)."""
    ranks_per_node: FloatArray
    """Ranks on a full node of the group: min(n, GPUs per node) (NCCL's ppn)."""
    num_nodes: FloatArray
    """Nodes the group spans: ⌈n / GPUs per node⌉."""
    nodes_per_site: FloatArray
    """Nodes of the group inside one site: min(nodes, nodes per site) (all of them on a
    single-site topology)."""
    num_sites: FloatArray
    """Sites the group spans: ⌈nodes / nodes per site⌉ (1 on a single-site topology)."""
    last_node_ranks: FloatArray
    """Ranks on the least-populated node (n − G·(nodes − 1)): a partial last node has to
    receive more from the others than a full one."""


def group_shape(ranks: npt.ArrayLike, topo: Topology) -> GroupShape:
    """The group of `ranks` ranks placed on `topo`.

    >>> from bandwall.model.topology import Topology
    >>> s = group_shape(20.0, Topology(gpus_per_node=8, scale_up=Link("u", 1e9, 1e-6),
    ...                                scale_out=Link("o", 1e9, 1e-6)))
    >>> [float(v) for v in (s.ranks_per_node, s.num_nodes, s.num_sites, s.last_node_ranks)]
    [8.0, 3.0, 1.0, 4.0]
    """
    G = np.asarray(topo.gpus_per_node, dtype=np.float64)
    n = np.asarray(ranks, dtype=np.float64) + np.zeros_like(G)
    ppn = np.minimum(n, G)
    nodes = np.ceil(n / G)
    if topo.nodes_per_site is None:
        per_site, sites = nodes, np.ones_like(nodes)
    else:
        P = np.asarray(topo.nodes_per_site, dtype=np.float64)
        per_site, sites = np.minimum(nodes, P), np.ceil(nodes / P)
    return GroupShape(
        num_ranks=n,
        ranks_per_node=ppn,
        num_nodes=nodes,
        nodes_per_site=per_site,
        num_sites=sites,
        last_node_ranks=n - G * (nodes - 1),
    )


def check_board_fabric(gpu: str, own: str, asked: str) -> None:
    """A GPU's scale-up links are part of its board: its own fabric, or PCIe for a what-if
    without NVLink. An RTX 4090 on NVLink 5 or an A100 with NVLink 5's NVLS was priced."""
    if asked == own or asked.startswith("pcie"):
        return
    raise ConfigError(
        f"{asked} is another board's fabric; {gpu} boards carry {own} (or give pcie4/pcie5 "
        "for one without it)",
        field="scale_up",
    )


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
    tcp_streams: int | None = None,
    scale_out_overrides: dict[str, float] | None = None,
    in_network: bool | None = None,
    backend: str = Backend.NCCL.value,
    congestion_control: str = CongestionControl.CUBIC.value,
    tcp_window_bytes: float | None = None,
    qps_per_connection: int | None = None,
    load_balancing: str | None = None,
    placement: str = Placement.SCATTERED.value,
    rail_optimized: bool = True,
    rdma_cc: str | None = None,
) -> Topology:
    """Assemble a Topology from catalog keys.

    The scale-up fabric defaults to the GPU's own (NVLink for H100). NICs per node default to
    one per GPU on RDMA fabrics (rail-optimized) and one per node on TCP fabrics. The GPU
    architecture comes from the GPU's compute capability, else its scale-up fabric.
    """
    from bandwall.catalog import Tier, load_catalog

    cat = load_catalog()
    gpu_spec = cat.gpu(gpu)
    up_spec = cat.fabric(scale_up or gpu_spec.scale_up_fabric)
    if up_spec.tier is not Tier.SCALE_UP:
        raise ConfigError(
            f"{up_spec.key!r} is a {up_spec.tier.value} fabric; choose one of: "
            + ", ".join(sorted(k for k, f in cat.fabrics.items() if f.tier is Tier.SCALE_UP)),
            field="scale_up",
        )
    check_board_fabric(gpu_spec.name, gpu_spec.scale_up_fabric, up_spec.key)
    out_link: Link | None = None
    if scale_out is not None:
        out_spec = cat.fabric(scale_out)
        if out_spec.tier is Tier.SCALE_UP:
            raise ConfigError(
                f"{out_spec.key!r} is a scale-up fabric; give it as the scale-up fabric "
                "(--scale-up; scale_up in the web API) and a scale-out or WAN fabric here, "
                "e.g. ib-ndr",
                field="fabric",
            )
        out_link = Link.from_fabric(out_spec)
        if scale_out_overrides:
            out_link = out_link.with_overrides(**scale_out_overrides)
        if nics_per_node is None:
            nics_per_node = out_spec.default_nics(gpus_per_node)
    wan_link = Link.from_fabric(cat.fabric(wan)) if wan is not None else None
    if gpu_spec.compute_capability is not None:
        arch: str | None = GpuArch.from_compute_capability(gpu_spec.compute_capability).value
    else:
        arch = up_spec.gpu_arch
    return Topology(
        gpus_per_node=gpus_per_node,
        scale_up=Link.from_fabric(up_spec) if gpus_per_node > 1 else None,
        scale_out=out_link,
        nics_per_node=nics_per_node or 1.0,
        oversubscription=oversubscription,
        nodes_per_site=nodes_per_site,
        wan=wan_link,
        tcp_streams=tcp_streams,
        in_network=in_network,
        backend=backend,
        congestion_control=congestion_control,
        tcp_window_bytes=tcp_window_bytes,
        gpu_arch=arch,
        qps_per_connection=qps_per_connection,
        load_balancing=load_balancing,
        placement=placement,
        rail_optimized=rail_optimized,
        rdma_cc=rdma_cc,
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
    tcp_streams: int | None = None,
    in_network: bool | None = None,
    backend: str = Backend.NCCL.value,
    congestion_control: str = CongestionControl.CUBIC.value,
    tcp_window_bytes: float | None = None,
    qps_per_connection: int | None = None,
    load_balancing: str | None = None,
    placement: str = Placement.SCATTERED.value,
    rail_optimized: bool = True,
    rdma_cc: str | None = None,
) -> Topology:
    """The topology `bandwall collective` prices on: `fabric` may be a scale-out fabric, or a
    scale-up one when every rank count fits in one node."""
    from bandwall.catalog import Tier, load_catalog

    if gpus_per_node < 1:
        raise ConfigError(f"must be >= 1, got {gpus_per_node}", field="gpus_per_node")
    if nodes_per_site is not None and not 1 <= nodes_per_site <= MAX_NODES_PER_SITE:
        shown = str(nodes_per_site) if len(str(nodes_per_site)) <= 20 else "a huge number"
        raise ConfigError(
            f"must be 1 to {MAX_NODES_PER_SITE:,}, got {shown}", field="nodes_per_site"
        )
    if oversubscription < 1:
        raise ConfigError(
            f"must be >= 1 (1 = non-blocking), got {oversubscription}", field="oversubscription"
        )
    software = {
        "in_network": in_network,
        "backend": backend,
        "congestion_control": congestion_control,
        "tcp_window_bytes": tcp_window_bytes,
        "tcp_streams": tcp_streams,
        "qps_per_connection": qps_per_connection,
        "load_balancing": load_balancing,
        "placement": placement,
        "rail_optimized": rail_optimized,
        "rdma_cc": rdma_cc,
    }
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
            **software,  # type: ignore[arg-type]
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
        **software,  # type: ignore[arg-type]
    )


# --- WAN site pairs ----------------------------------------------------------------------------


class WanPath(StrEnum):
    """How two sites are joined: a provider's inter-region backbone, or public transit."""

    BACKBONE = "backbone"
    INTERNET = "internet"


def wan_pairs() -> dict[frozenset[str], Any]:
    """The site-pair matrix of catalog/data/wan.toml, validated, keyed by the two sites."""
    from bandwall.catalog.models import WanPairSpec
    from bandwall.rawdata import raw_rows

    out: dict[frozenset[str], Any] = {}
    for row in raw_rows("catalog", "wan.toml", "pair"):
        spec = WanPairSpec.model_validate(row)
        out[frozenset((spec.a, spec.b))] = spec
    return out


def wan_sites() -> list[str]:
    """Site keys of the matrix (us-east, us-west, eu-west, asia-east)."""
    from bandwall.rawdata import raw_rows

    return [str(row["key"]) for row in raw_rows("catalog", "wan.toml", "site")]


def wan_link(
    a: str,
    b: str,
    *,
    path: str = WanPath.BACKBONE.value,
    bandwidth_Gbps: float = 10.0,
    rtt: str = "p50",
    efficiency: float = (1500 - TCP_IP_HEADER_BYTES) / (1500 + 38),
) -> Link:
    """The WAN link between sites `a` and `b`: published median (or p95) RTT and the path's
    loss, TCP with a 1,500 B MTU (efficiency = MSS / (MTU + 38 B of Ethernet framing)), at
    `bandwidth_Gbps` per site uplink.

    >>> link = wan_link("us-east", "eu-west")
    >>> round(float(link.rtt_s) * 1e3), link.loss_rate
    (75, 1e-07)
    """
    sites = wan_sites()
    for key, fld in ((a, "site_a"), (b, "site_b")):
        if key not in sites:
            raise unknown_choice(fld, key, sites)
    if a == b:
        raise ConfigError(f"{a!r} to itself is not a WAN link", field="site_b")
    try:
        kind = WanPath(path)
    except ValueError:
        raise unknown_choice("path", path, [p.value for p in WanPath]) from None
    if rtt not in ("p50", "p95"):
        raise unknown_choice("rtt", rtt, ["p50", "p95"])
    pair = wan_pairs()[frozenset((a, b))]
    rtt_ms = pair.rtt_ms if rtt == "p50" else pair.rtt_p95_ms
    loss = pair.loss_backbone if kind is WanPath.BACKBONE else pair.loss_internet
    return Link(
        name=f"wan:{a}-{b}:{kind.value}",
        bandwidth_Bps=bandwidth_Gbps * GB / 8,
        latency_s=rtt_ms / 2 * 1e-3,
        efficiency=efficiency,
        tcp=True,
        loss_rate=loss,
        mss_bytes=1500.0 - TCP_IP_HEADER_BYTES,
        transport=Transport.TCP.value,
    )


def check_whole_nodes(rank_counts: list[int], gpus_per_node: int) -> None:
    """Ranks beyond one node fill whole nodes, as `plan` asks of --gpus: the model prices
    n / gpus-per-node nodes, and a job of 8 ranks on nodes of 3 is not one NCCL sees."""
    from bandwall.errors import ConfigError

    ragged = [r for r in rank_counts if r > gpus_per_node and r % gpus_per_node]
    if ragged:
        r, g = ragged[0], gpus_per_node
        raise ConfigError(
            f"{r:,} ranks do not fill whole nodes of {g}: give at most {g} or a multiple of "
            f"{g} ({r // g * g:,} or {(r // g + 1) * g:,}), or a --gpus-per-node that divides "
            f"{r:,}",
            field="ranks",
        )
