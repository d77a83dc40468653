"""Properties of the collective model over random (op, size, ranks, fabric, rate, latency),
and the violations issue 22 found, pinned.

The cheapest option NCCL can run must be continuous and non-decreasing in size and latency,
non-increasing in the NIC rate, and never show more bus bandwidth than a link on its path
carries; what NCCL's tuner runs may depart from it only where the output says so (a note).
The link bounds here are derived independently of model/collectives/links.py: the bytes a GPU
port, a node's NICs or a site's uplink must move, over its rate. benchmarks/
collective_properties.py runs the same checks over >= 100,000 points.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bandwall.errors import ConfigError
from bandwall.model.collectives import Algo, Op, busbw_factor, collective_time_s
from bandwall.model.collectives import evaluate_collective as evaluate
from bandwall.model.distinct import distinct_rows
from bandwall.model.topology import Topology, build_topology

GB = 1e9
MiB = 2.0**20

FABRICS = ["ib-ndr", "ib-hdr", "roce-400", "roce-100", "efa-p5", "spectrum-x-800", "eth-25g-tcp"]
GPUS = ["A100-SXM-80GB", "H100-SXM", "B200", "L40S"]


def _at(topo: Topology, rate_Bps: Any = None, latency_s: Any = None) -> Topology:
    link = topo.scale_out
    assert link is not None
    return replace(topo, scale_out=link.with_overrides(bandwidth_Bps=rate_Bps, latency_s=latency_s))


def _said(res: object, kind: str) -> np.ndarray:
    note = np.asarray(res.note).astype(str)  # type: ignore[attr-defined]
    return np.char.find(note, kind) >= 0


# --- the violations of issue 22, pinned ---------------------------------------------------------


def test_more_nic_bandwidth_never_slows_a100_all_reduce() -> None:
    """Was: 4 GB all_reduce on 1,024 A100 over NDR, 36.5 ms up to 380 Gb/s, 45.0 ms from 385
    (NCCL's channel search re-planned the tree at a faster rung). Channel counts now follow
    the NIC the fabric was laid out for; only rates move with a what-if rate."""
    topo = build_topology(gpus_per_node=8, scale_out="ib-ndr", gpu="A100-SXM-80GB")
    rates = np.linspace(300, 400, 201) * GB / 8
    res = evaluate(Op.ALL_REDUCE, 4e9, 1024, _at(topo, rates))
    assert np.all(np.diff(res.time_s) <= 1e-12 * res.time_s[1:])


def test_more_nic_bandwidth_never_slows_roce_all_gather() -> None:
    """Was: 1 GB all_gather over 1,024 H100 on roce-400, 0.234 s at 9 Gb/s, 0.397 s at 10 (four
    hashed flows per NIC at 9 Gb/s, one at 10). Where the time steps with the rate, the
    note names NCCL's speed ladder (search.cc:1058)."""
    topo = build_topology(gpus_per_node=8, scale_out="roce-400")
    rates = np.linspace(5, 20, 301) * GB / 8
    res = evaluate(Op.ALL_GATHER, 1e9, 1024, _at(topo, rates))
    t = res.time_s
    assert np.all(np.diff(t) <= 1e-12 * t[1:])
    jumps = np.abs(np.diff(t)) > 0.01 * t[1:]
    ladder = _said(res, "speed ladder")
    assert np.all(~jumps | ladder[:-1] | ladder[1:])


def test_in_network_steps_say_speed_ladder() -> None:
    """Was unexplained (collective_properties.py, 83 per 100k): CollNet's heads take the NIC's
    ladder plan, so an all_reduce over 15 B200 on SHARP-enabled XDR stepped 5% down at 120 Gb/s
    with no note. Where planning the NIC at its full rate would be faster, the note says so."""
    topo = build_topology(gpus_per_node=1, scale_out="ib-xdr", gpu="B200", in_network=True)
    rates = np.linspace(100, 140, 401) * GB / 8
    res = evaluate(Op.ALL_REDUCE, 15209.0, 15, _at(topo, rates))
    assert set(res.algo.tolist()) == {"collnet_chain"}
    t = res.time_s
    jumps = np.abs(np.diff(t)) > 0.01 * t[1:]
    assert jumps.sum() >= 1
    ladder = _said(res, "speed ladder")
    assert np.all(~jumps | ladder[:-1] | ladder[1:])
    # at a rate on a rung the plan is the rate: nothing to say
    on_rung = evaluate(Op.ALL_REDUCE, 15209.0, 15, _at(topo, 120 * GB / 8))
    assert not _said(on_rung, "speed ladder").any()


def test_tree_correction_is_not_a_time_step() -> None:
    """Was: `bandwall collective --op all_reduce --ranks 64 --fabric ib-ndr --sizes
    4194303,4194304` gave 159.1 µs for the smaller and 144.1 µs for the larger (NCCL's
    per-power-of-two tree correction used as a time model). It is interpolated in the price;
    NCCL's tuner still applies it as a step when it picks."""
    topo = build_topology(gpus_per_node=8, scale_out="ib-ndr")
    t = collective_time_s(Op.ALL_REDUCE, Algo.AUTO, np.array([4194303.0, 4194304.0]), 64, topo)
    assert t[0] <= t[1] <= t[0] * (1 + 1e-5)
    sizes = np.geomspace(64.0, 2.0**31, 40_001)
    tree = evaluate(Op.ALL_REDUCE, sizes, 64, topo, Algo.TREE)
    assert tree.best_time_s is not None
    assert np.all(np.diff(tree.best_time_s) >= 0)
    assert np.max(tree.best_time_s[1:] / tree.best_time_s[:-1]) < 1.01


def test_all_to_all_on_pcie_gpus_is_bounded_by_their_pcie_link() -> None:
    """Was: L40S, 4 per node, 800G NICs, 16 ranks all_to_all: 117.8 GB/s busbw through a
    31.5 GB/s PCIe 4.0 x16 link (24 GB/s as NCCL rates it: 0.762 of it)."""
    topo = build_topology(gpus_per_node=4, scale_out="ib-xdr", gpu="L40S")
    assert topo.scale_up is not None
    cap = float(topo.scale_up.bandwidth_Bps) * topo.scale_up.efficiency / GB
    res = evaluate(Op.ALL_TO_ALL, np.geomspace(1e3, 1e10, 50), 16, topo)
    assert np.all(res.busbw_GBps <= cap * (1 + 1e-9))
    assert float(res.busbw_GBps[-1]) == pytest.approx(cap, rel=0.01)


@pytest.mark.parametrize("ranks", [9, 17, 23, 25, 31, 33, 47])
def test_nvls_tree_on_partial_nodes_is_bounded_by_the_lonely_ranks_nics(ranks: int) -> None:
    """Was: NVLS-tree on odd rank counts reached 1.22x its cap. A node holding g of the ranks
    receives the whole reduced buffer through min(NICs, g) NICs of 400 Gb/s × 0.94 (and their
    48 GB/s host paths): busbw <= 2(n−1)/n × that."""
    topo = build_topology(gpus_per_node=8, scale_out="ib-ndr")
    last = ranks - 8 * (-(-ranks // 8) - 1)
    nic = min(400 / 8 * 0.94, 48.0)
    cap = 2 * (ranks - 1) / ranks * min(8, last) * nic
    res = evaluate(Op.ALL_REDUCE, np.geomspace(1e6, 1e10, 20), ranks, topo, Algo.NVLS_TREE)
    assert np.all(res.busbw_GBps <= cap * (1 + 1e-9))


# --- properties over random points ------------------------------------------------------------


def _caps_GBps(op: Op, n: float, topo: Topology, rate_Bps: float) -> float:
    """The largest busbw any algorithm may show: per GPU port (one node, or a PCIe GPU), per
    node's NICs (the least-populated node), from the bytes each must move."""
    G = float(topo.gpus_per_node)
    nodes = -(-n // G)
    last = n - G * (nodes - 1)
    bus = float(busbw_factor(op, n))
    cap = np.inf
    up, out = topo.scale_up, topo.scale_out
    if up is not None and (nodes == 1 or up.transport == "pcie"):
        port = float(up.bandwidth_Bps) * up.efficiency
        per_port = (
            1.0 if op in (Op.ALL_REDUCE, Op.BROADCAST, Op.REDUCE, Op.SEND_RECV) else ((n - 1) / n)
        )
        cap = min(cap, bus / per_port * port)
    if out is not None and nodes > 1:
        R = float(topo.nics_per_node) * min(rate_Bps * out.efficiency, float(out.host_Bps))
        if op in (Op.ALL_GATHER, Op.REDUCE_SCATTER):
            node = (n - last) / n
        elif op is Op.ALL_TO_ALL:
            node = max(G * (n - G), last * (n - last)) / n
        else:
            node = 1.0
        cap = min(cap, bus / node * R)
    return cap / GB


points = st.fixed_dictionaries(
    {
        "op": st.sampled_from(list(Op)),
        "fabric": st.sampled_from(FABRICS),
        "gpu": st.sampled_from(GPUS),
        "gpn": st.sampled_from([1, 2, 4, 8]),
        "ranks": st.integers(2, 4096),
        "size": st.floats(1.0, 2.0**34),
        "rate": st.floats(0.05, 4.0),
        "latency": st.floats(0.25, 4.0),
    }
)


@settings(max_examples=100, deadline=None)
@given(p=points)
def test_cheapest_is_monotone_continuous_and_within_every_link(p: dict[str, object]) -> None:
    base = build_topology(gpus_per_node=p["gpn"], scale_out=p["fabric"], gpu=p["gpu"])  # type: ignore[arg-type]
    link = base.scale_out
    assert link is not None
    rate = float(link.bandwidth_Bps) * p["rate"]  # type: ignore[operator]
    lat = float(link.latency_s) * p["latency"]  # type: ignore[operator]
    op, n, size = p["op"], float(p["ranks"]), float(p["size"])  # type: ignore[arg-type]
    assert isinstance(op, Op)
    steps = np.geomspace(1.0, 1.5, 65)
    try:
        by_size = evaluate(op, size * steps, n, _at(base, rate, lat))
        by_rate = evaluate(op, size, n, _at(base, rate * steps, lat))
        by_lat = evaluate(op, size, n, _at(base, rate, lat * steps))
    except ConfigError:  # e.g. ranks past one node on a scale-up-only topology
        return
    jump = 2 * (1.5 ** (1 / 64) - 1) + 1e-6
    for res, sign in ((by_size, 1), (by_lat, 1), (by_rate, -1)):
        best = res.best_time_s
        assert best is not None
        ratio = best[1:] / best[:-1]
        assert np.all(sign * (ratio - 1) >= -1e-9)  # monotone
        if res is not by_rate:  # in the NIC rate NCCL's speed ladder may step (it says so)
            assert np.all(np.abs(ratio - 1) <= jump)  # continuous
        tuner = _said(res, "NCCL's tuner")
        said = tuner[1:] | tuner[:-1]
        t = res.time_s
        assert np.all((sign * (t[1:] / t[:-1] - 1) >= -1e-9) | said)
    ladder = _said(by_rate, "speed ladder") | _said(by_rate, "tuner")
    big = np.abs(by_rate.time_s[1:] / by_rate.time_s[:-1] - 1) > jump
    assert np.all(~big | ladder[1:] | ladder[:-1])
    cap = _caps_GBps(op, n, _at(base, rate, lat), rate)
    assert np.all(by_size.busbw_GBps <= cap * (1 + 1e-6))


@settings(max_examples=40, deadline=None)
@given(p=points)
def test_scalar_calls_match_the_vector_path(p: dict[str, object]) -> None:
    """The engine's scalar calls are answered from compiled option tables (fast.py); they
    price exactly as the vector path does."""
    topo = build_topology(gpus_per_node=p["gpn"], scale_out=p["fabric"], gpu=p["gpu"])  # type: ignore[arg-type]
    op, n = p["op"], float(p["ranks"])  # type: ignore[arg-type]
    assert isinstance(op, Op)
    sizes = float(p["size"]) * np.geomspace(1e-3, 1e3, 7)  # type: ignore[arg-type]
    try:
        vector = collective_time_s(op, Algo.AUTO, sizes, n, topo)
    except ConfigError:
        return
    scalar = [float(collective_time_s(op, Algo.AUTO, float(s), n, topo)) for s in sizes]
    np.testing.assert_allclose(scalar, vector, rtol=1e-12)
    # as the engine calls it for one plan: one-element arrays, on a topology of them
    one = [collective_time_s(op, Algo.AUTO, np.array([s]), np.array([n]), topo) for s in sizes]
    assert all(t.shape == (1,) for t in one)
    np.testing.assert_allclose([float(t[0]) for t in one], vector, rtol=1e-12)
    arrays = replace(topo, gpus_per_node=np.array([float(topo.gpus_per_node)]))
    one = [collective_time_s(op, Algo.AUTO, float(s), n, arrays) for s in sizes]
    assert all(t.shape == (1,) for t in one)
    np.testing.assert_allclose([float(t[0]) for t in one], vector, rtol=1e-12)
    if topo.scale_out is not None:  # a one-element array inside a link keeps its axis too
        rate = np.array([float(topo.scale_out.bandwidth_Bps)])
        arrays = replace(topo, scale_out=replace(topo.scale_out, bandwidth_Bps=rate))
        one = [collective_time_s(op, Algo.AUTO, float(s), n, arrays) for s in sizes]
        assert all(t.shape == (1,) for t in one)
        np.testing.assert_allclose([float(t[0]) for t in one], vector, rtol=1e-12)


def test_a_search_sized_call_prices_each_distinct_call_once_and_exactly() -> None:
    """A layout search repeats few (size, ranks) calls over thousands of layouts; they are
    priced once each (dedupe.distinct_calls) and every element gets its own call's price."""
    topo = build_topology(gpus_per_node=8, scale_out="ib-ndr", gpu="H100-SXM")
    rng = np.random.default_rng(11)
    count = 3 * 4096
    sizes = rng.choice([0.0, 1e3, 3.3e6, 1.2e9], count)
    ranks = rng.choice([1.0, 2.0, 16.0, 512.0], count)
    for op in (Op.ALL_REDUCE, Op.ALL_GATHER, Op.SEND_RECV):
        batch = collective_time_s(op, Algo.AUTO, sizes, ranks, topo)
        assert batch.shape == (count,)
        for i in rng.choice(count, 16, replace=False):
            one = collective_time_s(op, Algo.AUTO, float(sizes[i]), float(ranks[i]), topo)
            assert float(batch[i]) == pytest.approx(float(one), rel=1e-12)


def test_a_sweep_shaped_call_prices_only_the_axes_it_depends_on() -> None:
    """A sweep hands the collective model arrays that carry every layout axis though the
    message, the group and the link each depend on a few: constant axes are cut before
    pricing (dedupe.squeezed_call) and the result, broadcast back, equals each element's
    own call."""
    from bandwall.model.collectives import dedupe

    base = build_topology(gpus_per_node=8, scale_out="ib-ndr", gpu="H100-SXM")
    link = base.scale_out
    assert link is not None
    rates = np.geomspace(1e9, 5e10, 40).reshape(1, 40, 1, 1)
    topo = replace(base, scale_out=replace(link, bandwidth_Bps=rates))
    shape = (5, 40, 4, 6)
    sizes = np.broadcast_to(np.array([1e4, 2e6, 3e8, 4e9]).reshape(1, 1, 4, 1), shape).copy()
    ranks = np.broadcast_to(np.array([2.0, 8, 16, 64, 256, 1000]).reshape(1, 1, 1, 6), shape)
    ranks = ranks.copy()
    cut = dedupe.squeezed_call(sizes, ranks, topo)
    assert cut is not None
    size_c, n_c, _, back = cut
    assert back == shape and size_c.shape == (1, 1, 4, 1) and n_c.shape == (1, 1, 1, 6)
    assert dedupe.squeezed_call(size_c, n_c, topo) is None  # nothing left to cut
    batch = collective_time_s(Op.ALL_REDUCE, Algo.AUTO, sizes, ranks, topo)
    assert batch.shape == shape
    rng = np.random.default_rng(5)
    for _ in range(12):
        i, j, k, m = (int(rng.integers(0, d)) for d in shape)
        one_topo = replace(base, scale_out=replace(link, bandwidth_Bps=float(rates[0, j, 0, 0])))
        one = collective_time_s(
            Op.ALL_REDUCE, Algo.AUTO, float(sizes[i, j, k, m]), float(ranks[i, j, k, m]), one_topo
        )
        assert float(batch[i, j, k, m]) == pytest.approx(float(one), rel=1e-12)


def test_distinct_rows_numbers_rows_and_declines_when_few_repeat() -> None:
    rng = np.random.default_rng(2)
    a = rng.choice([1.0, 2.5, np.inf], 10_000)
    b = rng.choice([0.0, -1.0], 10_000)
    found = distinct_rows([a, b])
    assert found is not None
    first, inverse = found
    assert len(first) <= 6
    assert np.array_equal(a[first][inverse], a) and np.array_equal(b[first][inverse], b)
    assert distinct_rows([rng.random(10_000)]) is None
