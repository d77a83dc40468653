"""Fabric congestion: the balls-into-bins formulas against a seeded flow-level Monte Carlo of
an explicit leaf-spine fabric, the incast term against a head-of-line simulation, and the
collision model's effect on collectives."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from bandwall.errors import ConfigError
from bandwall.model import congestion
from bandwall.model.collectives import Algo, Op, collective_time_s, fabric_congestion
from bandwall.model.topology import Link, Topology, build_topology
from tests.conftest import plan_of

NIC_Bps = 50e9

# --- the oracle -------------------------------------------------------------------------------


def mc_ring(
    *,
    nodes: int,
    nics: int,
    host_ports: int,
    paths: int,
    speed: float,
    flows: int,
    rail: bool,
    packed: bool,
    trials: int,
    seed: int,
    failed: int = 0,
) -> tuple[float, float]:
    """Flow-level Monte Carlo of a rail-aligned NCCL ring on a two-tier Clos.

    Leaves have `host_ports` host ports and `paths` uplinks of `speed` NIC rates, uplink j
    to spine j, spine j one downlink to every leaf. Rail-optimised: one plane per NIC, a
    node's NIC i on its rail-i leaf (`host_ports` nodes per leaf); else top-of-rack leaves
    of host_ports/nics nodes. Packed: node i in slot i; scattered: a random permutation of
    the slots. Every NIC sends `flows` flows to the same NIC of the next node; a flow that
    leaves its leaf hashes onto a uniformly random spine. Under max-min fair sharing the
    slowest flow gets the first water level, min over links of capacity / flows on it,
    and a NIC's own `flows` flows share its port: time ∝ max(flows, busiest load / speed).

    `failed` leaf-spine links (of planes × leaves × paths) are down in each trial, drawn at
    random; routing withdraws a spine a flow cannot use both ways, and the flow hashes onto
    one of the rest.

    Returns (E[sprayed time] / E[time], E[time]): sprayed, the same placements with every
    leaf's crossing traffic spread evenly over its paths.
    """
    rng = np.random.default_rng(seed)
    per_leaf = host_ports if rail else host_ports // nics
    leaves = math.ceil(nodes / per_leaf)
    planes = nics if rail else 1
    times = np.empty(trials)
    ideals = np.empty(trials)
    for t in range(trials):
        slots = np.arange(nodes) if packed else rng.permutation(leaves * per_leaf)[:nodes]
        leaf = slots // per_leaf
        src, dst = leaf, np.roll(leaf, -1)
        cross = src != dst
        per_nic = flows * (1 if rail else nics)
        s = np.repeat(src[cross], per_nic)
        d = np.repeat(dst[cross], per_nic)
        sprayed = max(
            np.bincount(s, minlength=leaves).max(initial=0),
            np.bincount(d, minlength=leaves).max(initial=0),
        )
        worst = 0
        alive = np.ones(planes * leaves * paths, dtype=bool)
        alive[rng.choice(alive.size, failed, replace=False)] = False
        alive = alive.reshape(planes, leaves, paths)
        for plane in range(planes):
            if failed:  # a uniformly random spine among those alive at both ends
                usable = alive[plane][s] & alive[plane][d]
                spine = (rng.random(usable.shape) * usable).argmax(axis=1)
            else:
                spine = rng.integers(0, paths, s.size)
            up = np.bincount(s * paths + spine, minlength=leaves * paths)
            down = np.bincount(d * paths + spine, minlength=leaves * paths)
            worst = max(worst, up.max(initial=0), down.max(initial=0))
        times[t] = max(flows, worst / speed)
        ideals[t] = max(flows, sprayed / (paths * speed))
    return float(ideals.mean() / times.mean()), float(times.mean())


def fabric(
    *,
    host_ports: int,
    paths: int,
    speed: float,
    nics: int,
    rail: bool,
    packed: bool,
    qps: int | None = None,
    routing: str | None = None,
) -> Topology:
    """A topology whose leaves have exactly these ports, paths and uplink speed."""
    out = Link(
        "roce-test",
        bandwidth_Bps=NIC_Bps,
        latency_s=4e-6,
        efficiency=0.93,
        transport="roce",
        load_balancing="ecmp",
        adaptive_efficiency=0.98,
        switch_Bps=(host_ports + paths * speed) * NIC_Bps,
        switch_port_Bps=speed * NIC_Bps,
        congestion_control="dcqcn",
    )
    up = Link("up", bandwidth_Bps=450e9, latency_s=1e-6, efficiency=0.824, transport="nvlink")
    return Topology(
        gpus_per_node=nics,
        scale_up=up if nics > 1 else None,
        scale_out=out,
        nics_per_node=nics,
        oversubscription=host_ports / (paths * speed),
        placement="packed" if packed else "scattered",
        rail_optimized=rail,
        qps_per_connection=qps,
        load_balancing=routing,
        fabric_tiers=2,
        hash_dispersion=1.0,  # uniform random hashing: what the oracle draws
    )


# --- balls into bins --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("balls", "bins", "groups"),
    [(2, 2, 1), (8, 2, 1), (4, 4, 1), (16, 8, 4), (64, 32, 64), (300, 16, 20), (5000, 50, 40)],
)
def test_expected_busiest_bin_matches_monte_carlo(balls: int, bins: int, groups: int) -> None:
    """E[max load] over `groups` independent multinomial groups: exact conditioned-Poisson
    CDF (small) or Gumbel limit (above EXACT_MAX_BALLS) within 3% of 4,000 seeded throws."""
    rng = np.random.default_rng(7)
    trials = 4000 if balls * groups < 100_000 else 300
    busiest = np.empty(trials)
    for t in range(trials):
        loads = np.zeros((groups, bins), dtype=np.int64)
        hits = rng.integers(0, bins, (groups, balls))
        for g in range(groups):
            loads[g] = np.bincount(hits[g], minlength=bins)
        busiest[t] = loads.max()
    expected, p99 = congestion.max_load_stats(balls, bins, groups)
    assert float(expected) == pytest.approx(busiest.mean(), rel=0.03)
    assert float(p99) >= np.quantile(busiest, 0.95)


def test_two_flows_on_two_paths_is_exact() -> None:
    """Two flows, two paths: the busiest path holds 1 or 2 with equal odds, so the pair runs
    at 1/1.5 of the balanced rate."""
    k0, cdf = congestion.max_load_cdf(2, 2)
    assert k0 == 1 and cdf.tolist() == pytest.approx([0.5, 1.0])
    expected, _ = congestion.max_load_stats(2, 2, 1)
    assert float(expected) == pytest.approx(1.5)


def test_raab_steger_heavy_load_regime() -> None:
    """m ≫ n log n: the busiest bin holds m/n + sqrt(2 (m/n) ln n)(1 + o(1)) (Raab & Steger
    1998, Theorem 1); the model's Gumbel limit is within 5% of the leading terms."""
    m, n = 200_000, 64
    expected, _ = congestion.max_load_stats(m, n, 1)
    lam = m / n
    assert float(expected) == pytest.approx(lam + math.sqrt(2 * lam * math.log(n)), rel=0.05)


def test_vendor_aggregate_metric_is_one_minus_one_over_e() -> None:
    """One flow per uplink on average, flows independent: hashed links carry 1 − 1/e of the
    offered load (the '60% of standard Ethernet' of NVIDIA's Colossus release, 2024-10-28)."""
    assert float(congestion.carried_share(4096, 4096)) == pytest.approx(1 - 1 / math.e, abs=2e-3)
    rng = np.random.default_rng(3)
    hits = rng.integers(0, 64, (2000, 64)) + 64 * np.arange(2000)[:, None]
    loads = np.bincount(hits.ravel(), minlength=64 * 2000)
    assert float(congestion.carried_share(64, 64)) == pytest.approx(
        np.minimum(loads, 1).sum() / loads.sum(), rel=0.02
    )


# --- the fabric against the flow-level oracle -------------------------------------------------


ORACLE_CASES: list[dict[str, Any]] = [
    # rail-optimised, scattered: many leaves, flows per NIC from NCCL's default up
    dict(nodes=256, nics=2, host_ports=16, paths=16, speed=1.0, flows=1, rail=True, packed=False),
    dict(nodes=256, nics=2, host_ports=16, paths=16, speed=1.0, flows=2, rail=True, packed=False),
    dict(nodes=256, nics=2, host_ports=16, paths=16, speed=1.0, flows=8, rail=True, packed=False),
    dict(nodes=256, nics=2, host_ports=16, paths=16, speed=1.0, flows=32, rail=True, packed=False),
    # few spine paths, 2:1 oversubscribed, and uplinks at twice the NIC rate
    dict(nodes=128, nics=1, host_ports=8, paths=2, speed=1.0, flows=2, rail=True, packed=False),
    dict(nodes=128, nics=1, host_ports=8, paths=4, speed=1.0, flows=1, rail=True, packed=False),
    dict(nodes=128, nics=1, host_ports=16, paths=4, speed=2.0, flows=2, rail=True, packed=False),
    # top-of-rack leaves, packed rank order: the boundary node's NICs cross
    dict(nodes=32, nics=8, host_ports=16, paths=16, speed=1.0, flows=2, rail=False, packed=True),
    dict(nodes=32, nics=8, host_ports=16, paths=16, speed=1.0, flows=16, rail=False, packed=True),
    dict(nodes=64, nics=4, host_ports=16, paths=4, speed=1.0, flows=1, rail=False, packed=True),
]


@pytest.mark.parametrize("case", ORACLE_CASES, ids=lambda c: "-".join(f"{v}" for v in c.values()))
def test_collision_factor_matches_flow_level_monte_carlo(case: dict[str, Any]) -> None:
    """The analytic collision factor within 4% of the seeded flow-level simulation, across
    path counts (2 to 16), flows per NIC (1 to 32), uplink speeds, cabling and placement.
    Both divide the same balanced pace, max(q, λ/s), by the hashed one: the simulation's
    busiest link over real placements and hashes, the model's E[max(q, M/s)] for the
    placement as laid out (`layout_collisions`; `collisions` may price packed as scattered
    where that is better, checked below)."""
    _, mc_time = mc_ring(**case, trials=600, seed=11)
    topo = fabric(
        host_ports=case["host_ports"],
        paths=case["paths"],
        speed=case["speed"],
        nics=case["nics"],
        rail=case["rail"],
        packed=case["packed"],
    )
    model = congestion.layout_collisions(
        topo, nodes=float(case["nodes"]), flows_per_nic=float(case["flows"])
    )
    ideal = max(float(model.flows_per_nic), float(model.mean_load / model.path_speed))
    assert float(model.factor) == pytest.approx(ideal / mc_time, rel=0.04)
    priced = congestion.ring_collisions(topo, float(case["nodes"]), float(case["flows"]))
    assert float(priced.factor) >= float(model.factor)


def test_more_qps_shrink_collisions_as_the_oracle_predicts() -> None:
    """NCCL_IB_QPS_PER_CONNECTION 1 → 16 on a scattered 256-node ring (2 channels per NIC):
    the model's factor rises with the simulated one at every step, within 4%."""
    last = 0.0
    for qps in (1, 2, 4, 8, 16):
        topo = fabric(host_ports=16, paths=16, speed=1.0, nics=2, rail=True, packed=False, qps=qps)
        collided = congestion.ring_collisions(topo, 256.0, 2.0)
        model = float(collided.factor)
        _, mc_time = mc_ring(
            nodes=256,
            nics=2,
            host_ports=16,
            paths=16,
            speed=1.0,
            flows=2 * qps,
            rail=True,
            packed=False,
            trials=300,
            seed=qps,
        )
        ideal = max(float(collided.flows_per_nic), float(collided.mean_load))
        assert model == pytest.approx(ideal / mc_time, rel=0.04)
        assert model > last
        last = model


def test_packed_rail_optimised_rings_never_collide() -> None:
    """Rank order along rail leaves: only one NIC per leaf sends up, so its flows share
    paths with nobody but themselves."""
    topo = fabric(host_ports=32, paths=32, speed=1.0, nics=8, rail=True, packed=True)
    assert float(congestion.ring_collisions(topo, 1024.0, 2.0).factor) == 1.0
    mc, _ = mc_ring(
        nodes=128,
        nics=2,
        host_ports=32,
        paths=32,
        speed=1.0,
        flows=2,
        rail=True,
        packed=True,
        trials=50,
        seed=1,
    )
    assert mc == 1.0


# --- in the collective model ------------------------------------------------------------------


def hashed_share_128_nodes() -> float:
    """By hand, the NIC share of NCCL's 2 flows per NIC for 128 nodes (1,024 GPUs) on
    roce-400, rail-optimised, scattered: Tomahawk 4 leaves of 32 hosts and 32 paths, 4
    leaves per rail plane, 8 planes, up and down stages (64 groups); a neighbour crosses
    with probability 1 − 31/127, so rint(32 · 2 · 0.756) = 48 flows per leaf. The busiest
    link under uniform hashing, E[max(2, M)] (max_load_stats, checked against the Monte
    Carlo above), is brought towards the even spread max(2, 48/32) = 2 by the switch
    dispersion 0.27 (fitted, docs/congestion.md)."""
    uniform, _ = congestion.max_load_stats(48, 32, 64, 2.0)
    even = 2.0
    return 2.0 / (even + congestion.SWITCH_HASH_DISPERSION * (float(uniform) - even))


def test_adaptive_routing_fabrics_are_unaffected_and_roce_pays_for_hashing() -> None:
    """ib-ndr and Spectrum-X balance per packet (catalog adaptive_routing); plain RoCE hashes.
    At 1,024 GPUs a bandwidth-bound all-reduce on roce-400 runs at the hashed share of IB's
    (efficiencies 0.93 vs 0.94), and switching RoCE to adaptive routing costs only the
    stated 2% spraying overhead."""
    size, ranks = 2**38, 1024  # 256 GiB: the bandwidth term dominates
    ib = build_topology(gpus_per_node=8, scale_out="ib-ndr")
    roce = build_topology(gpus_per_node=8, scale_out="roce-400")
    sprayed = build_topology(gpus_per_node=8, scale_out="roce-400", load_balancing="adaptive")
    t_ib, t_roce, t_spray = (
        float(collective_time_s(Op.ALL_REDUCE, Algo.RING, size, ranks, t))
        for t in (ib, roce, sprayed)
    )
    share = hashed_share_128_nodes()
    assert share < 0.7
    assert t_roce == pytest.approx(t_ib * 0.94 / (0.93 * share), rel=0.02)
    # 0.94 vs 0.93 × 0.98 per NIC
    assert t_spray == pytest.approx(t_ib * 0.94 / (0.93 * 0.98), rel=0.02)
    assert fabric_congestion(ib, 1024)["collision_factor"] == 1.0


def test_collision_cost_shrinks_with_qps_in_collective_time() -> None:
    size, ranks = 8 * 2**30, np.array([8192.0])
    times = [
        float(
            collective_time_s(
                Op.ALL_REDUCE,
                Algo.AUTO,
                size,
                ranks,
                build_topology(gpus_per_node=8, scale_out="roce-400", qps_per_connection=q),
            )[0]
        )
        for q in (1, 4, 16)
    ]
    assert times[0] > times[1] > times[2]


def test_no_collisions_inside_a_leaf_or_on_generic_links() -> None:
    """Up to 32 nodes fit under one rail leaf of 32 hosts, in any order: nothing crosses.
    A generic link (no transport) keeps the ideal α-β model the hand-computed tests use."""
    roce = build_topology(gpus_per_node=8, scale_out="roce-400")
    balance = congestion.ring_balance(roce, np.array([1.0, 2.0, 16.0, 32.0, 128.0]), 2.0)
    assert balance[:4].tolist() == [1.0, 1.0, 1.0, 1.0]
    assert balance[4] == pytest.approx(hashed_share_128_nodes(), rel=1e-9)
    generic = Topology(
        gpus_per_node=1,
        scale_up=None,
        scale_out=Link("out", bandwidth_Bps=1e9, latency_s=1e-5),
        backend="gloo",
    )
    assert float(congestion.ring_balance(generic, 64.0, 2.0)) == 1.0


def test_job_wide_fabric_sets_the_number_of_links() -> None:
    """A data-parallel group of 128 nodes inside a 4,096-node job hashes onto the whole
    job's fabric (more links, a busier busiest one) than alone."""
    alone = build_topology(gpus_per_node=8, scale_out="roce-400")
    group = replace(alone, gpus_per_node=1.0, nics_per_node=1.0, node_nics=8.0)
    in_job = replace(group, fabric_nics=4096.0 * 8)
    f_alone = float(congestion.ring_collisions(group, 128.0, 2.0).factor)
    f_job = float(congestion.ring_collisions(in_job, 128.0, 2.0).factor)
    assert f_job < f_alone


# --- incast -----------------------------------------------------------------------------------


def test_head_of_line_blocking_matches_a_switch_simulation() -> None:
    """PFC-only incast: an input-queued FIFO switch with N inputs and uniformly random
    destinations saturates at Karol et al.'s throughput (0.75 at 2, 0.6184 at 8, 2 − √2)."""
    rng = np.random.default_rng(5)
    for n in (2, 4, 8, 16):
        dest = rng.integers(0, n, n)
        served, slots = 0, 4000
        for _ in range(slots):
            winners: dict[int, int] = {}
            for i in rng.permutation(n):
                winners.setdefault(int(dest[i]), int(i))
            w = np.fromiter(winners.values(), dtype=np.int64)
            served += w.size
            dest[w] = rng.integers(0, n, w.size)
        assert float(congestion.hol_throughput(n)) == pytest.approx(served / (slots * n), rel=0.02)
    assert float(congestion.hol_throughput(1e9)) == pytest.approx(2 - math.sqrt(2), rel=1e-6)


def test_incast_penalty_only_without_per_flow_congestion_control() -> None:
    """All-to-all on PFC-only RoCE (Meta's 400G deployment ran without DCQCN) pays head-of-
    line blocking; DCQCN, InfiniBand and Spectrum-X keep it off."""
    size, ranks = 2**30, 64
    dcqcn = build_topology(gpus_per_node=8, scale_out="roce-400")
    pfc = build_topology(gpus_per_node=8, scale_out="roce-400", rdma_cc="pfc")
    t_dcqcn = float(collective_time_s(Op.ALL_TO_ALL, Algo.AUTO, size, ranks, dcqcn))
    t_pfc = float(collective_time_s(Op.ALL_TO_ALL, Algo.AUTO, size, ranks, pfc))
    assert t_pfc > 1.3 * t_dcqcn
    for key in ("ib-ndr", "spectrum-x-400", "efa-p5", "roce-400"):
        topo = build_topology(gpus_per_node=8, scale_out=key)
        assert float(congestion.incast_factor(topo, 64)) == 1.0


# --- inputs -----------------------------------------------------------------------------------


def test_bad_settings_name_their_field() -> None:
    base = build_topology(gpus_per_node=8, scale_out="roce-400")
    with pytest.raises(ConfigError, match="qps-per-connection"):
        replace(base, qps_per_connection=0)
    with pytest.raises(ConfigError, match=r"placement: unknown value 'random'"):
        replace(base, placement="random")
    with pytest.raises(ConfigError, match=r"routing: unknown value 'ospf'"):
        replace(base, load_balancing="ospf")
    with pytest.raises(ConfigError, match=r"rdma-cc: unknown value 'reno'"):
        replace(base, rdma_cc="reno")


def test_describe_exposes_inputs_and_outputs() -> None:
    topo = build_topology(gpus_per_node=8, scale_out="roce-400")
    out = fabric_congestion(replace(topo, fabric_nics=8192.0), 8192)
    for key in (
        "routing",
        "qps_per_connection",
        "ecmp_flows_per_nic",
        "ecmp_paths_per_leaf",
        "ecmp_flows_per_leaf",
        "ecmp_links",
        "ecmp_expected_max_load",
        "ecmp_p99_max_load",
        "collision_factor",
    ):
        assert key in out
    assert out["ecmp_p99_max_load"] >= out["ecmp_expected_max_load"] > out["ecmp_mean_load"]
    assert 0 < out["collision_factor"] < 1


def test_a_what_if_nic_rate_keeps_the_leaf_it_was_cabled_for() -> None:
    """roce-400's leaf is a Tomahawk 4 (25.6 Tb/s, 64 x 400 G) under 400 G NICs; at 1:1 that
    is 25.6 / 2 / 0.4 = 32 host ports and 32 uplinks at the NIC's rate. A NIC one part in 1e9
    faster once re-split the leaf (floor(31.99999) = 31 host ports): 32 nodes no longer fit
    under one leaf and a 1 GiB all_reduce on 256 GPUs priced 90% slower (6.3 -> 11.9 ms)
    than on the slower NIC (a 1e-9 effect found by hypothesis led there). The leaf stays as
    cabled, through chained what-ifs too, and a faster NIC is never slower."""
    topo = build_topology(gpus_per_node=8, scale_out="roce-400")
    link = topo.scale_out
    assert link is not None
    assert [float(x) for x in congestion.leaf_geometry(topo)] == [32.0, 32.0, 1.0]
    hair = link.with_overrides(bandwidth_Bps=float(link.bandwidth_Bps) * (1 + 1e-9))
    twice = hair.with_overrides(bandwidth_Bps=float(link.bandwidth_Bps) * 2)
    for what_if in (hair, twice):
        assert what_if.layout_Bps == link.bandwidth_Bps
        geometry = congestion.leaf_geometry(replace(topo, scale_out=what_if))
        assert [float(x) for x in geometry] == [32.0, 32.0, 1.0]
    for n, op, size in itertools.product((32, 256, 1024), Op, (1.0, 2.0**20, 2.0**30)):
        t = [
            float(collective_time_s(op, Algo.AUTO, size, n, replace(topo, scale_out=w)))
            for w in (link, hair, twice)
        ]
        assert t[0] >= t[1] >= t[2], (n, op, size, t)


@pytest.mark.parametrize(
    ("paths", "flows", "failed"),
    [(16, 2, 1), (16, 2, 64), (16, 8, 32), (16, 8, 64), (4, 1, 8), (4, 1, 32)],
)
def test_failed_links_under_hashing_match_the_oracle(paths: int, flows: int, failed: int) -> None:
    """Failed leaf-spine links on a hashed fabric (256 nodes, 2 rails, 16 hosts per leaf,
    512 uplinks at 16 paths): the collision factor within 4% of the flow-level simulation
    with those links down, from 1 failure (no visible cost: the busiest path is already a
    chance pile-up elsewhere) to an eighth of the links (0.46 -> 0.39 at 8 flows per NIC)."""
    case = dict(nodes=256, nics=2, host_ports=16, paths=paths, speed=1.0, flows=flows, rail=True)
    if paths == 4:
        case.update(nodes=128, nics=1, host_ports=8)
    topo = fabric(
        host_ports=case["host_ports"],
        paths=paths,
        speed=1.0,
        nics=case["nics"],
        rail=True,
        packed=False,
    )
    hurt = replace(topo, failed_uplinks=float(failed))
    model = congestion.ring_collisions(hurt, float(case["nodes"]), float(flows))
    healthy = congestion.ring_collisions(topo, float(case["nodes"]), float(flows))
    _, mc_time = mc_ring(**case, packed=False, trials=400, seed=5, failed=failed)
    ideal = max(float(model.flows_per_nic), float(model.mean_load / model.path_speed))
    assert float(model.factor) == pytest.approx(ideal / mc_time, rel=0.04)
    assert float(model.factor) <= float(healthy.factor)


def test_failed_links_are_priced_once_under_static_routing() -> None:
    """Llama 3 405B on 16,384 GPUs of Spectrum-X hashed statically: one failed link of
    16,384 once halved the whole fabric (fabric health 0.5 on top of the collision model;
    docs/scenarios.md's tp 8 pp 16 row read 10.75 s, the same as a 2:1 fabric). Now the
    collision model alone prices it, and an eighth of the links down costs less than halving
    the spine does, but more than nothing."""
    common = dict(
        model="llama3-405b",
        gpus=16384,
        preset="ai-factory-ib",
        fabric="spectrum-x-800",
        routing="static",
        tp=4,
        pp=32,
        cp=8,
    )
    step = {
        k: plan_of(**common, **extra).metrics["step_time_s"]
        for k, extra in {
            "healthy": {},
            "one": {"failed_links": 1},
            "eighth": {"failed_link_fraction": 0.125},
            "2:1": {"oversubscription": 2.0},
        }.items()
    }
    # one link of 16,384 moves a few hashed flows (the switch's hash dispersion): a trace,
    # not the halving it once cost
    assert step["healthy"] <= step["one"] <= step["healthy"] * 1.01
    assert step["healthy"] < step["eighth"] < step["2:1"]
