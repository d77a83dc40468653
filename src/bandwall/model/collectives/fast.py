"""A cache of compiled option tables for scalar calls: the engine prices one size on one
group at a time, a dozen times per plan, on topologies of plain numbers.

The key is (op, algorithm, protocol, ranks, every field of the topology and its links); the
value is each surviving option as a tuple of floats, priced here in plain Python with the
formulas of :mod:`.pricing`. A topology holding arrays, a Gloo segmented ring or a calibrated
small-message regime is not compiled (the caller takes the vector path).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import fields
from operator import attrgetter
from typing import Any

import numpy as np

from bandwall.model import nccl
from bandwall.model.collectives import calibrated
from bandwall.model.collectives.levels import check_links
from bandwall.model.collectives.options import Option, call_overhead_s, options, prune
from bandwall.model.collectives.vocab import Algo, Op
from bandwall.model.nccl import Proto
from bandwall.model.topology import Link, Topology

#: Compiled tables kept (least recently used dropped first).
MAX_ENTRIES = 4096

_TOPO_GET = attrgetter(*(f.name for f in fields(Topology)))
_LINK_GET = attrgetter(*(f.name for f in fields(Link)))
_SKIP = ()
#: key -> (per-call overhead, one row per option), or _SKIP
_tables: OrderedDict[tuple[Any, ...], tuple[Any, ...]] = OrderedDict()
_links: OrderedDict[int, tuple[Link, tuple[Any, ...] | None]] = OrderedDict()
#: id(topology) -> (the topology, its fields as a key or None); the topology is held so its id
#: is not reused while the entry lives
_topos: OrderedDict[int, tuple[Topology, tuple[Any, ...] | None]] = OrderedDict()
#: id(topology) -> (the topology, its axes), as `_topos`
_ndims: OrderedDict[int, tuple[Topology, int]] = OrderedDict()


def clear() -> None:
    """Forget every compiled table (tests that patch constants call this)."""
    _tables.clear()
    _links.clear()
    _topos.clear()
    _ndims.clear()


class _NotPlainError(Exception):
    """A field holds an array: the call is not compiled."""


_SIMPLE = frozenset({float, int, str, bool, type(None), tuple})


def one_value(size: Any, ranks: Any) -> tuple[float, float, int] | None:
    """(size, ranks, axes) when both hold exactly one number (a Python number or a
    one-element array of at most one axis, as the engine passes for one plan), else None."""
    values = []
    ndim = 0
    for v in (size, ranks):
        t = type(v)
        if t is float or t is int or t is np.float64:
            values.append(float(v))
        elif t is np.ndarray and v.size == 1 and v.ndim <= 1:
            values.append(float(v.item()))
            ndim = max(ndim, v.ndim)
        else:
            return None
    return values[0], values[1], ndim


def topology_ndim(topo: Topology) -> int:
    """Axes of the topology's array fields, its links' included (only one-element ones
    reach here): the vector path's result has that many. Remembered by id, as the keys are."""
    hit = _ndims.get(id(topo))
    if hit is not None and hit[0] is topo:
        return hit[1]
    values = [v for v in _TOPO_GET(topo) if type(v) is not Link]
    for link in (v for v in _TOPO_GET(topo) if type(v) is Link):
        values.extend(_LINK_GET(link))
    ndim = max((v.ndim for v in values if type(v) is np.ndarray), default=0)
    _ndims[id(topo)] = (topo, ndim)
    if len(_ndims) > 256:
        _ndims.popitem(last=False)
    return ndim


def _plain(v: Any) -> Any:
    t = type(v)
    if t in _SIMPLE:
        return v
    if t is Link:
        return _link_key(v)
    if t is np.ndarray:
        if v.size == 1 and v.ndim <= 1:
            return v.item()
        raise _NotPlainError
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, float | int | str):
        return v
    raise _NotPlainError


class _Hashed(tuple):  # type: ignore[type-arg]
    """A key tuple that hashes once: a topology's fields (its links' nested) are ~60 values,
    and every call looks its table up by them."""

    _hash: int

    def __new__(cls, items: Any) -> _Hashed:
        self = super().__new__(cls, items)
        self._hash = tuple.__hash__(self)
        return self

    def __hash__(self) -> int:
        return self._hash


def _fields_key(
    memo: OrderedDict[int, Any], obj: Any, getter: Callable[[Any], tuple[Any, ...]]
) -> tuple[Any, ...] | None:
    """The plain-number key of a frozen object's fields, or None when one holds an array;
    remembered by id (the object is held, so its id is not reused while the entry lives)."""
    hit = memo.get(id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]  # type: ignore[no-any-return]
    try:
        key: tuple[Any, ...] | None = _Hashed(map(_plain, getter(obj)))
    except _NotPlainError:
        key = None
    memo[id(obj)] = (obj, key)
    if len(memo) > 256:
        memo.popitem(last=False)
    return key


def _link_key(link: Link) -> tuple[Any, ...]:
    key = _fields_key(_links, link, _LINK_GET)
    if key is None:
        raise _NotPlainError
    return key


def _key(
    op: Op, algo: Algo, protocol: Proto | None, ranks: float, topo: Topology
) -> tuple[Any, ...] | None:
    fields_key = _fields_key(_topos, topo, _TOPO_GET)
    if fields_key is None:
        return None
    return (op, algo, protocol, ranks, nccl.speed_ladder_on(), fields_key)


def _compile(
    op: Op, algo: Algo, ranks: float, topo: Topology, protocol: Proto | None
) -> tuple[Any, ...]:
    if calibrated.small_regime(topo) is not None:
        return _SKIP
    topo = calibrated.per_op(op, topo)
    n = np.asarray(ranks, dtype=np.float64)
    check_links(n, topo)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        opts = prune(options(op, algo, n, topo, protocol))
    if any(o.gloo_ring is not None for o in opts):
        return _SKIP
    overhead = float(np.asarray(call_overhead_s(topo, n)).item())
    return (overhead, *(_row(o) for o in opts))


def _f(v: Any) -> float | None:
    return None if v is None else float(np.asarray(v).item())


def _row(o: Option) -> tuple[Any, ...]:
    return (
        o.tuned,
        _f(o.tuner_latency_s),
        float(np.asarray(o.latency_s).item()),
        float(np.asarray(o.inv_bw).item()),
        o.tree_entries,
        o.proto_index,
        _f(o.plateau_bytes),
        o.plateau_factor,
        _f(o.channels),
        _f(o.chunk_eff),
        _f(o.fill_bytes),
    )


#: (proto, entries) -> knot values of the smooth tree correction as a Python list (knots sit
#: at log2(size/64) = -0.5, 0.5, 1.5, ...; nccl._knots).
_KNOT_Y = {key: [float(y) for y in ys] for key, (_, ys) in nccl._KNOTS.items()}
_STEP_Y = [[float(v) for v in row] for row in nccl.TREE_CORRECTION]


def _pos(size: float) -> float:
    return math.log2(max(size, 1e-300) / 64.0)


def _smooth(pos: float, proto: int, entries: int) -> float:
    """nccl.tree_correction_smooth at log2(size/64) = pos, by np.interp's formula."""
    ys = _KNOT_Y[(proto, entries)]
    if pos <= -0.5:
        return ys[0]
    last = len(ys) - 1
    if pos >= last - 0.5:
        return ys[last]
    j = int(pos + 0.5)
    return (ys[j + 1] - ys[j]) * (pos - (j - 0.5)) + ys[j]


def _steps(size: float, proto: int, entries: int) -> float:
    m = math.floor(size / 64.0)
    idx = math.floor(math.log2(max(m, 0.5)))
    if idx < 0 or idx >= entries:
        return 1.0
    return _STEP_Y[proto][idx]


def _price(row: tuple[Any, ...], size: float, pos: float) -> float:
    _, _, lat, inv, entries, proto, plateau, factor, channels, chunk_eff, fill = row
    own = size if entries is None else size / _smooth(pos, proto, entries)
    price = inv * own if channels is None else max(min(own * channels, chunk_eff), own) * inv
    if fill is not None:
        price += min(own, fill) * inv
    if plateau is not None and math.isfinite(plateau) and size > 0:
        ramp = math.log2(size) - math.log2(plateau) + 0.5
        return float(price + lat * (1.0 + (factor - 1.0) * min(max(ramp, 0.0), 1.0)))
    return float(price + lat)


def _tuner(row: tuple[Any, ...], size: float) -> float:
    _, tlat, _, inv, entries, proto, plateau, factor, _, _, _ = row
    bw = size * inv
    if entries is not None:
        bw = bw / _steps(size, proto, entries)
    if plateau is not None and size >= plateau:
        tlat = tlat * factor
    return float(tlat + bw)


def scalar_time_s(
    op: Op, algo: Algo, size: float, ranks: float, topo: Topology, protocol: Proto | None
) -> float | None:
    """The time of one call, or None when the call cannot be compiled (take the vector path)."""
    key = _key(op, algo, protocol, ranks, topo)
    if key is None:
        return None
    table = _tables.get(key)
    if table is None:
        if ranks <= 1:
            return 0.0
        table = _compile(op, algo, ranks, topo, protocol)
        _tables[key] = table
        if len(_tables) > MAX_ENTRIES:
            _tables.popitem(last=False)
    else:
        _tables.move_to_end(key)
    if table is _SKIP:
        return None
    if ranks <= 1:
        return 0.0
    tuner_best = untuned = math.inf
    picked = None  # the tuned option NCCL's tuner picks: only its price is needed
    pos = _pos(size)
    overhead = float(table[0])
    for row in table[1:]:
        if row[0]:
            guess = _tuner(row, size)
            if guess < tuner_best:
                tuner_best, picked = guess, row
        else:
            price = _price(row, size, pos)
            if price < untuned:
                untuned = price
    tuned = math.inf if picked is None else _price(picked, size, pos)
    return min(tuned, untuned) + overhead
