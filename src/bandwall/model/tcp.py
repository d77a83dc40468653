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
