"""Faults at scale: job MTBF, checkpoint interval (Young/Daly), goodput, degraded fabrics.

Pure functions; each cites its closed form. Vectorised where a sweep needs it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bandwall.catalog import FailureSpec
from bandwall.errors import ConfigError
from bandwall.model.topology import Routing, parse_routing

__all__ = ["Routing", "parse_routing"]


def job_mtbf_s(f: FailureSpec, gpus: Any, nodes: Any, nics: Any, links: Any) -> Any:
    """Mean time between job interruptions: component failures add as Poisson rates, so a
    synchronous job of n GPUs fails n times as often as one GPU."""
    rate_per_hour = np.asarray(
        gpus * f.gpu_per_hour
        + nodes * f.node_per_hour
        + nics * f.nic_per_hour
        + links * f.link_per_hour,
        dtype=np.float64,
    )
    with np.errstate(divide="ignore"):
        return np.where(rate_per_hour > 0, 3600.0 / rate_per_hour, np.inf)


def young_interval_s(checkpoint_s: Any, mtbf_s: Any) -> Any:
    """Young (1974): τ = sqrt(2·δ·M)."""
    return np.sqrt(2 * np.asarray(checkpoint_s) * mtbf_s)


def daly_interval_s(checkpoint_s: Any, mtbf_s: Any) -> Any:
    """Daly (2006), eq. 37: τ = sqrt(2δM)·[1 + ⅓·sqrt(δ/2M) + δ/(18M)] − δ for δ < 2M,
    else τ = M."""
    d, m = np.asarray(checkpoint_s, dtype=np.float64), np.asarray(mtbf_s, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r = d / (2 * m)
        tau = np.sqrt(2 * d * m) * (1 + np.sqrt(r) / 3 + r / 9) - d
    return np.where(d < 2 * m, tau, m)


def goodput(interval_s: Any, checkpoint_s: Any, restart_s: Any, mtbf_s: Any) -> Any:
    """Useful fraction of wall time with checkpoints every τ, write time δ, restart R and
    exponentially distributed failures of mean M (Daly 2006, eq. 13):

        T_wall / T_solve = M·e^(R/M)·(e^((τ+δ)/M) − 1) / τ
    """
    tau, d, r, m = (
        np.asarray(x, dtype=np.float64) for x in (interval_s, checkpoint_s, restart_s, mtbf_s)
    )
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        ratio = m * np.exp(r / m) * np.expm1((tau + d) / m) / tau
    return np.where(np.isfinite(m), 1.0 / ratio, tau / (tau + d))


def checkpoint_bytes(params: float) -> float:
    """A full training checkpoint: bf16 weights + fp32 master, Adam m and v = 14 B/param."""
    return 14.0 * params


def max_bin_load(balls: int, bins: int) -> int:
    """Median load of the fullest bin when `balls` land uniformly at random in `bins`.

    P(max ≥ k) ≈ min(1, bins·P(X ≥ k)) with X ~ Poisson(balls/bins); the median is the largest
    k where that is still ≥ ½ (at least 1 when there is a ball).
    """
    if balls <= 0 or bins <= 0:
        return 0
    lam = balls / bins
    k = 1
    log_lam = math.log(lam)
    cdf = math.exp(-lam)  # P(X <= 0); each term in log space, so λ > 745 does not underflow
    while k < balls:
        cdf += math.exp(k * log_lam - lam - math.lgamma(k + 1))  # P(X <= k)
        if bins * (1 - cdf) < 0.5:  # P(max >= k + 1) below one half
            break
        k += 1
    return k


def degraded_bandwidth_factor(
    links: int, failed: int, routing: Routing, flows_per_link: int = 1
) -> float:
    """Share of healthy scale-out bandwidth left after `failed` of `links` fail.

    Adaptive routing spreads packets over the survivors: (L − K)/L. Static ECMP hashing moves
    each failed link's flows to survivors at random; a synchronous collective runs at the pace
    of the most loaded link, which carries q + (its share of rehashed flows): q/(q + m), m the
    fullest-bin count of K·q flows over L − K links (Balls into bins). On a fabric whose
    collisions are modelled (congestion.applies) hashed failures are priced there instead,
    as spine paths lost, not as this factor on top of the collisions.
    """
    if not 0 <= failed < links:
        raise ConfigError(
            f"{failed} must be in [0, {links}) for {links} scale-out links", field="failed_links"
        )
    if failed == 0:
        return 1.0
    if routing is Routing.ADAPTIVE:
        return (links - failed) / links
    q = flows_per_link
    extra = max_bin_load(failed * q, links - failed)
    return q / (q + extra)


def slow_link_factor(links: Any, fraction: float, speed: float) -> Any:
    """Expected bandwidth share when a fraction of links run at `speed` of their rate: a ring
    or tree over `links` links runs at the slowest one, so with probability 1 − (1 − f)^links
    the collective goes at `speed`. Returns 1 / E[time factor]."""
    if not 0 <= fraction < 1:
        raise ConfigError(f"must be in [0, 1), got {fraction}", field="slow_link_fraction")
    if not 0 < speed <= 1:
        raise ConfigError(f"must be in (0, 1], got {speed}", field="slow_link_speed")
    p_any = 1 - (1 - fraction) ** np.asarray(links, dtype=np.float64)
    return 1.0 / (p_any / speed + (1 - p_any))


def straggler_s(
    compute_s: Any, fraction: float, slowdown: float, gpus: Any, mitigation: str
) -> Any:
    """Seconds per step lost to stragglers: a fraction f of GPUs running x slower.

    Synchronous: the slowest of n sets the pace whenever one is in the job, probability
    1-(1-f)^n. "backup": spare workers whose work is discarded cost f/(1-f) extra compute
    (Chen et al. 2016). "async": asynchronous outer steps under local SGD, each worker waits
    only for itself, so the mean f·x.
    """
    if mitigation == "backup":
        return compute_s * fraction / (1 - fraction)
    if mitigation == "async":
        return compute_s * slowdown * fraction
    return compute_s * slowdown * (1 - (1 - fraction) ** np.asarray(gpus, dtype=np.float64))


#: Fixed cost of one checkpoint whatever its size: planning, metadata and the device-to-host
#: staging a framework pauses for. PyTorch DCP measured a 6.3 s stall for a 7B model with
#: asynchronous save, against 148.8 s synchronous (PyTorch blog, "Reducing Model Checkpointing
#: Times by Over 10x with PyTorch Distributed Asynchronous Checkpointing", 2024).
CHECKPOINT_FIXED_S = 6.3


def checkpoint_write_s(params: float, write_GBps: Any) -> Any:
    """Seconds to write (or read back) a full checkpoint: a fixed cost plus its bytes at the
    aggregate storage rate."""
    size = checkpoint_bytes(params) / (np.asarray(write_GBps, dtype=np.float64) * 1e9)
    return CHECKPOINT_FIXED_S + size
