"""NCCL's own cost model: per algorithm × protocol a latency and a bandwidth, lowest time wins.

This re-derives, in vectorised numpy, the tuning model of NCCL 2.30.7-1
(NVIDIA/nccl @ 5067397c, identical to tag v2.30.7-1): src/graph/tuning.cc
(`ncclTopoTuneModel`: base and per-hop latencies, per-channel bandwidth caps, eligibility;
`ncclTopoGetAlgoTime`: tree correction factors, the ring "plateau"), src/graph/search.cc
(speed ladders and channel duplication of the topology search), src/transport/nvls.cc and
src/init.cc (when NVLS and CollNet exist). Constants are NCCL's; what NCCL learns from the
machine at run time (channel counts, per-channel speeds, NIC latency) is derived from the
bandwall topology as documented on each function.

time(algo, proto) = latency(algo, proto) + size / algbw(algo, proto)

where `size` is what nccl-tests calls the buffer size (the gathered buffer for all_gather and
reduce_scatter, as NCCL's nBytes). Where bandwall departs from NCCL, it says so:

- NCCL's bandwidths are what its topology search *plans*; bandwall caps them by what the
  hardware sustains: NICs × NIC rate × fabric efficiency / oversubscription, TCP limits on
  socket links, the site uplink across a WAN, and the fabric's load balance across spine
  paths (flow collisions under static ECMP, :mod:`bandwall.model.congestion`).
- NCCL adds the net plugin's self-reported latency to every network step (0 for InfiniBand,
  75 µs for aws-ofi-nccl on p5); bandwall adds the fabric's measured one-way latency.
- Network jitter (bandwall's straggler term) is added per step; NCCL has none.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from bandwall.model import congestion
from bandwall.model.topology import GpuArch, Link, Topology

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

GB = 1e9
US = 1e-6


class Proto(StrEnum):
    """NCCL protocols: LL (8 B data + 8 B flag per 16 B line), LL128 (120 of 128 B), Simple."""

    LL = "LL"
    LL128 = "LL128"
    SIMPLE = "Simple"


class NcclAlgo(StrEnum):
    """NCCL's algorithms (src/include/plugin/nccl_tuner.h)."""

    TREE = "tree"
    RING = "ring"
    COLLNET_DIRECT = "collnet_direct"
    COLLNET_CHAIN = "collnet_chain"
    NVLS = "nvls"
    NVLS_TREE = "nvls_tree"
    PAT = "pat"


class NcclFunc(StrEnum):
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_REDUCE = "all_reduce"


PROTOS = (Proto.LL, Proto.LL128, Proto.SIMPLE)
_P = {Proto.LL: 0, Proto.LL128: 1, Proto.SIMPLE: 2}
_ARCH = {GpuArch.VOLTA: 0, GpuArch.AMPERE: 1, GpuArch.HOPPER: 2, GpuArch.BLACKWELL: 3}

# --- constants of src/graph/tuning.cc (ncclTunerConstantsDefaults), µs and GB/s --------------

#: baseLatencies[algo][LL, LL128, Simple]
BASE_LAT_US: dict[NcclAlgo, tuple[float, float, float]] = {
    NcclAlgo.TREE: (6.8, 14.0, 8.4),
    NcclAlgo.RING: (6.6, 14.0, 8.4),
    NcclAlgo.COLLNET_DIRECT: (0.0, 0.0, 0.0),
    NcclAlgo.COLLNET_CHAIN: (0.0, 0.0, 0.0),
    NcclAlgo.NVLS: (0.0, 0.0, 0.0),
    NcclAlgo.NVLS_TREE: (0.0, 0.0, 0.0),
    NcclAlgo.PAT: (8.0, 8.0, 8.0),
}
#: hwLatencies[NVLINK | PCI | NET][algo][LL, LL128, Simple]: the cost of one step.
HW_LAT_US: dict[str, dict[NcclAlgo, tuple[float, float, float]]] = {
    "nvlink": {
        NcclAlgo.TREE: (0.6, 1.25, 4.0),
        NcclAlgo.RING: (0.6, 1.9, 3.4),
        NcclAlgo.COLLNET_DIRECT: (0.0, 0.0, 3.7),
        NcclAlgo.COLLNET_CHAIN: (0.0, 0.0, 2.8),
        NcclAlgo.NVLS: (0.0, 0.0, 25.0),
        NcclAlgo.NVLS_TREE: (0.0, 0.0, 25.0),
        NcclAlgo.PAT: (0.0, 0.0, 4.0),
    },
    "pci": {
        NcclAlgo.TREE: (1.0, 1.9, 4.0),
        NcclAlgo.RING: (1.0, 2.5, 5.7),
        NcclAlgo.COLLNET_DIRECT: (0.0, 0.0, 3.7),
        NcclAlgo.COLLNET_CHAIN: (0.0, 0.0, 2.8),
        NcclAlgo.NVLS: (0.0, 0.0, 0.0),
        NcclAlgo.NVLS_TREE: (0.0, 0.0, 0.0),
        NcclAlgo.PAT: (0.0, 0.0, 4.0),
    },
    "net": {
        NcclAlgo.TREE: (5.0, 8.5, 14.0),
        NcclAlgo.RING: (2.7, 4.0, 14.0),
        NcclAlgo.COLLNET_DIRECT: (0.0, 0.0, 31.0),
        NcclAlgo.COLLNET_CHAIN: (0.0, 0.0, 30.0),
        NcclAlgo.NVLS: (0.0, 0.0, 18.0),
        NcclAlgo.NVLS_TREE: (0.0, 0.0, 20.9),
        NcclAlgo.PAT: (0.0, 0.0, 14.0),
    },
}
#: llMaxBws[row][N1, N2, N4]: row = arch on one node, CPU vendor (0 Intel, 1 AMD) across nodes.
LL_MAX_BW = np.array(
    [[39.0, 39.0, 20.4], [87.7, 22.5, 19.0], [141.0, 45.0, 35.0], [282.0, 90.0, 70.0]]
)
#: Per-channel caps [arch][N1, N2, N4].
PER_CH_MAX_RING_LL128_BW = np.array(
    [[20.0, 20.0, 20.0], [20.0, 20.0, 20.0], [36.7, 36.7, 36.7], [40.0, 40.0, 40.0]]
)
PER_CH_MAX_TREE_LL128_BW = np.array(
    [[20.0, 20.0, 20.0], [20.0, 20.0, 20.0], [36.7, 36.7, 29.0], [55.6, 31.67, 20.0]]
)
PER_CH_MAX_TREE_BW = np.array(
    [[26.5, 18.5, 10.0], [24.0, 23.6, 17.8], [38.7, 41.4, 36.0], [70.0, 42.8, 24.0]]
)
PER_CH_MAX_NVLS_TREE_BW = np.array(
    [[26.5, 18.5, 10.0], [24.0, 23.6, 17.8], [0.0, 57.7, 45.5], [0.0, 96.0, 80.0]]
)
#: nvlsEfficiency[arch]: share of NVLink bandwidth an NVLS reduction reaches.
NVLS_EFFICIENCY = (0.0, 0.0, 0.85, 0.74)
#: treeCorrectionFactor[proto][log2(size/64)], 64 B .. 512 MiB.
# fmt: off
TREE_CORRECTION = np.array([
    [1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5,
     0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0],
    [1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6,
     0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 1.0, 1.0, 1.0],
    [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5,
     0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9, 0.9],
])
# fmt: on
#: The smallest correction per protocol: a tree is never faster than its bandwidth / this.
MIN_TREE_CORRECTION = tuple(float(row.min()) for row in TREE_CORRECTION)
#: getNetOverhead: per intra-node step of an inter-node ring (×3 for Simple).
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0}
#: CollNet Direct: 0.4 µs "arity serialization" per local rank.
COLLNET_ARITY_US = 0.4
#: PAT: log latency divided by 3.5 plus 2.8 µs per rank ("still a linear part").
PAT_LOG_DIVISOR = 3.5
PAT_LINEAR_US = 2.8
#: Ring/Simple all_reduce across nodes: latency × 1.4 (× 1.9 before Ampere) once each channel
#: carries >= 64 B per rank ("plateau effect of ring").
RING_PLATEAU = (1.9, 1.4)
#: NCCL_MAX_NVLS_ARITY, NCCL_MAX_DIRECT_ARITY + 1, ring search maxChannels (MAXCHANNELS / 2).
MAX_NVLS_ARITY = 32
MAX_COLLNET_LOCAL_RANKS = 8
MAX_SEARCH_CHANNELS = 32
MAX_COLL_CHANNELS = 64

# --- speed ladders of src/graph/search.cc (GB/s per channel) -----------------------------------

SPEEDS_INTRA = {
    "default": (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
    "sm90": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    "sm100": (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
}
# fmt: off
SPEEDS_INTER = {
    "default": (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0,
                4.0, 3.0, 2.4, 1.2, 0.24, 0.12),
    "sm90": (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0,
             2.4, 1.2, 0.24, 0.12),
    "sm100": (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0,
              12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12),
}
# fmt: on


def _ladder_key(arch: GpuArch) -> str:
    return {GpuArch.BLACKWELL: "sm100", GpuArch.HOPPER: "sm90"}.get(arch, "default")


def ladder_floor(bw_GBps: Any, ladder: tuple[float, ...]) -> FloatArray:
    """The fastest ladder speed not above `bw_GBps` (the slowest rung if none is)."""
    rungs = np.asarray(ladder[::-1])
    b = np.asarray(bw_GBps, dtype=np.float64)
    idx = np.searchsorted(rungs, b, side="right") - 1
    return np.asarray(rungs[np.clip(idx, 0, len(rungs) - 1)], dtype=np.float64)


def ring_search(
    per_gpu_GBps: Any, ladder: tuple[float, ...], max_channels: Any = MAX_SEARCH_CHANNELS
) -> tuple[FloatArray, FloatArray]:
    """Channels × per-channel speed the ring search settles on for a per-GPU capacity.

    search.cc, pass 1: from the fastest rung the capacity allows, try each rung while it is
    more than 0.49 of the first one found and keep the largest channels × speed (ties keep the
    faster rung); each channel takes `speed` of every GPU's link. Then `ncclTopoDupChannels`
    (below) and, in pass 2, faster rungs at the same channel count if they fit.

    >>> n, s = ring_search(370.8, SPEEDS_INTRA["sm90"])  # H100 SXM: 18 NVLinks × 20.6 GB/s
    >>> float(n), float(s)
    (6.0, 60.0)
    """
    cap = np.asarray(per_gpu_GBps, dtype=np.float64)
    maxc = np.asarray(max_channels, dtype=np.float64)
    first = ladder_floor(cap, ladder)
    best_n = np.zeros(np.broadcast(cap, maxc).shape)
    best_s = np.zeros_like(best_n)
    for speed in ladder:
        usable = (speed <= first) & (speed > 0.49 * first)
        nch = np.minimum(np.floor(cap / speed), maxc)
        better = usable & (nch * speed > best_n * best_s) & (nch >= 1)
        best_n = np.where(better, nch, best_n)
        best_s = np.where(better, speed, best_s)
    # nothing fits (capacity below the slowest rung): one channel at the capacity
    low = best_n == 0
    return np.where(low, 1.0, best_n), np.where(low, np.maximum(cap, 1e-9), best_s)


def dup_channels(n_ch: Any, speed: Any, cc_above_80: bool) -> tuple[FloatArray, FloatArray]:
    """ncclTopoDupChannels: double the channels at half the speed when a channel runs at
    >= 25 GB/s, unless (sm > 80 and speed < 50 and channels > 4)."""
    n_ch = np.asarray(n_ch, dtype=np.float64)
    speed = np.asarray(speed, dtype=np.float64)
    skip = (speed < 25.0) | (cc_above_80 & (speed < 50.0) & (n_ch > 4))
    dup = np.minimum(n_ch * 2, MAX_SEARCH_CHANNELS)
    factor = np.ceil(dup / n_ch)
    return np.where(skip, n_ch, dup), np.where(skip, speed, speed / factor)


def log2floor(x: Any) -> FloatArray:
    """log2i of NCCL: floor(log2(x)), 0 for x <= 1."""
    return np.floor(np.log2(np.maximum(np.asarray(x, dtype=np.float64), 1.0)))


@dataclass(frozen=True)
class Shape:
    """Where `ranks` ranks sit on a topology, per element: local ranks per node (ppn), nodes,
    sites; and the rates and latencies NCCL's model needs, in GB/s and µs like NCCL."""

    n: FloatArray
    ppn: FloatArray
    nodes: FloatArray
    sites: FloatArray
    nics: FloatArray
    arch: GpuArch
    intra_hw: str
    nvlink_GBps: FloatArray
    """Scale-up rate per GPU as NCCL rates it (NVLink count × per-link rate)."""
    net_ch_GBps: FloatArray
    """Per-channel speed the search plans on a NIC: a ladder rung <= min(NIC, host path)."""
    net_ch_per_nic: FloatArray
    net_cap_GBps: FloatArray
    """What a node's NICs sustain for this group: NICs × NIC rate × efficiency / oversub."""
    wan_cap_GBps: FloatArray
    net_lat_us: FloatArray
    wan_lat_us: FloatArray
    ll128_ok: BoolArray
    nvls_ok: BoolArray
    sharp_ok: BoolArray
    nvswitch: bool
    host_cpu: str
    jitter: tuple[tuple[FloatArray, FloatArray], ...]
    """(mean, spread) per level: intra, network, WAN; spread = σ·(H_n − 1)."""


def _harmonic(k: FloatArray) -> FloatArray:
    k = np.maximum(k, 1.0)
    approx = np.log(k) + 0.5772156649015329 + 1 / (2 * k) - 1 / (12 * k * k)
    return np.where(k <= 1, 1.0, approx)


def _jitter(link: Link | None, n: FloatArray) -> tuple[FloatArray, FloatArray]:
    zero = np.zeros_like(n)
    if link is None:
        return zero, zero
    mu = np.asarray(link.jitter_mean_s, dtype=np.float64) + zero
    spread = np.asarray(link.jitter_std_s, dtype=np.float64) * (_harmonic(n) - 1)
    return mu, spread


def channels_as_cabled(out: Link, arch: GpuArch) -> FloatArray:
    """Channels per NIC the ring search finds for the NIC rate the fabric was laid out for
    (`Link.layout_Bps`; the catalog's rate when no what-if replaced it)."""
    laid = out.bandwidth_Bps if out.layout_Bps is None else out.layout_Bps
    nic = np.asarray(laid, dtype=np.float64) / GB
    plan = np.minimum(nic, np.asarray(out.host_Bps, dtype=np.float64) / GB)
    speed = np.minimum(ladder_floor(plan, SPEEDS_INTER[_ladder_key(arch)]), plan)
    return np.maximum(np.floor(nic / speed), 1.0)


def shape_of(n: FloatArray, topo: Topology) -> Shape:
    """NCCL's view of `n` ranks on `topo` (all fields broadcast to n's shape)."""
    G = np.asarray(topo.gpus_per_node, dtype=np.float64)
    ppn = np.minimum(n, G)
    nodes = np.ceil(n / G)
    if topo.nodes_per_site is None:
        sites = np.ones_like(nodes)
    else:
        per_site = np.asarray(topo.nodes_per_site, dtype=np.float64)
        sites = np.ceil(nodes / per_site)
    arch = topo.arch
    up, out, wan = topo.scale_up, topo.scale_out, topo.wan
    zero = np.zeros_like(n)
    inf = np.inf
    nics = np.minimum(np.asarray(topo.nics_per_node, dtype=np.float64), ppn) + zero
    if up is not None:
        nvlink = np.asarray(up.bandwidth_Bps, dtype=np.float64) * up.efficiency / GB + zero
        intra_hw = "nvlink" if up.nvlink else "pci"
    else:
        nvlink, intra_hw = zero + inf, "nvlink"
    if out is not None:
        nic_nominal = np.asarray(out.bandwidth_Bps, dtype=np.float64) / GB
        plan = np.minimum(nic_nominal, np.asarray(out.host_Bps, dtype=np.float64) / GB)
        ch_speed = ladder_floor(plan, SPEEDS_INTER[_ladder_key(arch)])
        ch_speed = np.minimum(ch_speed, plan) + zero
        ch_per_nic = np.maximum(np.floor(nic_nominal / ch_speed), 1.0) + zero
        # the ladder sets how many channels the search plans and NCCL's own estimate
        # (search.cc:1058-1160 -> graph bwInter -> tuning.cc:324 busBw = nChannels × bw);
        # no transport paces a channel at its rung (net_socket.cc moves what TCP carries;
        # the lab's gloo busbw follows the tbf rate continuously, docs/lab.md): the channels
        # share the NIC's rate, so a 15 Gb/s NIC is not priced at its 9.6 Gb/s rung
        with np.errstate(invalid="ignore"):  # an unbounded NIC (plan = inf): keep the rung
            ch_speed = np.where(
                np.isfinite(plan), np.maximum(ch_speed, plan / ch_per_nic), ch_speed
            )
        flows = topo.streams_per_peer(out) * np.maximum(ppn / nics, 1.0)
        per_nic = np.minimum(np.asarray(topo.link_Bps(out, flows)) / GB, plan)
        # flow collisions on the spine paths (static ECMP), or the adaptive-routing balance;
        # the flows hashed are the channels NCCL opens on the NIC as cabled (a what-if rate
        # keeps them, so more bandwidth never hashes fewer flows)
        balance = congestion.ring_balance(
            topo, nodes, congestion.NCCL_COLL_CHANNEL_FACTOR * channels_as_cabled(out, arch)
        )
        net_cap = (
            nics * per_nic * balance / np.asarray(topo.oversubscription, dtype=np.float64) + zero
        )
        net_lat = np.asarray(out.latency_s, dtype=np.float64) / US + zero
        gdr = out.gpudirect
    else:
        ch_speed, ch_per_nic, net_cap, net_lat, gdr = zero + inf, zero + 1, zero + inf, zero, True
    if wan is not None:
        # a flat NCCL ring or tree crosses a site boundary on each of its two channels
        wan_flows = topo.streams_per_peer(wan) * 2.0
        wan_cap = np.asarray(topo.link_Bps(wan, wan_flows)) / GB + zero
        wan_lat = np.asarray(wan.latency_s, dtype=np.float64) / US + zero
    else:
        wan_cap, wan_lat = zero + inf, zero
    multi = nodes > 1
    # LL128: NVLink (or a lone GPU) inside the node, GPUDirect NICs across nodes (tuning.cc)
    intra_ok = (up is None) or up.nvlink
    ll128_ok = np.asarray(intra_ok & (~multi | gdr)) & np.ones_like(n, dtype=bool)
    nvls_hw = (
        up is not None
        and up.nvswitch
        and topo.in_network_on(up)
        and arch in (GpuArch.HOPPER, GpuArch.BLACKWELL)
    )
    sharp_hw = out is not None and topo.in_network_on(out)
    nvls_ok = np.asarray(nvls_hw & (ppn >= 2)) & np.ones_like(n, dtype=bool)
    sharp_ok = np.asarray(sharp_hw & multi & (sites <= 1)) & np.ones_like(n, dtype=bool)
    jitter = (_jitter(up, n), _jitter(out, n), _jitter(wan, n))
    return Shape(
        n=n,
        ppn=ppn,
        nodes=nodes,
        sites=sites,
        nics=nics,
        arch=arch,
        intra_hw=intra_hw,
        nvlink_GBps=nvlink,
        net_ch_GBps=ch_speed,
        net_ch_per_nic=ch_per_nic,
        net_cap_GBps=net_cap,
        wan_cap_GBps=wan_cap,
        net_lat_us=net_lat,
        wan_lat_us=wan_lat,
        ll128_ok=ll128_ok,
        nvls_ok=nvls_ok,
        sharp_ok=sharp_ok,
        nvswitch=bool(up is not None and up.nvswitch),
        host_cpu=topo.host_cpu,
        jitter=jitter,
    )


@dataclass(frozen=True)
class Candidate:
    """One (algorithm, protocol): size-independent latency (s) and inverse algorithm
    bandwidth (s/B), with the size-dependent corrections NCCL applies."""

    algo: NcclAlgo
    proto: Proto
    latency_s: FloatArray
    inv_bw: FloatArray
    tree_correction: bool = False
    plateau_bytes: FloatArray | None = None
    """Ring/Simple all_reduce across nodes: from this size on, latency × plateau_factor."""
    plateau_factor: float = 1.0

    def time_s(self, size: FloatArray, corr_row: FloatArray | None = None) -> FloatArray:
        bw_term = size * self.inv_bw
        if self.tree_correction and corr_row is not None:
            bw_term = bw_term / corr_row
        lat = self.latency_s
        if self.plateau_bytes is not None:
            lat = np.where(size >= self.plateau_bytes, lat * self.plateau_factor, lat)
        return lat + bw_term


def tree_correction_rows(size: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per protocol, NCCL's tree bandwidth correction for each size (1 outside 64 B..256 MiB)."""
    with np.errstate(divide="ignore"):
        idx = np.floor(np.log2(np.maximum(size, 1.0) / 64.0))
    valid = (idx >= 0) & (idx < 23)
    i = np.clip(idx, 0, 22).astype(np.intp)
    return tuple(np.where(valid, TREE_CORRECTION[p][i], 1.0) for p in range(3))  # type: ignore[return-value]


def _steps_jitter(sh: Shape, intra: Any, net: Any, wan: Any) -> FloatArray:
    """Mean plus straggler jitter of a schedule with the given step counts on each level."""
    total = np.zeros_like(sh.n)
    for steps, (mu, spread) in zip((intra, net, wan), sh.jitter, strict=True):
        s = np.asarray(steps, dtype=np.float64)
        total = total + s * mu + np.sqrt(np.maximum(s, 0.0)) * spread
    return total


def candidates(func: NcclFunc, sh: Shape) -> list[Candidate]:
    """Every (algorithm, protocol) NCCL would price for `func`, with its eligibility applied
    (an ineligible element gets infinite time)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _candidates(func, sh)


def _candidates(func: NcclFunc, sh: Shape) -> list[Candidate]:
    n, ppn, nodes, sites = sh.n, sh.ppn, sh.nodes, sh.sites
    a = _ARCH[sh.arch]
    multi = nodes > 1
    idx2 = np.where(nodes <= 2, nodes - 1, 2).astype(np.intp)
    ll_row = np.where(multi, 1 if sh.host_cpu == "amd" else 0, a).astype(np.intp)
    ll_max = LL_MAX_BW[ll_row, idx2]
    zero = np.zeros(n.shape)
    nsteps = {
        NcclFunc.ALL_REDUCE: 2 * (n - 1),
        NcclFunc.ALL_GATHER: n - 1,
        NcclFunc.REDUCE_SCATTER: n - 1,
        NcclFunc.BROADCAST: n,
        NcclFunc.REDUCE: n,
    }[func]
    is_ar = func is NcclFunc.ALL_REDUCE
    is_agrs = func in (NcclFunc.ALL_GATHER, NcclFunc.REDUCE_SCATTER)

    # ring graph: one node searches NVLink with the intra ladder; across nodes one channel
    # per NIC (or more if a rung fits several times) at the inter ladder speed
    lad_intra = SPEEDS_INTRA[_ladder_key(sh.arch)]
    n1, s1 = ring_search(sh.nvlink_GBps, lad_intra)
    n1, s1 = dup_channels(n1, s1, a >= 2)
    nm = np.minimum(np.maximum(np.floor(sh.nics), 1.0) * sh.net_ch_per_nic, MAX_SEARCH_CHANNELS)
    sm = sh.net_ch_GBps
    # a GPU's NVLink carries the channels whose NIC is another GPU's: (ppn - 1)/ppn of them
    nvl_fit = np.floor(sh.nvlink_GBps / (sm * np.maximum(ppn - 1, 1.0) / ppn))
    nm = np.where(ppn > 1, np.minimum(nm, np.maximum(nvl_fit, 1.0)), nm)
    nm, sm = dup_channels(nm, sm, a >= 2)
    ring_ch = np.where(multi, nm, n1)
    ring_s = np.where(multi, sm, s1)
    # what the hardware sustains for a ring: the NVLink of a GPU, the node's NICs, the WAN
    # (across nodes a GPU's NVLink carries the (ppn - 1)/ppn of channels leaving by other NICs)
    nvl_share = np.where(ppn > 1, sh.nvlink_GBps * ppn / np.maximum(ppn - 1, 1.0), np.inf)
    phys = np.where(multi, np.minimum(sh.net_cap_GBps, nvl_share), sh.nvlink_GBps)
    phys = np.where(sites > 1, np.minimum(phys, sh.wan_cap_GBps), phys)
    ring_bus = np.minimum(ring_ch * ring_s, phys)
    coll_ch = np.minimum(2 * ring_ch, MAX_COLL_CHANNELS)
    coll_ch = np.where(
        (a >= 2) & multi & (ring_s > 45) & (coll_ch < 16), np.minimum(2 * coll_ch, 64), coll_ch
    )

    # latencies
    hw_intra = HW_LAT_US[sh.intra_hw]
    hw_net = HW_LAT_US["net"]
    one_gpu = ppn <= 1
    out: list[Candidate] = []

    def inter_lat(algo: NcclAlgo, p: int, extra_us: FloatArray) -> FloatArray:
        base = np.where(one_gpu, hw_net[NcclAlgo.TREE][p], hw_net[algo][p])
        return base + extra_us * (2.0 if p == 2 else 1.0)

    def add(
        algo: NcclAlgo,
        proto: Proto,
        lat_us: FloatArray,
        jit: FloatArray,
        algbw_GBps: FloatArray,
        ok: Any,
        **kw: Any,
    ) -> None:
        ok_arr = np.asarray(ok) & (algbw_GBps > 0) & np.isfinite(lat_us)
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = np.where(ok_arr, 1.0 / (algbw_GBps * GB), 0.0) + zero
        lat = np.where(ok_arr, lat_us * US + jit, np.inf) + zero
        out.append(Candidate(algo, proto, lat, inv, **kw))

    log_nodes = log2floor(nodes)
    log_sites = log2floor(sites)
    ring_ratio = n / nsteps

    # --- ring (every function, every protocol)
    n_inter = np.where(multi, np.where(is_ar, 2, 1) * (nodes - 1), 0.0)
    if func in (NcclFunc.BROADCAST, NcclFunc.REDUCE):
        n_inter = np.where(multi, nodes - 1, 0.0)
    n_wan = np.minimum(np.where(is_ar, 2, 1) * (sites - 1), n_inter)
    n_site = n_inter - n_wan
    for proto in PROTOS:
        p = _P[proto]
        bus = ring_bus
        if proto is Proto.LL:
            bus = np.minimum(ll_max, bus * 0.5)
        elif proto is Proto.LL128:
            bus = np.minimum(bus * 0.92, ring_ch * PER_CH_MAX_RING_LL128_BW[a, idx2])
        algbw = bus * ring_ratio
        if func in (NcclFunc.BROADCAST, NcclFunc.REDUCE):
            lat_step = np.where(
                multi,
                hw_net[NcclAlgo.TREE if p == 2 else NcclAlgo.RING][p],
                hw_intra[NcclAlgo.TREE if p == 2 else NcclAlgo.RING][p],
            )
            lat = BASE_LAT_US[NcclAlgo.RING][p] + nsteps * lat_step
            lat = lat + n_site * sh.net_lat_us + n_wan * sh.wan_lat_us
            jit = _steps_jitter(sh, nsteps - n_inter, n_site, n_wan)
        else:
            ovh = np.where(multi, NET_OVERHEAD_US[sh.host_cpu] * (3 if p == 2 else 1), 0.0)
            intra = np.maximum(hw_intra[NcclAlgo.RING][p], ovh)
            lat = (
                BASE_LAT_US[NcclAlgo.RING][p]
                + (nsteps - n_inter) * intra
                + n_site * inter_lat(NcclAlgo.RING, p, sh.net_lat_us)
                + n_wan * inter_lat(NcclAlgo.RING, p, sh.wan_lat_us)
            )
            jit = _steps_jitter(sh, nsteps - n_inter, n_site, n_wan)
        ok = sh.ll128_ok if proto is Proto.LL128 else True
        plateau = None
        if is_ar and proto is Proto.SIMPLE:
            plateau = np.where(multi, 64.0 * coll_ch * n, np.inf)
        add(
            NcclAlgo.RING,
            proto,
            lat,
            jit,
            algbw,
            ok,
            plateau_bytes=plateau,
            plateau_factor=RING_PLATEAU[1 if a >= 1 else 0],
        )

    if is_ar:
        # --- tree: chain inside the node, double binary tree across nodes
        tree_s = np.where(
            multi & (nodes <= 2),
            np.minimum(2 * ring_s, np.maximum(sh.nvlink_GBps / ring_ch, ring_s)),
            ring_s,
        )
        tree_phys = np.where(
            multi, np.minimum(sh.net_cap_GBps * np.where(nodes <= 2, 2, 1), sh.nvlink_GBps), phys
        )
        tree_phys = np.where(sites > 1, np.minimum(tree_phys, 2 * sh.wan_cap_GBps), tree_phys)
        tree_bus0 = np.minimum(ring_ch * tree_s, tree_phys)
        tree_bus0 = np.minimum(tree_bus0 * 0.92, ring_ch * PER_CH_MAX_TREE_BW[a, idx2])
        t_site_levels = log_nodes - log_sites
        for proto in PROTOS:
            p = _P[proto]
            bus = tree_bus0
            if proto is Proto.LL:
                bus = np.minimum(bus / 3.8, ll_max)
            elif proto is Proto.LL128:
                bus = np.minimum(
                    bus * np.where(multi, 120.0 / 128.0, 7.0 / 9.0),
                    ring_ch * PER_CH_MAX_TREE_LL128_BW[a, idx2],
                )
            lat = BASE_LAT_US[NcclAlgo.TREE][p] + 2 * (
                (ppn - 1) * hw_intra[NcclAlgo.TREE][p]
                + t_site_levels * inter_lat(NcclAlgo.TREE, p, sh.net_lat_us)
                + log_sites * inter_lat(NcclAlgo.TREE, p, sh.wan_lat_us)
            )
            jit = _steps_jitter(sh, 2 * (ppn - 1), 2 * t_site_levels, 2 * log_sites)
            ok = sh.ll128_ok if proto is Proto.LL128 else True
            add(NcclAlgo.TREE, proto, lat, jit, bus * 0.5, ok, tree_correction=True)

    # --- NVLS: NVSwitch multicast inside the node; across nodes NVLS_TREE (tree over the
    # network) or NVLS + SHARP. One head (channel) per local GPU, or per NIC across nodes.
    nvls_funcs = (NcclFunc.ALL_REDUCE, NcclFunc.ALL_GATHER, NcclFunc.REDUCE_SCATTER)
    if func in nvls_funcs and bool(np.any(sh.nvls_ok)):
        eff = NVLS_EFFICIENCY[a]
        heads = np.where(multi, np.minimum(ppn, np.maximum(np.floor(sh.nics), 1.0)), ppn)
        heads = np.minimum(heads, MAX_NVLS_ARITY)
        lad = np.where(multi, 0, 1)
        intra_rung = np.where(
            lad == 1,
            ladder_floor(sh.nvlink_GBps / (heads + 1), lad_intra),
            ladder_floor(sh.nvlink_GBps / (heads + 1), SPEEDS_INTER[_ladder_key(sh.arch)]),
        )
        single_inter = ladder_floor(2 * intra_rung, lad_intra)
        per_head_net = np.minimum(sh.net_ch_GBps, sh.net_cap_GBps / np.maximum(heads, 1.0))
        inter_bw = np.where(multi, per_head_net, single_inter)
        intra_bw = intra_rung * eff * (heads - 1) / heads
        # all_reduce pipelines two operations; gathers use (ppn - 1)/ppn of it
        intra_bw = intra_bw * 2 if is_ar else intra_bw * (ppn - 1) / ppn
        nvls_lat_intra = hw_intra[NcclAlgo.NVLS][2]
        # NVLS proper: single node, or across nodes with SHARP (CollNet enabled)
        bw = np.minimum(intra_bw, inter_bw)
        bus = heads * bw
        algbw = bus * ring_ratio if is_ar else bus
        lat = nvls_lat_intra + np.where(multi, inter_lat(NcclAlgo.NVLS, 2, sh.net_lat_us), 0)
        ok = sh.nvls_ok & (heads >= 2) & (~multi | sh.sharp_ok)
        if not is_ar:
            ok = ok & (ppn <= MAX_NVLS_ARITY)
        jit = _steps_jitter(sh, 1.0, np.where(multi, 1.0, 0.0), 0.0)
        add(NcclAlgo.NVLS, Proto.SIMPLE, lat, jit, algbw, ok)
        if is_ar:
            tree_cap = PER_CH_MAX_NVLS_TREE_BW[a, idx2]
            wan_ok = np.where(sites > 1, sh.wan_cap_GBps / np.maximum(heads, 1.0), np.inf)
            bw_t = np.minimum(intra_bw, np.minimum(inter_bw * np.where(nodes <= 2, 2, 1), wan_ok))
            bw_t = np.minimum(bw_t, tree_cap)
            t_site_levels = log_nodes - log_sites
            lat = (
                BASE_LAT_US[NcclAlgo.NVLS_TREE][2]
                + hw_intra[NcclAlgo.NVLS_TREE][2]
                + 2 * t_site_levels * inter_lat(NcclAlgo.NVLS_TREE, 2, sh.net_lat_us)
                + 2 * log_sites * inter_lat(NcclAlgo.NVLS_TREE, 2, sh.wan_lat_us)
            )
            ok = sh.nvls_ok & (heads >= 2) & multi
            jit = _steps_jitter(sh, 1.0, 2 * t_site_levels, 2 * log_sites)
            add(
                NcclAlgo.NVLS_TREE,
                Proto.SIMPLE,
                lat,
                jit,
                heads * bw_t * ring_ratio,
                ok,
                tree_correction=sh.arch is GpuArch.BLACKWELL,
            )

    # --- CollNet (network SHARP): needs the SHARP plugin enabled, >= 2 nodes, <= 8 local ranks
    if (is_ar or is_agrs) and bool(np.any(sh.sharp_ok)):
        heads = np.minimum(ppn, np.maximum(np.floor(sh.nics), 1.0))
        bw_c = np.minimum(sh.net_ch_GBps, sh.net_cap_GBps / heads)
        ok = sh.sharp_ok & (ppn <= MAX_COLLNET_LOCAL_RANKS)
        inter = inter_lat(NcclAlgo.COLLNET_DIRECT, 2, sh.net_lat_us)
        lat_direct = (
            2
            * (
                np.minimum(1, ppn - 1) * hw_intra[NcclAlgo.COLLNET_DIRECT][2]
                + (ppn - 1) * COLLNET_ARITY_US
            )
            + inter
        )
        jit = _steps_jitter(sh, 2.0, 1.0, 0.0)
        if is_ar:
            f = ppn / heads
            f = f - (f - 1) / 2
            bus = heads * bw_c / f * (0.85 if a >= 2 else 1.0)
            add(NcclAlgo.COLLNET_DIRECT, Proto.SIMPLE, lat_direct, jit, bus * 0.5, ok & sh.nvswitch)
            lat_chain = 2 * (ppn - 1) * hw_intra[NcclAlgo.COLLNET_CHAIN][2] + inter_lat(
                NcclAlgo.COLLNET_CHAIN, 2, sh.net_lat_us
            )
            jit = _steps_jitter(sh, 2 * (ppn - 1), 1.0, 0.0)
            add(NcclAlgo.COLLNET_CHAIN, Proto.SIMPLE, lat_chain, jit, heads * bw_c * 0.5, ok)
        else:
            bus = ppn * np.minimum(sh.nvlink_GBps, 0.9 * bw_c)
            add(
                NcclAlgo.COLLNET_DIRECT,
                Proto.SIMPLE,
                lat_direct,
                jit,
                bus,
                ok & sh.nvswitch & (ppn <= heads),
            )

    # --- PAT: all_gather / reduce_scatter with one GPU per node
    if is_agrs:
        lat = (
            BASE_LAT_US[NcclAlgo.PAT][2]
            + (log_nodes - log_sites) * inter_lat(NcclAlgo.PAT, 2, sh.net_lat_us) / PAT_LOG_DIVISOR
            + log_sites * inter_lat(NcclAlgo.PAT, 2, sh.wan_lat_us) / PAT_LOG_DIVISOR
            + n * PAT_LINEAR_US
        )
        jit = _steps_jitter(sh, 0.0, log_nodes - log_sites, log_sites)
        add(NcclAlgo.PAT, Proto.SIMPLE, lat, jit, ring_bus * 0.75, (ppn <= 1) & multi)
    return out
