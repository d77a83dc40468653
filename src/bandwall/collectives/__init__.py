"""Analytical, vectorised cost model of collectives (ring, tree, halving-doubling,
hierarchical, in-network) over a scale-up / scale-out / WAN hierarchy."""

from bandwall.collectives.model import (
    ALGORITHMS,
    Algo,
    CollectiveResult,
    Op,
    auto_select,
    busbw_factor,
    collective_time_s,
    evaluate,
    expected_max_jitter_s,
    parse_algo,
    parse_op,
)
from bandwall.collectives.topology import Link, Topology, build_topology

__all__ = [
    "ALGORITHMS",
    "Algo",
    "CollectiveResult",
    "Link",
    "Op",
    "Topology",
    "auto_select",
    "build_topology",
    "busbw_factor",
    "collective_time_s",
    "evaluate",
    "expected_max_jitter_s",
    "parse_algo",
    "parse_op",
]
