"""Per size: the price of every option, the cheapest, and what NCCL's tuner would run.

NCCL's tuner compares its own predictions (enqueue.cc `topoGetAlgoInfo`: the first pair of
lowest `ncclTopoGetAlgoTime`, with the tree correction per power of two and the ring plateau
as steps) and runs that pair; the price of a call is that pair's price. Options NCCL does
not tune (Gloo, the generic schedules a framework runs itself) compete on price. Where the
tuner's pair is not the cheapest, :class:`Priced` says so per element (`tuner_slower`), and
`--algo` forces another.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from bandwall.model import nccl
from bandwall.model.collectives import dedupe
from bandwall.model.collectives.gloo import gloo_ring_all_reduce_s, gloo_ring_branches
from bandwall.model.collectives.options import IntArray, Option

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Priced:
    """Per element: the time of what runs, the cheapest time, and (when names were asked
    for) which option runs and which is cheapest."""

    time_s: FloatArray
    best_s: FloatArray
    which: IntArray | None = None
    best_which: IntArray | None = None
    ladder: BoolArray | None = None
    """The running option's bandwidth is set by NCCL's speed ladder below the NIC's rate."""
    segmented: BoolArray | None = None
    """The running option is Gloo's ring paying a round trip per segment pair."""


_scratch = threading.local()


def _buffers(shape: tuple[int, ...]) -> tuple[FloatArray, ...]:
    """Six float scratch arrays and a bool one of `shape`, kept per thread between calls:
    a fresh 0.5 MB array per operation costs more than the arithmetic on it (page faults)."""
    pool = getattr(_scratch, "pool", None)
    if pool is None or pool[0] != shape:
        pool = (shape, tuple(np.empty(shape) for _ in range(6)), np.empty(shape, dtype=bool))
        _scratch.pool = pool
    return (*pool[1], pool[2])


class SizeTerms:
    """The size-dependent factors shared by every option of one call, computed once on the
    sizes with their constant axes cut (a meshgrid of sizes is constant along its ranks)."""

    def __init__(self, size: FloatArray) -> None:
        self.size = size
        self._log2: FloatArray | None = None
        self._position: FloatArray | None = None
        self._bucket: FloatArray | None = None
        self._knots: dict[int, tuple[npt.NDArray[np.intp], FloatArray]] = {}
        self._smooth: dict[tuple[int, int], FloatArray] = {}
        self._steps: dict[tuple[int, int], FloatArray] = {}

    @property
    def log2_size(self) -> FloatArray:
        if self._log2 is None:
            with np.errstate(divide="ignore"):
                self._log2 = np.log2(self.size)
        return self._log2

    def smooth(self, proto: int, entries: int) -> FloatArray:
        key = (proto, entries)
        if key not in self._smooth:
            if entries not in self._knots:  # one log2 and knot search for every protocol
                if self._position is None:
                    self._position = nccl.tree_position(self.size)
                self._knots[entries] = nccl.tree_knot(self._position, entries)
            self._smooth[key] = nccl.tree_correction_smooth_knots(
                self._knots[entries], proto, entries
            )
        return self._smooth[key]

    def steps(self, proto: int, entries: int) -> FloatArray:
        key = (proto, entries)
        if key not in self._steps:
            if self._bucket is None:
                self._bucket = nccl.tree_bucket(self.size)
            self._steps[key] = nccl.tree_correction_steps_at(self._bucket, proto, entries)
        return self._steps[key]


def option_price_s(
    o: Option, terms: SizeTerms, out: FloatArray | None = None, tmp: FloatArray | None = None
) -> FloatArray:
    """The option's time at each size (the price: continuous and non-decreasing in size).

    `out` and `tmp`, full-shape buffers, are written in place when given: a fresh array per
    operation costs more than the arithmetic (page faults on every new 0.5 MB array)."""
    size = terms.size
    if o.gloo_ring is not None:
        alpha, spread, ranks = o.gloo_ring
        # the option's slope is the α-β ring's 2(n−1)/n / B
        inv_B = o.inv_bw / (2 * (ranks - 1) / ranks)
        t = gloo_ring_all_reduce_s(size, ranks, alpha, inv_B, spread)
        if out is None:
            return t
        np.copyto(out, np.broadcast_to(t, out.shape))
        return out
    shape = np.broadcast_shapes(np.shape(size), np.shape(o.latency_s))
    if out is None:
        out = np.empty(shape)
    if tmp is None:
        tmp = np.empty(shape)
    own = size if o.tree_entries is None else size / terms.smooth(o.proto_index, o.tree_entries)
    if o.channels is None:
        np.multiply(own, o.inv_bw, out=out)
    else:
        # one channel per chunk until every channel has one (own / chunk grow together, so
        # max(own, min(own × channels, chunk_eff)) is max(own, min(size, chunk) × channels)
        # in corrected bytes); as inv × min(own × channels, max(own, chunk_eff))
        assert o.chunk_eff is not None
        np.maximum(own, o.chunk_eff, out=out)
        np.multiply(own, o.channels, out=tmp)
        np.minimum(out, tmp, out=out)
        out *= o.inv_bw
    if o.fill_bytes is not None:
        # the pipeline filling: min(own, fill) more bytes at the algorithm's rate
        np.minimum(own, o.fill_bytes, out=tmp)
        tmp *= o.inv_bw
        out += tmp
    if o.plateau_bytes is not None:
        # the ramp of nccl.plateau_ramp, from log2 of the sizes (cut) and of the plateau
        with np.errstate(divide="ignore", invalid="ignore"):
            np.subtract(terms.log2_size, np.log2(o.plateau_bytes) - 0.5, out=tmp)
        np.clip(tmp, 0.0, 1.0, out=tmp)
        tmp *= o.plateau_factor - 1.0
        tmp += 1.0
        tmp *= o.latency_s
        out += tmp
    else:
        out += o.latency_s
    return out


def option_tuner_s(o: Option, terms: SizeTerms, out: FloatArray | None = None) -> FloatArray:
    """NCCL's own prediction for the option (tuning.cc `ncclTopoGetAlgoTime`)."""
    assert o.tuner_latency_s is not None
    size = terms.size
    if out is None:
        out = np.empty(np.broadcast_shapes(np.shape(size), np.shape(o.latency_s)))
    if o.tree_entries is not None:
        size = size / terms.steps(o.proto_index, o.tree_entries)
    np.multiply(size, o.inv_bw, out=out)
    out += o.tuner_latency_s
    if o.plateau_bytes is not None:
        out += (terms.size >= o.plateau_bytes) * (o.tuner_latency_s * (o.plateau_factor - 1.0))
    return out


def run(
    opts: list[Option],
    size: FloatArray,
    index: IntArray | None,
    want_names: bool,
    overhead_s: FloatArray | None = None,
) -> Priced:
    """Price every option at every size; `index` expands compressed option arrays.

    The cheapest is a running minimum; NCCL's pick a running minimum of its predictions,
    carrying that option's price."""
    ctx_shape = index.shape if index is not None else np.shape(opts[0].latency_s)
    shape = np.broadcast_shapes(size.shape, ctx_shape)
    size = dedupe.squeeze(size, shape)
    terms = SizeTerms(size)
    memo: dict[int, Any] = {}
    expanded = [o.expand(index, memo, want_names) for o in opts]
    best = np.full(shape, np.inf)
    tuner_best, tuned, untuned, price, tmp, guess, better = _buffers(shape)
    for buf in (tuner_best, tuned, untuned):
        buf.fill(np.inf)
    which = best_which = untuned_which = None
    if want_names:
        best_which = np.zeros(shape, dtype=np.intp)
        which = np.full(shape, -1, dtype=np.intp)
        untuned_which = np.zeros(shape, dtype=np.intp)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for i, o in enumerate(expanded):
            option_price_s(o, terms, price, tmp)
            if best_which is not None:
                np.less(price, best, out=better)
                np.copyto(best_which, i, where=better)
            np.minimum(best, price, out=best)
            if o.tuned:
                # the tuner keeps the first of equal predictions (enqueue.cc's strict <)
                option_tuner_s(o, terms, guess)
                np.less(guess, tuner_best, out=better)
                np.copyto(tuner_best, guess, where=better)
                np.copyto(tuned, price, where=better)
                if which is not None:
                    np.copyto(which, i, where=better)
            else:
                if untuned_which is not None:
                    np.less(price, untuned, out=better)
                    np.copyto(untuned_which, i, where=better)
                np.minimum(untuned, price, out=untuned)
        time = np.minimum(tuned, untuned)
        if overhead_s is not None and bool(np.any(overhead_s)):
            extra = overhead_s if index is None else overhead_s[index]
            time += extra
            best += extra
    if not want_names:
        return Priced(time, best)
    assert which is not None and untuned_which is not None
    from_tuner = (tuned <= untuned) & (which >= 0)  # before the scratch is reused
    which = np.where(from_tuner, which, untuned_which)
    ladder = np.zeros(shape, dtype=bool)
    segmented = np.zeros(shape, dtype=bool)
    for i, o in enumerate(expanded):
        running = which == i
        if o.ladder_bound is not None:
            ladder |= running & o.ladder_bound
        if o.gloo_ring is not None:
            segmented |= running & _round_trips_bind(o, size, shape)
    return Priced(time, best, which, best_which, ladder & from_tuner, segmented & ~from_tuner)


def _round_trips_bind(o: Option, size: FloatArray, shape: tuple[int, ...]) -> BoolArray:
    """Where Gloo's ring is on its round-trip side (its time steps with the segment count)."""
    if o.gloo_ring is None:
        return np.zeros(shape, dtype=bool)
    alpha, _, ranks = o.gloo_ring
    (rt_steps, rt_bytes), (ab_steps, ab_bytes) = gloo_ring_branches(size, ranks)
    inv_B = o.inv_bw / (2 * (ranks - 1) / ranks)
    rt = rt_steps * alpha + rt_bytes * inv_B
    ab = ab_steps * alpha + ab_bytes * inv_B
    return np.broadcast_to(rt > ab, shape)
