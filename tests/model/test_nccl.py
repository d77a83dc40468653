"""NCCL's tuning model, term by term, against values worked out by hand from its source.

Source for every constant: NVIDIA/nccl 2.30.7-1 (commit 5067397c), src/graph/tuning.cc
(base/hw latencies, llMaxBws, per-channel caps, nvlsEfficiency, treeCorrectionFactor,
eligibility) and src/graph/search.cc (speed ladders, ncclTopoDupChannels).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from bandwall.errors import ConfigError
from bandwall.model import nccl
from bandwall.model.collectives import Algo, Op, collective_time_s, select
from bandwall.model.nccl import Proto
from bandwall.model.topology import Link, Topology, build_topology

GiB = float(2**30)
US = 1e-6


def quiet(topo: Topology) -> Topology:
    """The topology without jitter, so latencies are NCCL's alone."""

    def q(link: Link | None) -> Link | None:
        return None if link is None else replace(link, jitter_mean_s=0.0, jitter_std_s=0.0)

    return replace(topo, scale_up=q(topo.scale_up), scale_out=q(topo.scale_out), wan=q(topo.wan))


H100 = quiet(build_topology(gpus_per_node=8, scale_out="ib-ndr"))


def t_us(algo: Algo, size: float, ranks: int, topo: Topology = H100, **kw: Proto) -> float:
    return float(collective_time_s(Op.ALL_REDUCE, algo, size, ranks, topo, **kw)) / US


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


def test_ring_ll_latency_is_base_plus_steps_times_hw() -> None:
    """8 GPUs, one node: Ring/LL = 6.6 + 2·7 × 0.6 = 15.0 µs; algBw = min(141, 360/2)·8/14."""
    algbw = min(141.0, 0.5 * 360.0) * 8 / 14 * 1e9
    expected = (6.6 + 14 * 0.6) + 8 / algbw / US
    assert t_us(Algo.RING, 8, 8, protocol=Proto.LL) == pytest.approx(expected, rel=1e-9)
    # Ring/Simple at 1 GiB: 8.4 + 14 × 3.4 = 56 µs, 360 GB/s bus
    simple = (8.4 + 14 * 3.4) + GiB / (360e9 * 8 / 14) / US
    assert t_us(Algo.RING, GiB, 8, protocol=Proto.SIMPLE) == pytest.approx(simple, rel=1e-9)
    # LL128: 14 + 14 × 1.9 µs, min(0.92 × 360, 12 channels × 36.7) GB/s
    ll128 = (14.0 + 14 * 1.9) + GiB / (0.92 * 360e9 * 8 / 14) / US
    assert t_us(Algo.RING, GiB, 8, protocol=Proto.LL128) == pytest.approx(ll128, rel=1e-9)


def test_nvls_single_node() -> None:
    """8 heads; each channel takes 2× on the head's NVLink, 1× elsewhere: 9 × bw <= 370.8 →
    40 GB/s rung; busBw = 8 × min(2 × 40 × 0.85 × 7/8, 60) = 476 (nccl-tests#212: ~480);
    latency 25 µs; algBw = 476 × 8/14 = 272."""
    expected = 25.0 + GiB / (476e9 * 8 / 14) / US
    assert t_us(Algo.NVLS, GiB, 8) == pytest.approx(expected, rel=1e-9)
    # ring/LL vs NVLS: 15 + S/80.57 = 25 + S/272 at S ≈ 1.1 MB (notes §5.1)
    _, algos, protos = select(Op.ALL_REDUCE, Algo.AUTO, np.array([2.0**19, 2.0**21]), 8, H100)
    assert list(algos) == ["ring", "nvls"] and list(protos) == ["LL", "Simple"]


def test_tree_and_ring_latency_across_nodes() -> None:
    """2 nodes × 8 GPUs on InfiniBand (1 µs one-way): Tree/LL = 6.8 + 2(7 × 0.6 + 1 × (5.0 +
    1)) = 27.2 µs; Ring/LL = 6.6 + 28 × max(0.6, 1.0 net overhead) + 2 × (2.7 + 1) = 42.0.
    One GPU per node uses the NET Tree row for the ring: 6.6 + 2 × (5.0 + 1) = 18.6."""
    tree = 27.2 + 8 / (min(nccl.LL_MAX_BW[0, 1], 1e9) * 1e9 * 0.5) / US
    got = t_us(Algo.TREE, 8, 16, protocol=Proto.LL)
    assert got == pytest.approx(tree, rel=2e-3)
    ring = t_us(Algo.RING, 8, 16, protocol=Proto.LL)
    assert ring == pytest.approx(42.0, rel=2e-3)
    one_gpu = quiet(build_topology(gpus_per_node=1, scale_out="ib-ndr"))
    assert t_us(Algo.RING, 8, 2, one_gpu, protocol=Proto.LL) == pytest.approx(18.6, rel=2e-3)


def test_ring_plateau_across_nodes() -> None:
    """Ring/Simple all_reduce across nodes: latency × 1.4 once S/(channels × ranks) >= 64."""
    sh = nccl.shape_of(np.array([16.0]), H100)
    ring = next(
        c
        for c in nccl.candidates(nccl.NcclFunc.ALL_REDUCE, sh)
        if c.algo is nccl.NcclAlgo.RING and c.proto is Proto.SIMPLE
    )
    assert ring.plateau_bytes is not None and ring.plateau_factor == 1.4
    cut = float(ring.plateau_bytes[0])
    assert cut == 64 * 16 * 16  # 16 executed channels (8 rails, doubled) × 16 ranks
    before = float(ring.time_s(np.array([cut - 1]))[0])
    after = float(ring.time_s(np.array([cut]))[0])
    assert after - before == pytest.approx(0.4 * float(ring.latency_s[0]), rel=1e-3)


def test_tree_correction_factor() -> None:
    """treeCorrectionFactor: index log2(size/64); 1 MiB is index 14 (LL 0.5, LL128 0.6,
    Simple 0.5); outside 64 B .. 256 MiB the factor is 1."""
    rows = nccl.tree_correction_rows(np.array([2.0**20, 32.0, 2.0**40]))
    assert [float(r[0]) for r in rows] == [0.5, 0.6, 0.5]
    assert all(float(r[1]) == 1.0 and float(r[2]) == 1.0 for r in rows)


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
