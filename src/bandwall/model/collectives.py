"""Vectorised alpha-beta cost model of collectives over a three-level hierarchy.

Every function broadcasts over numpy arrays of message sizes and rank counts, so one call prices
a whole nccl-tests sweep or a plan grid. Conventions follow nccl-tests: `size` is the total
buffer (the output of all_gather, the input of reduce_scatter), algbw = size / time, and busbw =
algbw × a per-op factor that makes it comparable with the link rate.

Assumptions, stated once:

- Each algorithm step costs the one-way latency α of the slowest level it crosses plus jitter.
  Jitter is a per-message delay with mean μ and std σ. Over a schedule of s steps a rank's
  delays add up (mean s·μ, spread σ·√s) and the collective waits for the slowest of the k ranks
  that synchronise, so it pays s·μ + σ·√s·(H_k − 1), where H_k is the k-th harmonic number
  (for one step this is E[max of k], exact for a shifted exponential). It grows like ln k.
- Flat algorithms (ring, tree, halving-doubling) see the hierarchy as NCCL does with one ring
  or tree per NIC: the per-rank bottleneck is min(scale-up per GPU, NICs × NIC rate per node /
  oversubscription, site uplink).
- Hierarchical runs reduce-scatter inside the node, the reduction across nodes on every rail at
  once, then across sites, and all-gathers back, with the phases pipelined over chunks: the
  latencies add, the bandwidth terms overlap (max).
- In-network reduction (SHARP/NVLS) sends each byte up to the switch once and receives it once
  on every level whose fabric supports it; other levels fall back to the ring inside the
  hierarchical schedule. The WAN never reduces in the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from bandwall.errors import ConfigError, unknown_choice
from bandwall.model.topology import Link, Topology
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
    HALVING_DOUBLING = "halving_doubling"
    HIERARCHICAL = "hierarchical"
    IN_NETWORK = "in_network"
    DIRECT = "direct"
    AUTO = "auto"


#: Algorithms that implement each op; the first is what a plain library would use.
ALGORITHMS: dict[Op, tuple[Algo, ...]] = {
    Op.ALL_REDUCE: (
        Algo.RING,
        Algo.TREE,
        Algo.HALVING_DOUBLING,
        Algo.HIERARCHICAL,
        Algo.IN_NETWORK,
    ),
    Op.ALL_GATHER: (Algo.RING, Algo.HALVING_DOUBLING, Algo.HIERARCHICAL, Algo.IN_NETWORK),
    Op.REDUCE_SCATTER: (Algo.RING, Algo.HALVING_DOUBLING, Algo.HIERARCHICAL, Algo.IN_NETWORK),
    Op.BROADCAST: (Algo.RING, Algo.TREE),
    Op.REDUCE: (Algo.RING, Algo.TREE),
    Op.ALL_TO_ALL: (Algo.DIRECT,),
    Op.SEND_RECV: (Algo.DIRECT,),
}


def parse_op(text: str) -> Op:
    try:
        return Op(text.strip().lower().replace("-", "_"))
    except ValueError:
        raise unknown_choice("op", text, [o.value for o in Op]) from None


def parse_algo(text: str) -> Algo:
    try:
        return Algo(text.strip().lower().replace("-", "_"))
    except ValueError:
        raise unknown_choice("algo", text, [a.value for a in Algo]) from None


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
    """Aggregate bandwidth of one instance of each level: per GPU, per node, per site."""
    bw_pair: FloatArray
    """What one rank gets when it alone crosses the slowest level (send/recv)."""
    in_net: tuple[bool, bool]
    in_net_bw: tuple[FloatArray, FloatArray]
    alpha_flat: FloatArray
    mu_flat: FloatArray
    spread_flat: FloatArray
    bw_flat: FloatArray


def _levels(ranks: FloatArray, topo: Topology) -> _Levels:
    G = np.asarray(topo.gpus_per_node, dtype=np.float64)
    n = ranks + np.zeros_like(G)
    g = np.minimum(n, G)
    nodes = np.ceil(n / G)
    if topo.nodes_per_site is None:
        N, M = nodes, np.ones_like(n)
    else:
        P = np.asarray(topo.nodes_per_site, dtype=np.float64)
        N, M = np.minimum(nodes, P), np.ceil(nodes / P)
    active = (g > 1, N > 1, M > 1)
    links = (topo.scale_up, topo.scale_out, topo.wan)
    for level, (is_active, link) in enumerate(zip(active, links, strict=True)):
        if link is None and bool(np.any(is_active)):
            names = ("scale_up", "scale_out", "wan")
            raise ConfigError(
                f"{names[level]}: these rank counts span more than one "
                f"{('GPU', 'node', 'site')[level]} but the topology has no {names[level]} fabric"
            )
    streams = topo.tcp_streams
    inf = np.inf
    up, out, wan = links
    nics = np.minimum(np.asarray(topo.nics_per_node, dtype=np.float64), g)
    pair_nics = np.minimum(np.asarray(topo.nics_per_node, dtype=np.float64), 1.0)
    bw_up = up.effective_Bps(streams) if up else inf
    bw_nic = out.effective_Bps(streams) / topo.oversubscription if out else inf
    bw_wan = wan.effective_Bps(streams) if wan else inf
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
    in_net = (bool(up and up.in_network), bool(out and out.in_network))
    in_net_bw = (
        np.where(active[0], up.in_network_Bps() if up else inf, inf),
        np.where(
            active[1], nics * (out.in_network_Bps() / topo.oversubscription) if out else inf, inf
        ),
    )
    return _Levels(
        n=n,
        g=g,
        N=N,
        M=M,
        alpha=(alpha[0], alpha[1], alpha[2]),
        mu=(mu[0], mu[1], mu[2]),
        spread=(spread[0], spread[1], spread[2]),
        bw_level=bw_level,
        bw_pair=np.minimum(
            np.minimum(bw_level[0], np.where(active[1], pair_nics * bw_nic, inf)), bw_level[2]
        ),
        in_net=in_net,
        in_net_bw=in_net_bw,
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
    per_gpu_wan = lv.bw_level[2] / (g * N)
    cross_site = size * (1 - 1 / M)
    cross_node = size * (1 / M - 1 / (M * N))
    intra = size * (1 / (M * N) - 1 / lv.n)
    return cross_site / per_gpu_wan + cross_node / per_gpu_out + intra / per_gpu_up


def _not_pow2(n: FloatArray) -> npt.NDArray[np.bool_]:
    result: npt.NDArray[np.bool_] = np.exp2(np.floor(np.log2(np.maximum(n, 1.0)))) != n
    return result


def _slowest_per_gpu_Bps(lv: _Levels) -> FloatArray:
    return np.minimum(
        np.minimum(lv.bw_level[0], lv.bw_level[1] / lv.g), lv.bw_level[2] / (lv.g * lv.N)
    )


def _in_network_schedule(size: FloatArray, lv: _Levels, *, reduce_both_ways: bool) -> FloatArray:
    """Hierarchical schedule with switch reduction on the levels that support it.

    `reduce_both_ways` is True for all_reduce (reduce up, multicast down: one pass of S per
    level) and False for all_gather/reduce_scatter (one pass of (k-1)/k · S).
    """
    ring_passes = 2.0 if reduce_both_ways else 1.0
    bw_terms = []
    lat = np.zeros_like(lv.n)
    for i, k in enumerate((lv.g, lv.N)):
        if lv.in_net[i]:
            share = 1.0 if reduce_both_ways else _frac(k)
            bw_terms.append(np.where(k > 1, share * size / lv.in_net_bw[i], 0.0))
            lat = lat + np.where(k > 1, _level_latency(lv, i, ring_passes), 0.0)
        else:
            bw_terms.append(ring_passes * _frac(k) * size / lv.bw_level[i])
            lat = lat + _level_latency(lv, i, ring_passes * (k - 1))
    bw_terms.append(ring_passes * _frac(lv.M) * size / lv.bw_level[2])
    lat = lat + _level_latency(lv, 2, ring_passes * (lv.M - 1))
    usable = (lv.in_net[0] & (lv.g > 1)) | (lv.in_net[1] & (lv.N > 1))
    t = lat + np.maximum(np.maximum(bw_terms[0], bw_terms[1]), bw_terms[2])
    return np.where(usable, t, np.inf)


def _time_one(op: Op, algo: Algo, size: FloatArray, lv: _Levels) -> FloatArray:
    n = lv.n
    levels = (lv.g, lv.N, lv.M)
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
            bw = [2 * _frac(k) * size / lv.bw_level[i] for i, k in enumerate(levels)]
            return lat + np.maximum(np.maximum(bw[0], bw[1]), bw[2])
        if algo is Algo.IN_NETWORK:
            return _in_network_schedule(size, lv, reduce_both_ways=True)
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
            bw = [_frac(k) * size / lv.bw_level[i] for i, k in enumerate(levels)]
            return lat + np.maximum(np.maximum(bw[0], bw[1]), bw[2])
        if algo is Algo.IN_NETWORK:
            return _in_network_schedule(size, lv, reduce_both_ways=False)
    elif op in (Op.BROADCAST, Op.REDUCE):
        if algo is Algo.RING:
            return _flat_latency(lv, n - 1) + size / lv.bw_flat
        if algo is Algo.TREE:
            depth = tuple(_ceil_log2(k) for k in levels)
            return _step_costs(lv, (depth[0], depth[1], depth[2])) + size / lv.bw_flat
    elif op is Op.ALL_TO_ALL and algo is Algo.DIRECT:
        g, N, M = lv.g, lv.N, lv.M
        to_node = (g - 1) / n * size / lv.bw_level[0]
        to_site = g * (N - 1) / n * size / (lv.bw_level[1] / g)
        to_world = g * N * (M - 1) / n * size / (lv.bw_level[2] / (g * N))
        return _flat_latency(lv, n - 1) + np.maximum(np.maximum(to_node, to_site), to_world)
    elif op is Op.SEND_RECV and algo is Algo.DIRECT:
        return _flat_latency(lv, 1) + size / lv.bw_pair
    raise AssertionError(f"unreachable: {op} {algo}")


def _check_algo(op: Op, algo: Algo, topo: Topology) -> None:
    allowed = ALGORITHMS[op]
    if algo not in allowed:
        raise ConfigError(
            f"{algo.value!r} is not available for {op.value}; choose one of: "
            + ", ".join(a.value for a in (*allowed, Algo.AUTO)),
            field="algo",
        )
    if algo is Algo.IN_NETWORK:
        levels = [link for link in (topo.scale_up, topo.scale_out) if link is not None]
        if not any(link.in_network for link in levels):
            names = ", ".join(link.name for link in levels) or "none"
            raise ConfigError(
                f"in_network needs a fabric with in-network reduction "
                f"(SHARP/NVLS); this topology has: {names}",
                field="algo",
            )


def collective_time_s(
    op: Op, algo: Algo, size_bytes: ArrayLike, ranks: ArrayLike, topo: Topology
) -> FloatArray:
    """Time of one collective, broadcast over sizes and rank counts.

    `algo` may be AUTO, which takes the fastest applicable algorithm element-wise. A single
    rank costs nothing (no communication).
    """
    size, n = np.broadcast_arrays(
        np.asarray(size_bytes, dtype=np.float64), np.asarray(ranks, dtype=np.float64)
    )
    if algo is Algo.AUTO:
        return auto_select(op, size, n, topo)[0]
    _check_algo(op, algo, topo)
    lv = _levels(n, topo)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        t = _time_one(op, algo, size, lv)
    return np.where(n <= 1, 0.0, t)


def auto_select(
    op: Op, size_bytes: ArrayLike, ranks: ArrayLike, topo: Topology
) -> tuple[FloatArray, npt.NDArray[np.str_]]:
    """Fastest algorithm per element, as NCCL's tuner picks per message size."""
    size, n = np.broadcast_arrays(
        np.asarray(size_bytes, dtype=np.float64), np.asarray(ranks, dtype=np.float64)
    )
    lv = _levels(n, topo)
    candidates = [a for a in ALGORITHMS[op] if a is not Algo.IN_NETWORK or any(lv.in_net)]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        times = np.stack([_time_one(op, a, size, lv) for a in candidates])
    times = np.where(np.isnan(times), np.inf, times)
    best = np.argmin(times, axis=0)
    names = np.array([a.value for a in candidates])[best]
    t = np.take_along_axis(times, best[None, ...], axis=0)[0]
    return np.where(n <= 1, 0.0, t), names


@dataclass(frozen=True)
class CollectiveResult:
    """One priced sweep: arrays of equal shape, one element per (size, ranks)."""

    op: Op
    size_bytes: FloatArray
    ranks: FloatArray
    algo: npt.NDArray[np.str_]
    time_s: FloatArray

    @property
    def algbw_GBps(self) -> FloatArray:
        with np.errstate(divide="ignore"):
            return np.where(self.time_s > 0, self.size_bytes / self.time_s / GB, 0.0)

    @property
    def busbw_GBps(self) -> FloatArray:
        return self.algbw_GBps * busbw_factor(self.op, self.ranks)

    def records(self) -> list[dict[str, object]]:
        """Rows with exactly the keys of `bandwall collective --json`."""
        algbw, busbw = self.algbw_GBps.ravel(), self.busbw_GBps.ravel()
        return [
            {
                "op": self.op.value,
                "ranks": int(r),
                "size_bytes": int(s),
                "algo": str(a),
                "time_s": float(t),
                "algbw_GBps": float(ab),
                "busbw_GBps": float(bb),
            }
            for s, r, a, t, ab, bb in zip(
                self.size_bytes.ravel(),
                self.ranks.ravel(),
                self.algo.ravel(),
                self.time_s.ravel(),
                algbw,
                busbw,
                strict=True,
            )
        ]


def evaluate_collective(
    op: Op, size_bytes: ArrayLike, ranks: ArrayLike, topo: Topology, algo: Algo = Algo.AUTO
) -> CollectiveResult:
    """Price `op` for every (size, ranks) pair; sizes and ranks broadcast together."""
    size, n = np.broadcast_arrays(
        np.asarray(size_bytes, dtype=np.float64), np.asarray(ranks, dtype=np.float64)
    )
    if np.any(n < 1):
        raise ConfigError("must be >= 1", field="ranks")
    if algo is Algo.AUTO:
        t, names = auto_select(op, size, n, topo)
    else:
        t = collective_time_s(op, algo, size, n, topo)
        names = np.full(size.shape, algo.value)
    return CollectiveResult(op=op, size_bytes=size, ranks=n, algo=names, time_s=t)
