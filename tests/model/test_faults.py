"""Failures, checkpoints, goodput, degraded fabrics and stragglers at scale."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from bandwall.catalog import load_catalog
from bandwall.errors import ConfigError, LayoutError
from bandwall.model.collectives import Algo, Op, collective_time_s
from bandwall.model.faults import (
    Routing,
    daly_interval_s,
    degraded_bandwidth_factor,
    goodput,
    job_mtbf_s,
    max_bin_load,
    young_interval_s,
)
from bandwall.planning.request import make_request
from bandwall.planning.resolve import resolve_cluster
from tests.conftest import PINNED, plan_of


def test_young_and_daly_closed_forms() -> None:
    d, m = 60.0, 4 * 3600.0
    assert float(young_interval_s(d, m)) == pytest.approx(math.sqrt(2 * d * m))
    r = d / (2 * m)
    daly = math.sqrt(2 * d * m) * (1 + math.sqrt(r) / 3 + r / 9) - d
    assert float(daly_interval_s(d, m)) == pytest.approx(daly)
    assert float(daly_interval_s(3 * m, m)) == pytest.approx(m)  # δ >= 2M: checkpoint every M
    # Daly's interval is (near) optimal for Daly's own wall-time model
    tau = float(daly_interval_s(d, m))
    best = float(goodput(tau, d, 600, m))
    for other in (0.5 * tau, 0.8 * tau, 1.25 * tau, 2 * tau):
        assert best >= float(goodput(other, d, 600, m)) - 1e-6


def test_goodput_closed_form_by_hand() -> None:
    tau, d, r, m = 600.0, 30.0, 300.0, 7200.0
    wall_over_solve = m * math.exp(r / m) * (math.exp((tau + d) / m) - 1) / tau
    assert float(goodput(tau, d, r, m)) == pytest.approx(1 / wall_over_solve)
    assert float(goodput(tau, d, r, math.inf)) == pytest.approx(tau / (tau + d))


def test_goodput_monotone_in_failures_and_checkpoint_speed() -> None:
    mtbfs = np.geomspace(600, 1e7, 40)
    deltas = np.geomspace(0.1, 3000, 40)
    for d in (1.0, 30.0, 300.0):
        g = goodput(daly_interval_s(d, mtbfs), d, 600.0, mtbfs)
        assert np.all(np.diff(g) >= -1e-12)  # rarer failures never less goodput
    for m in (1800.0, 3 * 3600.0, 86400.0):
        g = goodput(daly_interval_s(deltas, m), deltas, 600.0, m)
        assert np.all(np.diff(g) <= 1e-12)  # slower checkpoints never more goodput


def test_job_mtbf_matches_llama3_fleet() -> None:
    """Llama 3 paper: 419 unexpected interruptions in 54 days on 16,384 GPUs (≈ one per 3.1 h)."""
    f = load_catalog().failure_profile("h100-llama3-2024")
    mtbf = float(job_mtbf_s(f, 16384, 2048, 16384, 16384))
    assert mtbf / 3600 == pytest.approx(54 * 24 / 419, rel=0.01)
    assert float(job_mtbf_s(f, 1024, 128, 1024, 1024)) == pytest.approx(16 * mtbf, rel=1e-9)


def test_plan_reports_goodput_and_its_cost() -> None:
    p = plan_of(model="llama3-405b", gpus=16384, tp=8, pp=16, global_batch=2048, tokens=15e12)
    d = p.to_json()
    assert {"goodput", "mtbf_s", "checkpoint_interval_s"} <= set(d)
    assert 0.9 < d["goodput"] < 0.95  # Meta reports > 90% effective training time
    assert d["time_to_train_s"] == pytest.approx(d["ideal_time_s"] / d["goodput"])
    assert d["failure_cost_usd"] > 0
    off = plan_of(
        model="llama3-405b",
        gpus=16384,
        tp=8,
        pp=16,
        global_batch=2048,
        tokens=15e12,
        failures=False,
    )
    assert off.metrics["goodput"] == 1.0
    assert off.metrics["time_to_train_s"] == pytest.approx(d["ideal_time_s"])


def test_degraded_bandwidth_by_hand() -> None:
    assert degraded_bandwidth_factor(64, 0, Routing.STATIC) == 1.0
    assert degraded_bandwidth_factor(64, 16, Routing.ADAPTIVE) == pytest.approx(0.75)
    # one failed link, static hashing: its flow lands on one survivor, which now carries 2
    assert degraded_bandwidth_factor(64, 1, Routing.STATIC) == pytest.approx(0.5)
    assert max_bin_load(16, 48) == 2  # λ = 1/3: P(≥2)·48 ≈ 2.1, P(≥3)·48 ≈ 0.23
    assert degraded_bandwidth_factor(64, 16, Routing.STATIC) == pytest.approx(1 / 3)
    with pytest.raises(ConfigError, match="failed-links"):
        degraded_bandwidth_factor(64, 64, Routing.ADAPTIVE)


def test_rerouting_never_faster_than_healthy() -> None:
    for links in (8, 64, 1024):
        for k in range(0, links, max(1, links // 16)):
            a = degraded_bandwidth_factor(links, k, Routing.ADAPTIVE)
            s = degraded_bandwidth_factor(links, k, Routing.STATIC)
            assert s <= a <= 1.0
    healthy = plan_of(model="llama3-70b", gpus=1024, tp=8, pp=4)
    for routing in ("adaptive", "static"):
        for frac in (0.01, 0.1, 0.5):
            hurt = plan_of(
                model="llama3-70b",
                gpus=1024,
                tp=8,
                pp=4,
                failed_link_fraction=frac,
                routing=routing,
            )
            assert hurt.metrics["step_time_s"] >= healthy.metrics["step_time_s"]


def test_degraded_cross_node_busbw_by_hand() -> None:
    """A 16 GiB all-reduce over 8 nodes bound by the NICs: busbw scales with fabric health."""
    fields = dict(model="llama3-8b", gpus=64, preset="decentralized-colocated")
    size = 16 * 2**30

    def busbw(**extra: object) -> float:
        cl = resolve_cluster(make_request(**fields, **extra))
        t = float(collective_time_s(Op.ALL_REDUCE, Algo.RING, size, 64, cl.group_topology(1.0)))
        return size / t * 2 * 63 / 64

    base = busbw()
    assert busbw(failed_links=2, routing="adaptive") == pytest.approx(base * 6 / 8, rel=1e-3)
    assert busbw(failed_links=1, routing="static") == pytest.approx(base / 2, rel=1e-3)


def test_stragglers_and_mitigations() -> None:
    common = dict(
        model="llama3-8b",
        gpus=1024,
        global_batch=1024,
        straggler_fraction=0.01,
        straggler_slowdown=0.3,
        **{**PINNED, "tp": 2},
        micro_batch=1,
    )
    sync = plan_of(**common)
    backup = plan_of(**common, straggler_mitigation="backup")
    c = sync.metrics["compute_s"]
    assert sync.breakdown["straggler"] == pytest.approx(c * 0.3 * (1 - 0.99**1024))
    assert backup.breakdown["straggler"] == pytest.approx(c * 0.01 / 0.99)
    local = dict(common, local_sgd_steps=50, tp=8)
    asyn = plan_of(**local, straggler_mitigation="async")
    assert asyn.breakdown["straggler"] == pytest.approx(asyn.metrics["compute_s"] * 0.3 * 0.01)
    with pytest.raises(LayoutError, match="async outer steps need local SGD"):
        plan_of(**common, straggler_mitigation="async")


def test_slow_links_slow_the_ring() -> None:
    fields = dict(model="llama3-8b", gpus=256, preset="decentralized-colocated", overlap=False)
    base = plan_of(**fields)
    slow = plan_of(**fields, slow_link_fraction=0.05, slow_link_speed=0.5)
    p_any = 1 - 0.95**32  # 32 hosts with one NIC each: a slow link is almost surely in the ring
    expected = p_any / 0.5 + (1 - p_any)
    assert slow.breakdown["dp"] / base.breakdown["dp"] == pytest.approx(expected, rel=0.02)


@pytest.mark.parametrize(
    "bad",
    [
        ["--failed-link-fraction", "1"],
        ["--failed-link-fraction", "-0.1"],
        ["--slow-link-fraction", "1.2"],
        ["--routing", "magic"],
    ],
)
def test_bad_fault_input_is_one_line(run_cli, bad: list[str]) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("plan", "--model", "llama3-8b", "--gpus", "64", *bad)
    assert r.code == 2
    assert len(r.err.strip().splitlines()) == 1
    assert bad[0].lstrip("-") in r.err


def test_scale_command_along_gpu_count(run_cli) -> None:  # type: ignore[no-untyped-def]
    r = run_cli(
        "scale",
        "--model",
        "llama3-70b",
        "--preset",
        "ai-factory-spectrum-x",
        "--gpus",
        "1k:8k:x2",
        "--global-batch",
        "2048",
        "--json",
    )
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    assert [row["gpus"] for row in rows] == [1024, 2048, 4096, 8192]
    good = [row["goodput"] for row in rows]
    assert good == sorted(good, reverse=True)  # more GPUs, more failures
    table = run_cli("scale", "--model", "llama3-70b", "--gpus", "1k:2k:x2")
    assert table.code == 0 and "goodput" in table.out and "$/M tokens" in table.out


def test_oversubscription_sweep_is_monotone(run_cli) -> None:  # type: ignore[no-untyped-def]
    import csv
    import io

    r = run_cli(
        "sweep",
        "--model",
        "llama3-405b",
        "--gpus",
        "16384",
        "--tp",
        "8",
        "--pp",
        "16",
        "--global-batch",
        "2048",
        "--oversubscription",
        "1,2,4,8",
        "--csv",
    )
    assert r.code == 0, r.err
    rows = list(csv.DictReader(io.StringIO(r.out)))
    assert [float(x["oversubscription"]) for x in rows] == [1, 2, 4, 8]
    steps = [float(x["step_time_s"]) for x in rows]
    assert steps == sorted(steps) and steps[-1] > steps[0]


def test_max_bin_load_does_not_underflow_for_many_balls_per_bin() -> None:
    """With λ = balls/bins past ~745, exp(−λ) underflows; the busiest of two bins of 1,600
    balls sits a few dozen above λ = 800 (σ = √800 ≈ 28), not at 1,600 (found by mutation
    testing)."""
    from bandwall.model.faults import max_bin_load

    small, big = max_bin_load(1400, 2), max_bin_load(1600, 2)
    assert 700 < small < 730 and 800 < big < 830


# --- one routing vocabulary ------------------------------------------------------------------


def test_one_routing_enum_behind_every_routing_option() -> None:
    """faults.Routing is topology.Routing (the former LoadBalancing); `static`, plan's old
    spelling of static hashing, is ecmp wherever routing is read."""
    from bandwall.model import topology
    from bandwall.planning import request

    assert Routing is topology.Routing is topology.LoadBalancing
    assert [r.value for r in Routing] == ["auto", "adaptive", "ecmp", "flowlet"]
    assert Routing.STATIC is Routing.ECMP
    assert topology.parse_routing(" Static ") is Routing.ECMP
    assert topology.parse_routing("ecmp") is Routing.ECMP
    assert {k: v.value for k, v in topology.ROUTING_ALIASES.items()} == request.ROUTING_ALIASES
    assert make_request(routing="static").routing == "ecmp"
    with pytest.raises(ConfigError, match="routing: unknown value 'ospf'"):
        topology.parse_routing("ospf")
    # the topology stores one spelling: auto is the fabric's own, static is ecmp
    t = topology.build_topology(gpus_per_node=8, scale_out="roce-400", load_balancing="static")
    assert t.load_balancing == "ecmp"
    assert (
        topology.build_topology(
            gpus_per_node=8, scale_out="roce-400", load_balancing="auto"
        ).load_balancing
        is None
    )


def test_plan_and_collective_take_the_same_routing_words(run_cli) -> None:  # type: ignore[no-untyped-def]
    """`plan --routing ecmp` (new) and `--routing static` (old) give the same plan, and
    `collective --routing` takes plan's words: static and auto as well as ecmp."""
    common = ["plan", "--model", "llama3-8b", "--gpus", "256", "--preset", "ai-factory-roce"]
    new = run_cli(*common, "--routing", "ecmp", "--json")
    old = run_cli(*common, "--routing", "static", "--json")
    assert new.code == old.code == 0
    assert new.out == old.out
    assert '"routing": "ecmp"' in new.out
    coll = ["collective", "--ranks", "256", "--fabric", "roce-400", "--sizes", "1G", "--json"]
    outs = {w: run_cli(*coll, "--routing", w) for w in ("ecmp", "static", "auto")}
    assert {r.code for r in outs.values()} == {0}
    assert outs["ecmp"].out == outs["static"].out == outs["auto"].out  # roce hashes by default
