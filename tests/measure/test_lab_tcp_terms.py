"""Issue 22's lab questions (docs/lab.md, "Rates, back-to-back operations and slow start"),
each under a minute on 2 busy cores; tolerances from the spread measured there.

- Rates: gloo's all_reduce busbw follows the tbf rate; at 1.9 Gbit/s it runs well above
  the 0.96 Gb/s a channel-ladder rung would hold it to (NCCL's Hopper inter-node ladder has
  rungs at 0.96 and 1.92 Gb/s).
- Back to back: an all_reduce started alone costs the model's lone Gloo ring; back to back
  never below the pipelined bound (tcp.steady_op_s) nor above alone.
- Slow start: a fresh connection at 50 ms RTT takes several round trips more than its
  bytes at the rate; tcp.transfer_s prices the ramp.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bandwall.measure.lab import netns, tcp_terms
from tests.conftest import NEEDS_ROOT, lab_name, netns_names

pytestmark = [pytest.mark.lab, pytest.mark.quiet, NEEDS_ROOT]


@pytest.fixture
def runner(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(netns, "STATE_DIR", tmp_path / "labs")
    stem = {"test_rates": "trt", "test_back": "tov", "test_slow": "tss"}
    name = lab_name(next(v for k, v in stem.items() if request.node.name.startswith(k)))
    yield tcp_terms.Runner(name=name, workdir=tmp_path)
    assert not any(ns.startswith(f"bw-{name}-") for ns in netns_names())


def test_rates_follow_the_link_not_a_ladder(runner: tcp_terms.Runner) -> None:
    """16 MiB all_reduce, 2 ranks, veth + tbf. At 300 Mbit/s busbw is 0.85-1.00 of the
    rate (measured 0.95: the TCP payload share 0.956). At 1.9 Gbit/s the 2 busy cores begin
    to limit gloo (0.74 of the rate measured), yet it moves at least 1.2 × the 0.96 Gb/s ×
    0.956 a ladder rung would allow (measured 1.54 ×): no transport paces at a rung."""
    low, high = runner.rates(["300mbit", "1900mbit"], 16 << 20, 3, hosts=2)
    assert 0.85 <= low["busbw_Gbps"] / low["rate_Gbps"] <= 1.0, low
    assert high["ladder_Gbps"] == pytest.approx(0.96 * tcp_terms.VETH_PAYLOAD_SHARE)
    assert high["busbw_Gbps"] >= 1.2 * high["ladder_Gbps"], high


def test_back_to_back_between_the_pipelined_bound_and_alone(runner: tcp_terms.Runner) -> None:
    """1 MiB, 4 ranks, 10 ms RTT, 200 Mbit/s. Alone: between the pipelined bound and the
    model's Gloo ring with α as measured (α-β: every step's latency in series), within 15%
    (a loaded machine measured +2% of the α-β sum; a quiet one 75 ms, 23% under it, as TCP's
    window carries a step's bytes while the next step's latency runs: the α-β sum is an upper
    bound). Back to back: at least 0.85 of max(6 round trips, serialisation) (a quiet machine
    measured 67-69 ms against 65-66 ms; a loaded one 89-128 ms, the cores then limit) and
    under 2 × alone per operation, the spread measured under load (a quiet machine stays
    under 1.15 × alone; in CI, the lab tests on one worker beside a busy one, 89 ms against
    67 ms alone failed that bound, and 128 ms was measured before: the cores, not the
    network, set the chained time there)."""
    o = runner.overlap(0.005, 1 << 20, 4)
    assert 0.85 * o["model_back_to_back_s"] <= o["alone_s"] <= 1.15 * o["model_alone_s"], o
    assert o["back_to_back_s"] >= 0.85 * o["model_back_to_back_s"], o
    assert o["back_to_back_s"] < 2 * o["alone_s"], o


def test_slow_start_prices_a_fresh_burst(runner: tcp_terms.Runner) -> None:
    """Reno, 50 ms RTT (measured on the connection), 200 Mbit/s, 3 fresh connections per
    size. 256 KiB and 1 MiB take 4-5× their bytes at the rate (the rate-only model is
    below 0.4 of the measurement); the slow-start model is within −30%/+10% (measured −3%
    and −17%, repeats within ±8%)."""
    out = runner.bursts(0.025, [256 << 10, 1 << 20], "reno", 3)
    for r in out["rows"]:
        assert r["model_rate_only_s"] < 0.4 * r["fresh_s"], r
        assert 0.70 * r["fresh_s"] <= r["model_slow_start_s"] <= 1.10 * r["fresh_s"], r
