"""Deduplicating the size-independent work: a sweep or a layout search repeats few distinct
(rank count, topology) combinations over many elements, so NCCL's channel search, the
latencies and the TCP rates are computed once per distinct combination and expanded back."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from bandwall.model.topology import Topology

FloatArray = npt.NDArray[np.float64]


def arrays(topo: Topology) -> list[tuple[str | None, str, Any]]:
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


def squeeze(a: Any, shape: tuple[int, ...]) -> FloatArray:
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


def compress(
    n: FloatArray, topo: Topology
) -> tuple[FloatArray, Topology, npt.NDArray[np.intp] | None]:
    """The distinct (rank count, topology) combinations, and how to expand them back.

    A sweep or a layout search repeats few distinct rank counts and group shapes over
    hundreds of thousands of elements; the size-independent part of the model (NCCL's
    channel search, latencies, TCP rates) is computed once per distinct combination.
    Constant axes are dropped first (no copy needed: numpy broadcasts them back).
    """
    fields = arrays(topo)
    shape = np.broadcast_shapes(np.shape(n), *(np.shape(v) for _, _, v in fields))
    if int(np.prod(shape)) < _COMPRESS_MIN:
        return n, topo, None
    n_sq = squeeze(n, shape)
    squeezed = [squeeze(v, shape) for _, _, v in fields]
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
