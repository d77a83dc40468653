"""Internet paths as measured: the effective WAN tiers against the published all-reduces that
set them (PCCL) and the multi-continent DiLoCo runs that did not (INTELLECT-1).

Sources. PCCL technical report (Keiblinger et al., arXiv 2505.14065, May 2025, §6; its tables
reproduced at 13shivam.github.io/distributed-ml-demystified/chapter8-benchmarks.html): ring
all-reduce of a 1.073 GB contribution per peer, one connection per peer, over the public
internet between GPU providers. INTELLECT-1 technical report (Jaghouar et al., arXiv
2412.01152, Dec 2024, the compute-utilisation table): 10B-parameter model (Llama-3 shape:
42 layers, hidden 4,096, 32 heads, 8 KV heads, FFN 14,336, vocabulary 128,256), up to 14
nodes of 8 H100, 100 inner steps of ~38 minutes, int8 pseudo-gradients all-reduced in a ring
over one Gloo process group per GPU (8 concurrent all-reduces per node); median outer
all-reduce 103 s (USA only), 382 s (USA + Europe), 469 s (USA, Europe and Asia). The times
agree with the utilisations the report gives (2,280 / (2,280 + t) = 95.7%, 85.7%, 82.9%
against 96%, 85.6%, 83%) and with the MFUs it lists (41.4%, 37.1%, 36.2% of 43.3%; quoted
in robirahman/miri-decentralized-training-report, Simulator_Documentation.md).

Pricing: `collective_time_s` with the ring INTELLECT-1 ran (Algo.RING; NCCL's tuner would
pick a tree, which moves half the bytes per node), one node per site, the site's uplink
divided among the node's 8 concurrent all-reduces as `Cluster.group_topology` divides it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from bandwall.catalog import load_catalog
from bandwall.model.collectives import Algo, Op, collective_time_s
from bandwall.model.topology import Link, Topology, build_topology

PCCL_CONTRIBUTION_BYTES = 1.073e9
#: INTELLECT-1's pseudo-gradients in int8: 10.2B parameters (the Llama-3 shape above:
#: 2 × 128,256 × 4,096 embeddings + 42 × (2 × 4,096² + 2 × 4,096 × 1,024 + 3 × 4,096 × 14,336)).
INTELLECT1_PARAMS = 2 * 128_256 * 4096 + 42 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
INTELLECT1_NODES = 14
GPUS_PER_NODE = 8


def sites_topology(wan: str, *, groups: int, streams: int | None = None) -> Topology:
    """One node per site; `groups` concurrent collectives share the site's uplink."""
    link = Link.from_fabric(load_catalog().fabric(wan))
    shared = link.with_overrides(bandwidth_Bps=np.asarray(link.bandwidth_Bps) / groups)
    topo = build_topology(
        gpus_per_node=1, scale_out="eth-25g-tcp", wan=wan, nodes_per_site=1, tcp_streams=streams
    )
    return replace(topo, wan=shared)


def intellect1_outer_s(wan: str) -> float:
    """Seconds of INTELLECT-1's outer all-reduce: each GPU's 1/8 of the int8 pseudo-gradients
    in a 14-node ring, 8 such rings per node at once."""
    shard = INTELLECT1_PARAMS / GPUS_PER_NODE  # int8: one byte per parameter
    topo = sites_topology(wan, groups=GPUS_PER_NODE)
    t = collective_time_s(Op.ALL_REDUCE, Algo.RING, shard, INTELLECT1_NODES, topo)
    return float(t)


def test_intellect1_parameter_count() -> None:
    """10.2 billion, the report's "10B"."""
    assert pytest.approx(10.2e9, rel=0.005) == INTELLECT1_PARAMS


@pytest.mark.parametrize(
    ("wan", "peers", "seconds"),
    [("internet-eu", 6, 8.3), ("internet-na", 12, 35.2), ("internet-transatlantic", 18, 90.5)],
)
def test_effective_tiers_reproduce_the_pccl_rings_that_set_them(
    wan: str, peers: int, seconds: float
) -> None:
    """Set, not tested: each tier's per-connection rate is PCCL's single-connection ring.
    One stream over the tier (what the model gives a connection: window, CUBIC, per-flow
    cap) moves a peer's 2(n − 1)/n of the contribution in the measured time, within 1%."""
    link = Link.from_fabric(load_catalog().fabric(wan))
    topo = sites_topology(wan, groups=1)
    rate_Bps = float(topo.link_Bps(link, 1.0))
    t = 2 * (peers - 1) / peers * PCCL_CONTRIBUTION_BYTES / rate_Bps
    assert t == pytest.approx(seconds, rel=0.01)


def test_eight_connections_carry_pccl_measured_gain() -> None:
    """Set: 8 concurrent connections carry 3.125 × one (PCCL, Europe West: 11.25 vs 3.6
    Gbit/s); the tiers encode it as the path rate 8 connections see."""
    cat = load_catalog()
    for key in ("internet-na", "internet-eu", "internet-transatlantic"):
        spec = cat.fabric(key)
        assert spec.per_flow_limit_Gbps is not None
        assert spec.bandwidth_Gbps == pytest.approx(
            11.25 / 3.6 * spec.per_flow_limit_Gbps, rel=2e-3
        )


def test_intellect1_usa_outer_all_reduce_within_25_percent() -> None:
    """Held out: 14 nodes across the USA on internet-na: 111 s against the median 103 s."""
    assert intellect1_outer_s("internet-na") == pytest.approx(103.0, rel=0.25)


@pytest.mark.xfail(
    strict=True,
    reason="not reproduced: PCCL's transatlantic connection (0.179 Gb/s) with its 8-connection "
    "gain prices the ring 28% (USA + Europe) and 42% (with Asia, no published Asian path) "
    "faster than INTELLECT-1 measured; docs/validation.md",
)
@pytest.mark.parametrize(("published_s"), [382.0, 469.0], ids=["usa-europe", "three-continents"])
def test_intellect1_intercontinental_outer_all_reduce_within_25_percent(
    published_s: float,
) -> None:
    assert intellect1_outer_s("internet-transatlantic") == pytest.approx(published_s, rel=0.25)


def test_nominal_tier_was_four_to_six_times_too_fast() -> None:
    """The issue's finding, kept as a regression marker: the nominal 10 Gb/s internet tier
    prices the USA outer all-reduce several times faster than measured; the effective tier
    does not."""
    assert intellect1_outer_s("internet-10g") < 103.0 / 3
    assert intellect1_outer_s("internet-na") > 103.0 / 1.25
