"""The hierarchy as the α-β schedules see it: per level (GPUs of a node, nodes of a site,
sites) its member count, one-way latency, jitter and bandwidth.

Inactive levels (a single GPU, node or site) have size 1, zero latency and infinite
bandwidth, so every schedule can sum and min over all three levels without branching.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from bandwall.errors import ConfigError
from bandwall.model import congestion
from bandwall.model.collectives.vocab import Op
from bandwall.model.jitter import straggler_spread_s
from bandwall.model.topology import Link, Topology, group_shape

FloatArray = npt.NDArray[np.float64]
Three = tuple[FloatArray, FloatArray, FloatArray]


@dataclass(frozen=True)
class Levels:
    """Per-rank-count view of the hierarchy: sizes, latencies and bandwidths of each level."""

    n: FloatArray
    g: FloatArray
    """Ranks per node."""
    N: FloatArray
    """Nodes per site (of this group)."""
    M: FloatArray
    """Sites."""
    alpha: Three
    mu: Three
    """Mean jitter per step on each level (0 where inactive)."""
    spread: Three
    """σ·(H_k − 1) on each level, k its member count: the straggler term per √step."""
    bw_level: Three
    """Aggregate bandwidth of one instance of each level: per GPU, per node, per site (the
    site uplink as one ring's connections use it)."""
    bw_wan_all: FloatArray
    """The site uplink when every rank of the site crosses it at once (its own streams)."""
    bw_pair: FloatArray
    """What one rank gets when it alone crosses the slowest level (send/recv)."""
    alpha_flat: FloatArray
    mu_flat: FloatArray
    spread_flat: FloatArray
    bw_flat: FloatArray


def check_links(n: FloatArray, topo: Topology) -> None:
    """Refuse rank counts that need a level the topology has no fabric for."""
    shape = group_shape(n, topo)
    active = (shape.ranks_per_node > 1, shape.num_nodes > 1, shape.num_sites > 1)
    links = (topo.scale_up, topo.scale_out, topo.wan)
    names = ("scale_up", "scale_out", "wan")
    for level, (is_active, link) in enumerate(zip(active, links, strict=True)):
        if link is None and bool(np.any(is_active)):
            raise ConfigError(
                f"{names[level]}: these rank counts span more than one "
                f"{('GPU', 'node', 'site')[level]} but the topology has no {names[level]} fabric"
            )


def _balance(op: Op, N: FloatArray, topo: Topology) -> tuple[FloatArray, FloatArray]:
    """Scale-out load balance of `op`'s traffic across N nodes (collisions under static
    ECMP, or the adaptive-routing balance; model/congestion.py) and of one send/recv pair."""
    if op is Op.SEND_RECV:
        pair = congestion.p2p_balance(topo, N, 1.0)
        return pair, pair
    one = np.ones_like(N)  # the send/recv bandwidth is only read by SEND_RECV
    if op is Op.ALL_TO_ALL:
        # every node sends to every other at once: ECMP spreads many flows, PFC-only fabrics
        # block heads of line with N senders contending
        return congestion.p2p_balance(topo, N, N - 1) * congestion.incast_factor(topo, N), one
    channels = congestion.NCCL_COLL_CHANNEL_FACTOR * one
    return congestion.ring_balance(topo, N, channels), one


def _per_level(
    active: tuple[npt.NDArray[np.bool_], ...],
    links: tuple[Link | None, Link | None, Link | None],
    value: str,
    zero: FloatArray,
) -> Three:
    a, b, c = (
        np.where(on, getattr(link, value), 0.0) + zero if link else zero
        for on, link in zip(active, links, strict=True)
    )
    return a, b, c


def levels(ranks: FloatArray, topo: Topology, op: Op = Op.ALL_REDUCE) -> Levels:
    shape = group_shape(ranks, topo)
    n, g, N, M = (
        shape.num_ranks,
        shape.ranks_per_node,
        shape.nodes_per_site,
        shape.num_sites,
    )
    active = (g > 1, N > 1, M > 1)
    links = (topo.scale_up, topo.scale_out, topo.wan)
    inf = np.inf
    up, out, wan = links
    nics = np.minimum(np.asarray(topo.nics_per_node, dtype=np.float64), g)
    pair_nics = np.minimum(np.asarray(topo.nics_per_node, dtype=np.float64), 1.0)
    oversub = np.asarray(topo.oversubscription, dtype=np.float64)
    bw_up = topo.link_Bps(up) if up else inf
    if out is not None:
        # each NIC is capped by its PCIe host path as well as its wire
        host = np.asarray(out.host_Bps, dtype=np.float64)
        flows = topo.streams_per_peer(out) * np.maximum(g / nics, 1.0)
        bw_nic = np.minimum(topo.link_Bps(out, flows), host) / oversub
        bw_nic_one = np.minimum(topo.link_Bps(out, topo.streams_per_peer(out)), host) / oversub
        balance, pair_balance = _balance(op, N, topo)
        bw_nic = bw_nic * balance
        bw_nic_one = bw_nic_one * pair_balance
    else:
        bw_nic = bw_nic_one = np.full_like(n, inf)
    bw_wan = topo.link_Bps(wan, topo.streams_per_peer(wan)) if wan else inf
    bw_wan_all = topo.link_Bps(wan, topo.streams_per_peer(wan) * g * N) if wan else inf
    bw_level = (
        np.where(active[0], bw_up, inf),
        np.where(active[1], nics * bw_nic, inf),
        np.where(active[2], bw_wan, inf),
    )
    zero = np.zeros_like(n)
    alpha = _per_level(active, links, "latency_s", zero)
    mu = _per_level(active, links, "jitter_mean_s", zero)
    spread = tuple(
        np.where(a, straggler_spread_s(link.jitter_std_s, k), 0.0) + zero if link else zero
        for a, link, k in zip(active, links, (g, N, M), strict=True)
    )
    flat_spread = [
        np.where(a, straggler_spread_s(link.jitter_std_s, n), 0.0) + zero if link else zero
        for a, link in zip(active, links, strict=True)
    ]
    return Levels(
        n=n,
        g=g,
        N=N,
        M=M,
        alpha=alpha,
        mu=mu,
        spread=(spread[0], spread[1], spread[2]),
        bw_level=bw_level,
        bw_wan_all=np.where(active[2], bw_wan_all, inf),
        bw_pair=np.minimum(
            np.minimum(bw_level[0], np.where(active[1], pair_nics * bw_nic_one, inf)),
            bw_level[2],
        ),
        alpha_flat=np.maximum(np.maximum(alpha[0], alpha[1]), alpha[2]),
        mu_flat=np.maximum(np.maximum(mu[0], mu[1]), mu[2]),
        spread_flat=np.maximum(np.maximum(flat_spread[0], flat_spread[1]), flat_spread[2]),
        bw_flat=np.minimum(np.minimum(bw_level[0], bw_level[1]), bw_level[2]),
    )
