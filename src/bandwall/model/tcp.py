"""TCP throughput of one or many streams: congestion control, socket buffers, host and NIC.

A TCP transfer over a link of round-trip time RTT and packet-loss probability p is limited, per
stream, by the smallest of:

- the congestion-control response to loss: Reno (Mathis et al. 1997), CUBIC (RFC 9438 §5,
  Eq. 5-7, with its Reno-friendly floor, §4.3) or BBR (rate-based: the bottleneck rate times
  the delivered fraction 1 − p while p stays below BBR v1's loss tolerance);
- the window the socket buffers allow in flight, divided by RTT;
- a per-flow cap of the provider (AWS: 5 Gb/s between placement groups, 10 Gb/s inside one)
  and of the host (one stream is processed by one core);

and the streams together by the NIC rate times the link's efficiency. Every function
broadcasts over numpy arrays. Rates are bytes per second, windows bytes, times seconds.

Sources: Mathis, Semke, Mahdavi, Ott, "The Macroscopic Behavior of the TCP Congestion
Avoidance Algorithm", CCR 27(3), 1997; RFC 9438 "CUBIC for Fast and Long-Distance Networks"
(Aug 2023) §4.2, §4.3, §4.6, §5.1-5.2; Cardwell et al., "BBR: Congestion-Based Congestion
Control", ACM Queue 14(5), 2016, and Linux net/ipv4/tcp_bbr.c (PROBE_BW gain 5/4); Linux
Documentation/networking/ip-sysctl.rst (tcp_rmem, tcp_wmem) and include/net/sock.h
(SK_WMEM_MAX); pytorch/gloo gloo/transport/tcp/pair.cc (SO_SNDBUF <= 32 MiB per send).
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from bandwall.errors import parse_choice

Numeric = float | npt.NDArray[Any]
FloatArray = npt.NDArray[np.float64]


class CongestionControl(StrEnum):
    """Linux congestion-control modules (net.ipv4.tcp_congestion_control)."""

    RENO = "reno"
    CUBIC = "cubic"
    BBR = "bbr"


def parse_congestion_control(text: str) -> CongestionControl:
    return parse_choice(CongestionControl, text, "congestion_control")


#: Mathis et al. (1997): BW = MSS/RTT · C/√p with C = √(3/2) when every segment is ACKed.
MATHIS_C = math.sqrt(1.5)
#: RFC 9438 §5.1: C = 0.4 segments/s³ (SHOULD); §4.6: β_cubic = 0.7.
CUBIC_C = 0.4
CUBIC_BETA = 0.7
#: RFC 9438 §5.2 Eq. 5-7: AVG_W_cubic = (C(3+β)/(4(1−β)))^¼ · RTT^¾ / p^¾ = 1.054 · RTT^¾/p^¾.
CUBIC_AVG_W_COEF = (CUBIC_C * (3 + CUBIC_BETA) / (4 * (1 - CUBIC_BETA))) ** 0.25
#: RFC 9438 §4.3 Eq. 3-4: the Reno-friendly AIMD window with α_cubic = 3(1−β)/(1+β):
#: sqrt(α(1+β)/(2(1−β)p)) = sqrt(3/(2p)), the same as Reno's.
CUBIC_RENO_FRIENDLY_COEF = math.sqrt(
    (3 * (1 - CUBIC_BETA) / (1 + CUBIC_BETA)) * (1 + CUBIC_BETA) / (2 * (1 - CUBIC_BETA))
)
#: BBR v1 probes at 5/4 of the estimated bottleneck rate (tcp_bbr.c PROBE_BW gain cycle); it
#: keeps the rate while the 5/4 probe still delivers the rate: 1.25(1 − p) >= 1, p <= 20%.
#: The patch cover letter gives 15% as the design point up to which it fills the path.
BBR_FULL_RATE_LOSS = 0.15
BBR_MAX_LOSS = 0.20

#: Linux defaults (ip-sysctl.rst; RHEL 9/10 and Ubuntu 22.04/24.04 kernels 5.14-6.8):
#: tcp_rmem max 6 MiB, tcp_wmem max 4 MiB, net.core.wmem_max = SK_WMEM_MAX = 212,992 B.
LINUX_TCP_RMEM_MAX_BYTES = 6 * 2**20
LINUX_TCP_WMEM_MAX_BYTES = 4 * 2**20
LINUX_CORE_WMEM_MAX_BYTES = 212_992
#: Autotuned sockets (NCCL leaves SO_SNDBUF/SO_RCVBUF alone unless NCCL_SOCKET_SNDBUF/RCVBUF
#: are set): in-flight data reaches the receive buffer, tcp_rmem max. Published single-flow
#: rates on cloud paths carry ~6.6 MB in flight (PCCL arXiv 2505.14065, 0.9 Gb/s over ~60 ms;
#: DT-FM 2022, 0.79 Gb/s at 67 ms), the same order as 6 MiB.
AUTOTUNED_WINDOW_BYTES = float(LINUX_TCP_RMEM_MAX_BYTES)
#: Gloo sets SO_SNDBUF = min(message, 32 MiB) on each send, which turns autotuning off and is
#: capped by net.core.wmem_max; the kernel doubles the value: 2 × 212,992 = 425,984 B.
GLOO_WINDOW_BYTES = float(2 * LINUX_CORE_WMEM_MAX_BYTES)
#: One TCP stream is handled by one core; iperf on EC2 reaches ~25 Gb/s with one flow and
#: needs several flows beyond that (secondary source: "AWS placement-group iperf" gist,
#: sciarrilli, summarised in /work/notes/wan-tcp.md §4).
HOST_STREAM_LIMIT_BPS = 25e9 / 8


def mathis_Bps(mss_bytes: Numeric, rtt_s: Numeric, loss: Numeric) -> FloatArray:
    """Reno's loss-limited rate MSS·C/(RTT·√p) (Mathis et al. 1997); infinite without loss.

    >>> round(float(mathis_Bps(1460, 0.02, 1e-4)) / 1e6, 3)  # MB/s at 20 ms, 0.01 % loss
    8.941
    """
    p = np.asarray(loss, dtype=np.float64)
    rtt = np.asarray(rtt_s, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rate = np.asarray(mss_bytes, dtype=np.float64) * MATHIS_C / (rtt * np.sqrt(p))
    return np.where((p > 0) & (rtt > 0), rate, np.inf)


def cubic_window_segments(rtt_s: Numeric, loss: Numeric) -> FloatArray:
    """CUBIC's average congestion window in segments under periodic loss p (RFC 9438):
    max(1.054·(RTT/p)^¾ (Eq. 5-7), √(3/(2p)) (Reno-friendly region, Eq. 3-4)).

    >>> [round(float(cubic_window_segments(0.1, p))) for p in (1e-2, 1e-4, 1e-6)]
    [12, 187, 5926]
    """
    p = np.asarray(loss, dtype=np.float64)
    rtt = np.asarray(rtt_s, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        cubic = CUBIC_AVG_W_COEF * (rtt / p) ** 0.75
        friendly = CUBIC_RENO_FRIENDLY_COEF / np.sqrt(p)
    return np.where(p > 0, np.maximum(cubic, friendly), np.inf)


def cubic_Bps(mss_bytes: Numeric, rtt_s: Numeric, loss: Numeric) -> FloatArray:
    """CUBIC's loss-limited rate: average window × MSS / RTT."""
    rtt = np.asarray(rtt_s, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rate = cubic_window_segments(rtt, loss) * np.asarray(mss_bytes, dtype=np.float64) / rtt
    return np.where(rtt > 0, rate, np.inf)


def bbr_delivered_share(loss: Numeric) -> FloatArray:
    """Share of the bottleneck rate BBR v1 sustains at random loss p: 1 − p up to 15 %, then
    falling linearly to 0 at 20 % where its 5/4 probe can no longer deliver the rate."""
    p = np.asarray(loss, dtype=np.float64)
    fade = np.clip((BBR_MAX_LOSS - p) / (BBR_MAX_LOSS - BBR_FULL_RATE_LOSS), 0.0, 1.0)
    result: FloatArray = (1 - p) * fade
    return result


def window_Bps(window_bytes: Numeric, rtt_s: Numeric) -> FloatArray:
    """At most one window in flight per round trip: window / RTT."""
    rtt = np.asarray(rtt_s, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore"):
        rate = np.asarray(window_bytes, dtype=np.float64) / rtt
    return np.where(rtt > 0, rate, np.inf)


def stream_Bps(
    cc: CongestionControl,
    *,
    mss_bytes: Numeric,
    rtt_s: Numeric,
    loss: Numeric,
    window_bytes: Numeric,
    per_flow_limit_Bps: Numeric = np.inf,
    host_limit_Bps: Numeric = HOST_STREAM_LIMIT_BPS,
) -> FloatArray:
    """What one stream carries: min(congestion control, window/RTT, per-flow, host).

    BBR has no loss-response term here; its loss shows in :func:`tcp_Bps` as a share of the
    bottleneck rate.
    """
    limit = np.minimum(window_Bps(window_bytes, rtt_s), per_flow_limit_Bps)
    limit = np.minimum(limit, host_limit_Bps)
    if cc is CongestionControl.RENO:
        return np.minimum(limit, mathis_Bps(mss_bytes, rtt_s, loss))
    if cc is CongestionControl.CUBIC:
        return np.minimum(limit, cubic_Bps(mss_bytes, rtt_s, loss))
    return np.asarray(limit, dtype=np.float64)


def tcp_Bps(
    cc: CongestionControl,
    *,
    streams: Numeric,
    link_Bps: Numeric,
    mss_bytes: Numeric,
    rtt_s: Numeric,
    loss: Numeric,
    window_bytes: Numeric,
    per_flow_limit_Bps: Numeric = np.inf,
    host_limit_Bps: Numeric = HOST_STREAM_LIMIT_BPS,
) -> FloatArray:
    """Aggregate rate of `streams` parallel streams over one link of `link_Bps` (already
    net of protocol efficiency): min(streams × per-stream rate, link rate [× BBR's share]).

    >>> cubic = CongestionControl.CUBIC
    >>> one = tcp_Bps(cubic, streams=1, link_Bps=1.25e9, mss_bytes=1448, rtt_s=0.065,
    ...               loss=0.0, window_bytes=6 * 2**20)
    >>> round(float(one) * 8 / 1e9, 2)  # Gb/s: window-limited, 6 MiB per 65 ms
    0.77
    """
    per_stream = stream_Bps(
        cc,
        mss_bytes=mss_bytes,
        rtt_s=rtt_s,
        loss=loss,
        window_bytes=window_bytes,
        per_flow_limit_Bps=per_flow_limit_Bps,
        host_limit_Bps=host_limit_Bps,
    )
    cap = np.asarray(link_Bps, dtype=np.float64)
    if cc is CongestionControl.BBR:
        cap = cap * bbr_delivered_share(loss)
    return np.minimum(np.asarray(streams, dtype=np.float64) * per_stream, cap)


# --- short transfers: slow start and back-to-back operations ----------------------------------

#: Linux's initial congestion window, 10 segments (RFC 6928; include/net/tcp.h TCP_INIT_CWND).
INITIAL_WINDOW_SEGMENTS = 10
#: Window growth per round trip in slow start: the sender adds a segment per segment acked
#: (RFC 5681 §3.1 with appropriate byte counting, RFC 3465), and Linux's receiver acks every
#: segment while it is in quick-ack mode at the start of a transfer, so the window doubles.
#: BBR's startup multiplies its pacing rate by 2/ln 2 ≈ 2.89 per round on a bandwidth
#: estimate that itself lags a round (tcp_bbr.c, bbr_high_gain), delivering about as much
#: per round as doubling does: the same law is used for both.
SLOW_START_GROWTH = 2.0
#: Rounds of slow start priced at most (2^40 segments: far past any window).
_MAX_ROUNDS = 48


def transfer_s(
    size_bytes: Numeric,
    *,
    rtt_s: Numeric,
    rate_Bps: Numeric,
    mss_bytes: Numeric = 1448.0,
    window_bytes: Numeric = np.inf,
    initial_window_segments: Numeric = INITIAL_WINDOW_SEGMENTS,
    growth: float = SLOW_START_GROWTH,
) -> FloatArray:
    """Seconds from the first byte sent to the last byte received, on a connection that
    starts from the initial window: a new one, or one idle for longer than its
    retransmission timeout (Linux's tcp_slow_start_after_idle = 1, RFC 5681 §4.1).

    Round j (j = 0, 1, …) may send w_j = min(IW·MSS·growth^j, window) bytes, one round trip
    after the previous round's first segment; once w_j reaches the path's bandwidth-delay
    product (rate × RTT) the pipe is full and the rest goes at `rate` (RFC 5681 §3.1;
    Cardwell, Savage & Anderson, "Modeling TCP latency", INFOCOM 2000, §2). The last byte
    arrives RTT/2 after it leaves. A connection already past slow start takes
    size/min(rate, window/RTT) + RTT/2 (:func:`steady_transfer_s`).

    >>> round(float(transfer_s(14_480, rtt_s=0.05, rate_Bps=25e6)) * 1e3, 2)  # 1 round, ms
    25.58
    >>> round(float(transfer_s(2**20, rtt_s=0.05, rate_Bps=25e6)) * 1e3)  # 7 rounds, ms
    330
    """
    size = np.asarray(size_bytes, dtype=np.float64)
    rtt = np.asarray(rtt_s, dtype=np.float64)
    rate = np.minimum(
        np.asarray(rate_Bps, dtype=np.float64), np.asarray(window_bytes, dtype=np.float64) / rtt
    )
    win = np.asarray(window_bytes, dtype=np.float64)
    first = np.asarray(initial_window_segments, dtype=np.float64) * np.asarray(
        mss_bytes, dtype=np.float64
    )
    size, rtt, rate, win, first = np.broadcast_arrays(size, rtt, rate, win, first)
    sent = np.zeros(size.shape)  # bytes sent before the current round
    done = np.zeros(size.shape, dtype=bool)
    out = np.zeros(size.shape)
    for j in range(_MAX_ROUNDS):
        cwnd = np.minimum(first * growth**j, win)
        full = cwnd >= rate * rtt  # the pipe is full from this round on
        left = size - sent
        # the rest fits in this round, or the pipe is full: it leaves at the path's rate
        ends = ~done & ((left <= cwnd) | full)
        out = np.where(ends, j * rtt + left / rate + rtt / 2, out)
        done |= ends
        if bool(np.all(done)):
            break
        sent = sent + cwnd
    return np.where(size > 0, out, 0.0)


#: Linux's minimum retransmission timeout (include/net/tcp.h TCP_RTO_MIN, 200 ms).
RTO_MIN_S = 0.2


def idle_window_segments(
    window_segments: Numeric,
    idle_s: Numeric,
    rtt_s: Numeric,
    initial_window_segments: Numeric = INITIAL_WINDOW_SEGMENTS,
) -> FloatArray:
    """The congestion window a connection resumes with after `idle_s` of silence: halved
    for every retransmission timeout that passed, never below the initial window (RFC 2861
    §3; Linux tcp_cwnd_restart with tcp_slow_start_after_idle = 1). The timeout is taken as
    200 ms + RTT (TCP_RTO_MIN plus the smoothed RTT, the variance of a quiet path ~0).

    >>> [float(w) for w in idle_window_segments(800, [0.0, 0.5, 10.0], 0.05)]
    [800.0, 200.0, 10.0]
    """
    rto = RTO_MIN_S + np.asarray(rtt_s, dtype=np.float64)
    halvings = np.floor(np.maximum(np.asarray(idle_s, dtype=np.float64), 0.0) / rto)
    shrunk = np.asarray(window_segments, dtype=np.float64) * np.exp2(-np.minimum(halvings, 64))
    result: FloatArray = np.maximum(shrunk, np.asarray(initial_window_segments, dtype=np.float64))
    return result


def steady_transfer_s(
    size_bytes: Numeric, *, rtt_s: Numeric, rate_Bps: Numeric, window_bytes: Numeric = np.inf
) -> FloatArray:
    """The same transfer on a connection already at its full window: size/min(rate,
    window/RTT) + RTT/2."""
    rtt = np.asarray(rtt_s, dtype=np.float64)
    rate = np.minimum(
        np.asarray(rate_Bps, dtype=np.float64), np.asarray(window_bytes, dtype=np.float64) / rtt
    )
    result: FloatArray = np.asarray(size_bytes, dtype=np.float64) / rate + rtt / 2
    return result


def slow_start_s(
    size_bytes: Numeric,
    *,
    rtt_s: Numeric,
    rate_Bps: Numeric,
    mss_bytes: Numeric = 1448.0,
    window_bytes: Numeric = np.inf,
    initial_window_segments: Numeric = INITIAL_WINDOW_SEGMENTS,
) -> FloatArray:
    """What starting from the initial window adds to a transfer: :func:`transfer_s` minus
    :func:`steady_transfer_s` (≥ 0). It grows with the round trips slow start needs to fill
    the pipe, about log2(rate·RTT / (IW·MSS)), so it matters for short bursts at high RTT.

    >>> round(float(slow_start_s(2**20, rtt_s=0.05, rate_Bps=25e6)) * 1e3)  # ms
    264
    """
    start = transfer_s(
        size_bytes,
        rtt_s=rtt_s,
        rate_Bps=rate_Bps,
        mss_bytes=mss_bytes,
        window_bytes=window_bytes,
        initial_window_segments=initial_window_segments,
    )
    full = steady_transfer_s(size_bytes, rtt_s=rtt_s, rate_Bps=rate_Bps, window_bytes=window_bytes)
    result: FloatArray = np.maximum(start - full, 0.0)
    return result


def steady_op_s(latency_chain_s: Numeric, bandwidth_s: Numeric) -> FloatArray:
    """Per-operation time of identical collectives issued back to back over TCP once the
    pipeline is full: max(latency chain, bandwidth term).

    A lone Gloo ring waits for a receiver-ready round trip before each segment pair moves
    (gloo/transport/tcp/pair.cc, model/collectives.py); issued back to back, a rank that has
    finished posts the next operation's receives while its neighbours still send, so the
    next operation's handshakes overlap this one's transfers and only the longer of the two
    chains paces the sequence: the 2(n − 1) round trips of the ring, or its 2(n − 1)/n · S/B
    of serialisation (the lab, docs/lab.md: 1 MiB at 10 ms RTT, 67 ms back to back against
    96 ms alone).
    """
    result: FloatArray = np.maximum(
        np.asarray(latency_chain_s, dtype=np.float64), np.asarray(bandwidth_s, dtype=np.float64)
    )
    return result


def back_to_back_s(single_s: Numeric, steady_s: Numeric, ops: Numeric) -> FloatArray:
    """Total seconds of `ops` identical operations issued back to back: the first at its
    lone price, the others at the pipelined one (never above the lone price)."""
    n = np.maximum(np.asarray(ops, dtype=np.float64), 0.0)
    one = np.asarray(single_s, dtype=np.float64)
    steady = np.minimum(np.asarray(steady_s, dtype=np.float64), one)
    result: FloatArray = np.where(n > 0, one + np.maximum(n - 1.0, 0.0) * steady, 0.0)
    return result
