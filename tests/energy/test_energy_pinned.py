"""Energy terms pinned against hand-computed cases and their bounds (docs/testing.md).

The linear power model is LLMCarbon's (Faiz et al. ICLR 2024): P = idle + (TDP − idle)·u with
u = min(1, flop_util/0.6 + 0.3·hbm_util); waits draw u = 0.15 (bandwall.model.energy). The
GPU below idles at 70 W with a 700 W TDP, so the range is 630 W and waiting draws
70 + 0.15·630 = 164.5 W.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bandwall.model import energy

IDLE, TDP = 70.0, 700.0
WAIT = 70.0 + 0.15 * 630.0  # 164.5 W
EXACT = 1e-12

finite = st.floats(min_value=-10.0, max_value=10.0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(flop_util=finite, hbm_util=finite, share=finite)
def test_power_stays_between_idle_and_tdp(flop_util: float, hbm_util: float, share: float) -> None:
    """Whatever the utilisations (measured ones can be noisy, beyond 1 or below 0), the
    share of the idle-to-TDP range is a share, the board draws between idle and TDP, and a
    busy/wait mix lies between its two powers."""
    u = float(energy.power_utilisation(flop_util, hbm_util))
    assert 0.0 <= u <= 1.0
    p = float(energy.gpu_power_W(IDLE, TDP, flop_util))
    assert IDLE <= p <= TDP
    mix = float(energy.busy_wait_power_W(IDLE, TDP, share, 1.0))
    assert WAIT <= mix <= TDP


def test_utilisation_clips_at_both_ends() -> None:
    # 0.9 MFU: 0.9/0.6 = 1.5, capped at 1 (TDP); negative inputs floor at 0 (idle)
    assert float(energy.power_utilisation(0.9, 0.0)) == 1.0
    assert float(energy.power_utilisation(0.3, 0.5)) == pytest.approx(0.65)  # 0.5 + 0.15
    assert float(energy.power_utilisation(-0.3, 0.0)) == 0.0
    assert float(energy.gpu_power_W(IDLE, TDP, -0.5)) == IDLE


def test_busy_share_clips_at_both_ends() -> None:
    # a share above 1 is all busy (TDP at u = 1), below 0 all waiting
    assert float(energy.busy_wait_power_W(IDLE, TDP, 1.5, 1.0)) == pytest.approx(TDP)
    assert float(energy.busy_wait_power_W(IDLE, TDP, -0.5, 1.0)) == pytest.approx(WAIT)
    # a quarter busy at u = 0.5 (385 W), the rest waiting: 0.25·385 + 0.75·164.5 = 219.625 W
    assert float(energy.busy_wait_power_W(IDLE, TDP, 0.25, 0.5)) == pytest.approx(219.625)


def test_two_endpoints_need_a_switch() -> None:
    """Al-Fares et al. 2008: one radix-64 switch serves 2..64 endpoints, two tiers 65..2048."""
    assert energy.fat_tree_tiers(np.array([0, 1, 2, 3])).tolist() == [0, 0, 1, 1]


def test_one_tier_port_power_by_hand() -> None:
    # 1 tier: NIC 25 W + 2·1 − 1 = 1 switch port at 12 W + transceivers at both ends 2 × 10 W
    assert float(energy.network_W_per_port(25.0, 10.0, 12.0, 1)) == pytest.approx(57.0)
    # 3 tiers: NIC + 5 ports × 12 + 6 transceivers × 10 = 25 + 60 + 60
    assert float(energy.network_W_per_port(25.0, 10.0, 12.0, 3)) == pytest.approx(145.0)


def test_joules_per_token_by_hand() -> None:
    # 700 W at 1,000 tokens/s: 0.7 J/token; at half a token per second: 1,400 J/token
    assert float(energy.joules_per_token(700.0, 1000.0)) == pytest.approx(0.7, rel=EXACT)
    assert float(energy.joules_per_token(700.0, 0.5)) == pytest.approx(1400.0, rel=EXACT)
    # nothing produced: infinite, whether or not power is drawn, and without warnings
    assert float(energy.joules_per_token(700.0, 0.0)) == math.inf
    assert float(energy.joules_per_token(0.0, 0.0)) == math.inf


def test_tokens_per_kwh_by_hand() -> None:
    # 3.6e6 J per kWh: at 0.5 J/token 7.2e6 tokens; at 2 J/token 1.8e6
    assert float(energy.tokens_per_kWh(0.5)) == pytest.approx(7.2e6, rel=EXACT)
    assert float(energy.tokens_per_kWh(2.0)) == pytest.approx(1.8e6, rel=EXACT)
    assert float(energy.tokens_per_kWh(0.0)) == math.inf  # free tokens, quietly


PROFILE = energy.EnergyProfile(
    idle_W=IDLE,
    tdp_W=TDP,
    host_W_per_gpu=100.0,
    network_W_per_gpu=20.0,
    pue=1.2,
    g_co2_per_kWh=400.0,
    price_per_kWh_usd=0.1,
)


def test_training_power_by_hand() -> None:
    """A 2 s step with 1 s of compute at 30 TFLOP/s of a 100 TFLOP/s peak: flop_util 0.3,
    u = 0.3/0.6 = 0.5, busy 70 + 630·0.5 = 385 W; half the step waits at 164.5 W: 274.75 W.
    Host 100 W and network 20 W: 394.75 W of IT power; PUE 1.2: 473.7 W."""
    got = energy.training_power_W(
        PROFILE, step_s=2.0, compute_s=1.0, flops_per_gpu_step=30e12, peak_flops=100e12
    )
    assert float(got) == pytest.approx(473.7, rel=EXACT)


def test_training_power_of_a_step_without_compute() -> None:
    """No compute (a pure communication step, or an empty one): the GPU waits all along:
    (164.5 + 100 + 20) × 1.2 = 341.4 W, with no division warning."""
    for step in (1.0, 0.0):
        got = energy.training_power_W(
            PROFILE, step_s=step, compute_s=0.0, flops_per_gpu_step=0.0, peak_flops=100e12
        )
        assert float(got) == pytest.approx(341.4, rel=EXACT)


def test_job_energy_reports_the_power_it_was_given() -> None:
    # 500 W × 4 GPUs × 1,800 s = 3.6e6 J = 1 kWh; 1e6 tokens: 3.6 J/token
    out = energy.job_energy(PROFILE, power_W_per_gpu=500.0, gpus=4, seconds=1800.0, tokens=1e6)
    assert float(out["energy_kwh"]) == pytest.approx(1.0, rel=EXACT)
    assert float(out["joules_per_token"]) == pytest.approx(3.6, rel=EXACT)
    assert float(out["power_W_per_gpu"]) == 500.0
    # a single token carries the whole 3.6e6 J
    one = energy.job_energy(PROFILE, power_W_per_gpu=500.0, gpus=4, seconds=1800.0, tokens=1)
    assert float(one["joules_per_token"]) == pytest.approx(3.6e6, rel=EXACT)


def test_job_energy_without_tokens_or_time() -> None:
    """No tokens: infinite J/token and no tokens per kWh. No time either: 0 kWh, still
    infinite J/token, and the power per GPU as given. No floating-point warnings."""
    idle = energy.job_energy(PROFILE, power_W_per_gpu=500.0, gpus=4, seconds=1800.0, tokens=0)
    assert float(idle["joules_per_token"]) == math.inf
    assert float(idle["tokens_per_kwh"]) == 0.0
    empty = energy.job_energy(PROFILE, power_W_per_gpu=500.0, gpus=4, seconds=0.0, tokens=0)
    assert float(empty["energy_kwh"]) == 0.0
    assert float(empty["joules_per_token"]) == math.inf
    assert float(empty["power_W_per_gpu"]) == 500.0
