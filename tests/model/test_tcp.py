"""TCP throughput terms against hand computation, the RFC and published single-flow rates."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bandwall.errors import ConfigError
from bandwall.model import tcp
from bandwall.model.collectives import Algo, Op, collective_time_s
from bandwall.model.tcp import CongestionControl
from bandwall.model.topology import Link, Topology, build_topology, wan_link, wan_pairs, wan_sites

MSS = 1448.0
CC = CongestionControl


def test_mathis_reno_by_hand() -> None:
    """Mathis et al. 1997: BW = MSS/RTT · sqrt(3/2)/sqrt(p); 1460 B, 20 ms, p = 1e-4."""
    expected = 1460 * math.sqrt(1.5) / (0.020 * math.sqrt(1e-4))  # 8.94 MB/s
    assert float(tcp.mathis_Bps(1460, 0.020, 1e-4)) == pytest.approx(expected)
    assert float(tcp.mathis_Bps(1460, 0.020, 0.0)) == math.inf


@pytest.mark.parametrize(
    ("loss", "window"),
    # RFC 9438 §5.2 table, RTT = 0.1 s, C = 0.4: CUBIC's average window in segments
    [(1e-2, 12), (1e-3, 38), (1e-4, 187), (1e-5, 1054), (1e-6, 5926)],
)
def test_cubic_average_window_is_rfc9438_table(loss: float, window: int) -> None:
    assert float(tcp.cubic_window_segments(0.1, loss)) == pytest.approx(window, abs=1)


def test_cubic_coefficients_are_rfc9438_eq5_to_7() -> None:
    """(C(3+β)/(4(1−β)))^¼ with C = 0.4, β = 0.7 is 1.054, not the old BIC (C(4−β)/(4β))^¼;
    the Reno-friendly window with α = 3(1−β)/(1+β) is sqrt(3/(2p)) = 1.22/√p (§4.3)."""
    assert pytest.approx((0.4 * 3.7 / 1.2) ** 0.25) == tcp.CUBIC_AVG_W_COEF
    assert pytest.approx(1.0538, abs=1e-4) == tcp.CUBIC_AVG_W_COEF
    assert pytest.approx(math.sqrt(1.5)) == tcp.CUBIC_RENO_FRIENDLY_COEF
    # at 65 ms and p = 1e-6 the cubic region applies: 1.054 · (0.065/1e-6)^0.75 segments
    w = 1.0538 * (0.065 / 1e-6) ** 0.75
    rate = float(tcp.cubic_Bps(MSS, 0.065, 1e-6))
    assert rate == pytest.approx(w * MSS / 0.065, rel=1e-3)
    # below RTT* = 1.222·p^(1/3) (26 ms at p = 1e-5) CUBIC behaves like Reno
    assert float(tcp.cubic_Bps(MSS, 0.010, 1e-5)) == pytest.approx(
        math.sqrt(1.5) / math.sqrt(1e-5) * MSS / 0.010
    )


def test_window_limit_is_buffer_over_rtt() -> None:
    """At most one window per round trip: 6 MiB (tcp_rmem max) over 65 ms = 96.8 MB/s."""
    assert float(tcp.window_Bps(6 * 2**20, 0.065)) == pytest.approx(6 * 2**20 / 0.065)
    one = tcp.tcp_Bps(
        CC.CUBIC, streams=1, link_Bps=1.25e9, mss_bytes=MSS, rtt_s=0.065, loss=0.0,
        window_bytes=6 * 2**20,
    )  # fmt: skip
    assert float(one) == pytest.approx(6 * 2**20 / 0.065)
    # Gloo: SO_SNDBUF capped at net.core.wmem_max 212,992 B, doubled by the kernel
    assert tcp.GLOO_WINDOW_BYTES == 2 * 212_992


def test_bbr_keeps_rate_until_its_loss_tolerance() -> None:
    """BBR v1 delivers the bottleneck rate × (1 − p) up to 15 % loss (tcp_bbr.c design point)
    and nothing at 20 % (its 5/4 probe: 1.25(1 − p) >= 1)."""
    assert float(tcp.bbr_delivered_share(0.01)) == pytest.approx(0.99)
    assert float(tcp.bbr_delivered_share(0.15)) == pytest.approx(0.85)
    assert float(tcp.bbr_delivered_share(0.175)) == pytest.approx(0.825 * 0.5)
    assert float(tcp.bbr_delivered_share(0.2)) == 0.0
    kw = {"mss_bytes": MSS, "rtt_s": 0.1, "loss": 0.01, "window_bytes": 1e12, "link_Bps": 1.25e9}
    bbr = float(tcp.tcp_Bps(CC.BBR, streams=1, **kw))
    cubic = float(tcp.tcp_Bps(CC.CUBIC, streams=1, **kw))
    assert bbr == pytest.approx(1.25e9 * 0.99)
    assert cubic < bbr / 100  # Queue 2016 Fig. 8: CUBIC collapses at 1 % loss, BBR does not


def test_per_flow_and_host_caps() -> None:
    """AWS: 10 Gb/s per flow in a placement group; one stream ~25 Gb/s of one core."""
    kw = {"mss_bytes": 8961.0, "rtt_s": 50e-6, "loss": 0.0, "window_bytes": 6 * 2**20}
    one = tcp.tcp_Bps(CC.CUBIC, streams=1, link_Bps=12.5e9, per_flow_limit_Bps=1.25e9, **kw)
    four = tcp.tcp_Bps(CC.CUBIC, streams=4, link_Bps=12.5e9, per_flow_limit_Bps=1.25e9, **kw)
    many = tcp.tcp_Bps(CC.CUBIC, streams=64, link_Bps=12.5e9, per_flow_limit_Bps=1.25e9, **kw)
    assert float(one) == pytest.approx(1.25e9)
    assert float(four) == pytest.approx(5e9)
    assert float(many) == pytest.approx(12.5e9)  # the NIC
    nocap = tcp.tcp_Bps(CC.CUBIC, streams=1, link_Bps=12.5e9, **kw)
    assert float(nocap) == pytest.approx(tcp.HOST_STREAM_LIMIT_BPS)


def test_link_effective_uses_congestion_control_and_window() -> None:
    wan = Link("wan", bandwidth_Bps=10e9 / 8, latency_s=10e-3, tcp=True, loss_rate=1e-4)
    reno = wan.effective_Bps(1, congestion_control=CC.RENO)
    assert reno == pytest.approx(float(tcp.mathis_Bps(1460, 0.02, 1e-4)))
    assert wan.effective_Bps(4, congestion_control=CC.RENO) == pytest.approx(4 * reno)
    assert wan.mathis_Bps(1) == pytest.approx(reno)
    lossless = Link("dc", bandwidth_Bps=10e9 / 8, latency_s=10e-3, tcp=True)
    # window-limited: 6 MiB per 20 ms round trip
    assert lossless.effective_Bps() == pytest.approx(6 * 2**20 / 0.02)
    assert lossless.effective_Bps(window_bytes=1e9) == pytest.approx(10e9 / 8)


# --- the WAN matrix ----------------------------------------------------------------------------


def test_site_pair_matrix_is_complete_and_sourced() -> None:
    sites = wan_sites()
    assert sites == ["us-east", "us-west", "eu-west", "asia-east"]
    pairs = wan_pairs()
    assert len(pairs) == 6
    for spec in pairs.values():
        assert spec.rtt_ms <= spec.rtt_p95_ms
        assert spec.loss_backbone <= spec.loss_internet
        assert "Azure" in spec.source or "AWS" in spec.source
    # published medians (AWS 2017 / Azure P50 / DT-FM 2022) within the ranges of the notes
    assert float(wan_link("us-east", "us-west").rtt_s) == pytest.approx(0.065)
    assert float(wan_link("eu-west", "asia-east", rtt="p95").rtt_s) == pytest.approx(0.240)
    link = wan_link("asia-east", "us-east", path="internet", bandwidth_Gbps=100)
    assert link.loss_rate == 1e-6 and float(link.bandwidth_Bps) == pytest.approx(12.5e9)
    with pytest.raises(ConfigError, match="site-b"):
        wan_link("us-east", "mars")
    with pytest.raises(ConfigError, match="path"):
        wan_link("us-east", "us-west", path="carrier-pigeon")


def test_published_single_flow_rates_are_window_limited() -> None:
    """DT-FM (2022) measured one TCP flow per AWS region pair: the model with the autotuned
    6 MiB window and backbone loss lands within a factor of two of each (their bandwidth ×
    delay of 6.6-10 MB is the window they had)."""
    topo = Topology(gpus_per_node=1, scale_up=None, scale_out=None)
    for spec in wan_pairs().values():
        link = wan_link(spec.a, spec.b, bandwidth_Gbps=10)
        model_Gbps = float(topo.link_Bps(link, 1)) * 8 / 1e9
        assert spec.single_flow_Gbps is not None
        assert 0.5 <= model_Gbps / spec.single_flow_Gbps <= 2.0, (spec.a, spec.b, model_Gbps)


def test_diloco_style_wan_sync_is_no_longer_mathis_bound() -> None:
    """The issue: internet-10g carried 0.45 Gb/s per Reno stream at the old loss (1e-5). With
    CUBIC, sourced loss and the library's streams it carries several times more."""
    topo = build_topology(gpus_per_node=8, scale_out="ib-ndr", wan="internet-10g", nodes_per_site=2)
    assert topo.wan is not None
    new = float(topo.link_Bps(topo.wan, topo.streams_per_peer(topo.wan))) * 8 / 1e9
    reno_old = float(tcp.mathis_Bps(1460, 0.010, 1e-5)) * 8 / 1e9
    assert reno_old == pytest.approx(0.45, rel=0.05)
    assert new / reno_old >= 3


# --- properties ---------------------------------------------------------------------------------

rates = st.floats(min_value=1e6, max_value=1e12)
rtts = st.floats(min_value=1e-5, max_value=0.5)
losses = st.floats(min_value=0.0, max_value=0.3)
streams = st.integers(min_value=1, max_value=256)
ccs = st.sampled_from(list(CC))


@settings(max_examples=200, deadline=None)
@given(cc=ccs, rate=rates, rtt=rtts, loss=losses, k=streams, window=st.floats(1e4, 1e9))
def test_more_streams_never_slower(
    cc: CC, rate: float, rtt: float, loss: float, k: int, window: float
) -> None:
    kw = {"link_Bps": rate, "mss_bytes": MSS, "rtt_s": rtt, "loss": loss, "window_bytes": window}
    a = float(tcp.tcp_Bps(cc, streams=k, **kw))
    b = float(tcp.tcp_Bps(cc, streams=k + 1, **kw))
    assert b >= a * (1 - 1e-12)
    assert 0 <= a <= rate * (1 + 1e-12)


@settings(max_examples=100, deadline=None)
@given(cc=ccs, rtt=rtts, loss=st.floats(0.0, 0.1), k=st.integers(1, 64))
def test_tcp_collectives_finite_and_faster_with_streams(
    cc: CC, rtt: float, loss: float, k: int
) -> None:
    link = Link(
        "t", bandwidth_Bps=1.25e9, latency_s=rtt / 2, tcp=True, loss_rate=loss, transport="tcp"
    )
    times = []
    for s in (k, 2 * k):
        for backend in ("nccl", "gloo"):
            topo = Topology(
                gpus_per_node=1,
                scale_up=None,
                scale_out=link,
                tcp_streams=s,
                congestion_control=cc.value,
                backend=backend,
            )
            t = collective_time_s(Op.ALL_REDUCE, Algo.AUTO, np.array([8.0, 2**26]), 8, topo)
            assert np.all(np.isfinite(t)) and np.all(t > 0)
            times.append(t)
    # more streams never slower, for either backend
    assert np.all(times[2] <= times[0] * (1 + 1e-12))
    assert np.all(times[3] <= times[1] * (1 + 1e-12))


# --- short transfers: slow start, idle restart, back-to-back operations -----------------------


def test_slow_start_rounds_by_hand() -> None:
    """RFC 5681 with IW = 10 × 1448 B (RFC 6928), doubling per round trip, 200 Mbit/s-class
    path (25 MB/s) at 50 ms (BDP 1.25 MB). 1 MiB: rounds of 14,480, 28,960, …, 463,360 B
    carry 912,240 B in six round trips; the 7th carries the last 136,336 B, which land
    136,336 / 25e6 s after it starts and RTT/2 later: 300 + 5.45 + 25 = 330.45 ms."""
    t = float(tcp.transfer_s(2**20, rtt_s=0.05, rate_Bps=25e6))
    assert t == pytest.approx(0.30 + 136_336 / 25e6 + 0.025)
    # one initial window: no round trip waited
    assert float(tcp.transfer_s(14_480, rtt_s=0.05, rate_Bps=25e6)) == pytest.approx(
        14_480 / 25e6 + 0.025
    )
    # 16 MiB: round j = 6 sends 926,720 B < BDP, round j = 7 would send 1,853,440 B ≥ BDP:
    # the pipe is full after 7 round trips (1,838,960 B sent) and the rest goes at the rate
    big = 16 * 2**20
    sent = 14_480 * (2**7 - 1)
    assert float(tcp.transfer_s(big, rtt_s=0.05, rate_Bps=25e6)) == pytest.approx(
        7 * 0.05 + (big - sent) / 25e6 + 0.025
    )
    # what slow start adds over a full window
    steady = float(tcp.steady_transfer_s(2**20, rtt_s=0.05, rate_Bps=25e6))
    assert steady == pytest.approx(2**20 / 25e6 + 0.025)
    assert float(tcp.slow_start_s(2**20, rtt_s=0.05, rate_Bps=25e6)) == pytest.approx(t - steady)


def test_slow_start_vanishes_where_the_pipe_is_one_window() -> None:
    """A path whose bandwidth-delay product is below the initial window never waits a
    round: 1 Gbit/s at 0.1 ms is 12.5 KB < 14.48 KB."""
    assert float(tcp.slow_start_s(2**24, rtt_s=1e-4, rate_Bps=125e6)) == pytest.approx(0.0)


def test_idle_restart_halves_per_timeout() -> None:
    """RFC 2861 / Linux tcp_cwnd_restart: 800 segments idle 0.5 s at 50 ms RTT (RTO
    200 + 50 ms) halve twice to 200; ten seconds bring them to the initial 10."""
    w = tcp.idle_window_segments(800, np.array([0.0, 0.249, 0.5, 10.0]), 0.05)
    assert w.tolist() == [800.0, 800.0, 200.0, 10.0]


def test_back_to_back_operations_pay_the_longer_chain() -> None:
    """A 4-rank gloo ring of 1 MiB at 10 ms RTT and 200 Mbit/s: the 2(n − 1) = 6 receiver-
    ready round trips (6 × 10.5 = 63 ms) and the serialisation 2·3/4·1 MiB / 24.1 MB/s =
    65 ms overlap when operations follow each other: 65 ms each, against 96 ms alone."""
    rate = 200e6 / 8 * 1448 / 1500
    bandwidth = 1.5 * 2**20 / rate
    steady = float(tcp.steady_op_s(6 * 0.0105, bandwidth))
    assert steady == pytest.approx(bandwidth)
    assert float(tcp.back_to_back_s(0.096, steady, 10)) == pytest.approx(0.096 + 9 * steady)
    assert float(tcp.back_to_back_s(0.096, steady, 1)) == pytest.approx(0.096)
    assert float(tcp.back_to_back_s(0.096, steady, 0)) == 0.0
    # never above the lone price
    assert float(tcp.back_to_back_s(0.05, 0.08, 3)) == pytest.approx(0.15)


@given(
    sizes=st.lists(st.floats(1.0, 1e10), min_size=2, max_size=5),
    rtt=st.floats(1e-4, 0.4),
    rates=st.lists(st.floats(1e5, 1e11), min_size=2, max_size=4),
)
@settings(max_examples=60, deadline=None)
def test_transfer_time_monotone(sizes: list[float], rtt: float, rates: list[float]) -> None:
    """More bytes never arrive sooner; a faster path never delivers later; starting from the
    initial window never beats a full one."""
    s = np.sort(np.asarray(sizes))
    r = np.sort(np.asarray(rates))
    by_size = tcp.transfer_s(s, rtt_s=rtt, rate_Bps=r[0])
    assert np.all(np.diff(by_size) >= -1e-12)
    by_rate = tcp.transfer_s(s[-1], rtt_s=rtt, rate_Bps=r)
    assert np.all(np.diff(by_rate) <= 1e-12)
    assert np.all(
        tcp.transfer_s(s, rtt_s=rtt, rate_Bps=r[0])
        >= tcp.steady_transfer_s(s, rtt_s=rtt, rate_Bps=r[0]) - 1e-12
    )
