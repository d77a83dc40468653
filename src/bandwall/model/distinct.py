"""Distinct rows of a few float columns: a sweep or a layout search repeats few distinct
combinations over hundreds of thousands of elements, so the model prices each once and
expands the result back (collectives/dedupe.py, compute/gemm.py, compute/layer.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

#: Elements sampled to guess the distinct keys.
_SAMPLE = 8192
#: Rows sampled to decline early when too many of them differ.
_CHECK = 1024
_MIX = np.uint64(0x9E3779B97F4A7C15)


def _keys(cols: list[npt.NDArray[np.float64]]) -> npt.NDArray[np.uint64]:
    key = np.zeros(len(cols[0]), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c in cols:
            key = (key ^ np.ascontiguousarray(c, dtype=np.float64).view(np.uint64)) * _MIX
            key ^= key >> np.uint64(29)
    return key


def distinct_rows(
    cols: list[npt.NDArray[np.float64]], share: float = 0.25
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]] | None:
    """(one index of each distinct row, the row number of every element) of equal-length
    1-D float columns, or None when more than `share` of the rows are distinct (pricing
    them all directly is then as cheap). Rows are hashed to one key; a collision would
    merge two rows, so the result is checked against every column and refused if it did."""
    key = _keys(cols)
    codes = _codes(key, share)
    if codes is None:
        return None
    first, inverse = codes
    for c in cols:  # a hash collision would merge two rows: never silently
        # bit for bit, as the keys were made (NaNs alike; faster than equal_nan)
        bits = np.ascontiguousarray(c, dtype=np.float64).view(np.uint64)
        if not np.array_equal(bits[first][inverse], bits):
            return None
    return first, inverse


def _sorted_distinct(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """np.unique of integer keys (the callers' hashed uint64 keys and slot indices) without its
    hash-table path, which imports numpy.ma on first use (7 ms of a `plan` command's start,
    measured 2026-12-07): sort, keep each run's first. Not for floats: NaNs would stay apart."""
    s = np.sort(a)
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def _codes(
    key: npt.NDArray[np.uint64], share: float
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]] | None:
    """(an index of each distinct key, code of every element), or None when more than
    `share` of the keys are distinct (compressing would not pay). Few distinct keys are the
    rule: take them from a sample, give each a slot by the key's top bits (the keys are
    already mixed) and look every element up in that table, checking it; else sort.
    A sample with more distinct keys than `share` of all settles it without the sort."""
    step = max(len(key) // _SAMPLE, 1)
    cand = _sorted_distinct(key[::step])
    k = len(cand)
    if k > share * len(key):
        return None
    for bits in range(max(int(k - 1).bit_length() + 2, 1), 21):
        slots = (cand >> np.uint64(64 - bits)).astype(np.intp)
        if len(_sorted_distinct(slots)) == k:
            table = np.zeros(1 << bits, dtype=np.intp)
            table[slots] = np.arange(k, dtype=np.intp)
            pos = table[(key >> np.uint64(64 - bits)).astype(np.intp)]
            if np.array_equal(cand[pos], key):
                first = np.zeros(k, dtype=np.intp)
                first[pos] = np.arange(len(key), dtype=np.intp)  # any member represents it
                return first, pos
            break
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if len(first) > share * len(key):
        return None
    return first, inverse.astype(np.intp)


def distinct_broadcast(
    cols: list[npt.NDArray[np.float64]],
    shape: tuple[int, ...],
    share: float = 0.5,
    decline: float = 0.25,
    sample: int = _CHECK,
) -> tuple[list[npt.NDArray[np.float64]], npt.NDArray[np.intp]] | None:
    """Distinct rows of columns that broadcast to `shape`: (each column at one element of
    each distinct row, the row number of every element, flat), or None when more than
    `share` of the rows are distinct, or when more than `decline` of a strided sample of
    about `sample` rows is already distinct (checked before any column is expanded to the
    full shape).

    `decline` is what hashing every row is worth to the caller: a collective prices a row
    in well under a microsecond, so a sample a quarter distinct already says pricing directly
    is cheaper; a transformer layer's ~20 GEMMs cost ~100x more per row, and a layout search
    of ~400k layouts holding ~1,300 distinct per-GPU shapes (Mixtral on 1,024 GPUs: a third of
    a 4,096-row sample distinct, most of a 1,024-row one) is worth compressing ~300x (16 s ->
    1.5 s per plan)."""
    total = int(np.prod(shape))
    if total > 2 * sample:
        at = np.unravel_index(np.arange(0, total, total // sample), shape)
        keys = _keys([np.broadcast_to(c, shape)[at] for c in cols])
        if len(_sorted_distinct(keys)) > decline * len(keys):
            return None
    flat = [np.broadcast_to(c, shape).ravel() for c in cols]
    found = distinct_rows(flat, share)
    if found is None:
        return None
    first, inverse = found
    return [c[first] for c in flat], inverse
