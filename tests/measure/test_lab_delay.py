"""The delay line against what it is told, and the model's latency and TCP terms against the
delay line (docs/lab.md has the full table; these are its cheapest, most telling rows).

Sizes are chosen so that the network, not the 2 shared cores, sets the time: a 4 KiB
all_reduce costs ~5 ms of CPU here at zero delay (LAB-NOTES), so small messages are only
asserted on at 50 ms RTT, where the wire takes 300 ms.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bandwall.measure.lab import validate
from tests.conftest import NEEDS_ROOT, lab_name

TV = lab_name("tv")
pytestmark = [pytest.mark.lab, pytest.mark.quiet, NEEDS_ROOT]


@pytest.fixture
def bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> validate.Bench:
    from bandwall.measure.lab import netns

    monkeypatch.setattr(netns, "STATE_DIR", tmp_path / "labs")
    return validate.Bench(rate="200mbit", hosts=4, cc="reno", name=TV, workdir=tmp_path)


def _delaylines() -> int:
    n = 0
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                args = (p / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            n += any(a.endswith(b"lab/delayline.py") for a in args) and TV.encode() in args
    return n


def test_delay_and_jitter_are_what_was_asked(bench: validate.Bench) -> None:
    """RTT = 2 × delay + the lab's own cost. Jitter adds an Exp(J) delay on each direction,
    so the round trips must look like the jitter-free ones plus a Gamma(2, J): their
    quartiles within 0.35 J of that convolution. No jitter, or half or twice the jitter,
    misses by 0.8-1.7 J. 1,050 jittered round trips put the sampling error of a quartile at
    ~0.3 ms (0.08 J).

    The lab's own cost is a userspace delay line on the 2 shared cores: ~0.2-0.5 ms when the
    machine is quiet, several ms at a load of 9, and it drifts within seconds (a run at load
    9 saw the upper quartile 1.4 ms above a baseline taken just before). So the references
    are measured in the same stretch of time, interleaved: three bursts of jitter-free and
    jittered round trips, alternating, pooled. Their tolerance adds the drift measured
    between the jitter-free bursts at that quartile to 0.35 J (0.25 J until CI on ceef1c8
    missed it by 0.30 J at the lower quartile, under load with the drift the bursts saw at
    0.06 ms): measured, not guessed. The
    delay is checked as the difference between round trips at 2 ms and at 0.5 ms (3 ms,
    whatever the lab's own cost). The delay line goes away with the lab.
    """
    jitter_s = 0.004
    short = np.array(bench.ping(0.0005, 0.0, count=100))
    plain_bursts, jittered = [], []
    for _ in range(3):
        plain_bursts.append(np.array(bench.ping(0.002, 0.0, count=150)))
        jittered.append(np.array(bench.ping(0.002, jitter_s, count=350)))
    plain, jittery = np.concatenate(plain_bursts), np.concatenate(jittered)

    def drift(q: float) -> float:
        marks = [float(np.percentile(b, q)) for b in plain_bursts]
        return max(marks) - min(marks)

    delay = float(np.median(plain) - np.median(short))  # 2 × (2 - 0.5) ms asked
    assert abs(delay - 0.003) <= 0.0005 + drift(50), (delay, drift(50))
    assert float(np.min(plain)) >= 0.004  # never faster than the delay asked
    rng = np.random.default_rng(0)
    expected = rng.choice(plain, 200_000) + rng.gamma(2.0, jitter_s, 200_000)
    for q in (25, 50, 75):
        got, want = np.percentile(jittery, q), np.percentile(expected, q)
        assert abs(got - want) <= 0.35 * jitter_s + drift(q), (q, got, want, drift(q))
    assert _delaylines() == 0


def test_alpha_and_all_reduce_against_the_model(bench: validate.Bench) -> None:
    """α (a 1-element send/recv) within 15% at 10 and 50 ms RTT; all_reduce where the
    bandwidth term dominates within 15%. Where latency dominates, gloo pays a round trip per
    ring step (its receiver-ready handshake), twice a one-way α per step: the model's Gloo ring
    must be within 15% there, and the measurement twice the one-way-α ring."""
    floor = bench.ring(0.0, [4096], iters=3, pings=20)
    assert floor["cc"] == "reno"
    rate = 0.2
    cases = {10.0: 4 << 20, 50.0: 16 << 20}
    quiet_floor_s = floor["one_way_low_s"]
    for rtt_ms, big in cases.items():
        # the lab's own cost measured again just before each case, and the quieter of the
        # two kept: CI once saw a floor run's lower quartile at ~1 ms (load on the 2 cores)
        # where the 10 ms run just after it sat 0.12 ms above its delay, a 17.7% miss
        again = bench.ring(0.0, [4096], iters=1, pings=40)
        quiet_floor_s = min(quiet_floor_s, again["one_way_low_s"])
        got = bench.ring(rtt_ms / 2e3, [4096, big], iters=2, pings=20)
        link = validate.LabLink(rate, rtt_ms / 2e3, floor["one_way_s"])
        # α on both sides from the quieter quarter of the ping-pongs: other work on the 2
        # cores adds its own tail to a run, and the floor run is not this run
        quiet = validate.LabLink(rate, rtt_ms / 2e3, quiet_floor_s)
        alpha = validate.error(validate.predict_one_way_s(quiet), got["one_way_low_s"])
        assert abs(alpha) <= 0.15, (rtt_ms, got["one_way_low_s"], alpha)
        bulk = validate.predict_all_reduce_s(link, big, 4)
        assert abs(validate.error(bulk, got["all_reduce_s"][big])) <= 0.15, (rtt_ms, got)
        if rtt_ms == 50.0:
            small = got["all_reduce_s"][4096]
            model = validate.predict_all_reduce_s(link, 4096, 4)
            assert abs(validate.error(model, small)) <= 0.15, (small, model)
            one_way_ring = 2 * (4 - 1) * link.alpha_s  # the α-β ring's 2(n−1) one-way steps
            assert 1.7 <= small / one_way_ring <= 2.3, small / one_way_ring


def test_window_bound_streams_and_their_gain(bench: validate.Bench) -> None:
    """At 50 ms RTT a stream whose sender sets SO_SNDBUF = 212,992 B (Gloo on a kernel with
    the old net.core.wmem_max) is window-bound: the model's min(k × 2 × 212,992 B / RTT, link)
    predicts 1, 2 and 4 streams within 25%. The kernel's send-buffer accounting lets each
    stream put 0.9-1.25x the doubled buffer into flight, and that share differs from stream to
    stream and run to run (CI once saw 7.8 MB/s for one stream and 20.6 MB/s for two), so the
    band is the model's window's, not one measured stream's times k."""
    got = bench.streams(0.025, [1, 2, 4], sndbuf_bytes=212_992, seconds=2.0)
    link = validate.LabLink(0.2, 0.025, 0.0002, window_bytes=2 * 212_992)
    for k in (1, 2, 4):
        err = validate.error(validate.predict_stream_Bps(link, k), got[k])
        assert abs(err) <= 0.25, (k, got, err)
    assert got[2] >= 1.6 * got[1]  # the gain is real, not noise
    assert got[4] >= 0.8 * 0.2e9 / 8  # four windows fill the 200 Mb/s link


def test_loss_bound_streams_follow_mathis(bench: validate.Bench) -> None:
    """0.1% random loss at 50 ms RTT, 4 streams: Mathis et al. per stream, times 4. One
    stream swings ±25% between runs (a few dozen loss events), four average out. 20 s of
    measurement (~60 loss events): 8 s (~25) fell outside 25% in about one CI run in eight
    (-27.1% once), with no change to the lab or the model.

    Mathis' rate is inversely proportional to the RTT, and the delay line is a userspace
    process on the 2 shared cores: under load it adds its own queueing to the 50 ms asked
    for (a run at load 3.3 fell outside 25%). So the prediction uses the RTT measured on the
    lab just before, with the same delay and no loss: a self-measured baseline."""
    bench.rate = "100mbit"
    rtt_s = float(np.median(bench.ping(0.025, 0.0, count=40)))
    assert 0.050 <= rtt_s <= 0.065, rtt_s
    got = bench.streams(0.025, [4], loss=0.001, warmup_s=2.0, seconds=20.0)
    window = validate.autotuned_window_bytes()
    link = validate.LabLink(0.1, rtt_s / 2, 0.0, loss=0.001, window_bytes=window)
    err = validate.error(validate.predict_stream_Bps(link, 4), got[4])
    assert abs(err) <= 0.25, (got, err, rtt_s)
