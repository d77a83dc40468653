"""Vectorised cost model of collectives: NCCL's own tuner model, PyTorch's Gloo algorithms,
and hierarchical schedules for multi-site (WAN) clusters.

Every function broadcasts over numpy arrays of message sizes and rank counts, so one call
prices a whole nccl-tests sweep or a plan grid. Conventions follow nccl-tests: `size` is the
total buffer (the output of all_gather, the input of reduce_scatter), algbw = size / time, and
busbw = algbw × a per-op factor that makes it comparable with the link rate.

Which model prices a collective depends on the topology's backend:

- **NCCL** (GPUs): :mod:`bandwall.model.nccl` — per algorithm (ring, tree, NVLS, NVLS-tree,
  CollNet direct/chain, PAT) × protocol (LL, LL128, Simple) a latency and a bandwidth from
  NCCL 2.30.7's tuning constants; AUTO takes the fastest eligible pair element-wise, as
  NCCL's tuner does. all_to_all and send_recv are NCCL point-to-point (`direct`). On
  multi-site topologies the hierarchical and halving-doubling schedules below also compete
  (frameworks such as DiLoCo-style trainers run them over the WAN themselves).
- **Gloo** (CPUs over TCP): what PyTorch's ProcessGroupGloo runs, with no tuner — ring
  all_reduce and all_gather, reduce_scatter as a full all_reduce, binomial-tree broadcast
  (whole buffer per round), ring reduce-scatter plus gather for reduce, direct all_to_all.
  Sources: pytorch ProcessGroupGloo.cpp @ c194358a; pytorch/gloo @ 70dc3602
  (allreduce.cc, broadcast.cc, reduce.cc, allgather.cc, alltoall.cc).

Generic (α-β) schedules, shared by Gloo and the multi-site options:

- Each step costs the one-way latency α of the slowest level it crosses plus jitter. Jitter is
  a per-message delay with mean μ and std σ; over s steps a rank pays s·μ and the collective
  waits for the slowest of the k ranks that synchronise: σ·√s·(H_k − 1), H_k the k-th
  harmonic number (exact for one step of a shifted exponential). It grows like ln k.
- Flat schedules see the per-rank bottleneck min(scale-up per GPU, NICs × NIC rate per node /
  oversubscription, site uplink); hierarchical ones pipeline the levels (latencies add,
  bandwidth terms overlap).
- TCP links are priced by :mod:`bandwall.model.tcp` (congestion control, windows, streams).
- Switched RDMA fabrics lose bandwidth to flow collisions when they hash flows onto spine
  paths (static ECMP), and to head-of-line blocking in all-to-all phases when PFC is their
  only defence (:mod:`bandwall.model.congestion`); adaptive routing keeps the balance.

Calibrated fabric profiles (`bandwall calibrate`) add a small-message regime and per-op
factors; :func:`collective_time_s` applies them to whatever model prices the collective.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from bandwall.errors import ConfigError, parse_choice, unknown_choice
from bandwall.model import congestion, nccl
from bandwall.model.nccl import NcclAlgo, NcclFunc, Proto
from bandwall.model.topology import Backend, Link, Topology
from bandwall.units import GB

FloatArray = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike

EULER_GAMMA = 0.5772156649015329


class Op(StrEnum):
    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALL_TO_ALL = "all_to_all"
    SEND_RECV = "send_recv"


class Algo(StrEnum):
    RING = "ring"
    TREE = "tree"
    NVLS = "nvls"
    NVLS_TREE = "nvls_tree"
    COLLNET_DIRECT = "collnet_direct"
    COLLNET_CHAIN = "collnet_chain"
    PAT = "pat"
    HALVING_DOUBLING = "halving_doubling"
    HIERARCHICAL = "hierarchical"
    IN_NETWORK = "in_network"
    """The fastest in-network reduction the hardware offers: NVLS, NVLS-tree or CollNet."""
    DIRECT = "direct"
    AUTO = "auto"


#: Protocol label of schedules that are not NCCL collectives (Gloo, generic schedules).
NO_PROTOCOL = "-"

_NCCL_ALGOS = {
    Algo.RING: NcclAlgo.RING,
    Algo.TREE: NcclAlgo.TREE,
    Algo.NVLS: NcclAlgo.NVLS,
    Algo.NVLS_TREE: NcclAlgo.NVLS_TREE,
    Algo.COLLNET_DIRECT: NcclAlgo.COLLNET_DIRECT,
    Algo.COLLNET_CHAIN: NcclAlgo.COLLNET_CHAIN,
    Algo.PAT: NcclAlgo.PAT,
}
_IN_NETWORK = (Algo.NVLS, Algo.NVLS_TREE, Algo.COLLNET_DIRECT, Algo.COLLNET_CHAIN)
_FUNC = {
    Op.ALL_REDUCE: NcclFunc.ALL_REDUCE,
    Op.ALL_GATHER: NcclFunc.ALL_GATHER,
    Op.REDUCE_SCATTER: NcclFunc.REDUCE_SCATTER,
    Op.BROADCAST: NcclFunc.BROADCAST,
    Op.REDUCE: NcclFunc.REDUCE,
}

#: Algorithms that implement each op on the NCCL backend (first: NCCL's default family).
ALGORITHMS: dict[Op, tuple[Algo, ...]] = {
    Op.ALL_REDUCE: (
        Algo.RING,
        Algo.TREE,
        Algo.NVLS,
        Algo.NVLS_TREE,
        Algo.COLLNET_DIRECT,
        Algo.COLLNET_CHAIN,
        Algo.IN_NETWORK,
        Algo.HALVING_DOUBLING,
        Algo.HIERARCHICAL,
    ),
    Op.ALL_GATHER: (
        Algo.RING,
        Algo.NVLS,
        Algo.COLLNET_DIRECT,
        Algo.PAT,
        Algo.IN_NETWORK,
        Algo.HALVING_DOUBLING,
        Algo.HIERARCHICAL,
    ),
    Op.REDUCE_SCATTER: (
        Algo.RING,
        Algo.NVLS,
        Algo.COLLNET_DIRECT,
        Algo.PAT,
        Algo.IN_NETWORK,
        Algo.HALVING_DOUBLING,
        Algo.HIERARCHICAL,
    ),
    Op.BROADCAST: (Algo.RING, Algo.TREE),
    Op.REDUCE: (Algo.RING, Algo.TREE),
    Op.ALL_TO_ALL: (Algo.DIRECT,),
    Op.SEND_RECV: (Algo.DIRECT,),
}
#: What PyTorch's Gloo backend runs per op (AUTO), then what else may be forced on it.
GLOO_ALGORITHMS: dict[Op, tuple[Algo, ...]] = {
    Op.ALL_REDUCE: (Algo.RING, Algo.HALVING_DOUBLING, Algo.HIERARCHICAL),
    Op.ALL_GATHER: (Algo.RING, Algo.HALVING_DOUBLING, Algo.HIERARCHICAL),
    Op.REDUCE_SCATTER: (Algo.RING,),
    Op.BROADCAST: (Algo.TREE, Algo.RING),
    Op.REDUCE: (Algo.RING,),
    Op.ALL_TO_ALL: (Algo.DIRECT,),
    Op.SEND_RECV: (Algo.DIRECT,),
}
#: Generic schedules that compete with NCCL's algorithms on multi-site topologies.
_WAN_SCHEDULES: dict[Op, tuple[Algo, ...]] = {
    Op.ALL_REDUCE: (Algo.HIERARCHICAL, Algo.HALVING_DOUBLING),
    Op.ALL_GATHER: (Algo.HIERARCHICAL, Algo.HALVING_DOUBLING),
    Op.REDUCE_SCATTER: (Algo.HIERARCHICAL, Algo.HALVING_DOUBLING),
}


def parse_op(text: str) -> Op:
    return parse_choice(Op, text.replace("-", "_"), "op")


def parse_algo(text: str) -> Algo:
    key = text.strip().lower().replace("-", "_")
    key = {"collnet": "collnet_direct", "nvlstree": "nvls_tree"}.get(key, key)
    try:
        return Algo(key)
    except ValueError:
        raise unknown_choice("algo", text, [a.value for a in Algo]) from None


def parse_protocol(text: str) -> Proto:
    """NCCL_PROTO spelling: LL, LL128 or Simple (any case)."""
    folded = {p.value.lower(): p for p in Proto}
    found = folded.get(text.strip().lower())
    if found is None:
        raise unknown_choice("protocol", text, [p.value for p in Proto])
    return found


def busbw_factor(op: Op, ranks: ArrayLike) -> FloatArray:
    """nccl-tests bus-bandwidth factor: busbw = algbw × factor.

    >>> float(busbw_factor(Op.ALL_REDUCE, 8))
    1.75
    """
    n = np.asarray(ranks, dtype=np.float64)
    if op is Op.ALL_REDUCE:
        return 2 * (n - 1) / n
    if op in (Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALL_TO_ALL):
        return (n - 1) / n
    return np.ones_like(n)


def harmonic(k: ArrayLike) -> FloatArray:
    """H_k by its asymptotic expansion (error < 1e-3 at k = 2, exact 1 at k = 1)."""
    k = np.maximum(np.asarray(k, dtype=np.float64), 1.0)
    approx = np.log(k) + EULER_GAMMA + 1 / (2 * k) - 1 / (12 * k * k)
    return np.where(k <= 1, 1.0, approx)


def expected_max_jitter_s(link: Link | None, ranks: ArrayLike, steps: ArrayLike = 1) -> FloatArray:
    """Expected jitter a schedule of `steps` steps pays on `link` when `ranks` ranks wait on
    the slowest: steps·μ + σ·√steps·(H_ranks − 1)."""
    k = np.asarray(ranks, dtype=np.float64)
    s = np.asarray(steps, dtype=np.float64)
    if link is None:
        return np.zeros(np.broadcast(k, s).shape)
    return s * link.jitter_mean_s + link.jitter_std_s * np.sqrt(s) * (harmonic(k) - 1)


# --- generic α-β schedules ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Levels:
    """Per-rank-count view of the hierarchy: sizes, latencies and bandwidths of each level.

    Inactive levels (a single GPU, node or site) have size 1, zero latency and infinite
    bandwidth, so every formula can sum and min over all three levels without branching.
    """

    n: FloatArray
    g: FloatArray
    N: FloatArray
    M: FloatArray
    alpha: tuple[FloatArray, FloatArray, FloatArray]
    mu: tuple[FloatArray, FloatArray, FloatArray]
    """Mean jitter per step on each level (0 where inactive)."""
    spread: tuple[FloatArray, FloatArray, FloatArray]
    """σ·(H_k − 1) on each level, k its member count: the straggler term per √step."""
    bw_level: tuple[FloatArray, FloatArray, FloatArray]
    """Aggregate bandwidth of one instance of each level: per GPU, per node, per site (the
    site uplink as one ring's connections use it)."""
    bw_wan_all: FloatArray
    """The site uplink when every rank of the site crosses it at once (its own streams)."""
    bw_pair: FloatArray
    """What one rank gets when it alone crosses the slowest level (send/recv)."""
    alpha_flat: FloatArray
    mu_flat: FloatArray
    spread_flat: FloatArray
    bw_flat: FloatArray


def _shape(ranks: FloatArray, topo: Topology) -> tuple[FloatArray, ...]:
    G = np.asarray(topo.gpus_per_node, dtype=np.float64)
    n = ranks + np.zeros_like(G)
    g = np.minimum(n, G)
    nodes = np.ceil(n / G)
    if topo.nodes_per_site is None:
        N, M = nodes, np.ones_like(n)
    else:
        P = np.asarray(topo.nodes_per_site, dtype=np.float64)
        N, M = np.minimum(nodes, P), np.ceil(nodes / P)
    return n, g, N, M


def _check_links(n: FloatArray, topo: Topology) -> None:
    _, g, _, M = _shape(n, topo)
    nodes = np.ceil(n / np.asarray(topo.gpus_per_node, dtype=np.float64))
    active = (g > 1, nodes > 1, M > 1)
    links = (topo.scale_up, topo.scale_out, topo.wan)
    names = ("scale_up", "scale_out", "wan")
    for level, (is_active, link) in enumerate(zip(active, links, strict=True)):
        if link is None and bool(np.any(is_active)):
            raise ConfigError(
                f"{names[level]}: these rank counts span more than one "
                f"{('GPU', 'node', 'site')[level]} but the topology has no {names[level]} fabric"
            )


def _balance(op: Op, N: FloatArray, topo: Topology) -> tuple[FloatArray, FloatArray]:
    """Scale-out load balance of `op`'s traffic across N nodes (collisions under static
    ECMP, or the adaptive-routing balance; model/congestion.py) and of one send/recv pair."""
    if op is Op.SEND_RECV:
        pair = congestion.p2p_balance(topo, N, 1.0)
        return pair, pair
    one = np.ones_like(N)  # the send/recv bandwidth is only read by SEND_RECV
    if op is Op.ALL_TO_ALL:
        # every node sends to every other at once: ECMP spreads many flows, PFC-only fabrics
        # block heads of line with N senders contending
        return congestion.p2p_balance(topo, N, N - 1) * congestion.incast_factor(topo, N), one
    channels = congestion.NCCL_COLL_CHANNEL_FACTOR * one
    return congestion.ring_balance(topo, N, channels), one


def _levels(ranks: FloatArray, topo: Topology, op: Op = Op.ALL_REDUCE) -> _Levels:
    n, g, N, M = _shape(ranks, topo)
    active = (g > 1, N > 1, M > 1)
    links = (topo.scale_up, topo.scale_out, topo.wan)
    inf = np.inf
    up, out, wan = links
    nics = np.minimum(np.asarray(topo.nics_per_node, dtype=np.float64), g)
    pair_nics = np.minimum(np.asarray(topo.nics_per_node, dtype=np.float64), 1.0)
    oversub = np.asarray(topo.oversubscription, dtype=np.float64)
    bw_up = topo.link_Bps(up) if up else inf
    bw_nic = (
        topo.link_Bps(out, topo.streams_per_peer(out) * np.maximum(g / nics, 1.0)) / oversub
        if out
        else inf
    )
    bw_nic_one = topo.link_Bps(out, topo.streams_per_peer(out)) / oversub if out else inf
    if out is not None:
        balance, pair_balance = _balance(op, N, topo)
        bw_nic = bw_nic * balance
        bw_nic_one = bw_nic_one * pair_balance
    bw_wan = topo.link_Bps(wan, topo.streams_per_peer(wan)) if wan else inf
    bw_wan_all = topo.link_Bps(wan, topo.streams_per_peer(wan) * g * N) if wan else inf
    bw_level = (
        np.where(active[0], bw_up, inf),
        np.where(active[1], nics * bw_nic, inf),
        np.where(active[2], bw_wan, inf),
    )
    zero = np.zeros_like(n)
    alpha = tuple(
        np.where(a, link.latency_s, 0.0) if link else zero
        for a, link in zip(active, links, strict=True)
    )
    level_sizes = (g, N, M)
    mu = tuple(
        np.where(a, link.jitter_mean_s, 0.0) if link else zero
        for a, link in zip(active, links, strict=True)
    )
    spread = tuple(
        np.where(a, expected_max_jitter_s(link, k) - link.jitter_mean_s, 0.0) if link else zero
        for a, link, k in zip(active, links, level_sizes, strict=True)
    )
    flat_spread = [
        np.where(a, expected_max_jitter_s(link, n) - link.jitter_mean_s, 0.0) if link else zero
        for a, link in zip(active, links, strict=True)
    ]
    return _Levels(
        n=n,
        g=g,
        N=N,
        M=M,
        alpha=(alpha[0], alpha[1], alpha[2]),
        mu=(mu[0], mu[1], mu[2]),
        spread=(spread[0], spread[1], spread[2]),
        bw_level=bw_level,
        bw_wan_all=np.where(active[2], bw_wan_all, inf),
        bw_pair=np.minimum(
            np.minimum(bw_level[0], np.where(active[1], pair_nics * bw_nic_one, inf)),
            bw_level[2],
        ),
        alpha_flat=np.maximum(np.maximum(alpha[0], alpha[1]), alpha[2]),
        mu_flat=np.maximum(np.maximum(mu[0], mu[1]), mu[2]),
        spread_flat=np.maximum(np.maximum(flat_spread[0], flat_spread[1]), flat_spread[2]),
        bw_flat=np.minimum(np.minimum(bw_level[0], bw_level[1]), bw_level[2]),
    )


def _frac(k: FloatArray) -> FloatArray:
    """(k-1)/k: the share of a buffer a level of k members must move."""
    return (k - 1) / k


def _ceil_log2(k: FloatArray) -> FloatArray:
    return np.ceil(np.log2(np.maximum(k, 1.0)))


def _latency(
    steps: FloatArray | float, alpha: FloatArray, mu: FloatArray, spread: FloatArray
) -> FloatArray:
    """Latency and jitter of `steps` dependent steps: steps·(α + μ) + √steps·σ·(H_k − 1)."""
    return steps * (alpha + mu) + np.sqrt(steps) * spread


def _level_latency(lv: _Levels, i: int, steps: FloatArray | float) -> FloatArray:
    return _latency(steps, lv.alpha[i], lv.mu[i], lv.spread[i])


def _flat_latency(lv: _Levels, steps: FloatArray | float) -> FloatArray:
    return _latency(steps, lv.alpha_flat, lv.mu_flat, lv.spread_flat)


def _step_costs(lv: _Levels, steps: tuple[FloatArray, FloatArray, FloatArray]) -> FloatArray:
    """Latency of a schedule taking steps[i] steps on level i, the levels one after another."""
    return sum((_level_latency(lv, i, steps[i]) for i in range(3)), np.zeros_like(lv.n))


def _hd_bandwidth_s(size: FloatArray, lv: _Levels) -> FloatArray:
    """One pass of recursive halving (or doubling): data crossing each level boundary.

    With rank order following the hierarchy, the first log2(M) exchanges cross sites carrying
    S/2 + S/4 + ... = S(1 − 1/M), the next log2(N) cross nodes, the rest stay in the node. All
    ranks exchange at once, so each GPU gets its share of the node's NICs and the site uplink.
    """
    g, N, M = lv.g, lv.N, lv.M
    per_gpu_up = lv.bw_level[0]
    per_gpu_out = lv.bw_level[1] / g
    per_gpu_wan = lv.bw_wan_all / (g * N)
    cross_site = size * (1 - 1 / M)
    cross_node = size * (1 / M - 1 / (M * N))
    intra = size * (1 / (M * N) - 1 / lv.n)
    return cross_site / per_gpu_wan + cross_node / per_gpu_out + intra / per_gpu_up


def _not_pow2(n: FloatArray) -> npt.NDArray[np.bool_]:
    result: npt.NDArray[np.bool_] = np.exp2(np.floor(np.log2(np.maximum(n, 1.0)))) != n
    return result


def _slowest_per_gpu_Bps(lv: _Levels) -> FloatArray:
    return np.minimum(
        np.minimum(lv.bw_level[0], lv.bw_level[1] / lv.g), lv.bw_wan_all / (lv.g * lv.N)
    )


def _generic_time(op: Op, algo: Algo, size: FloatArray, lv: _Levels, gloo: bool) -> FloatArray:
    """The α-β schedules; `gloo` selects Gloo's own variants where they differ."""
    n = lv.n
    levels = (lv.g, lv.N, lv.M)
    if op is Op.REDUCE_SCATTER and gloo and algo is Algo.RING:
        # ProcessGroupGloo::_reduce_scatter_base: a full ring all_reduce, then a local copy
        return _generic_time(Op.ALL_REDUCE, Algo.RING, size, lv, gloo)
    if op is Op.ALL_REDUCE:
        if algo is Algo.RING:
            return _flat_latency(lv, 2 * (n - 1)) + 2 * _frac(n) * size / lv.bw_flat
        if algo is Algo.TREE:
            depth = tuple(_ceil_log2(k) for k in levels)
            return (
                _step_costs(lv, (2 * depth[0], 2 * depth[1], 2 * depth[2])) + 2 * size / lv.bw_flat
            )
        if algo is Algo.HALVING_DOUBLING:
            depth = tuple(_ceil_log2(k) for k in levels)
            extra = np.where(
                _not_pow2(n), _flat_latency(lv, 2) + 2 * size / _slowest_per_gpu_Bps(lv), 0.0
            )
            return (
                _step_costs(lv, (2 * depth[0], 2 * depth[1], 2 * depth[2]))
                + 2 * _hd_bandwidth_s(size, lv)
                + extra
            )
        if algo is Algo.HIERARCHICAL:
            lat = _step_costs(lv, (2 * (lv.g - 1), 2 * (lv.N - 1), 2 * (lv.M - 1)))
            bw = [
                2 * _frac(lv.g) * size / lv.bw_level[0],
                2 * _frac(lv.N) * size / lv.bw_level[1],
                2 * _frac(lv.M) * size / lv.bw_wan_all,
            ]
            return lat + np.maximum(np.maximum(bw[0], bw[1]), bw[2])
    elif op in (Op.ALL_GATHER, Op.REDUCE_SCATTER):
        if algo is Algo.RING:
            return _flat_latency(lv, n - 1) + _frac(n) * size / lv.bw_flat
        if algo is Algo.HALVING_DOUBLING:
            depth = tuple(_ceil_log2(k) for k in levels)
            extra = np.where(
                _not_pow2(n), _flat_latency(lv, 1) + size / _slowest_per_gpu_Bps(lv) / n, 0.0
            )
            return (
                _step_costs(lv, (depth[0], depth[1], depth[2])) + _hd_bandwidth_s(size, lv) + extra
            )
        if algo is Algo.HIERARCHICAL:
            lat = _step_costs(lv, (lv.g - 1, lv.N - 1, lv.M - 1))
            bw = [
                _frac(lv.g) * size / lv.bw_level[0],
                _frac(lv.N) * size / lv.bw_level[1],
                _frac(lv.M) * size / lv.bw_wan_all,
            ]
            return lat + np.maximum(np.maximum(bw[0], bw[1]), bw[2])
    elif op in (Op.BROADCAST, Op.REDUCE):
        if algo is Algo.RING:
            if gloo and op is Op.REDUCE:
                # gloo/reduce.cc: ring reduce-scatter, then the root gathers the reduced chunks
                return _flat_latency(lv, n) + 2 * _frac(n) * size / lv.bw_flat
            return _flat_latency(lv, n - 1) + size / lv.bw_flat
        if algo is Algo.TREE:
            depth = tuple(_ceil_log2(k) for k in levels)
            lat = _step_costs(lv, (depth[0], depth[1], depth[2]))
            if gloo:
                # gloo/broadcast.cc: binomial tree, the whole buffer in every round, no pipeline
                return lat + _ceil_log2(n) * size / lv.bw_flat
            return lat + size / lv.bw_flat
    elif op is Op.ALL_TO_ALL and algo is Algo.DIRECT:
        g, N, M = lv.g, lv.N, lv.M
        to_node = (g - 1) / n * size / lv.bw_level[0]
        to_site = g * (N - 1) / n * size / (lv.bw_level[1] / g)
        to_world = g * N * (M - 1) / n * size / (lv.bw_wan_all / (g * N))
        steps = 1.0 if gloo else n - 1  # gloo posts every send and receive at once
        return _flat_latency(lv, steps) + np.maximum(np.maximum(to_node, to_site), to_world)
    elif op is Op.SEND_RECV and algo is Algo.DIRECT:
        return _flat_latency(lv, 1) + size / lv.bw_pair
    raise AssertionError(f"unreachable: {op} {algo}")


#: Gloo's ring all_reduce cuts the buffer into segments of at most this many bytes
#: (gloo/allreduce.h `kMaxSegmentSize`; pytorch/gloo @ 70dc3602).
GLOO_SEGMENT_BYTES = 2.0**20


def gloo_ring_all_reduce_s(
    size_bytes: ArrayLike,
    n: ArrayLike,
    alpha_s: ArrayLike,
    inv_bw_s_per_B: ArrayLike,
    spread_s: ArrayLike = 0.0,
) -> FloatArray:
    """Gloo's segmented ring all_reduce, with the round trip each send waits for.

    A Gloo send waits for the receiver's "ready" notice (`NOTIFY_RECV_READY`,
    gloo/transport/tcp/pair.cc) before data moves, and the ring keeps two segments in flight:
    each pair of segment sends costs max(2α + s/B, 2s/B). The buffer is cut into
    `segments = max(⌈S / 1 MiB⌉, 2n)` rounded up to a multiple of n, of s = S/segments bytes;
    reduce-scatter and all-gather each send segments·(n−1)/n of them, so over both phases
    P = segments·(n−1)/n pairs. Never faster than the α-β ring (every step still pays its
    one-way latency and the whole volume):

        T = max(L(2P) + (n−1)/n · S/B,  L(2(n−1)) + 2(n−1)/n · S/B),
        L(k) = k·α + √k·σ(H−1).

    At datacenter latency this is the α-β ring; where 2α exceeds a segment's transfer it is
    twice the α-β ring's latency (docs/lab.md: the lab measured 64 KiB-16 MiB at 1-50 ms RTT
    within −5% to +6% of this, where the α-β ring alone was up to 52% low).

    >>> # 4 ranks, 5 ms one way: 8 segments, 6 pairs × 2α = 2(n−1) round trips
    >>> round(float(gloo_ring_all_reduce_s(0.0, 4, 0.005, 0.0)), 3)
    0.06
    """
    size = np.asarray(size_bytes, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    (rt_steps, rt_bytes), (ab_steps, ab_bytes) = gloo_ring_branches(size, n)
    alpha, spread, inv_bw = (np.asarray(a) for a in (alpha_s, spread_s, inv_bw_s_per_B))
    round_trips = rt_steps * alpha + np.sqrt(rt_steps) * spread + rt_bytes * inv_bw
    alpha_beta = ab_steps * alpha + np.sqrt(ab_steps) * spread + ab_bytes * inv_bw
    return np.asarray(np.maximum(round_trips, alpha_beta))


def gloo_ring_branches(
    size_bytes: ArrayLike, n: ArrayLike
) -> tuple[tuple[FloatArray, FloatArray], tuple[FloatArray, FloatArray]]:
    """(one-way latencies, bytes at the link rate) of the two sides of Gloo's ring: the
    round-trip side (2P latencies, (n−1)/n·S) and the α-β side (2(n−1), 2(n−1)/n·S). The time
    is the larger; `calibrate` fits α and B on whichever side each measured row is on."""
    size = np.asarray(size_bytes, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    segments = np.maximum(np.ceil(size / GLOO_SEGMENT_BYTES), 2 * n)
    segments = np.ceil(segments / np.maximum(n, 1.0)) * n
    return (2 * segments * _frac(n), _frac(n) * size), (2 * (n - 1) + 0 * size, 2 * _frac(n) * size)


# --- candidates: NCCL, Gloo and generic schedules behind one interface ----------------------------


@dataclass(frozen=True)
class _Option:
    """One way to run the collective: time = latency + size × inv_bw (+ NCCL's corrections).

    Arrays have the (compressed) context shape; `tree_proto` is the protocol whose tree
    correction factor divides the bandwidth term, `plateau_bytes` where ring/Simple latency
    grows by `plateau_factor`.
    """

    algo: Algo
    protocol: str
    latency_s: FloatArray
    inv_bw: FloatArray
    tree_proto: int | None = None
    plateau_bytes: FloatArray | None = None
    plateau_factor: float = 1.0
    gloo_ring: tuple[FloatArray, FloatArray, FloatArray] | None = None
    """(α + μ, σ·(H−1), n) per context: time by :func:`gloo_ring_all_reduce_s`, not affine."""

    def expand(self, index: npt.NDArray[np.intp] | None) -> _Option:
        if index is None:
            return self
        return replace(
            self,
            latency_s=self.latency_s[index],
            inv_bw=self.inv_bw[index],
            plateau_bytes=None if self.plateau_bytes is None else self.plateau_bytes[index],
            gloo_ring=(
                None if self.gloo_ring is None else tuple(a[index] for a in self.gloo_ring)  # type: ignore[arg-type]
            ),
        )

    def worst(self) -> tuple[FloatArray, FloatArray]:
        """Latency and inverse bandwidth at the least favourable size."""
        lat = self.latency_s * (self.plateau_factor if self.plateau_bytes is not None else 1.0)
        if self.tree_proto is None:
            return lat, self.inv_bw
        return lat, self.inv_bw / nccl.MIN_TREE_CORRECTION[self.tree_proto]

    @property
    def has_tree(self) -> bool:
        return self.tree_proto is not None


def _nccl_options(op: Op, n: FloatArray, topo: Topology) -> list[_Option]:
    sh = nccl.shape_of(n, topo)
    return [
        _Option(
            Algo(c.algo.value),
            c.proto.value,
            c.latency_s,
            c.inv_bw,
            nccl.PROTOS.index(c.proto) if c.tree_correction else None,
            c.plateau_bytes,
            c.plateau_factor,
        )
        for c in nccl.candidates(_FUNC[op], sh)
    ]


def _generic_option(op: Op, algo: Algo, lv: _Levels, gloo: bool, proto: str) -> _Option:
    """Every α-β schedule is affine in size: its latency at size 0 plus a slope."""
    zero = np.zeros_like(lv.n)
    big = 2.0**30  # the slope from a large size keeps full precision
    t0 = _generic_time(op, algo, zero, lv, gloo)
    t1 = _generic_time(op, algo, zero + big, lv, gloo)
    return _Option(algo, proto, t0, np.maximum((t1 - t0) / big, 0.0))


def _multi_site(n: FloatArray, topo: Topology) -> bool:
    if topo.wan is None or topo.nodes_per_site is None:
        return False
    _, _, _, M = _shape(n, topo)
    return bool(np.any(M > 1))


def _options(
    op: Op, algo: Algo, n: FloatArray, topo: Topology, protocol: Proto | None
) -> list[_Option]:
    """Every option `algo` stands for on this topology (AUTO: all eligible ones)."""
    gloo = topo.backend_kind is Backend.GLOO
    if gloo:
        if protocol is not None:
            raise ConfigError("protocols are NCCL's; Gloo has none", field="protocol")
        allowed = GLOO_ALGORITHMS[op]
        chosen = allowed[0] if algo is Algo.AUTO else algo
        if chosen not in allowed:
            raise ConfigError(
                f"{algo.value!r} is not available for {op.value} on gloo; choose one of: "
                + ", ".join(a.value for a in (*allowed, Algo.AUTO)),
                field="algo",
            )
        lv = _levels(n, topo, op)
        option = _generic_option(op, chosen, lv, True, NO_PROTOCOL)
        if chosen is Algo.RING and op in (Op.ALL_REDUCE, Op.REDUCE_SCATTER):
            hand = (lv.alpha_flat + lv.mu_flat, lv.spread_flat, np.asarray(n, dtype=np.float64))
            option = replace(option, gloo_ring=hand)
        return [option]
    allowed = ALGORITHMS[op]
    if algo is not Algo.AUTO and algo not in allowed:
        raise ConfigError(
            f"{algo.value!r} is not available for {op.value}; choose one of: "
            + ", ".join(a.value for a in (*allowed, Algo.AUTO)),
            field="algo",
        )
    opts: list[_Option] = []
    tree_bcast = op in (Op.BROADCAST, Op.REDUCE) and algo is Algo.TREE
    nccl_family = algo is Algo.AUTO or algo in _NCCL_ALGOS or algo is Algo.IN_NETWORK
    if op in _FUNC and nccl_family and not tree_bcast:
        for opt in _nccl_options(op, n, topo):
            if algo is Algo.IN_NETWORK:
                keep = opt.algo in _IN_NETWORK
            else:
                keep = algo is Algo.AUTO or opt.algo is algo
            if protocol is not None:
                keep = keep and opt.protocol == protocol.value
            if keep:
                opts.append(opt)
        if algo is not Algo.AUTO and not any(bool(np.any(np.isfinite(o.latency_s))) for o in opts):
            if algo is Algo.IN_NETWORK:
                _no_in_network(topo)
            raise ConfigError(
                f"{algo.value}{'/' + protocol.value if protocol else ''} cannot run {op.value} "
                f"here: {_WHY_NOT.get(algo, 'not eligible on this topology')}",
                field="protocol" if protocol and algo is not Algo.RING else "algo",
            )
    generic: tuple[Algo, ...] = ()
    if algo is Algo.AUTO:
        if op in (Op.ALL_TO_ALL, Op.SEND_RECV):
            generic = (Algo.DIRECT,)
        elif _multi_site(n, topo):
            generic = _WAN_SCHEDULES.get(op, ())
    elif (algo not in _NCCL_ALGOS and algo is not Algo.IN_NETWORK) or tree_bcast:
        generic = (algo,)
    if generic:
        if protocol is not None and protocol is not Proto.SIMPLE:
            raise ConfigError(
                f"{', '.join(a.value for a in generic)} runs NCCL point-to-point with the "
                "Simple protocol",
                field="protocol",
            )
        lv = _levels(n, topo, op)
        for a in generic:
            opt = _generic_option(op, a, lv, False, Proto.SIMPLE.value)
            if algo is Algo.AUTO and op not in (Op.ALL_TO_ALL, Op.SEND_RECV):
                # the site-level schedules compete only where the group spans sites
                opt = replace(opt, latency_s=np.where(lv.M > 1, opt.latency_s, np.inf))
            opts.append(opt)
    if not opts:
        raise ConfigError(
            f"no {algo.value} option with protocol {protocol.value if protocol else 'any'} "
            f"for {op.value}",
            field="protocol" if protocol else "algo",
        )
    return opts


_WHY_NOT = {
    Algo.RING: "LL128 needs NVLink inside the node and GPUDirect RDMA NICs across nodes",
    Algo.TREE: "LL128 needs NVLink inside the node and GPUDirect RDMA NICs across nodes",
    Algo.NVLS: "NVLS needs an NVSwitch with NVLink SHARP (nvlink4/nvlink5, Hopper or later), "
    ">= 2 GPUs per node and in_network not off; across nodes also SHARP on the scale-out "
    "(in_network=True)",
    Algo.NVLS_TREE: "NVLS-tree needs NVLS inside the node (nvlink4/nvlink5) and >= 2 nodes",
    Algo.COLLNET_DIRECT: "CollNet needs SHARP switches enabled (in_network=True on "
    "InfiniBand), >= 2 nodes, <= 8 GPUs per node and an NVSwitch",
    Algo.COLLNET_CHAIN: "CollNet needs SHARP switches enabled (in_network=True on "
    "InfiniBand), >= 2 nodes and <= 8 GPUs per node",
    Algo.PAT: "PAT runs with one GPU per node on >= 2 nodes",
}


def _no_in_network(topo: Topology) -> None:
    levels = [link for link in (topo.scale_up, topo.scale_out) if link is not None]
    capable = [link.name for link in levels if link.in_network]
    if capable and topo.in_network is not True:
        hint = f"{', '.join(capable)} can reduce in the switch but it is off; set in_network"
    else:
        hint = "this topology has: " + (", ".join(link.name for link in levels) or "none")
    raise ConfigError(
        f"in_network needs a fabric with in-network reduction (SHARP/NVLS); {hint}",
        field="algo",
    )


def _prune(options: list[_Option]) -> list[_Option]:
    """Drop options never faster than another at any size (and options never eligible):
    j dominates i when j's latency and inverse bandwidth at j's least favourable size are no
    worse than i's at i's most favourable one, element-wise."""
    alive = [o for o in options if bool(np.any(np.isfinite(o.latency_s)))]
    if len(alive) <= 1:
        return alive or options[:1]
    keep = []
    for i, oi in enumerate(alive):
        dominated = False
        for j, oj in enumerate(alive):
            if j == i:
                continue
            lat_j, inv_j = oj.worst()
            inv_i = np.where(np.isfinite(oi.latency_s), oi.inv_bw, np.inf)
            if bool(np.all(lat_j <= oi.latency_s) and np.all(inv_j <= inv_i)):
                # strict somewhere, or equal everywhere and j comes first: keep one of twins
                strict = bool(np.any(lat_j < oi.latency_s) or np.any(inv_j < inv_i))
                if strict or j < i:
                    dominated = True
                    break
        if not dominated:
            keep.append(oi)
    return keep


def _run(
    options: list[_Option],
    size: FloatArray,
    index: npt.NDArray[np.intp] | None,
    want_names: bool,
) -> tuple[FloatArray, npt.NDArray[np.intp] | None]:
    """The fastest option per element; `index` expands compressed option arrays."""
    ctx_shape = index.shape if index is not None else np.shape(options[0].latency_s)
    shape = np.broadcast_shapes(size.shape, ctx_shape)
    corr = nccl.tree_correction_rows(size) if any(o.has_tree for o in options) else None
    best = np.full(shape, np.inf)
    buf = np.empty(shape)
    which = np.zeros(shape, dtype=np.intp) if want_names else None
    with np.errstate(invalid="ignore", over="ignore"):
        for i, opt in enumerate(options):
            o = opt.expand(index)
            if o.gloo_ring is not None:
                alpha, spread, ranks = o.gloo_ring
                # the option's slope is the α-β ring's 2(n−1)/n / B
                inv_B = o.inv_bw / (2 * _frac(ranks))
                buf[...] = gloo_ring_all_reduce_s(size, ranks, alpha, inv_B, spread)
                if which is not None:
                    np.putmask(which, buf < best, i)
                np.minimum(best, buf, out=best)
                continue
            np.multiply(size, o.inv_bw, out=buf)
            if o.tree_proto is not None and corr is not None:
                np.divide(buf, corr[o.tree_proto], out=buf)
            if o.plateau_bytes is not None:
                buf += np.where(
                    size >= o.plateau_bytes, o.latency_s * o.plateau_factor, o.latency_s
                )
            else:
                buf += o.latency_s
            if which is not None:
                np.putmask(which, buf < best, i)
            np.minimum(best, buf, out=best)
    return best, which


# --- compressing the size-independent context ----------------------------------------------------


def _arrays(topo: Topology) -> list[tuple[str | None, str, Any]]:
    """(link attribute or None, field, value) of every numeric field that may be an array."""
    fields: list[tuple[str | None, str, Any]] = [
        (None, f, getattr(topo, f))
        for f in (
            "gpus_per_node",
            "nics_per_node",
            "oversubscription",
            "nodes_per_site",
            "tcp_streams",
            "tcp_window_bytes",
            "qps_per_connection",
            "member_spacing_nodes",
            "fabric_nics",
            "node_nics",
            "leaf_ports",
            "ecmp_paths",
            "failed_uplinks",
        )
    ]
    for attr in ("scale_up", "scale_out", "wan"):
        link = getattr(topo, attr)
        if link is None:
            continue
        for f in (
            "bandwidth_Bps",
            "latency_s",
            "jitter_mean_s",
            "jitter_std_s",
            "loss_rate",
            "host_Bps",
            "small_latency_s",
            "layout_Bps",
        ):
            fields.append((attr, f, getattr(link, f)))
    return [(a, f, v) for a, f, v in fields if v is not None and np.ndim(v) > 0]


#: Below this many size-independent elements compressing costs more than it saves.
_COMPRESS_MIN = 4096
_SAMPLE = 8192
_MIX = np.uint64(0x9E3779B97F4A7C15)


def _squeeze(a: Any, shape: tuple[int, ...]) -> FloatArray:
    """`a` with every axis along which it is constant cut to length 1 (a meshgrid of rank
    counts is constant along the size axis): same values once broadcast back to `shape`."""
    arr = np.asarray(a, dtype=np.float64)
    arr = arr.reshape((1,) * (len(shape) - arr.ndim) + arr.shape)
    for axis in range(arr.ndim):
        if arr.shape[axis] > 1:
            head = np.take(arr, [0], axis=axis)
            tail = np.take(arr, [arr.shape[axis] - 1], axis=axis)
            if np.array_equal(head, tail) and np.array_equal(arr, np.broadcast_to(head, arr.shape)):
                arr = head
    return arr


def _codes(
    key: npt.NDArray[np.uint64],
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]] | None:
    """(an index of each distinct key, code of every element), or None when more than a
    quarter of the keys are distinct (compressing would not pay). Few distinct keys are the
    rule: take them from a sample, give each a slot by the key's top bits (the keys are
    already mixed) and look every element up in that table, checking it; else sort.
    A sample already a quarter distinct settles it without the sort (a sweep over a
    bandwidth axis makes every combination distinct: that sort was a quarter of its time)."""
    step = max(len(key) // _SAMPLE, 1)
    cand = np.unique(key[::step])
    k = len(cand)
    if k * 4 > len(key):
        return None
    for bits in range(max(int(k - 1).bit_length() + 2, 1), 21):
        slots = (cand >> np.uint64(64 - bits)).astype(np.intp)
        if len(np.unique(slots)) == k:
            table = np.zeros(1 << bits, dtype=np.intp)
            table[slots] = np.arange(k, dtype=np.intp)
            pos = table[(key >> np.uint64(64 - bits)).astype(np.intp)]
            if np.array_equal(cand[pos], key):
                first = np.zeros(k, dtype=np.intp)
                first[pos] = np.arange(len(key), dtype=np.intp)  # any member represents it
                return first, pos
            break
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if len(first) * 4 > len(key):
        return None
    return first, inverse.astype(np.intp)


def _compress(
    n: FloatArray, topo: Topology
) -> tuple[FloatArray, Topology, npt.NDArray[np.intp] | None]:
    """The distinct (rank count, topology) combinations, and how to expand them back.

    A sweep or a layout search repeats few distinct rank counts and group shapes over
    hundreds of thousands of elements; the size-independent part of the model (NCCL's
    channel search, latencies, TCP rates) is computed once per distinct combination.
    Constant axes are dropped first (no copy needed: numpy broadcasts them back).
    """
    fields = _arrays(topo)
    shape = np.broadcast_shapes(np.shape(n), *(np.shape(v) for _, _, v in fields))
    if int(np.prod(shape)) < _COMPRESS_MIN:
        return n, topo, None
    n_sq = _squeeze(n, shape)
    squeezed = [_squeeze(v, shape) for _, _, v in fields]
    sq_shape = np.broadcast_shapes(n_sq.shape, *(v.shape for v in squeezed))
    total = int(np.prod(sq_shape))
    if total < _COMPRESS_MIN:
        return n_sq, _rebuilt(topo, fields, squeezed), None
    cols = [np.broadcast_to(c, sq_shape).ravel() for c in (n_sq, *squeezed)]
    key = np.zeros(total, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c in cols:
            key = (key ^ np.ascontiguousarray(c).view(np.uint64)) * _MIX
            key ^= key >> np.uint64(29)
    codes = _codes(key)
    if codes is None:
        return n_sq, _rebuilt(topo, fields, squeezed), None
    first, inverse = codes
    for c in cols:  # a hash collision would merge two combinations: never silently
        if not np.array_equal(c[first][inverse], c):
            return n_sq, _rebuilt(topo, fields, squeezed), None
    return (
        cols[0][first],
        _rebuilt(topo, fields, [c[first] for c in cols[1:]]),
        (inverse.reshape(sq_shape)),
    )


def _rebuilt(
    topo: Topology, fields: list[tuple[str | None, str, Any]], values: list[FloatArray]
) -> Topology:
    links: dict[str, dict[str, Any]] = {}
    top: dict[str, Any] = {}
    for (attr, f, _), v in zip(fields, values, strict=True):
        if attr is None:
            top[f] = v
        else:
            links.setdefault(attr, {})[f] = v
    for attr, changes in links.items():
        top[attr] = replace(getattr(topo, attr), **changes)
    return replace(topo, **top)


def _choices(
    options: list[_Option], which: npt.NDArray[np.intp]
) -> tuple[npt.NDArray[np.str_], npt.NDArray[np.str_]]:
    return (
        np.array([o.algo.value for o in options])[which],
        np.array([o.protocol for o in options])[which],
    )


def _priced(
    op: Op,
    algo: Algo,
    size: FloatArray,
    n: FloatArray,
    topo: Topology,
    protocol: Proto | None,
    want_names: bool,
) -> tuple[FloatArray, npt.NDArray[np.str_] | None, npt.NDArray[np.str_] | None]:
    cn, ctopo, index = _compress(n, topo)
    _check_links(cn, ctopo)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        options = _options(op, algo, cn, ctopo, protocol)
        options = _prune(options)
    t, which = _run(options, size, index, want_names)
    if which is None:
        return t, None, None
    algos, protos = _choices(options, which)
    return t, algos, protos


# --- calibrated profiles: per-op factors and the small-message regime ---------------------------


def _scaled(link: Link | None, op: Op) -> Link | None:
    if link is None or not link.op_time_factors:
        return link
    return replace(link, efficiency=link.efficiency / link.op_factor(op.value))


def _calibrated(op: Op, topo: Topology) -> Topology:
    """Per-op factors of calibrated links, applied as a slower (or faster) link for `op`."""
    if not any(link is not None and link.op_time_factors for link in _links(topo)):
        return topo
    return replace(
        topo,
        scale_up=_scaled(topo.scale_up, op),
        scale_out=_scaled(topo.scale_out, op),
        wan=_scaled(topo.wan, op),
    )


def _links(topo: Topology) -> tuple[Link | None, Link | None, Link | None]:
    return topo.scale_up, topo.scale_out, topo.wan


def _small_regime(topo: Topology) -> tuple[float, Topology] | None:
    """The size below which calibrated small-message parameters apply, and that topology."""
    cut = [link.small_message_bytes for link in _links(topo) if link is not None]
    cut = [c for c in cut if c > 0]
    if not cut:
        return None

    def small(link: Link | None) -> Link | None:
        return link.small_variant() if link is not None and link.small_message_bytes else link

    return min(cut), replace(
        topo, scale_up=small(topo.scale_up), scale_out=small(topo.scale_out), wan=small(topo.wan)
    )


def _select(
    op: Op,
    algo: Algo,
    size: FloatArray,
    n: FloatArray,
    topo: Topology,
    protocol: Proto | None,
    want_names: bool,
) -> tuple[FloatArray, npt.NDArray[np.str_] | None, npt.NDArray[np.str_] | None]:
    regime = _small_regime(topo)
    topo = _calibrated(op, topo)
    t, algos, protos = _priced(op, algo, size, n, topo, protocol, want_names)
    if regime is not None:
        # Below the cut the small-message fit prices the collective; above it the large one,
        # never below the small fit at the cut, so time stays monotone in size. The per-op
        # factors apply on both sides (calibrate fits them on large messages for both).
        cut, small_topo = regime
        small_topo = _calibrated(op, small_topo)
        t_small, a_small, p_small = _priced(op, algo, size, n, small_topo, protocol, want_names)
        t_cut, _, _ = _priced(op, algo, np.full(size.shape, cut), n, small_topo, protocol, False)
        below = size < cut
        t = np.where(below, t_small, np.maximum(t, t_cut))
        if algos is not None and a_small is not None and protos is not None and p_small is not None:
            algos = np.where(below, a_small, algos)
            protos = np.where(below, p_small, protos)
    single = n <= 1
    t = np.where(single, 0.0, t)
    if algos is not None and protos is not None:
        algos = np.where(single, "none", algos)
        protos = np.where(single, NO_PROTOCOL, protos)
    return t, algos, protos


def _broadcast(size_bytes: ArrayLike, ranks: ArrayLike) -> tuple[FloatArray, FloatArray]:
    return np.asarray(size_bytes, dtype=np.float64), np.asarray(ranks, dtype=np.float64)


def collective_time_s(
    op: Op,
    algo: Algo,
    size_bytes: ArrayLike,
    ranks: ArrayLike,
    topo: Topology,
    *,
    protocol: Proto | None = None,
) -> FloatArray:
    """Time of one collective, broadcast over sizes and rank counts.

    `algo` may be AUTO: the fastest eligible (algorithm, protocol) element-wise, as NCCL's
    tuner picks (on Gloo, PyTorch's fixed algorithm). A forced algorithm still takes its
    fastest eligible protocol unless `protocol` is given. A single rank costs nothing.
    """
    size, n = _broadcast(size_bytes, ranks)
    return _select(op, algo, size, n, topo, protocol, want_names=False)[0]


def auto_select(
    op: Op, size_bytes: ArrayLike, ranks: ArrayLike, topo: Topology
) -> tuple[FloatArray, npt.NDArray[np.str_]]:
    """Fastest algorithm per element, as NCCL's tuner picks per message size."""
    t, algos, _ = select(op, Algo.AUTO, size_bytes, ranks, topo)
    return t, algos


def select(
    op: Op,
    algo: Algo,
    size_bytes: ArrayLike,
    ranks: ArrayLike,
    topo: Topology,
    protocol: Proto | None = None,
) -> tuple[FloatArray, npt.NDArray[np.str_], npt.NDArray[np.str_]]:
    """Time, chosen algorithm and chosen protocol per element."""
    size, n = _broadcast(size_bytes, ranks)
    t, algos, protos = _select(op, algo, size, n, topo, protocol, want_names=True)
    assert algos is not None and protos is not None
    return t, algos, protos


@dataclass(frozen=True)
class CollectiveResult:
    """One priced sweep: arrays of equal shape, one element per (size, ranks)."""

    op: Op
    size_bytes: FloatArray
    ranks: FloatArray
    algo: npt.NDArray[np.str_]
    time_s: FloatArray
    protocol: npt.NDArray[np.str_] | None = None

    @property
    def algbw_GBps(self) -> FloatArray:
        with np.errstate(divide="ignore"):
            return np.where(self.time_s > 0, self.size_bytes / self.time_s / GB, 0.0)

    @property
    def busbw_GBps(self) -> FloatArray:
        return self.algbw_GBps * busbw_factor(self.op, self.ranks)

    def records(self) -> list[dict[str, object]]:
        """Rows of `bandwall collective --json`: op, ranks, size_bytes, algo, protocol,
        time_s, algbw_GBps, busbw_GBps."""
        algbw, busbw = self.algbw_GBps.ravel(), self.busbw_GBps.ravel()
        protos = (
            self.protocol.ravel()
            if self.protocol is not None
            else np.full(self.time_s.size, NO_PROTOCOL)
        )
        return [
            {
                "op": self.op.value,
                "ranks": int(r),
                "size_bytes": int(s),
                "algo": str(a),
                "protocol": str(p),
                "time_s": float(t),
                "algbw_GBps": float(ab),
                "busbw_GBps": float(bb),
            }
            for s, r, a, p, t, ab, bb in zip(
                self.size_bytes.ravel(),
                self.ranks.ravel(),
                self.algo.ravel(),
                protos,
                self.time_s.ravel(),
                algbw,
                busbw,
                strict=True,
            )
        ]


def evaluate_collective(
    op: Op,
    size_bytes: ArrayLike,
    ranks: ArrayLike,
    topo: Topology,
    algo: Algo = Algo.AUTO,
    protocol: Proto | None = None,
) -> CollectiveResult:
    """Price `op` for every (size, ranks) pair; sizes and ranks broadcast together."""
    size, n = (
        np.asarray(a)
        for a in np.broadcast_arrays(
            np.asarray(size_bytes, dtype=np.float64), np.asarray(ranks, dtype=np.float64)
        )
    )
    if np.any(n < 1):
        raise ConfigError("must be >= 1", field="ranks")
    t, algos, protos = select(op, algo, size, n, topo, protocol)
    return CollectiveResult(op=op, size_bytes=size, ranks=n, algo=algos, time_s=t, protocol=protos)


def fabric_congestion(topo: Topology, ranks: float) -> dict[str, Any]:
    """The collision model's inputs and outputs for a ring of `ranks` ranks on `topo`, with
    NCCL's collective channels per NIC (model/congestion.py): what `--json` shows for a
    plan's data-parallel group (`Cluster.group_topology(tp·cp)`, dp ranks). Keys: routing,
    placement, rail_optimized, qps_per_connection, rdma_cc, collision_factor and, on a
    hashed fabric, ecmp_flows_per_nic, ecmp_paths_per_leaf, ecmp_path_speed,
    ecmp_crossing_share, ecmp_flows_per_leaf, ecmp_links, ecmp_mean_load,
    ecmp_expected_max_load, ecmp_p99_max_load, collision_factor_p99, ecmp_carried_share."""
    link = topo.scale_out
    routing = (
        topo.load_balancing
        if topo.load_balancing is not None
        else (link.load_balancing if link is not None else "none")
    )
    out: dict[str, Any] = {
        "routing": routing,
        "placement": topo.placement,
        "rail_optimized": topo.rail_optimized,
        "qps_per_connection": float(np.max(topo.qps())),
        "rdma_cc": congestion.fabric_cc(topo).value,
    }
    n = np.asarray(float(ranks))
    nodes = float(np.max(np.ceil(n / np.asarray(topo.gpus_per_node, dtype=np.float64))))
    if link is None or nodes <= 1 or not congestion.applies(topo):
        out["collision_factor"] = 1.0
        return out
    if routing == "adaptive":
        out["collision_factor"] = float(np.max(congestion.ring_balance(topo, nodes, 2.0)))
        return out
    per_nic = float(np.max(nccl.shape_of(n, topo).net_ch_per_nic))
    channels = congestion.NCCL_COLL_CHANNEL_FACTOR * per_nic
    out.update(congestion.ring_collisions(topo, nodes, channels, full=True).summary())
    return out
