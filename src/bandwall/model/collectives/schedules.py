"""Generic α-β schedules, one function per (op, algorithm), the way NCCL keys its tables
([coll][algo]): the multi-site options, NCCL's point-to-point exchanges, and what PyTorch's
Gloo runs (:data:`GLOO_SCHEDULES` where Gloo's variant differs).

Each step costs the one-way latency α of the slowest level it crosses plus jitter: over s
steps a rank pays s·μ and the collective waits for the slowest of the k ranks that
synchronise, σ·√s·(H_k − 1). Flat schedules see the per-rank bottleneck min(scale-up per GPU,
NICs × NIC rate per node / oversubscription, site uplink); hierarchical ones pipeline the
levels (latencies add, bandwidth terms overlap). Every schedule is affine in size.

Gloo sources: pytorch ProcessGroupGloo.cpp @ c194358a; pytorch/gloo @ 70dc3602
(allreduce.cc, broadcast.cc, reduce.cc, allgather.cc, alltoall.cc).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from bandwall.model.collectives.levels import Levels
from bandwall.model.collectives.vocab import Algo, Op

FloatArray = npt.NDArray[np.float64]
Schedule = Callable[[FloatArray, Levels], FloatArray]


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


def flat_latency(lv: Levels, steps: FloatArray | float) -> FloatArray:
    return _latency(steps, lv.alpha_flat, lv.mu_flat, lv.spread_flat)


def _step_costs(lv: Levels, steps: tuple[FloatArray, FloatArray, FloatArray]) -> FloatArray:
    """Latency of a schedule taking steps[i] steps on level i, the levels one after another."""
    total = np.zeros_like(lv.n)
    for i in range(3):
        total = total + _latency(steps[i], lv.alpha[i], lv.mu[i], lv.spread[i])
    return total


def _depths(lv: Levels) -> tuple[FloatArray, FloatArray, FloatArray]:
    return _ceil_log2(lv.g), _ceil_log2(lv.N), _ceil_log2(lv.M)


def _hd_bandwidth_s(size: FloatArray, lv: Levels) -> FloatArray:
    """One pass of recursive halving (or doubling): data crossing each level boundary.

    With rank order following the hierarchy, the first log2(M) exchanges cross sites carrying
    S/2 + S/4 + ... = S(1 − 1/M), the next log2(N) cross nodes, the rest stay in the node. All
    ranks exchange at once, so each GPU gets its share of the node's NICs and the site uplink.
    """
    g, N, M = lv.g, lv.N, lv.M
    cross_site = size * (1 - 1 / M)
    cross_node = size * (1 / M - 1 / (M * N))
    intra = size * (1 / (M * N) - 1 / lv.n)
    return (
        cross_site / (lv.bw_wan_all / (g * N))
        + cross_node / (lv.bw_level[1] / g)
        + intra / lv.bw_level[0]
    )


def _not_pow2(n: FloatArray) -> npt.NDArray[np.bool_]:
    result: npt.NDArray[np.bool_] = np.exp2(np.floor(np.log2(np.maximum(n, 1.0)))) != n
    return result


def _slowest_per_gpu_Bps(lv: Levels) -> FloatArray:
    return np.minimum(
        np.minimum(lv.bw_level[0], lv.bw_level[1] / lv.g), lv.bw_wan_all / (lv.g * lv.N)
    )


def _hierarchical(size: FloatArray, lv: Levels, passes: float) -> FloatArray:
    """Each level in turn (latencies add), the levels' transfers pipelined (the slowest
    sets the pace); `passes` 2 for all_reduce (reduce-scatter then all-gather), else 1."""
    lat = _step_costs(lv, (passes * (lv.g - 1), passes * (lv.N - 1), passes * (lv.M - 1)))
    bw = (
        passes * _frac(lv.g) * size / lv.bw_level[0],
        passes * _frac(lv.N) * size / lv.bw_level[1],
        passes * _frac(lv.M) * size / lv.bw_wan_all,
    )
    return lat + np.maximum(np.maximum(bw[0], bw[1]), bw[2])


def _halving_doubling(size: FloatArray, lv: Levels, passes: float) -> FloatArray:
    """Recursive halving/doubling, log2 of each level's members per pass; a rank count that
    is not a power of two first folds the extra ranks in (one more exchange of the buffer)."""
    d = _depths(lv)
    whole = size if passes == 2 else size / lv.n
    extra = np.where(
        _not_pow2(lv.n),
        flat_latency(lv, passes) + passes * whole / _slowest_per_gpu_Bps(lv),
        0.0,
    )
    return (
        _step_costs(lv, (passes * d[0], passes * d[1], passes * d[2]))
        + passes * _hd_bandwidth_s(size, lv)
        + extra
    )


def _all_to_all(size: FloatArray, lv: Levels, steps: FloatArray | float) -> FloatArray:
    """Every rank sends (n−1)/n of its buffer, 1/n to each peer; the slowest level carries
    the pairs that cross it (a node's GPUs share its NICs, a site's its uplink)."""
    g, N, M = lv.g, lv.N, lv.M
    to_node = (g - 1) / lv.n * size / lv.bw_level[0]
    to_site = g * (N - 1) / lv.n * size / (lv.bw_level[1] / g)
    to_world = g * N * (M - 1) / lv.n * size / (lv.bw_wan_all / (g * N))
    return flat_latency(lv, steps) + np.maximum(np.maximum(to_node, to_site), to_world)


#: (op, algorithm) -> time(size, levels): NCCL point-to-point exchanges and the generic
#: schedules that compete with NCCL across sites or are forced by name.
SCHEDULES: dict[tuple[Op, Algo], Schedule] = {
    (Op.ALL_REDUCE, Algo.RING): lambda s, lv: (
        flat_latency(lv, 2 * (lv.n - 1)) + 2 * _frac(lv.n) * s / lv.bw_flat
    ),
    (Op.ALL_REDUCE, Algo.TREE): lambda s, lv: (
        _step_costs(lv, tuple(2 * d for d in _depths(lv)))  # type: ignore[arg-type]
        + 2 * s / lv.bw_flat
    ),
    (Op.ALL_REDUCE, Algo.HALVING_DOUBLING): lambda s, lv: _halving_doubling(s, lv, 2),
    (Op.ALL_REDUCE, Algo.HIERARCHICAL): lambda s, lv: _hierarchical(s, lv, 2),
    (Op.ALL_GATHER, Algo.RING): lambda s, lv: (
        flat_latency(lv, lv.n - 1) + _frac(lv.n) * s / lv.bw_flat
    ),
    (Op.ALL_GATHER, Algo.HALVING_DOUBLING): lambda s, lv: _halving_doubling(s, lv, 1),
    (Op.ALL_GATHER, Algo.HIERARCHICAL): lambda s, lv: _hierarchical(s, lv, 1),
    (Op.REDUCE_SCATTER, Algo.RING): lambda s, lv: (
        flat_latency(lv, lv.n - 1) + _frac(lv.n) * s / lv.bw_flat
    ),
    (Op.REDUCE_SCATTER, Algo.HALVING_DOUBLING): lambda s, lv: _halving_doubling(s, lv, 1),
    (Op.REDUCE_SCATTER, Algo.HIERARCHICAL): lambda s, lv: _hierarchical(s, lv, 1),
    (Op.BROADCAST, Algo.RING): lambda s, lv: flat_latency(lv, lv.n - 1) + s / lv.bw_flat,
    (Op.BROADCAST, Algo.TREE): lambda s, lv: _step_costs(lv, _depths(lv)) + s / lv.bw_flat,
    (Op.REDUCE, Algo.RING): lambda s, lv: flat_latency(lv, lv.n - 1) + s / lv.bw_flat,
    (Op.REDUCE, Algo.TREE): lambda s, lv: _step_costs(lv, _depths(lv)) + s / lv.bw_flat,
    # NCCL's all_to_all steps through its peers one after another
    (Op.ALL_TO_ALL, Algo.DIRECT): lambda s, lv: _all_to_all(s, lv, lv.n - 1),
    (Op.SEND_RECV, Algo.DIRECT): lambda s, lv: flat_latency(lv, 1) + s / lv.bw_pair,
}

#: Where Gloo's algorithm differs from the generic one of the same name.
GLOO_SCHEDULES: dict[tuple[Op, Algo], Schedule] = {
    # ProcessGroupGloo::_reduce_scatter_base: a full ring all_reduce, then a local copy
    (Op.REDUCE_SCATTER, Algo.RING): SCHEDULES[(Op.ALL_REDUCE, Algo.RING)],
    # gloo/broadcast.cc: binomial tree, the whole buffer in every round, no pipeline
    (Op.BROADCAST, Algo.TREE): lambda s, lv: (
        _step_costs(lv, _depths(lv)) + _ceil_log2(lv.n) * s / lv.bw_flat
    ),
    # gloo/reduce.cc: ring reduce-scatter, then the root gathers the reduced chunks
    (Op.REDUCE, Algo.RING): lambda s, lv: flat_latency(lv, lv.n) + 2 * _frac(lv.n) * s / lv.bw_flat,
    # gloo/alltoall.cc posts every send and receive at once: one latency
    (Op.ALL_TO_ALL, Algo.DIRECT): lambda s, lv: _all_to_all(s, lv, 1.0),
}


def schedule_time_s(op: Op, algo: Algo, size: FloatArray, lv: Levels, gloo: bool) -> FloatArray:
    """Time of the (op, algo) schedule; `gloo` takes Gloo's variant where it has one."""
    fn = GLOO_SCHEDULES.get((op, algo)) if gloo else None
    if fn is None:
        fn = SCHEDULES.get((op, algo))
    if fn is None:
        raise AssertionError(f"unreachable: no schedule for {op} {algo}")
    return fn(size, lv)
