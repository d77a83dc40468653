"""NCCL's tuning model, term by term, against values worked out by hand from its source.

Source for every constant: NVIDIA/nccl 2.30.7-1 (commit 5067397c), src/graph/tuning.cc
(base/hw latencies, llMaxBws, per-channel caps, nvlsEfficiency, treeCorrectionFactor,
thread thresholds, eligibility), src/graph/search.cc (speed ladders, ncclTopoDupChannels),
src/enqueue.cc (the tuner's pick, channels per message size) and src/graph/connect.cc.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from bandwall.errors import ConfigError
from bandwall.model import nccl
from bandwall.model.collectives import Algo, Op, collective_time_s, select
from bandwall.model.collectives.options import nccl_options
from bandwall.model.collectives.pricing import SizeTerms, option_price_s, option_tuner_s
from bandwall.model.nccl import NcclAlgo, NcclFunc, Proto
from bandwall.model.topology import Link, Topology, build_topology

GiB = float(2**30)
US = 1e-6


def quiet(topo: Topology) -> Topology:
    """The topology without jitter, so latencies are NCCL's alone."""

    def q(link: Link | None) -> Link | None:
        return None if link is None else replace(link, jitter_mean_s=0.0, jitter_std_s=0.0)

    return replace(topo, scale_up=q(topo.scale_up), scale_out=q(topo.scale_out), wan=q(topo.wan))


H100 = quiet(build_topology(gpus_per_node=8, scale_out="ib-ndr"))


def candidate(
    ranks: int, algo: NcclAlgo, proto: Proto, topo: Topology = H100, func: NcclFunc | None = None
) -> nccl.Candidate:
    sh = nccl.shape_of(np.array([float(ranks)]), topo)
    return next(
        c
        for c in nccl.candidates(func or NcclFunc.ALL_REDUCE, sh)
        if c.algo is algo and c.proto is proto
    )


def algbw_GBps(c: nccl.Candidate) -> float:
    return 1 / float(c.inv_bw[0]) / 1e9


def test_ring_search_and_channel_duplication_on_hgx() -> None:
    """H100 SXM: 18 NVLinks × 20.6 GB/s = 370.8; the sm90 ladder finds 6 channels × 60 GB/s,
    duplicated to 12 × 30 (busBw 360). A100: 12 × 20 = 240 → 6 × 40 → 12 × 20."""
    n, s = nccl.ring_search(370.8, nccl.SPEEDS_INTRA["sm90"])
    assert (float(n), float(s)) == (6.0, 60.0)
    n, s = nccl.dup_channels(n, s, True)
    assert (float(n), float(s)) == (12.0, 30.0)
    n, s = nccl.dup_channels(*nccl.ring_search(240.0, nccl.SPEEDS_INTRA["default"]), False)
    assert (float(n), float(s)) == (12.0, 20.0)
    # sm > 80, channel < 50 GB/s and more than 4 channels: no duplication (8 NDR rails × 48)
    n, s = nccl.dup_channels(8.0, 48.0, True)
    assert (float(n), float(s)) == (8.0, 48.0)


@pytest.mark.parametrize(
    ("rate_GBps", "channels", "planned"),
    [
        (48.0, 1.0, 48.0),  # NDR on PCIe Gen5: one channel at the top rung
        (47.5, 1.0, 45.0),  # 380 Gb/s: the 45 GB/s rung
        (1.875, 1.0, 1.2),  # a 15 Gb/s socket NIC plans one 1.2 GB/s channel
        (1.125, 4.0, 0.96),  # 9 Gb/s: four 0.24 GB/s channels fit
        (0.05, 1.0, 0.05),  # below the slowest rung: one channel at the rate itself
    ],
)
def test_nic_plan_on_the_sm90_ladder(rate_GBps: float, channels: float, planned: float) -> None:
    """search.cc:1058 sm90SpeedArrayInter: channels at the fastest rung not above the rate."""
    n, p = nccl.nic_plan(rate_GBps, nccl.SPEEDS_INTER["sm90"])
    assert float(n) == channels and float(p) == pytest.approx(planned)


def test_ring_latency_and_bandwidth_on_one_node() -> None:
    """8 GPUs, one node: Ring/LL = 6.6 + 2·7 × 0.6 = 15.0 µs, algBw = min(141, 360/2)·8/14;
    Ring/Simple 8.4 + 14 × 3.4 = 56 µs at 360 GB/s bus; LL128 14 + 14 × 1.9 µs at
    min(0.92 × 360, 12 × 36.7) GB/s (tuning.cc:326-329, 384-407)."""
    ll = candidate(8, NcclAlgo.RING, Proto.LL)
    assert float(ll.nccl_latency_s[0]) / US == pytest.approx(15.0)
    assert algbw_GBps(ll) == pytest.approx(min(141.0, 180.0) * 8 / 14)
    simple = candidate(8, NcclAlgo.RING, Proto.SIMPLE)
    assert float(simple.nccl_latency_s[0]) / US == pytest.approx(8.4 + 14 * 3.4)
    assert algbw_GBps(simple) == pytest.approx(360.0 * 8 / 14)
    ll128 = candidate(8, NcclAlgo.RING, Proto.LL128)
    assert float(ll128.nccl_latency_s[0]) / US == pytest.approx(14.0 + 14 * 1.9)
    assert algbw_GBps(ll128) == pytest.approx(0.92 * 360.0 * 8 / 14)
    # the executed channels: comm->nChannels doubles the 12 searched (connect.cc:460)
    assert float(ll.exec_channels[0]) == 24.0  # type: ignore[index]


def test_nvls_single_node() -> None:
    """8 heads; each channel takes 2× on the head's NVLink, 1× elsewhere: 9 × bw <= 370.8 →
    40 GB/s rung; busBw = 8 × min(2 × 40 × 0.85 × 7/8, 60) = 476 (nccl-tests#212: ~480);
    latency 25 µs; algBw = 476 × 8/14 = 272; nvlsChannels 16 on Hopper (nvls.cc:155)."""
    nvls = candidate(8, NcclAlgo.NVLS, Proto.SIMPLE)
    assert float(nvls.nccl_latency_s[0]) / US == pytest.approx(25.0)
    assert algbw_GBps(nvls) == pytest.approx(476.0 * 8 / 14)
    assert float(nvls.exec_channels[0]) == 16.0  # type: ignore[index]
    # NCCL's tuner on 8 GPUs: ring/LL below ~1 MB, NVLS above (nccl-tests#309: 8 B-1 MB
    # ring/LL, 2 MB-16 GB NVLS/Simple on a single HGX H100)
    _, algos, protos = select(Op.ALL_REDUCE, Algo.AUTO, np.array([2.0**19, 2.0**21]), 8, H100)
    assert list(algos) == ["ring", "nvls"] and list(protos) == ["LL", "Simple"]


def test_tree_and_ring_latency_across_nodes() -> None:
    """2 nodes × 8 GPUs on InfiniBand (1 µs one-way): Tree/LL = 6.8 + 2(7 × 0.6 + 1 × (5.0 +
    1)) = 27.2 µs; Ring/LL = 6.6 + 28 × max(0.6, 1.0 net overhead) + 2 × (2.7 + 1) = 42.0.
    One GPU per node uses the NET Tree row for the ring: 6.6 + 2 × (5.0 + 1) = 18.6."""
    tree = candidate(16, NcclAlgo.TREE, Proto.LL)
    assert float(tree.nccl_latency_s[0]) / US == pytest.approx(27.2)
    ring = candidate(16, NcclAlgo.RING, Proto.LL)
    assert float(ring.nccl_latency_s[0]) / US == pytest.approx(42.0)
    one_gpu = quiet(build_topology(gpus_per_node=1, scale_out="ib-ndr"))
    ring1 = candidate(2, NcclAlgo.RING, Proto.LL, one_gpu)
    assert float(ring1.nccl_latency_s[0]) / US == pytest.approx(18.6)


def _option(ranks: int, algo: Algo, proto: str, topo: Topology = H100):  # type: ignore[no-untyped-def]
    n = np.array([float(ranks)])
    return next(
        o for o in nccl_options(Op.ALL_REDUCE, n, topo) if o.algo is algo and o.protocol == proto
    )


def test_ring_plateau_is_a_step_for_the_tuner_and_a_ramp_in_the_price() -> None:
    """Ring/Simple all_reduce across nodes: NCCL's latency × 1.4 once S/(channels × ranks)
    >= 64 (tuning.cc:647-649): a step in its prediction; the price ramps over the octave
    centred on it, so time stays continuous."""
    o = _option(16, Algo.RING, "Simple")
    assert o.plateau_bytes is not None and o.plateau_factor == 1.4
    cut = float(o.plateau_bytes[0])
    assert cut == 64 * 16 * 16  # 16 executed channels (8 rails, doubled) × 16 ranks
    lat = float(o.tuner_latency_s[0])
    before = float(option_tuner_s(o, SizeTerms(np.array([cut - 1])))[0])
    after = float(option_tuner_s(o, SizeTerms(np.array([cut])))[0])
    assert after - before == pytest.approx(0.4 * lat, rel=1e-3)
    sizes = np.array([cut / 2**0.5, cut - 1, cut, cut * 2**0.5])
    price = option_price_s(o, SizeTerms(sizes))
    assert price[2] - price[1] < 1e-3 * 0.4 * lat  # no step at the cut, just the slope
    assert np.all(np.diff(price) > 0)
    ramp = nccl.plateau_ramp(sizes, cut, 1.4)
    assert ramp[0] == pytest.approx(1.0) and ramp[-1] == pytest.approx(1.4)
    assert ramp[2] == pytest.approx(1.2)


def test_tree_correction_steps_and_interpolation() -> None:
    """treeCorrectionFactor: index log2i(size >> 6); 1 MiB is index 14 (LL 0.5, LL128 0.6,
    Simple 0.5); below 64 B (log2i(0) = −1) and from 512 MiB the factor is 1. The price
    interpolates between bucket middles: the table's value there, and size / factor grows."""
    rows = nccl.tree_correction_rows(np.array([2.0**20, 32.0, 2.0**40]))
    assert [float(r[0]) for r in rows] == [0.5, 0.6, 0.5]
    assert all(float(r[1]) == 1.0 and float(r[2]) == 1.0 for r in rows)
    middles = 64.0 * 2.0 ** (np.arange(23) + 0.5)
    for proto in range(3):
        smooth = nccl.tree_correction_smooth(middles, proto)
        np.testing.assert_allclose(smooth, nccl.TREE_CORRECTION[proto][:23])
        sizes = np.geomspace(1.0, 2.0**36, 20_001)
        charged = sizes / nccl.tree_correction_smooth(sizes, proto)
        assert np.all(np.diff(charged) > 0)


def test_tree_correction_knots_by_arithmetic_equal_np_interp() -> None:
    """The smooth correction finds its interval by arithmetic (knots one apart from
    log2(size/64) = -0.5) instead of np.interp's search: the same values bit for bit, at
    random sizes, at knots, at both ends, at 0, inf and NaN, for every table."""
    rng = np.random.default_rng(20261206)
    knots = 64.0 * 2.0 ** (np.arange(-2, 27) + 0.5)
    edges = [0.0, 1.0, 45.25, 64.0, 2.0**29, 2.0**40, 1e300, np.inf, np.nan]
    sizes = np.concatenate([np.exp(rng.uniform(-5.0, 35.0, 50_000)), knots, edges])
    position = nccl.tree_position(sizes)
    for (proto, entries), (x, y) in nccl._KNOTS.items():
        fast = nccl.tree_correction_smooth_knots(nccl.tree_knot(position, entries), proto, entries)
        np.testing.assert_array_equal(fast, np.interp(position, x, y))


def test_nccl_runs_fewer_channels_below_one_chunk_each() -> None:
    """enqueue.cc:2093: channels drop while nBytes < nc × nt × threadThreshold. Ring/LL on 8
    GPUs: threshold 8 × 8 ranks, 512 threads → 32 KiB per channel, 24 channels: a 32 KiB
    message runs on one channel at 1/24 of the bandwidth; from 768 KiB on all channels run."""
    o = _option(8, Algo.RING, "LL")
    inv = float(o.inv_bw[0])
    chunk = 512 * 8 * 8
    assert float(o.chunk_eff[0]) == 24 * chunk
    for size, charged in ((chunk, 24 * chunk), (4 * chunk, 24 * chunk), (48 * chunk, 48 * chunk)):
        terms = SizeTerms(np.array([float(size)]))
        fill = min(float(size), float(o.fill_bytes[0])) if o.fill_bytes is not None else 0.0
        expected = float(o.latency_s[0]) + inv * (charged + fill)
        assert float(option_price_s(o, terms)[0]) == pytest.approx(expected, rel=1e-12)


def test_eligibility_rules() -> None:
    """NVLS needs NVSwitch + Hopper and >= 2 GPUs; NVLS-tree needs >= 2 nodes; LL128 needs
    NVLink inside the node and GPUDirect NICs; CollNet needs SHARP turned on; PAT one GPU per
    node."""
    eight = np.array([8.0, 16.0])
    _, algos, _ = select(Op.ALL_REDUCE, Algo.AUTO, GiB, eight, H100)
    assert list(algos) == ["nvls", "nvls_tree"]
    a100 = quiet(build_topology(gpus_per_node=8, scale_out="ib-ndr", gpu="A100-SXM-80GB"))
    with pytest.raises(ConfigError, match="NVLS needs"):
        collective_time_s(Op.ALL_REDUCE, Algo.NVLS, GiB, 8, a100)
    with pytest.raises(ConfigError, match="NVLS-tree needs"):
        collective_time_s(Op.ALL_REDUCE, Algo.NVLS_TREE, GiB, 8, H100)
    off = replace(H100, in_network=False)
    _, algos, _ = select(Op.ALL_REDUCE, Algo.AUTO, GiB, 8, off)
    assert str(algos) == "ring"
    pcie = quiet(build_topology(gpus_per_node=8, scale_out="ib-ndr", gpu="L40S"))
    with pytest.raises(ConfigError, match="LL128 needs NVLink"):
        collective_time_s(Op.ALL_REDUCE, Algo.RING, GiB, 8, pcie, protocol=Proto.LL128)
    tcp = quiet(build_topology(gpus_per_node=8, scale_out="eth-25g-tcp"))
    t = collective_time_s(
        Op.ALL_REDUCE, Algo.RING, GiB, np.array([8, 16]), tcp, protocol=Proto.LL128
    )
    assert np.isfinite(t[0]) and t[1] == np.inf  # LL128 only inside the node on sockets
    # SHARP exists on ib-ndr but NCCL's CollNet is off by default (collnetEnable = 0)
    with pytest.raises(ConfigError, match="CollNet needs SHARP"):
        collective_time_s(Op.ALL_REDUCE, Algo.COLLNET_DIRECT, GiB, 16, H100)
    sharp = replace(H100, in_network=True)
    direct = collective_time_s(Op.ALL_REDUCE, Algo.COLLNET_DIRECT, GiB, 16, sharp)
    # CollNet direct latency: 2(1 × 3.7 + 7 × 0.4) + 31 + 2 × 1 µs (Simple flushes twice)
    assert float(direct) > (2 * (3.7 + 7 * 0.4) + 33) * US
    one_gpu = quiet(build_topology(gpus_per_node=1, scale_out="ib-ndr"))
    _, algos, _ = select(Op.ALL_GATHER, Algo.AUTO, 8.0, 64, one_gpu)
    assert str(algos) == "pat"
    with pytest.raises(ConfigError, match="PAT runs with one GPU per node"):
        collective_time_s(Op.ALL_GATHER, Algo.PAT, 8.0, 64, H100)


def test_in_network_is_explicit() -> None:
    """in_network None: NVLS on (NCCL_NVLS_ENABLE=2), SHARP off; True: both; False: none."""
    up, out = H100.scale_up, H100.scale_out
    assert up is not None and out is not None
    assert H100.in_network_on(up) and not H100.in_network_on(out)
    on = replace(H100, in_network=True)
    assert on.in_network_on(up) and on.in_network_on(out)
    roce = build_topology(gpus_per_node=8, scale_out="roce-400", in_network=True)
    assert roce.scale_out is not None and not roce.in_network_on(roce.scale_out)
    with pytest.raises(ConfigError, match="in_network needs"):
        collective_time_s(Op.ALL_REDUCE, Algo.IN_NETWORK, GiB, 8, replace(H100, in_network=False))
    t = collective_time_s(Op.ALL_REDUCE, Algo.IN_NETWORK, GiB, 8, H100)
    assert float(t) == pytest.approx(
        float(collective_time_s(Op.ALL_REDUCE, Algo.NVLS, GiB, 8, H100))
    )


def test_gloo_runs_pytorchs_fixed_algorithms() -> None:
    """ProcessGroupGloo: ring all_reduce; reduce_scatter = a full ring all_reduce; broadcast =
    binomial tree sending the whole buffer in each of ceil(log2 P) rounds."""
    link = Link("l", bandwidth_Bps=1e9, latency_s=1e-3, transport="roce")
    gloo = Topology(gpus_per_node=1, scale_up=None, scale_out=link, backend="gloo")
    ar = float(collective_time_s(Op.ALL_REDUCE, Algo.AUTO, GiB, 8, gloo))
    # 1,024 segments of 1 MiB, 896 pairs: each waits a round trip (2 ms) longer than a
    # segment's transfer (1.05 ms), so 1,792 one-way latencies + 7/8 of the bytes, not the
    # α-β ring's 14 × 1 ms + 2 × 7/8 × GiB / 1 GB/s = 1.893 s
    assert ar == pytest.approx(1792 * 1e-3 + 7 / 8 * GiB / 1e9)
    rs = float(collective_time_s(Op.REDUCE_SCATTER, Algo.AUTO, GiB, 8, gloo))
    assert rs == pytest.approx(ar)
    bc = float(collective_time_s(Op.BROADCAST, Algo.AUTO, GiB, 8, gloo))
    assert bc == pytest.approx(3 * 1e-3 + 3 * GiB / 1e9)
    _, algos, protos = select(Op.ALL_REDUCE, Algo.AUTO, 8.0, 8, gloo)
    assert (str(algos), str(protos)) == ("ring", "-")
    with pytest.raises(ConfigError, match="not available for all_reduce on gloo"):
        collective_time_s(Op.ALL_REDUCE, Algo.NVLS, GiB, 8, gloo)
