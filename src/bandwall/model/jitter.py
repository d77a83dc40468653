"""Straggler statistics shared by the collective models: harmonic numbers and the expected
slowest of k jittery ranks.

A message's extra delay is modelled as a shifted exponential (mean μ, std σ). A step that k
ranks synchronise on waits for the slowest of them: for an exponential the expected maximum
of k draws is σ·H_k, so the wait beyond the mean is σ·(H_k − 1); over s independent steps the
spread grows like √s (sum of s draws). H_k grows like ln k + γ.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from bandwall.model.topology import Link

FloatArray = npt.NDArray[np.float64]

#: Euler–Mascheroni constant γ (H_k − ln k → γ; the mean of the standard Gumbel law).
EULER_GAMMA = 0.5772156649015329


def harmonic(k: npt.ArrayLike) -> FloatArray:
    """H_k by its asymptotic expansion ln k + γ + 1/(2k) − 1/(12k²) (error < 1e-3 at k = 2,
    exactly 1 at k ≤ 1).

    >>> round(float(harmonic(4)), 4)  # 25/12
    2.0833
    """
    k = np.maximum(np.asarray(k, dtype=np.float64), 1.0)
    approx = np.log(k) + EULER_GAMMA + 1 / (2 * k) - 1 / (12 * k * k)
    return np.where(k <= 1, 1.0, approx)


def straggler_spread_s(std_s: npt.ArrayLike, ranks: npt.ArrayLike) -> FloatArray:
    """σ·(H_k − 1): what one step waits beyond the mean jitter for the slowest of k ranks."""
    return np.asarray(std_s, dtype=np.float64) * (harmonic(ranks) - 1)


def expected_max_jitter_s(
    link: Link | None, ranks: npt.ArrayLike, steps: npt.ArrayLike = 1
) -> FloatArray:
    """Expected jitter a schedule of `steps` steps pays on `link` when `ranks` ranks wait on
    the slowest: steps·μ + σ·√steps·(H_ranks − 1)."""
    k = np.asarray(ranks, dtype=np.float64)
    s = np.asarray(steps, dtype=np.float64)
    if link is None:
        return np.zeros(np.broadcast(k, s).shape)
    return s * link.jitter_mean_s + np.sqrt(s) * straggler_spread_s(link.jitter_std_s, k)
