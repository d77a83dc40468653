"""NCCL's own cost model: per algorithm × protocol a latency and a bandwidth.

This re-derives, in vectorised numpy, the tuning model of NCCL 2.30.7-1 (NVIDIA/nccl @
5067397c, identical to tag v2.30.7-1). The constant tables below follow src/graph/tuning.cc
in its own order, keyed as NCCL keys them ([algo][proto], [arch][nodes]), so a diff against
upstream stays mechanical; what NCCL learns from the machine at run time (channel counts,
per-channel speeds, NIC latency) is derived from the bandwall topology as documented on each
function.

NCCL prices a collective as latency(algo, proto) + size / algbw(algo, proto) with `size`
nccl-tests' buffer size (its nBytes), and its tuner picks the pair of lowest predicted time
(enqueue.cc `topoGetAlgoInfo`). Every :class:`Candidate` carries two views of that:

- **NCCL's view** (`nccl_latency_s`, and the step functions it applies to the bandwidth at
  run time: the tree correction per power of two and the ring "plateau", tuning.cc
  `ncclTopoGetAlgoTime`): what the tuner compares. bandwall reproduces its choice.
- **The price**: the same latency plus network jitter, the same bandwidth, but those step
  functions interpolated so time is continuous and monotone in size, and the channels NCCL
  actually runs at a size (enqueue.cc: fewer channels until each has `nt × threadThreshold`
  bytes, :data:`THREAD_THRESHOLD`). Per-call overheads are added by the collectives package.

Where bandwall departs from NCCL, it says so:

- NCCL's bandwidths are what its topology search *plans*; bandwall also caps them by what the
  hardware sustains: NICs × NIC rate × fabric efficiency / oversubscription, the NIC's PCIe
  host path, TCP limits on socket links, the site uplink across a WAN, and the fabric's load
  balance across spine paths (flow collisions under static ECMP, :mod:`bandwall.model.
  congestion`). NCCL's tuner is given those capped bandwidths too.
- The channel *count* is NCCL's search at the NIC rate the cluster was laid out for
  (`Link.layout_Bps`); a what-if NIC rate moves the planned per-channel speed (the speed
  ladder, search.cc) and the caps, not the channel count. So more NIC bandwidth never buys
  fewer channels or fewer hashed flows.
- NCCL adds the net plugin's self-reported latency to every network step (0 for InfiniBand,
  75 µs for aws-ofi-nccl on p5); bandwall adds the fabric's measured one-way latency.
- Network jitter (bandwall's straggler term) is added per step to the price; NCCL has none.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from bandwall.model import congestion
from bandwall.model.jitter import straggler_spread_s
from bandwall.model.topology import GpuArch, GroupShape, Link, Topology, group_shape
from bandwall.units import GB, US

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.intp]


class Proto(StrEnum):
    """NCCL protocols: LL (8 B data + 8 B flag per 16 B line), LL128 (120 of 128 B), Simple."""

    LL = "LL"
    LL128 = "LL128"
    SIMPLE = "Simple"


class NcclAlgo(StrEnum):
    """NCCL's algorithms, in NCCL's own order (src/include/plugin/nccl_tuner.h): the tuner
    keeps the first of equal times, so candidates are built in this order."""

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

# --- src/graph/tuning.cc, in file order (µs and GB/s) ------------------------------------------

#: nvlsEfficiency[arch] (tuning.cc:139): share of NVLink bandwidth an NVLS reduction reaches.
NVLS_EFFICIENCY = (0.0, 0.0, 0.85, 0.74)

# ncclTunerConstantsDefaults (tuning.cc:146-212)
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
#: perChMaxRingLL128Bws[arch][N1, N2, N4]
PER_CH_MAX_RING_LL128_BW = np.array(
    [[20.0, 20.0, 20.0], [20.0, 20.0, 20.0], [36.7, 36.7, 36.7], [40.0, 40.0, 40.0]]
)
#: perChMaxTreeLL128Bws[arch][N1, N2, N4]
PER_CH_MAX_TREE_LL128_BW = np.array(
    [[20.0, 20.0, 20.0], [20.0, 20.0, 20.0], [36.7, 36.7, 29.0], [55.6, 31.67, 20.0]]
)
#: perChMaxTreeBws[arch][N1, N2, N4]
PER_CH_MAX_TREE_BW = np.array(
    [[26.5, 18.5, 10.0], [24.0, 23.6, 17.8], [38.7, 41.4, 36.0], [70.0, 42.8, 24.0]]
)
#: perChMaxNVLSTreeBws[arch][N1, N2, N4]
PER_CH_MAX_NVLS_TREE_BW = np.array(
    [[26.5, 18.5, 10.0], [24.0, 23.6, 17.8], [0.0, 57.7, 45.5], [0.0, 96.0, 80.0]]
)

#: getNetOverhead (tuning.cc:228): per intra-node step of an inter-node ring (×3 for Simple).
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0}

# ncclTopoTuneModel's "model refinements" (tuning.cc:326-337) and latencies (tuning.cc:384-434)
#: Ring/LL uses half the bus; ring/LL128 0.92 of it; tree 0.92, LL /3.8, LL128 7/9 on one node
#: and 120/128 across nodes; PAT 0.75.
RING_LL_SHARE = 0.5
LL128_SHARE = 0.92
TREE_SHARE = 0.92
TREE_LL_DIVISOR = 3.8
TREE_LL128_SHARE = (7.0 / 9.0, 120.0 / 128.0)
PAT_SHARE = 0.75
#: CollNet Direct: 0.4 µs "arity serialization" per local rank.
COLLNET_ARITY_US = 0.4
#: PAT: log latency divided by 3.5 plus 2.8 µs per rank ("still a linear part").
PAT_LOG_DIVISOR = 3.5
PAT_LINEAR_US = 2.8

# thread thresholds (tuning.cc:588-595, src/include/comm.h:49-51) and thread counts
# (src/include/device.h:93-114): enqueue.cc:2093 drops channels while nBytes < nc × nt × thr
#: threadThresholds per protocol (LL, LL128, Simple); ring/LL's is × nRanks.
THREAD_THRESHOLD = (8.0, 8.0, 64.0)
#: CollNet chain and direct Simple: 512.
COLLNET_THREAD_THRESHOLD = 512.0
#: maxThreads per protocol for ring and tree: NCCL_LL_MAX_NTHREADS, NCCL_LL128_MAX_NTHREADS,
#: NCCL_SIMPLE_MAX_NTHREADS; CollNet runs NCCL_MAX_NTHREADS.
MAX_NTHREADS = (512.0, 640.0, 512.0)
COLLNET_NTHREADS = 640.0

#: treeCorrectionFactor[proto][log2(size/64)] (tuning.cc:623), 64 B .. 512 MiB.
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
#: ncclTopoGetAlgoTime (tuning.cc:640-645): entries used by tree (logSize < 23) and by
#: NVLS-tree on Blackwell x86 (logSize < 24); beyond them the factor is 1.
TREE_CORRECTION_ENTRIES = {NcclAlgo.TREE: 23, NcclAlgo.NVLS_TREE: 24}
#: Ring/Simple all_reduce across nodes: latency × 1.4 (× 1.9 before Ampere) once each channel
#: carries >= 64 B per rank (tuning.cc:647-649, "plateau effect of ring").
RING_PLATEAU = (1.9, 1.4)
RING_PLATEAU_BYTES_PER_RANK = 64.0

#: nvlsChannels (src/transport/nvls.cc:155-157): Hopper 16; Blackwell 32 across nodes, 24 in one.
NVLS_NCHANNELS = {GpuArch.HOPPER: (16, 16), GpuArch.BLACKWELL: (24, 32)}
#: NCCL_MAX_NVLS_ARITY, NCCL_MAX_DIRECT_ARITY + 1, ring search maxChannels (MAXCHANNELS / 2),
#: MAXCHANNELS.
MAX_NVLS_ARITY = 32
MAX_COLLNET_LOCAL_RANKS = 8
MAX_SEARCH_CHANNELS = 32
MAX_COLL_CHANNELS = 64

# --- speed ladders of src/graph/search.cc:1051-1066 (GB/s per channel) -------------------------

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
    """ncclTopoDupChannels (search.cc:1036): double the channels at half the speed when a
    channel runs at >= 25 GB/s, unless (sm > 80 and speed < 50 and channels > 4)."""
    n_ch = np.asarray(n_ch, dtype=np.float64)
    speed = np.asarray(speed, dtype=np.float64)
    skip = (speed < 25.0) | (cc_above_80 & (speed < 50.0) & (n_ch > 4))
    dup = np.minimum(n_ch * 2, MAX_SEARCH_CHANNELS)
    factor = np.ceil(dup / n_ch)
    return np.where(skip, n_ch, dup), np.where(skip, speed, speed / factor)


#: False inside `without_speed_ladder`: NICs planned at their full rate.
_SPEED_LADDER: ContextVar[bool] = ContextVar("speed_ladder", default=True)


@contextmanager
def without_speed_ladder() -> Iterator[None]:
    """Price as if NCCL's search planned every NIC at its full rate. Comparing with the real
    price says where the speed ladder (search.cc:1051-1066), not the hardware, sets the price:
    there it steps with the NIC rate instead of following it."""
    token = _SPEED_LADDER.set(False)
    try:
        yield
    finally:
        _SPEED_LADDER.reset(token)


def speed_ladder_on() -> bool:
    """False inside `without_speed_ladder` (caches of priced options key on it)."""
    return _SPEED_LADDER.get()


def nic_plan(plan_GBps: Any, ladder: tuple[float, ...]) -> tuple[FloatArray, FloatArray]:
    """(channels, planned GB/s) the search fits on one NIC rated `plan_GBps`: channels at the
    fastest rung not above the rate, as many as fit (at least one, at the rate itself when
    it is below the slowest rung).

    >>> [float(v) for v in nic_plan(1.875, SPEEDS_INTER["sm90"])]  # a 15 Gb/s socket NIC
    [1.0, 1.2]
    """
    plan = np.asarray(plan_GBps, dtype=np.float64)
    rung = np.minimum(ladder_floor(plan, ladder), plan)
    channels = np.maximum(np.floor(plan / rung), 1.0)
    return channels, channels * rung


def log2floor(x: Any) -> FloatArray:
    """log2i of NCCL: floor(log2(x)), 0 for x <= 1."""
    return np.floor(np.log2(np.maximum(np.asarray(x, dtype=np.float64), 1.0)))


@dataclass(frozen=True)
class Shape:
    """NCCL's view of a group on a topology, per element: where the ranks sit
    (:class:`~bandwall.model.topology.GroupShape`) and the rates and latencies its model
    needs, in GB/s and µs like NCCL."""

    group: GroupShape
    nics: FloatArray
    arch: GpuArch
    intra_hw: str
    nvlink_GBps: FloatArray
    """Scale-up rate per GPU as NCCL rates it (NVLink count × per-link rate)."""
    nic_plan_GBps: FloatArray
    """What the search plans on one NIC at its current rate: channels × ladder rung (<= the
    NIC's rate and its host path)."""
    nic_rate_GBps: FloatArray
    """The NIC as NCCL sees it: min(rate, host path)."""
    layout_rung_GBps: FloatArray
    """Per-channel rung at the NIC rate the fabric was laid out for (sets channel counts)."""
    layout_ch_per_nic: FloatArray
    net_cap_GBps: FloatArray
    """What a node's NICs sustain for this group: NICs × NIC rate × efficiency / oversub ×
    the fabric's load balance."""
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

    @property
    def n(self) -> FloatArray:
        return self.group.num_ranks

    @property
    def ppn(self) -> FloatArray:
        return self.group.ranks_per_node

    @property
    def nodes(self) -> FloatArray:
        return self.group.num_nodes

    @property
    def sites(self) -> FloatArray:
        return self.group.num_sites


def _jitter(link: Link | None, n: FloatArray) -> tuple[FloatArray, FloatArray]:
    zero = np.zeros_like(n)
    if link is None:
        return zero, zero
    mu = np.asarray(link.jitter_mean_s, dtype=np.float64) + zero
    return mu, straggler_spread_s(link.jitter_std_s, n) + zero


def shape_of(n: FloatArray, topo: Topology) -> Shape:
    """NCCL's view of `n` ranks on `topo` (all fields broadcast to n's shape)."""
    g = group_shape(n, topo)
    n = g.num_ranks
    ppn, nodes, sites = g.ranks_per_node, g.num_nodes, g.num_sites
    arch = topo.arch
    ladder = SPEEDS_INTER[_ladder_key(arch)]
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
        host = np.asarray(out.host_Bps, dtype=np.float64) / GB
        rate = np.minimum(np.asarray(out.bandwidth_Bps, dtype=np.float64) / GB, host) + zero
        laid_out = out.bandwidth_Bps if out.layout_Bps is None else out.layout_Bps
        layout_rate = np.minimum(np.asarray(laid_out, dtype=np.float64) / GB, host) + zero
        layout_ch, layout_plan = nic_plan(layout_rate, ladder)
        _, plan = nic_plan(rate, ladder) if _SPEED_LADDER.get() else (None, rate)
        flows = topo.streams_per_peer(out) * np.maximum(ppn / nics, 1.0)
        per_nic = np.minimum(np.asarray(topo.link_Bps(out, flows)) / GB, rate)
        # flow collisions on the spine paths (static ECMP), or the adaptive-routing balance
        balance = congestion.ring_balance(
            topo, nodes, congestion.NCCL_COLL_CHANNEL_FACTOR * layout_ch
        )
        net_cap = (
            nics * per_nic * balance / np.asarray(topo.oversubscription, dtype=np.float64) + zero
        )
        net_lat = np.asarray(out.latency_s, dtype=np.float64) / US + zero
        gdr = out.gpudirect
    else:
        rate = plan = net_cap = zero + inf
        layout_plan, layout_ch, net_lat, gdr = zero + inf, zero + 1, zero, True
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
    return Shape(
        group=g,
        nics=nics,
        arch=arch,
        intra_hw=intra_hw,
        nvlink_GBps=nvlink,
        nic_plan_GBps=plan,
        nic_rate_GBps=rate,
        layout_rung_GBps=layout_plan / layout_ch,
        layout_ch_per_nic=layout_ch,
        net_cap_GBps=net_cap,
        wan_cap_GBps=wan_cap,
        net_lat_us=net_lat,
        wan_lat_us=wan_lat,
        ll128_ok=ll128_ok,
        nvls_ok=nvls_ok,
        sharp_ok=sharp_ok,
        nvswitch=bool(up is not None and up.nvswitch),
        host_cpu=topo.host_cpu,
        jitter=(_jitter(up, n), _jitter(out, n), _jitter(wan, n)),
    )


@dataclass(frozen=True)
class Candidate:
    """One (algorithm, protocol): size-independent latencies (s) and inverse algorithm
    bandwidth (s/B), with what depends on size.

    `latency_s` is the price's (NCCL's latency plus jitter), `nccl_latency_s` the tuner's.
    The bandwidth term is divided by NCCL's tree correction when `tree_entries` is set (the
    first `tree_entries` entries of :data:`TREE_CORRECTION`), and latency grows by
    `plateau_factor` from `plateau_bytes` on (ring/Simple all_reduce across nodes): as steps in
    NCCL's prediction, interpolated in the price (:func:`tree_correction_smooth`,
    :func:`plateau_ramp`). Below `channels × chunk_bytes` NCCL runs fewer channels, one per
    `chunk_bytes` (enqueue.cc:2093). The collectives package prices both views.
    """

    algo: NcclAlgo
    proto: Proto
    latency_s: FloatArray
    nccl_latency_s: FloatArray
    inv_bw: FloatArray
    tree_entries: int | None = None
    plateau_bytes: FloatArray | None = None
    plateau_factor: float = 1.0
    channels: FloatArray | None = None
    chunk_bytes: FloatArray | None = None
    ladder_bound: BoolArray | None = None
    """Where the bandwidth is set by NCCL's speed ladder below the NIC's rate (search.cc)."""
    exec_channels: FloatArray | None = None
    """Channels NCCL runs the algorithm on at full size (comm->nChannels, or nvlsChannels)."""
    in_network: bool = False
    """Reduces in the switch inside the node (NVLS, NVLS-tree)."""
    sharp: bool = False
    """Reduces in the network switch across nodes (CollNet, NVLS across nodes)."""

    @property
    def proto_index(self) -> int:
        return _P[self.proto]


def tree_correction_steps(size: FloatArray, proto: int, entries: int = 23) -> FloatArray:
    """NCCL's factor per power of two: TREE_CORRECTION[proto][log2i(size >> 6)] for the first
    `entries` entries, 1 elsewhere (tuning.cc:639-645)."""
    return tree_correction_steps_at(tree_bucket(size), proto, entries)


def tree_bucket(size: Any) -> FloatArray:
    """log2i(size >> 6), the row of NCCL's tree correction table a size falls in (-1 below
    64 B), shared by every protocol."""
    with np.errstate(divide="ignore"):
        return np.floor(np.log2(np.maximum(np.floor(np.asarray(size) / 64.0), 0.5)))


def tree_correction_steps_at(bucket: FloatArray, proto: int, entries: int = 23) -> FloatArray:
    """`tree_correction_steps` from the sizes' `tree_bucket`."""
    valid = (bucket >= 0) & (bucket < entries)
    i = np.clip(bucket, 0, entries - 1).astype(np.intp)
    return np.where(valid, np.take(TREE_CORRECTION[proto], i), 1.0)


def tree_correction_rows(size: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per protocol, NCCL's tree bandwidth correction for each size (1 outside 64 B..512 MiB)."""
    return tuple(tree_correction_steps(size, p) for p in range(3))  # type: ignore[return-value]


def _knots(proto: int, entries: int) -> tuple[FloatArray, FloatArray]:
    """Interpolation knots of the smooth correction: each power-of-two bucket's factor at its
    middle (log2(size/64) = i + 0.5), 1 half a bucket beyond either end."""
    x = np.arange(-1, entries + 1, dtype=np.float64) + 0.5
    y = np.concatenate(([1.0], TREE_CORRECTION[proto][:entries], [1.0]))
    return x, y


_KNOTS = {(p, e): _knots(p, e) for p in range(3) for e in TREE_CORRECTION_ENTRIES.values()}


def tree_correction_smooth(size: Any, proto: int, entries: int = 23) -> FloatArray:
    """NCCL's tree correction interpolated linearly in log2(size) between bucket middles, so
    time stays continuous; size / factor still grows with size (every step of the table is
    at most 0.2 over a factor >= 0.4, under the log2 slope of 1)."""
    return tree_correction_smooth_at(tree_position(size), proto, entries)


def tree_position(size: Any) -> FloatArray:
    """log2(size / 64), where `tree_correction_smooth` reads its knots, shared by every
    protocol."""
    with np.errstate(divide="ignore"):
        return np.log2(np.maximum(np.asarray(size, dtype=np.float64), 1e-300) / 64.0)


def tree_correction_smooth_at(position: FloatArray, proto: int, entries: int = 23) -> FloatArray:
    """`tree_correction_smooth` from the sizes' `tree_position`."""
    return tree_correction_smooth_knots(tree_knot(position, entries), proto, entries)


def tree_knot(position: FloatArray, entries: int) -> tuple[IntArray, FloatArray]:
    """(the knot left of each position, the distance from it), shared by every protocol's
    table of `entries` entries: the knots sit one apart from log2(size/64) = -0.5, so the
    interval is found by arithmetic, not np.interp's binary search (3x faster)."""
    last = entries + 1
    u = np.clip(position, -0.5, last - 0.5)
    with np.errstate(invalid="ignore"):  # a NaN size: any j (taken with clip), NaN dist
        j = (u + 0.5).astype(np.intp)  # truncation is floor here (u + 0.5 >= 0)
    return j, u - (j - 0.5)


_SLOPES = {key: np.append(np.diff(y), 0.0) for key, (_, y) in _KNOTS.items()}


def tree_correction_smooth_knots(
    knot: tuple[IntArray, FloatArray], proto: int, entries: int
) -> FloatArray:
    """`tree_correction_smooth` from `tree_knot`: np.interp's formula (slope × distance +
    left value; the last knot's slope is 0, so positions clipped there give its value)."""
    j, dist = knot
    _, y = _KNOTS[(proto, entries)]
    out = np.take(_SLOPES[(proto, entries)], j, mode="clip")
    out *= dist
    out += np.take(y, j, mode="clip")
    return out


def plateau_ramp(size: Any, plateau_bytes: Any, factor: float) -> Any:
    """NCCL's ring plateau (latency × factor from `plateau_bytes` on) as a ramp linear in
    log2(size) over the octave centred on it: 1 below plateau/√2, `factor` above plateau·√2."""
    if plateau_bytes is None:
        return 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        pos = np.log2(np.asarray(size, dtype=np.float64) / plateau_bytes) + 0.5
    return 1.0 + (factor - 1.0) * np.clip(np.nan_to_num(pos, nan=0.0, neginf=0.0), 0.0, 1.0)


def _steps_jitter(sh: Shape, intra: Any, net: Any, wan: Any) -> FloatArray:
    """Mean plus straggler jitter of a schedule with the given step counts on each level."""
    total = np.zeros_like(sh.n)
    for steps, (mu, spread) in zip((intra, net, wan), sh.jitter, strict=True):
        s = np.asarray(steps, dtype=np.float64)
        total = total + s * mu + np.sqrt(np.maximum(s, 0.0)) * spread
    return total


def _capped_share(capped: FloatArray, free: FloatArray) -> FloatArray:
    """The share of its channels' bandwidth a protocol keeps under a whole-GPU cap (LL's
    llMaxBw). The size terms charge a chunk per channel at the per-channel rate: under the
    cap, more channels (more NICs) split the same capped rate into slower channels, so a
    small message got slower with more NICs (ring/LL all_gather over 1,024 ranks, 4 MiB: 2.6 ms
    at 1 NIC, 5.1 ms at 4; fuzz round 17, C5). Scaling the channels the size terms count by
    this share keeps each channel at its uncapped rate, which is what a message using a few
    of them gets. Across nodes only, where the channel count follows the NICs: within a node
    the single-node curves (collective_small_msgs.csv) fit worse with it (32 KiB-16 MiB fit
    14.4% -> 17.1%, held out 12.2% -> 12.8%, refitted)."""
    return np.where(free > 0, np.minimum(capped / np.where(free > 0, free, 1.0), 1.0), 1.0)


def candidates(func: NcclFunc, sh: Shape) -> list[Candidate]:
    """Every (algorithm, protocol) NCCL would price for `func`, in NCCL's order, with its
    eligibility applied (an ineligible element gets infinite latency)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _candidates(func, sh)


def _candidates(func: NcclFunc, sh: Shape) -> list[Candidate]:  # noqa: C901
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
    is_bcast = func in (NcclFunc.BROADCAST, NcclFunc.REDUCE)

    # --- channels and planned bandwidth of the ring graph
    # one node: the ring search over NVLink with the intra ladder. Across nodes: one channel
    # per NIC (or as many as fit) at the inter rung of the NIC rate the fabric was laid out
    # for, as many as a GPU's NVLink carries ((ppn - 1)/ppn of the channels leave by other
    # GPUs' NICs), then ncclTopoDupChannels.
    lad_intra = SPEEDS_INTRA[_ladder_key(sh.arch)]
    n1, s1 = dup_channels(*ring_search(sh.nvlink_GBps, lad_intra), a >= 2)
    share = np.where(ppn > 1, (ppn - 1) / ppn, 0.0)
    nm = np.minimum(np.maximum(np.floor(sh.nics), 1.0) * sh.layout_ch_per_nic, MAX_SEARCH_CHANNELS)
    sm = sh.layout_rung_GBps
    nvl_fit = np.floor(sh.nvlink_GBps / (sm * share))
    nm = np.where(ppn > 1, np.minimum(nm, np.maximum(nvl_fit, 1.0)), nm)
    nm, sm = dup_channels(nm, sm, a >= 2)
    ring_ch = np.where(multi, nm, n1)
    # planned bandwidth across nodes at the NIC's current rate: the NICs' ladder plan, within
    # what a GPU's NVLink carries (the channel fit above as a rate, so it is continuous)
    nic_planned = np.maximum(np.floor(sh.nics), 1.0) * sh.nic_plan_GBps
    nvl_carry = np.where(ppn > 1, sh.nvlink_GBps / share, np.inf)
    planned = np.where(multi, np.minimum(nic_planned, nvl_carry), ring_ch * s1)
    ring_s = planned / ring_ch
    # what the hardware sustains for a ring: the NVLink of a GPU, the node's NICs, the WAN
    phys = np.where(multi, np.minimum(sh.net_cap_GBps, nvl_carry), sh.nvlink_GBps)
    phys = np.where(sites > 1, np.minimum(phys, sh.wan_cap_GBps), phys)
    ring_bus = np.minimum(planned, phys)
    # the speed ladder leaves part of the NIC unused where it, not the hardware, binds
    ladder_bound = (
        multi
        & (nic_planned < np.maximum(sh.nics, 1.0) * sh.nic_rate_GBps)
        & (planned < phys * (1 - 1e-9))
    )
    # executed channels (connect.cc:460 doubles them; :481 doubles again on fast Hopper+ rings)
    coll_ch = np.minimum(2 * ring_ch, MAX_COLL_CHANNELS)
    coll_ch = np.where(
        (a >= 2) & multi & (sm > 45) & (coll_ch < 16), np.minimum(2 * coll_ch, 64), coll_ch
    )

    hw_intra = HW_LAT_US[sh.intra_hw]
    hw_net = HW_LAT_US["net"]
    one_gpu = ppn <= 1
    out: list[Candidate] = []

    def inter_lat(algo: NcclAlgo, p: int, extra_us: FloatArray) -> FloatArray:
        # ppn = 1: latencies fully exposed, NCCL takes the NET tree row; Simple adds the
        # flush (tuning.cc:387-391)
        base = np.where(one_gpu, hw_net[NcclAlgo.TREE][p], hw_net[algo][p])
        return base + extra_us * (2.0 if p == 2 else 1.0)

    def chunk(algo: NcclAlgo, p: int) -> FloatArray:
        thr = THREAD_THRESHOLD[p] * (n if (algo is NcclAlgo.RING and p == 0) else 1.0)
        return MAX_NTHREADS[p] * thr + zero

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
        inv = np.where(ok_arr, 1.0 / (algbw_GBps * GB), 0.0) + zero
        lat = np.where(ok_arr, lat_us * US, np.inf) + zero
        kw.setdefault("exec_channels", coll_ch + zero)
        out.append(Candidate(algo, proto, lat + jit, lat, inv, **kw))

    log_nodes = log2floor(nodes)
    log_sites = log2floor(sites)
    ring_ratio = n / nsteps

    # --- tree: chain inside the node, double binary tree across nodes (all_reduce)
    if is_ar:
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
        tree_bus0 = np.minimum(tree_bus0 * TREE_SHARE, ring_ch * PER_CH_MAX_TREE_BW[a, idx2])
        t_site_levels = log_nodes - log_sites
        for proto in PROTOS:
            p = _P[proto]
            bus = tree_bus0
            active = coll_ch
            if proto is Proto.LL:
                free = bus / TREE_LL_DIVISOR
                bus = np.minimum(free, ll_max)
                active = coll_ch * np.where(multi, _capped_share(bus, free), 1.0)
            elif proto is Proto.LL128:
                bus = np.minimum(
                    bus * np.where(multi, TREE_LL128_SHARE[1], TREE_LL128_SHARE[0]),
                    ring_ch * PER_CH_MAX_TREE_LL128_BW[a, idx2],
                )
            lat = BASE_LAT_US[NcclAlgo.TREE][p] + 2 * (
                (ppn - 1) * hw_intra[NcclAlgo.TREE][p]
                + t_site_levels * inter_lat(NcclAlgo.TREE, p, sh.net_lat_us)
                + log_sites * inter_lat(NcclAlgo.TREE, p, sh.wan_lat_us)
            )
            jit = _steps_jitter(sh, 2 * (ppn - 1), 2 * t_site_levels, 2 * log_sites)
            ok = sh.ll128_ok if proto is Proto.LL128 else True
            add(
                NcclAlgo.TREE,
                proto,
                lat,
                jit,
                bus * 0.5,
                ok,
                tree_entries=TREE_CORRECTION_ENTRIES[NcclAlgo.TREE],
                channels=active,
                exec_channels=active,
                chunk_bytes=chunk(NcclAlgo.TREE, p),
                ladder_bound=ladder_bound,
            )

    # --- ring (every function, every protocol)
    n_inter = np.where(multi, np.where(is_ar, 2, 1) * (nodes - 1), 0.0)
    if is_bcast:
        n_inter = np.where(multi, nodes - 1, 0.0)
    n_wan = np.minimum(np.where(is_ar, 2, 1) * (sites - 1), n_inter)
    n_site = n_inter - n_wan
    for proto in PROTOS:
        p = _P[proto]
        bus = ring_bus
        active = coll_ch
        if proto is Proto.LL:
            free = bus * RING_LL_SHARE
            bus = np.minimum(ll_max, free)
            active = coll_ch * np.where(multi, _capped_share(bus, free), 1.0)
        elif proto is Proto.LL128:
            bus = np.minimum(bus * LL128_SHARE, ring_ch * PER_CH_MAX_RING_LL128_BW[a, idx2])
        algbw = bus * ring_ratio
        if is_bcast:
            lat_step = np.where(
                multi,
                hw_net[NcclAlgo.TREE if p == 2 else NcclAlgo.RING][p],
                hw_intra[NcclAlgo.TREE if p == 2 else NcclAlgo.RING][p],
            )
            lat = BASE_LAT_US[NcclAlgo.RING][p] + nsteps * lat_step
            lat = lat + n_site * sh.net_lat_us + n_wan * sh.wan_lat_us
        else:
            # inter-node rings still launch nsteps × the net overhead (tuning.cc:402-407)
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
            plateau = np.where(multi, RING_PLATEAU_BYTES_PER_RANK * coll_ch * n, np.inf)
        add(
            NcclAlgo.RING,
            proto,
            lat,
            jit,
            algbw,
            ok,
            plateau_bytes=plateau,
            plateau_factor=RING_PLATEAU[1 if a >= 1 else 0],
            channels=active,
            exec_channels=active,
            chunk_bytes=chunk(NcclAlgo.RING, p),
            ladder_bound=ladder_bound,
        )

    # --- CollNet (network SHARP): needs the SHARP plugin enabled, >= 2 nodes, <= 8 local ranks
    if (is_ar or is_agrs) and bool(np.any(sh.sharp_ok)):
        heads = np.minimum(ppn, np.maximum(np.floor(sh.nics), 1.0))
        head_plan = sh.nic_plan_GBps / sh.layout_ch_per_nic
        per_head = np.minimum(head_plan, sh.net_cap_GBps / heads)
        # a head's share is the NIC's ladder plan where that, not the network, binds: the
        # price then steps with the NIC rate as the ring's does (search.cc:1051-1066)
        head_ladder = (
            multi
            & (sh.nic_plan_GBps < sh.nic_rate_GBps * (1 - 1e-9))
            & (head_plan < sh.net_cap_GBps / heads * (1 - 1e-9))
        )
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
            bus = heads * per_head / f * (0.85 if a >= 2 else 1.0)
            add(
                NcclAlgo.COLLNET_DIRECT,
                Proto.SIMPLE,
                lat_direct,
                jit,
                bus * 0.5,
                ok & sh.nvswitch,
                sharp=True,
                ladder_bound=head_ladder,
            )
            lat_chain = 2 * (ppn - 1) * hw_intra[NcclAlgo.COLLNET_CHAIN][2] + inter_lat(
                NcclAlgo.COLLNET_CHAIN, 2, sh.net_lat_us
            )
            jit = _steps_jitter(sh, 2 * (ppn - 1), 1.0, 0.0)
            add(
                NcclAlgo.COLLNET_CHAIN,
                Proto.SIMPLE,
                lat_chain,
                jit,
                heads * per_head * 0.5,
                ok,
                channels=coll_ch,
                chunk_bytes=COLLNET_NTHREADS * COLLNET_THREAD_THRESHOLD + zero,
                sharp=True,
                ladder_bound=head_ladder,
            )
        else:
            bus = ppn * np.minimum(sh.nvlink_GBps, 0.9 * per_head)
            add(
                NcclAlgo.COLLNET_DIRECT,
                Proto.SIMPLE,
                lat_direct,
                jit,
                bus,
                ok & sh.nvswitch & (ppn <= heads),
                sharp=True,
                ladder_bound=head_ladder & (0.9 * per_head < sh.nvlink_GBps),
            )

    # --- NVLS: NVSwitch multicast inside the node; across nodes NVLS_TREE (tree over the
    # network) or NVLS + SHARP. One head (channel) per local GPU, or per NIC across nodes.
    nvls_funcs = (NcclFunc.ALL_REDUCE, NcclFunc.ALL_GATHER, NcclFunc.REDUCE_SCATTER)
    if func in nvls_funcs and bool(np.any(sh.nvls_ok)):
        eff = NVLS_EFFICIENCY[a]
        heads = np.where(multi, np.minimum(ppn, np.maximum(np.floor(sh.nics), 1.0)), ppn)
        heads = np.minimum(heads, MAX_NVLS_ARITY)
        intra_rung = np.where(
            multi,
            ladder_floor(sh.nvlink_GBps / (heads + 1), SPEEDS_INTER[_ladder_key(sh.arch)]),
            ladder_floor(sh.nvlink_GBps / (heads + 1), lad_intra),
        )
        single_inter = ladder_floor(2 * intra_rung, lad_intra)
        per_head_net = np.minimum(
            sh.nic_plan_GBps / sh.layout_ch_per_nic, sh.net_cap_GBps / np.maximum(heads, 1.0)
        )
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
        single_ch, multi_ch = NVLS_NCHANNELS.get(sh.arch, (16, 16))
        nvls_ch = np.where(multi, float(multi_ch), float(single_ch)) + zero
        add(
            NcclAlgo.NVLS,
            Proto.SIMPLE,
            lat,
            jit,
            algbw,
            ok,
            in_network=True,
            sharp=True,
            exec_channels=nvls_ch,
        )
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
            blackwell = sh.arch is GpuArch.BLACKWELL
            add(
                NcclAlgo.NVLS_TREE,
                Proto.SIMPLE,
                lat,
                jit,
                heads * bw_t * ring_ratio,
                ok,
                tree_entries=TREE_CORRECTION_ENTRIES[NcclAlgo.NVLS_TREE] if blackwell else None,
                in_network=True,
                exec_channels=nvls_ch,
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
        add(
            NcclAlgo.PAT,
            Proto.SIMPLE,
            lat,
            jit,
            ring_bus * PAT_SHARE,
            (ppn <= 1) & multi,
            ladder_bound=ladder_bound,
        )
    return out
