"""Energy terms: GPU, host and network power, facility overhead, cost and CO2.

A GPU's activity u combines how busy its tensor cores and its memory are,

    u = min(1, flop_util / (FLOP_UTIL_AT_TDP · clock) + HBM_POWER_WEIGHT · hbm_util)

(`clock`: the sustained clock under a power cap, so a compute-bound kernel still reaches
u = 1), and the board draws

    P_gpu = min(P_limit, P_idle + (TDP - P_idle) · curve(u))

where `curve` is the GPU family's measured power curve (catalog/data/power.toml [[curve]]:
piecewise linear through published (activity, power) points; linear when no curve is
measured) and P_limit the power cap (`--power-cap-w`, MLPerf MaxQ) or the TDP. Compute-bound
training runs at the limit, memory-bound decoding draws a fraction of it, and time spent
waiting on the network draws WAIT_UTILISATION. The server around the GPUs (CPUs, DRAM,
NVSwitch, fans, power-supply loss) and the scale-out network (NIC, transceivers, switch ports)
add per-GPU watts; the facility multiplies IT power by its PUE. Sources and dates of every
figure are in ``catalog/data/power.toml`` (`bandwall catalog power`).

All functions are pure and broadcast over numpy arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bandwall.model.compute.rates import sustained_clock_factor

#: Joules in a kilowatt-hour.
J_PER_KWH = 3.6e6
#: Share of dense peak FLOP/s at which a GPU reaches its TDP. Large GEMMs sustain 0.8 of peak
#: and are then power-capped (cuBLAS/MAMF measurements in catalog/data/gpu_perf.toml run at the
#: power limit); Megatron/NeMo training at 0.4-0.55 MFU draws 85-95 % of TDP (MLPerf Training
#: v4.0 power: 972 W per H100 system-wide for GPT-3 on 512 GPUs, ~640 W of it the GPU).
#: Set from those sources, not fitted (docs/energy.md).
FLOP_UTIL_AT_TDP = 0.6
#: Share of the idle-to-TDP range that streaming HBM at its full rate draws with the SMs
#: otherwise idle: decoding on H200 draws 137-300 W of 700 W at ~80 % of peak bandwidth
#: (Ma et al. 2026, "The Illusion of Power Capping in LLM Decode", arXiv 2605.11999), i.e.
#: u = 0.10-0.36; the midpoint over 0.8 is 0.3. Not fitted.
HBM_POWER_WEIGHT = 0.3
#: Utilisation of a GPU waiting on a collective, a pipeline bubble or a network hop: NCCL's
#: kernels poll with a few SMs and the clocks stay up (estimate: 15 % of the idle-to-TDP range).
WAIT_UTILISATION = 0.15
#: Ports a non-blocking folded-Clos switch of radix k gives per tier: one tier serves k
#: endpoints, two serve k²/2, three k³/4 (Al-Fares et al., SIGCOMM 2008).
DEFAULT_SWITCH_RADIX = 64


#: A power curve: (activity, share of the idle-to-TDP range) points, increasing.
Curve = tuple[tuple[float, float], ...]
#: No measured curve: power linear in activity between idle and TDP (LLMCarbon, Faiz et al.
#: ICLR 2024).
LINEAR: Curve = ((0.0, 0.0), (1.0, 1.0))


def power_utilisation(flop_util: Any, hbm_util: Any, clock: Any = 1.0) -> Any:
    """Activity of a GPU at `flop_util` (achieved / dense peak FLOP/s) and `hbm_util`
    (achieved / peak HBM bandwidth); `clock` is the sustained clock factor under a power cap.

    >>> float(power_utilisation(0.6, 0.0)), float(power_utilisation(0.0, 0.5))
    (1.0, 0.15)
    """
    flops = np.asarray(flop_util) / (FLOP_UTIL_AT_TDP * np.asarray(clock))
    # clipped to [0, 1] (np.minimum/np.maximum: np.clip costs microseconds per call)
    return np.minimum(1.0, np.maximum(0.0, flops + HBM_POWER_WEIGHT * np.asarray(hbm_util)))


def curve_share(curve: Curve, utilisation: Any) -> Any:
    """Share of the idle-to-TDP range the curve gives at an activity in [0, 1].

    >>> float(curve_share(LINEAR, 0.25)), float(curve_share(((0, 0), (0.2, 0.5), (1, 1)), 0.1))
    (0.25, 0.25)
    """
    u = np.minimum(1.0, np.maximum(0.0, np.asarray(utilisation, dtype=np.float64)))
    xs, ys = zip(*curve, strict=True)
    return np.interp(u, xs, ys)


def gpu_power_W(
    idle_W: Any,
    tdp_W: Any,
    utilisation: Any,
    *,
    curve: Curve = LINEAR,
    limit_W: Any = None,
) -> Any:
    """Board power at an activity in [0, 1]: the curve between idle and TDP, never above the
    power limit.

    >>> float(gpu_power_W(70.0, 700.0, 0.5)), float(gpu_power_W(70.0, 700.0, 1.0, limit_W=450))
    (385.0, 450.0)
    """
    idle, tdp = np.asarray(idle_W), np.asarray(tdp_W)
    demand = idle + (tdp - idle) * curve_share(curve, utilisation)
    return demand if limit_W is None else np.minimum(demand, np.asarray(limit_W))


def busy_wait_power_W(
    idle_W: Any,
    tdp_W: Any,
    busy_share: Any,
    busy_utilisation: Any,
    *,
    curve: Curve = LINEAR,
    limit_W: Any = None,
) -> Any:
    """Average board power when a share of the time runs at `busy_utilisation` and the rest
    waits (communication, bubbles, hops) at WAIT_UTILISATION."""
    share = np.minimum(1.0, np.maximum(0.0, np.asarray(busy_share, dtype=np.float64)))
    kw: dict[str, Any] = {"curve": curve, "limit_W": limit_W}
    busy = gpu_power_W(idle_W, tdp_W, busy_utilisation, **kw)
    wait = gpu_power_W(idle_W, tdp_W, WAIT_UTILISATION, **kw)
    return share * busy + (1.0 - share) * wait


def fat_tree_tiers(endpoints: Any, radix: int = DEFAULT_SWITCH_RADIX) -> Any:
    """Switch tiers a non-blocking fat tree needs for `endpoints` NIC ports (0: none, the job
    fits in one node and uses no scale-out port).

    >>> [int(t) for t in fat_tree_tiers([1, 64, 65, 2048, 2049])]
    [0, 1, 2, 2, 3]
    """
    e = np.asarray(endpoints, dtype=np.float64)
    return np.where(
        e <= 1, 0.0, np.where(e <= radix, 1.0, np.where(e <= radix * radix / 2, 2.0, 3.0))
    )


def network_W_per_port(
    nic_W: Any,
    optics_W: Any,
    switch_W_per_port: Any,
    tiers: Any,
    *,
    cpo_optics_W: Any = None,
) -> Any:
    """Watts one scale-out endpoint costs in an L-tier fat tree: its NIC, the 2L-1 switch ports
    its traffic owns (one down-port per tier, one up-port per tier below the top), and a
    transceiver at each end of its L links (the NIC end is always pluggable; with co-packaged
    optics the switch ends draw `cpo_optics_W`).

    >>> float(network_W_per_port(25.0, 10.0, 12.0, 2))
    101.0
    """
    t = np.asarray(tiers, dtype=np.float64)
    ports = np.maximum(2 * t - 1, 0.0)
    switch_optics = optics_W if cpo_optics_W is None else cpo_optics_W
    per_port = (
        np.asarray(nic_W) + ports * np.asarray(switch_W_per_port) + np.asarray(optics_W)
    ) + ports * np.asarray(switch_optics)
    return np.where(t > 0, per_port, 0.0)


def facility_power_W(it_W: Any, pue: Any) -> Any:
    """Power drawn from the grid: IT power times PUE (cooling, power conversion, lighting)."""
    return np.asarray(it_W) * np.asarray(pue)


def energy_kWh(power_W: Any, seconds: Any) -> Any:
    """Energy of a steady draw over a duration.

    >>> float(energy_kWh(1000.0, 3600.0))
    1.0
    """
    return np.asarray(power_W) * np.asarray(seconds) / J_PER_KWH


def joules_per_token(power_W: Any, tokens_per_s: Any) -> Any:
    """Energy per token at a steady rate; infinite when nothing is produced."""
    rate = np.asarray(tokens_per_s, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(rate > 0, np.asarray(power_W) / rate, np.inf)


def tokens_per_kWh(j_per_token: Any) -> Any:
    """Tokens one kilowatt-hour produces.

    >>> float(tokens_per_kWh(0.36))
    10000000.0
    """
    j = np.asarray(j_per_token, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(j > 0, J_PER_KWH / j, np.inf)


def energy_cost_usd(kwh: Any, price_per_kWh_usd: Any) -> Any:
    return np.asarray(kwh) * np.asarray(price_per_kWh_usd)


def co2_kg(kwh: Any, g_co2_per_kWh: Any) -> Any:
    """Location-based emissions: kWh × grid intensity.

    >>> float(co2_kg(1000.0, 480.0))
    480.0
    """
    return np.asarray(kwh) * np.asarray(g_co2_per_kWh) / 1000.0


@dataclass(frozen=True)
class EnergyProfile:
    """What one GPU slot of a cluster draws besides the GPU's own utilisation, and where the
    electricity comes from. Built by `bandwall.planning` from catalog/data/power.toml and the
    request's overrides."""

    idle_W: float
    tdp_W: float
    host_W_per_gpu: float
    network_W_per_gpu: Any
    """NIC, optics and switch share per GPU (NICs per node / GPUs per node ports)."""
    pue: float
    g_co2_per_kWh: float
    price_per_kWh_usd: float
    power_cap_W: float | None = None
    """Board power limit (nvidia-smi -pl, MLPerf MaxQ); None: the TDP."""
    curve: Curve = LINEAR
    """The GPU family's measured power curve (power.toml [[curve]])."""

    @property
    def limit_W(self) -> float:
        """What the board may draw: the cap when below the TDP."""
        cap = self.power_cap_W
        return min(self.tdp_W, cap) if cap else self.tdp_W

    @property
    def clock(self) -> float:
        """Sustained clock factor of compute-bound kernels under the cap (rates model)."""
        if self.limit_W >= self.tdp_W:
            return 1.0
        return float(sustained_clock_factor(self.limit_W, self.tdp_W))

    def it_W(self, gpu_W: Any) -> Any:
        """IT power per GPU slot: board + host share + network share."""
        return np.asarray(gpu_W) + self.host_W_per_gpu + np.asarray(self.network_W_per_gpu)

    def board_W(self, flop_util: Any, hbm_util: Any, busy_share: Any = 1.0) -> Any:
        """Board power at these utilisations, waiting for the rest of the time."""
        u = power_utilisation(flop_util, hbm_util, self.clock)
        return busy_wait_power_W(
            self.idle_W, self.tdp_W, busy_share, u, curve=self.curve, limit_W=self.limit_W
        )


def training_power_W(
    profile: EnergyProfile,
    *,
    step_s: Any,
    compute_s: Any,
    flops_per_gpu_step: Any,
    peak_flops: float,
) -> Any:
    """Average facility power per GPU over a training step: the compute part at the FLOP
    utilisation it achieves, exposed communication, bubbles and straggler waits at
    WAIT_UTILISATION; plus host, network and PUE."""
    step = np.asarray(step_s, dtype=np.float64)
    busy = np.asarray(compute_s, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        flop_util = np.where(busy > 0, np.asarray(flops_per_gpu_step) / (busy * peak_flops), 0.0)
        share = np.where(step > 0, busy / step, 0.0)
    gpu = profile.board_W(flop_util, 0.0, share)
    return facility_power_W(profile.it_W(gpu), profile.pue)


def serving_power_W(profile: EnergyProfile, flop_util: Any, hbm_util: Any, busy_share: Any) -> Any:
    """Average board power of a serving GPU: its iterations at their tensor-core and HBM
    utilisation (decode is memory-bound and draws well below the limit; prefill-heavy and
    large-batch iterations reach it), the hops in between at WAIT_UTILISATION."""
    return profile.board_W(flop_util, hbm_util, busy_share)


def nameplate_energy_kWh(gpu_hours: Any, tdp_W: Any, pue: Any = 1.0) -> Any:
    """Energy as model cards and BLOOM's footprint account it: GPU-hours × the GPU's TDP
    ("peak power capacity per GPU device", Llama 2/3 model cards; 400 W per A100 in
    Luccioni et al. 2022, BLOOM) × PUE. An upper bound, not a measurement.

    >>> float(nameplate_energy_kWh(184_320, 400.0))
    73728.0
    """
    return np.asarray(gpu_hours) * np.asarray(tdp_W) / 1000.0 * np.asarray(pue)


def job_energy(
    profile: EnergyProfile, *, power_W_per_gpu: Any, gpus: Any, seconds: Any, tokens: Any
) -> dict[str, Any]:
    """kWh, J/token, tokens/kWh, electricity cost and CO2 of a job running `seconds` on
    `gpus` GPUs that each draw `power_W_per_gpu` from the grid (PUE included)."""
    total_W = np.asarray(power_W_per_gpu) * np.asarray(gpus)
    kwh = energy_kWh(total_W, seconds)
    with np.errstate(divide="ignore", invalid="ignore"):
        jpt = np.where(
            np.asarray(tokens) > 0, kwh * J_PER_KWH / np.asarray(tokens, dtype=np.float64), np.inf
        )
    return {
        "energy_kwh": kwh,
        "joules_per_token": jpt,
        "tokens_per_kwh": tokens_per_kWh(jpt),
        "energy_cost_usd": energy_cost_usd(kwh, profile.price_per_kWh_usd),
        "co2_kg": co2_kg(kwh, profile.g_co2_per_kWh),
        "power_W_per_gpu": np.asarray(power_W_per_gpu, dtype=np.float64) + 0.0 * kwh,
    }
