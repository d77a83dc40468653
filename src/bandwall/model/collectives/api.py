"""The public entry points: price a collective over sizes and rank counts, and say what runs.

`collective_time_s` is what the engine calls (about a dozen times per plan); a call with
one size and one rank count on a topology of plain numbers is answered from a cache of
compiled option tables keyed by (op, algorithm, protocol, ranks, topology) (:mod:`.fast`).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from bandwall.errors import ConfigError
from bandwall.model import congestion, nccl
from bandwall.model.collectives import calibrated, dedupe, fast, pricing
from bandwall.model.collectives.levels import check_links
from bandwall.model.collectives.options import Option, call_overhead_s, options, prune
from bandwall.model.collectives.vocab import NO_PROTOCOL, Algo, Op, busbw_factor
from bandwall.model.nccl import Proto, without_speed_ladder
from bandwall.model.topology import Link, Topology
from bandwall.units import GB

FloatArray = npt.NDArray[np.float64]
StrArray = npt.NDArray[np.str_]
_TOPO_GET = attrgetter(*(f.name for f in fields(Topology)))
_LINK_GET = attrgetter(*(f.name for f in fields(Link)))


@dataclass(frozen=True)
class Selection:
    """Per element: the time of what runs and the cheapest time; with names, which
    algorithm and protocol run, which are cheapest, and why they differ."""

    time_s: FloatArray
    best_s: FloatArray
    algo: StrArray | None = None
    protocol: StrArray | None = None
    best_algo: StrArray | None = None
    best_protocol: StrArray | None = None
    ladder: npt.NDArray[np.bool_] | None = None
    segmented: npt.NDArray[np.bool_] | None = None

    @property
    def stepped(self) -> npt.NDArray[np.bool_]:
        """Where the price steps by a documented behaviour named in the note (NCCL's speed
        ladder, Gloo's segments), not continuously."""
        out = np.zeros(self.time_s.shape, dtype=bool)
        for flag in (self.ladder, self.segmented):
            if flag is not None:
                out = out | flag
        return out

    @property
    def tuner_slower(self) -> npt.NDArray[np.bool_]:
        """Where NCCL's tuner runs a pair slower than the cheapest."""
        return np.isfinite(self.time_s) & (self.time_s > self.best_s * (1 + 1e-9))

    def notes(self) -> StrArray:
        """What the output says where the price departs from the cheapest option or from the
        NIC's rate: NCCL's tuner picks a slower pair (tuning.cc ncclTopoGetAlgoTime,
        enqueue.cc topoGetAlgoInfo), or NCCL's speed ladder plans below the NIC's rate
        (search.cc:1051-1066). Each distinct note is worded once."""
        assert self.algo is not None and self.best_algo is not None
        assert self.protocol is not None and self.best_protocol is not None
        slower = self.tuner_slower
        ladder = np.zeros_like(slower) if self.ladder is None else self.ladder
        segmented = np.zeros_like(slower) if self.segmented is None else self.segmented
        out = np.full(self.time_s.shape, "", dtype=object)
        flagged = slower | ladder | segmented
        if not bool(np.any(flagged)):
            return out.astype(str)
        with np.errstate(divide="ignore", invalid="ignore"):
            pct = np.round(100 * (1 - self.best_s / self.time_s)).astype(np.int64)
        keys = np.stack(
            [
                np.where(slower, self.algo, ""),
                np.where(slower, self.protocol, ""),
                np.where(slower, self.best_algo, ""),
                np.where(slower, self.best_protocol, ""),
                np.where(slower, pct.astype(str), ""),
                np.where(ladder, "1", ""),
                np.where(segmented, "1", ""),
            ],
            axis=-1,
        )[flagged]
        unique, inverse = np.unique(keys, axis=0, return_inverse=True)
        worded = [_note(*row) for row in unique]
        out[flagged] = np.array(worded, dtype=object)[inverse.ravel()]
        return out.astype(str)


def _note(
    algo: str, proto: str, best: str, best_proto: str, pct: str, ladder: str, segmented: str
) -> str:
    parts = []
    if algo:
        parts.append(
            f"NCCL's tuner picks {algo}/{proto} here; {best}/{best_proto} would be {pct}% "
            f"faster (--algo {best} --protocol {best_proto})"
        )
    if ladder:
        parts.append(LADDER_NOTE)
    if segmented:
        parts.append(SEGMENT_NOTE)
    return "; ".join(parts)


#: Why Gloo's ring steps with size where its round trips bind.
SEGMENT_NOTE = (
    "Gloo sends 1 MiB segments, each pair after a round trip (gloo/allreduce.h, "
    "transport/tcp/pair.cc): time steps with the segment count"
)
#: Why the price steps with the NIC rate where NCCL's speed ladder binds.
LADDER_NOTE = (
    "NCCL plans channels on its speed ladder below this NIC's rate (search.cc:1051-1066); "
    "the rest of the rate is unused"
)


def _priced(
    op: Op,
    algo: Algo,
    size: FloatArray,
    n: FloatArray,
    topo: Topology,
    protocol: Proto | None,
    want_names: bool,
) -> tuple[pricing.Priced, list[Option]]:
    memo = _SHARED.get()
    key = None if memo is None else _group_key(n, topo)
    if memo is None or key is None:
        memo, key = {}, ()  # not shared: a dict of this call only
    group = memo.get(key)
    if group is None:
        cn, ctopo, index = dedupe.compress(n, topo)
        check_links(cn, ctopo)
        group = memo[key] = (cn, ctopo, index, call_overhead_s(ctopo, cn))
    cn, ctopo, index, overhead = group
    op_key = (key, op, algo, protocol, nccl.speed_ladder_on())
    opts = memo.get(op_key)
    if opts is None:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            opts = memo[op_key] = prune(options(op, algo, cn, ctopo, protocol))
    return pricing.run(opts, size, index, want_names, overhead), opts


#: What `shared_groups` keeps, compared by content: per (rank counts, topology) the
#: compressed group and its per-call overhead, and per (that, op, algorithm, protocol, speed
#: ladder) the pruned options.
_SHARED: ContextVar[dict[tuple[Any, ...], Any] | None] = ContextVar("shared_groups", default=None)
#: Groups with more elements than this (rank counts and topology arrays together) are not
#: kept: their key would cost about what it saves.
SHARED_MAX_ELEMENTS = 1 << 16


class shared_groups:  # noqa: N801 (used as a function: `with shared_groups():`)
    """Compress each distinct group once, and price its options once per op, inside the block
    (one engine evaluation): TP's all-reduce, all-gather and reduce-scatter share one group,
    and a sweep over ZeRO stages prices FSDP's and DDP's collectives on the same groups; the
    options, NCCL's channel search included, do not depend on the size. The key is the
    inputs' exact bytes, so a hit is the same computation. (A class, not a generator: one
    plan enters it once, in well under a microsecond.)"""

    def __enter__(self) -> None:
        self._token = _SHARED.set({})

    def __exit__(self, *exc: object) -> None:
        _SHARED.reset(self._token)


def _content(v: Any) -> Any:
    """A hashable stand-in for one field value, equal only for identical values (arrays by
    dtype, shape and bytes; a link by its fields; a float by its bits, so -0.0 is not 0.0;
    types kept apart, so 1 is not 1.0)."""
    t = type(v)
    if t is np.ndarray:
        return (v.dtype.str, v.shape, v.tobytes())
    if t is Link:
        return (t, tuple(map(_content, _LINK_GET(v))))
    if isinstance(v, np.generic):
        return (v.dtype.str, v.tobytes())
    if t is float:
        return (t, v.hex())
    return (t, v)


def _group_key(n: FloatArray, topo: Topology) -> tuple[Any, ...] | None:
    values = _TOPO_GET(topo)
    links = [_LINK_GET(v) for v in values if type(v) is Link]
    elements = np.size(n) + sum(
        np.size(v) for v in (*values, *(x for link in links for x in link)) if type(v) is np.ndarray
    )
    if elements > SHARED_MAX_ELEMENTS:
        return None
    key = (_content(n), tuple(map(_content, values)))
    try:
        hash(key)
    except TypeError:  # a field of a type without a hash: not shared
        return None
    return key


def _names(
    opts: list[Option], which: npt.NDArray[np.intp] | None
) -> tuple[StrArray | None, StrArray | None]:
    if which is None:
        return None, None
    return (
        np.array([o.algo.value for o in opts])[which],
        np.array([o.protocol for o in opts])[which],
    )


def _selection(
    op: Op,
    algo: Algo,
    size: FloatArray,
    n: FloatArray,
    topo: Topology,
    protocol: Proto | None,
    want_names: bool,
) -> Selection:
    p, opts = _priced(op, algo, size, n, topo, protocol, want_names)
    a, pr = _names(opts, p.which)
    ba, bp = _names(opts, p.best_which)
    ladder = p.ladder
    if want_names:
        # where planning every NIC at its full rate would be faster, NCCL's speed ladder sets
        # the price (whichever option it binds: the one running or one that would take over)
        with without_speed_ladder():
            free, _ = _priced(op, algo, size, n, topo, protocol, False)
        binds = (free.time_s < p.time_s * (1 - 1e-9)) | (free.best_s < p.best_s * (1 - 1e-9))
        ladder = binds if ladder is None else ladder | binds
    return Selection(p.time_s, p.best_s, a, pr, ba, bp, ladder, p.segmented)


def _where(mask: Any, a: Any, b: Any) -> Any:
    return None if a is None or b is None else np.where(mask, a, b)


def _select(
    op: Op,
    algo: Algo,
    size: FloatArray,
    n: FloatArray,
    topo: Topology,
    protocol: Proto | None,
    want_names: bool,
) -> Selection:
    regime = calibrated.small_regime(topo)
    topo = calibrated.per_op(op, topo)
    sel = _selection(op, algo, size, n, topo, protocol, want_names)
    if regime is not None:
        # Below the cut the small-message fit prices the collective; above it the large one,
        # never below the small fit at the cut, so time stays monotone in size. The per-op
        # factors apply on both sides (calibrate fits them on large messages for both).
        cut, small_topo = regime
        small_topo = calibrated.per_op(op, small_topo)
        small = _selection(op, algo, size, n, small_topo, protocol, want_names)
        at_cut = _selection(op, algo, np.full(size.shape, cut), n, small_topo, protocol, False)
        below = size < cut
        sel = Selection(
            np.where(below, small.time_s, np.maximum(sel.time_s, at_cut.time_s)),
            np.where(below, small.best_s, np.maximum(sel.best_s, at_cut.best_s)),
            _where(below, small.algo, sel.algo),
            _where(below, small.protocol, sel.protocol),
            _where(below, small.best_algo, sel.best_algo),
            _where(below, small.best_protocol, sel.best_protocol),
            _where(below, small.ladder, sel.ladder),
            _where(below, small.segmented, sel.segmented),
        )
    single = n <= 1
    if not bool(np.any(single)):
        return sel
    return Selection(
        np.where(single, 0.0, sel.time_s),
        np.where(single, 0.0, sel.best_s),
        _where(single, "none", sel.algo),
        _where(single, NO_PROTOCOL, sel.protocol),
        _where(single, "none", sel.best_algo),
        _where(single, NO_PROTOCOL, sel.best_protocol),
        None if sel.ladder is None else np.where(single, False, sel.ladder),
        None if sel.segmented is None else np.where(single, False, sel.segmented),
    )


def _broadcast(size_bytes: npt.ArrayLike, ranks: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    return np.asarray(size_bytes, dtype=np.float64), np.asarray(ranks, dtype=np.float64)


def collective_time_s(
    op: Op,
    algo: Algo,
    size_bytes: npt.ArrayLike,
    ranks: npt.ArrayLike,
    topo: Topology,
    *,
    protocol: Proto | None = None,
) -> FloatArray:
    """Time of one collective, broadcast over sizes and rank counts.

    `algo` AUTO runs what NCCL's tuner picks (on Gloo, PyTorch's fixed algorithm; across
    sites also the hierarchical schedules a framework runs itself, where cheaper); a forced
    algorithm takes the protocol NCCL's tuner picks for it unless `protocol` is given. The
    time is that pair's price. A single rank costs nothing.
    """
    t, shape = _time_s(op, algo, size_bytes, ranks, topo, protocol)
    return t if t.shape == shape else np.broadcast_to(t, shape).copy()


def compact_time_s(
    op: Op, algo: Algo, size_bytes: npt.ArrayLike, ranks: npt.ArrayLike, topo: Topology
) -> tuple[FloatArray, tuple[int, ...]]:
    """`collective_time_s` before it is broadcast back: the times with every axis they do not
    vary along cut to length 1 (a TP group inside a node does not vary with the scale-out
    bandwidth a sweep spans), and the shape `collective_time_s` would return. Terms built on
    it then stay that small; the values, broadcast back, are the same bits."""
    t, shape = _time_s(op, algo, size_bytes, ranks, topo, None)
    if t.shape == shape or t.dtype != np.float64:  # nothing cut from the inputs: kept whole
        return t, shape
    return _constant_axes_cut(t), shape


def _constant_axes_cut(t: FloatArray) -> FloatArray:
    """`t` with every axis along which it holds the same bits cut to length 1 (bits, so a
    NaN stays a NaN and -0.0 is not 0.0)."""
    bits = t.view(np.uint64)
    for axis in range(bits.ndim):
        if bits.shape[axis] > 1:
            head = bits[(slice(None),) * axis + (slice(0, 1),)]
            if np.array_equal(bits, np.broadcast_to(head, bits.shape)):
                bits = head
    return bits.view(np.float64)


def _time_s(
    op: Op,
    algo: Algo,
    size_bytes: npt.ArrayLike,
    ranks: npt.ArrayLike,
    topo: Topology,
    protocol: Proto | None,
) -> tuple[FloatArray, tuple[int, ...]]:
    """(the times on the inputs' axes that vary, the shape they broadcast back to)."""
    one = fast.one_value(size_bytes, ranks)
    if one is not None:
        t = fast.scalar_time_s(op, algo, one[0], one[1], topo, protocol)
        if t is not None:
            # the shape the vector path would return: one element, as many axes as any input
            full = np.full((1,) * max(one[2], fast.topology_ndim(topo)), t)
            return full, full.shape
    size, n = _broadcast(size_bytes, ranks)
    cut = dedupe.squeezed_call(size, n, topo)
    if cut is not None:
        size_c, n_c, topo_c, shape = cut
        return collective_time_s(op, algo, size_c, n_c, topo_c, protocol=protocol), shape
    whole = _uncut_time_s(op, algo, size, n, topo, protocol)
    return whole, whole.shape


def _uncut_time_s(
    op: Op, algo: Algo, size: FloatArray, n: FloatArray, topo: Topology, protocol: Proto | None
) -> FloatArray:
    calls = dedupe.distinct_calls(size, n, topo)
    if calls is not None:
        size_u, n_u, topo_u, inverse, shape = calls
        each = _select(op, algo, size_u, n_u, topo_u, protocol, want_names=False).time_s
        return np.asarray(each)[inverse].reshape(shape)
    return _select(op, algo, size, n, topo, protocol, want_names=False).time_s


def select(
    op: Op,
    algo: Algo,
    size_bytes: npt.ArrayLike,
    ranks: npt.ArrayLike,
    topo: Topology,
    protocol: Proto | None = None,
) -> tuple[FloatArray, StrArray, StrArray]:
    """Time, algorithm and protocol of what runs, per element."""
    sel = selection(op, algo, size_bytes, ranks, topo, protocol)
    assert sel.algo is not None and sel.protocol is not None
    return sel.time_s, sel.algo, sel.protocol


def selection(
    op: Op,
    algo: Algo,
    size_bytes: npt.ArrayLike,
    ranks: npt.ArrayLike,
    topo: Topology,
    protocol: Proto | None = None,
) -> Selection:
    """What runs and what would be cheapest, per element (:class:`Selection`)."""
    size, n = _broadcast(size_bytes, ranks)
    return _select(op, algo, size, n, topo, protocol, want_names=True)


def auto_select(
    op: Op, size_bytes: npt.ArrayLike, ranks: npt.ArrayLike, topo: Topology
) -> tuple[FloatArray, StrArray]:
    """What NCCL's tuner runs per element (per message size), and its time."""
    t, algos, _ = select(op, Algo.AUTO, size_bytes, ranks, topo)
    return t, algos


@dataclass(frozen=True)
class CollectiveResult:
    """One priced sweep: arrays of equal shape, one element per (size, ranks)."""

    op: Op
    size_bytes: FloatArray
    ranks: FloatArray
    algo: StrArray
    time_s: FloatArray
    protocol: StrArray | None = None
    best_time_s: FloatArray | None = None
    """The cheapest option's time (below `time_s` where NCCL's tuner picks a slower one)."""
    note: StrArray | None = None
    """Why the price departs from the cheapest option or the NIC's rate ('' where it does
    not): NCCL's tuner picks a slower pair, or its speed ladder binds."""
    stepped: npt.NDArray[np.bool_] | None = None
    """Where the price steps by a documented behaviour the note names (NCCL's speed ladder
    with the NIC rate, Gloo's segments with size) rather than continuously."""
    best_algo: StrArray | None = None
    best_protocol: StrArray | None = None
    """The cheapest algorithm and protocol (what `--algo` would force to get best_time_s)."""

    def summary_notes(self) -> list[str]:
        """The notes of a sweep in a few lines: one per rank count and kind of note, with the
        size range it covers ("ranks 64, 16K-64K: NCCL's tuner picks ring/LL; tree/LL would
        be 13-34% faster (--algo tree --protocol LL)")."""
        from bandwall.units import format_size

        if self.note is None:
            return []
        groups: dict[tuple[str, ...], list[tuple[float, float]]] = {}
        notes = self.note.ravel()
        for i in np.nonzero(np.char.str_len(notes.astype(str)) > 0)[0]:
            size, ranks = float(self.size_bytes.ravel()[i]), float(self.ranks.ravel()[i])
            t, best = float(self.time_s.ravel()[i]), float(self.best_time_s.ravel()[i])  # type: ignore[union-attr]
            text = str(notes[i])
            if text.startswith("NCCL's tuner") and self.best_algo is not None:
                assert self.protocol is not None and self.best_protocol is not None
                best_algo = str(self.best_algo.ravel()[i])
                best_proto = str(self.best_protocol.ravel()[i])
                extra = text.partition(f"--protocol {best_proto})")[2].lstrip("; ")
                key: tuple[str, ...] = (
                    f"{ranks:,.0f}",
                    "tuner",
                    str(self.algo.ravel()[i]),
                    str(self.protocol.ravel()[i]),
                    best_algo,
                    best_proto,
                    extra,
                )
                groups.setdefault(key, []).append((size, 1 - best / t))
            else:
                groups.setdefault((f"{ranks:,.0f}", "other", text), []).append((size, 0.0))
        lines = []
        for key, members in groups.items():
            sizes = [m[0] for m in members]
            span = format_size(min(sizes))
            if max(sizes) > min(sizes):
                span += f"-{format_size(max(sizes))}"
            where = f"ranks {key[0]}, {span}"
            if key[1] == "tuner":
                gains = [m[1] for m in members]
                pct = (
                    f"{min(gains):.0%}"
                    if max(gains) - min(gains) < 0.005
                    else (f"{min(gains):.0%}-{max(gains):.0%}")
                )
                line = (
                    f"{where}: NCCL's tuner picks {key[2]}/{key[3]}; {key[4]}/{key[5]} would be "
                    f"{pct} faster (--algo {key[4]} --protocol {key[5]})"
                )
                if key[6]:
                    line += f"; {key[6]}"
            else:
                line = f"{where}: {key[2]}"
            lines.append(line)
        return lines

    @property
    def algbw_GBps(self) -> FloatArray:
        with np.errstate(divide="ignore"):
            return np.where(self.time_s > 0, self.size_bytes / self.time_s / GB, 0.0)

    @property
    def busbw_GBps(self) -> FloatArray:
        return self.algbw_GBps * busbw_factor(self.op, self.ranks)

    def records(self) -> list[dict[str, object]]:
        """Rows of `bandwall collective --json`: op, ranks, size_bytes, algo, protocol,
        time_s, algbw_GBps, busbw_GBps, note."""
        algbw, busbw = self.algbw_GBps.ravel(), self.busbw_GBps.ravel()
        count = self.time_s.size
        protos = self.protocol.ravel() if self.protocol is not None else [NO_PROTOCOL] * count
        notes = self.note.ravel() if self.note is not None else [""] * count
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
                "note": str(nt),
            }
            for s, r, a, p, t, ab, bb, nt in zip(
                self.size_bytes.ravel(),
                self.ranks.ravel(),
                self.algo.ravel(),
                protos,
                self.time_s.ravel(),
                algbw,
                busbw,
                notes,
                strict=True,
            )
        ]


def evaluate_collective(
    op: Op,
    size_bytes: npt.ArrayLike,
    ranks: npt.ArrayLike,
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
    sel = selection(op, algo, size, n, topo, protocol)
    assert sel.algo is not None
    return CollectiveResult(
        op=op,
        size_bytes=size,
        ranks=n,
        algo=sel.algo,
        time_s=sel.time_s,
        protocol=sel.protocol,
        best_time_s=sel.best_s,
        note=sel.notes(),
        stepped=sel.stepped,
        best_algo=sel.best_algo,
        best_protocol=sel.best_protocol,
    )


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
    per_nic = float(np.max(nccl.shape_of(n, topo).layout_ch_per_nic))
    channels = congestion.NCCL_COLL_CHANNEL_FACTOR * per_nic
    out.update(congestion.ring_collisions(topo, nodes, channels, full=True).summary())
    return out
