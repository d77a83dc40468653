"""Deduplicating the size-independent work: a sweep or a layout search repeats few distinct
(rank count, topology) combinations over many elements, so NCCL's channel search, the
latencies and the TCP rates are computed once per distinct combination and expanded back."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from bandwall.model.distinct import distinct_broadcast, distinct_rows
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
    codes = distinct_rows(cols)
    if codes is None:
        return n_sq, _rebuilt(topo, fields, squeezed), None
    first, inverse = codes
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


def squeezed_call(
    size: FloatArray, n: FloatArray, topo: Topology
) -> tuple[FloatArray, FloatArray, Topology, tuple[int, ...]] | None:
    """The call with every axis along which size, rank count and topology are all constant
    cut to length 1, and the shape to broadcast its result back to; None when nothing is cut
    or the call is small. The engine's arrays carry every layout axis of a sweep (a TP
    message on a 108,000-point grid depends on 3 micro-batches × 4 tp × 100 bandwidths), so
    this alone prices most calls on 1-2% of the grid."""
    fields = arrays(topo)
    shape = np.broadcast_shapes(size.shape, n.shape, *(np.shape(v) for _, _, v in fields))
    total = int(np.prod(shape))
    if total < _COMPRESS_MIN:
        return None
    size_sq, n_sq = squeeze(size, shape), squeeze(n, shape)
    squeezed = [squeeze(v, shape) for _, _, v in fields]
    sq_shape = np.broadcast_shapes(size_sq.shape, n_sq.shape, *(v.shape for v in squeezed))
    if int(np.prod(sq_shape)) == total:
        return None
    return size_sq, n_sq, _rebuilt(topo, fields, squeezed), shape


def distinct_calls(
    size: FloatArray, n: FloatArray, topo: Topology
) -> tuple[FloatArray, FloatArray, Topology, npt.NDArray[np.intp], tuple[int, ...]] | None:
    """The distinct (size, rank count, topology) calls among many, and how to expand them
    back: (sizes, ranks, topology, row of every element, broadcast shape), or None when
    fewer than half repeat. A layout search asks for the same message on the same group for
    thousands of layouts; its size-dependent pricing is then done once per distinct call."""
    fields = arrays(topo)
    shape = np.broadcast_shapes(size.shape, n.shape, *(np.shape(v) for _, _, v in fields))
    if int(np.prod(shape)) < _COMPRESS_MIN:
        return None
    cols = [size, n, *(np.asarray(v, dtype=np.float64) for _, _, v in fields)]
    found = distinct_broadcast(cols, shape)
    if found is None:
        return None
    rows, inverse = found
    return rows[0], rows[1], _rebuilt(topo, fields, rows[2:]), inverse, shape
