"""Gloo's segmented ring all_reduce: a round trip per pair of segments.

A Gloo send waits for the receiver's "ready" notice (`NOTIFY_RECV_READY`,
gloo/transport/tcp/pair.cc) before data moves, and the ring keeps two segments in flight.
Source: pytorch/gloo @ 70dc3602 (allreduce.h, allreduce.cc, transport/tcp/pair.cc).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: Gloo's ring all_reduce cuts the buffer into segments of at most this many bytes
#: (gloo/allreduce.h `kMaxSegmentSize`; pytorch/gloo @ 70dc3602).
GLOO_SEGMENT_BYTES = 2.0**20


def _frac(k: FloatArray) -> FloatArray:
    return (k - 1) / k


def gloo_ring_all_reduce_s(
    size_bytes: npt.ArrayLike,
    n: npt.ArrayLike,
    alpha_s: npt.ArrayLike,
    inv_bw_s_per_B: npt.ArrayLike,
    spread_s: npt.ArrayLike = 0.0,
) -> FloatArray:
    """Gloo's segmented ring all_reduce, with the round trip each send waits for.

    Each pair of segment sends costs max(2α + s/B, 2s/B). The buffer is cut into
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
    size_bytes: npt.ArrayLike, n: npt.ArrayLike
) -> tuple[tuple[FloatArray, FloatArray], tuple[FloatArray, FloatArray]]:
    """(one-way latencies, bytes at the link rate) of the two sides of Gloo's ring: the
    round-trip side (2P latencies, (n−1)/n·S) and the α-β side (2(n−1), 2(n−1)/n·S). The time
    is the larger; `calibrate` fits α and B on whichever side each measured row is on."""
    size = np.asarray(size_bytes, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    segments = np.maximum(np.ceil(size / GLOO_SEGMENT_BYTES), 2 * n)
    segments = np.ceil(segments / np.maximum(n, 1.0)) * n
    return (2 * segments * _frac(n), _frac(n) * size), (2 * (n - 1) + 0 * size, 2 * _frac(n) * size)
