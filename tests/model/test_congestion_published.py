"""Static ECMP against independent published measurements: which figures set the switch
hash dispersion (congestion.SWITCH_HASH_DISPERSION) and which test it (docs/congestion.md,
"Which figures set what").

The rows, their ids and their configurations were fixed before any error was looked at;
the split too: rows sorted by sha256(id), the first two (40%) fit the one constant, the
other three are held out. Uniform random hashing (dispersion 1), which the lab and the
flow-level oracle confirm for random hashes, overstates every measured loss 2-3×.

Rows (id: published figure; source):

- tolly-h3c-64gpu-ecmp: ECMP at 1/1.228 of path-planned busbw; Tolly report 225112 for New
  H3C (2025): 8 × 8 H20, NCCL 2.22.3, 4 leaves, 2 spines, all_reduce 16 GB, planned +22.8%.
- meta-eecmp-qp-vs-te: E-ECMP + QP scaling at 0.91-0.95 of traffic engineering; Gangidi et
  al., SIGCOMM 2024 (Meta): TE beats E-ECMP + QP scaling by 5-10%.
- nvidia-spectrumx-1.6x-allreduce: Spectrum-X 1.6× standard Ethernet; NVIDIA/xAI Colossus
  release, 2024-10-28 (95% vs 60%).
- meta-ecmp-baseline-up-to-40: E-ECMP + QP scaling "up to 40%" faster AllReduce than
  ECMP; Gangidi et al., SIGCOMM 2024.
- asterfusion-16gpu-ecmp: ECMP 84.5% vs flowlet adaptive routing 97% of line; Asterfusion,
  2025-09-25, 2 × 8 GPUs.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from bandwall.model import congestion
from bandwall.model.collectives import Algo, Op, collective_time_s
from bandwall.model.topology import Topology, build_topology, collective_topology

GiB = 2**30


def _collective_topo(
    ranks: int, routing: str, dispersion: float, leaf_ports: int, paths: int
) -> Topology:
    """roce-400 top-of-rack leaves of `leaf_ports` NIC ports and `paths` uplinks (1:1),
    packed rank order, two tiers; adaptive routing at efficiency 1 (planned or sprayed)."""
    t = collective_topology(
        max_ranks=ranks,
        gpus_per_node=8,
        fabric="roce-400",
        load_balancing=routing,
        rail_optimized=False,
        placement="packed",
    )
    assert t.scale_out is not None
    return replace(
        t,
        scale_out=replace(t.scale_out, adaptive_efficiency=1.0),
        leaf_ports=float(leaf_ports),
        ecmp_paths=float(paths),
        fabric_tiers=2,
        hash_dispersion=dispersion,
    )


def _busbw_ratio(ranks: int, dispersion: float, leaf_ports: int, paths: int) -> float:
    """ECMP's busbw over the balanced one, a 16 GiB all_reduce."""
    times = [
        float(
            collective_time_s(
                Op.ALL_REDUCE,
                Algo.AUTO,
                16 * GiB,
                ranks,
                _collective_topo(ranks, routing, dispersion, leaf_ports, paths),
            )
        )
        for routing in ("adaptive", "ecmp")
    ]
    return times[0] / times[1]


def tolly(d: float) -> float:
    """8 nodes, the cabling not published: rail leaves would keep every ring under its leaf
    (no loss), so top-of-rack leaves of 2 nodes (16 ports), 8 uplinks to each of 2 spines."""
    return _busbw_ratio(64, d, leaf_ports=16, paths=16)


def _meta(d: float, qps: int) -> Topology:
    """Meta's AI zone: 3,072 GPUs, top-of-rack switches of 2 × 8 NICs with 1:1 uplinks,
    topology-aware (packed) placement, two tiers."""
    t = build_topology(
        gpus_per_node=8,
        scale_out="roce-400",
        qps_per_connection=qps,
        load_balancing="ecmp",
        placement="packed",
        rail_optimized=False,
    )
    return replace(
        t,
        fabric_nics=3072.0,
        node_nics=8.0,
        fabric_tiers=2,
        leaf_ports=16.0,
        ecmp_paths=16.0,
        hash_dispersion=d,
    )


def meta_eecmp(d: float) -> float:
    """E-ECMP + QP scaling: 16 flows per GPU pair (8 QPs × NCCL's 2 channels), the share
    of balanced bandwidth (TE)."""
    return float(congestion.ring_collisions(_meta(d, 8), 384.0, 2.0).factor)


def meta_baseline(d: float) -> float:
    """Largest gain of 16 flows over NCCL's default 2 on a 3,072-rank all_reduce, 1 MiB
    to 16 GiB ('up to')."""
    sizes = np.array([2.0**k for k in range(20, 35)])
    base = collective_time_s(Op.ALL_REDUCE, Algo.AUTO, sizes, 3072, _meta(d, 1))
    more = collective_time_s(Op.ALL_REDUCE, Algo.AUTO, sizes, 3072, _meta(d, 8))
    return float(np.max(base / more) - 1.0)


def nvidia(d: float) -> float:
    """100,000 GPUs, rail-optimised roce-400 (64-port leaves), NCCL defaults, scattered:
    Spectrum-X's 0.95 over the hashed ring's share of roce-400's 0.93."""
    t = build_topology(gpus_per_node=8, scale_out="roce-400", load_balancing="ecmp")
    t = replace(t, fabric_nics=100_000.0, node_nics=8.0, hash_dispersion=d)
    return 0.95 / (0.93 * float(congestion.ring_collisions(t, 12_500.0, 2.0).factor))


def aster(d: float) -> float:
    """2 nodes of 8 GPUs, one per leaf (what a spine test needs), 8 uplinks each."""
    return _busbw_ratio(16, d, leaf_ports=8, paths=8)


ROWS: dict[str, tuple[Callable[[float], float], float]] = {
    "tolly-h3c-64gpu-ecmp": (tolly, 1 / 1.228),
    "meta-eecmp-qp-vs-te": (meta_eecmp, 0.93),
    "nvidia-spectrumx-1.6x-allreduce": (nvidia, 1.6),
    "meta-ecmp-baseline-up-to-40": (meta_baseline, 0.40),
    "asterfusion-16gpu-ecmp": (aster, 84.5 / 97),
}


def split() -> tuple[list[str], list[str]]:
    """Sorted by sha256 of the id: the first 2 of 5 fit, the rest are held out."""
    order = sorted(ROWS, key=lambda r: hashlib.sha256(r.encode()).hexdigest())
    return order[:2], order[2:]


def fit_error(d: float) -> float:
    fit, _ = split()
    return sum(math.log(ROWS[r][0](d) / ROWS[r][1]) ** 2 for r in fit)


def test_split_is_the_stated_rule() -> None:
    fit, held = split()
    assert fit == ["tolly-h3c-64gpu-ecmp", "meta-eecmp-qp-vs-te"]
    assert len(held) == 3


def test_dispersion_is_the_least_squares_fit_of_the_fit_rows() -> None:
    """SWITCH_HASH_DISPERSION minimises the squared log errors of the two fit rows on a
    0.01 grid (its neighbours do worse); both fit rows within 3%."""
    d = congestion.SWITCH_HASH_DISPERSION
    assert fit_error(d) <= fit_error(d - 0.01)
    assert fit_error(d) <= fit_error(d + 0.01)
    for rid in split()[0]:
        model, published = ROWS[rid][0](d), ROWS[rid][1]
        assert model == pytest.approx(published, rel=0.03), rid


def test_uniform_hashing_overstates_the_measured_loss() -> None:
    """With independent uniform hashes (dispersion 1) the fit rows lose 2-3× what was
    measured: 1 − ratio against 1 − published."""
    for rid in split()[0]:
        model = ROWS[rid][0](1.0)
        published = ROWS[rid][1]
        assert 1.5 < (1 - model) / (1 - published) < 4.0, rid


@pytest.mark.parametrize("rid", ["meta-ecmp-baseline-up-to-40", "asterfusion-16gpu-ecmp"])
def test_held_out_rows_within_15_percent(rid: str) -> None:
    model, published = ROWS[rid][0](congestion.SWITCH_HASH_DISPERSION), ROWS[rid][1]
    assert model == pytest.approx(published, rel=0.15)


@pytest.mark.xfail(
    strict=True,
    reason="not reproduced: at 100,000 GPUs the hashed ring still gets only 0.45 of the "
    "balanced bandwidth, so Spectrum-X prices 2.3x faster than standard Ethernet, not 1.6x "
    "(NVIDIA's figures are aggregate shares: 60% is the uniform carried share x 0.93)",
)
def test_held_out_nvidia_ratio_within_15_percent() -> None:
    rid = "nvidia-spectrumx-1.6x-allreduce"
    model, published = ROWS[rid][0](congestion.SWITCH_HASH_DISPERSION), ROWS[rid][1]
    assert model == pytest.approx(published, rel=0.15)
