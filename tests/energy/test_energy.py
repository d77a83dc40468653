"""Energy terms: hand-computed cases, the sourced power catalog, and MLPerf Power rows."""

from __future__ import annotations

import numpy as np
import pytest

from bandwall.catalog import load_catalog
from bandwall.catalog.power import load_power, power_table
from bandwall.model import energy
from bandwall.planning.infer import error_summary, validate_energy


def test_gpu_power_is_linear_between_idle_and_tdp() -> None:
    assert energy.gpu_power_W(70.0, 700.0, 0.0) == pytest.approx(70.0)
    assert energy.gpu_power_W(70.0, 700.0, 1.0) == pytest.approx(700.0)
    assert energy.gpu_power_W(70.0, 700.0, 2.0) == pytest.approx(700.0)  # capped at TDP
    # u = 0.3 / 0.6 + 0.3 * 0.5 = 0.65 -> 70 + 630 * 0.65
    u = energy.power_utilisation(0.3, 0.5)
    assert u == pytest.approx(0.3 / energy.FLOP_UTIL_AT_TDP + energy.HBM_POWER_WEIGHT * 0.5)
    assert energy.gpu_power_W(70.0, 700.0, u) == pytest.approx(70.0 + 630.0 * float(u))


def test_waiting_draws_less_than_computing() -> None:
    busy = energy.busy_wait_power_W(70.0, 700.0, 1.0, 1.0)
    half = energy.busy_wait_power_W(70.0, 700.0, 0.5, 1.0)
    wait = 70.0 + 630.0 * energy.WAIT_UTILISATION
    assert busy == pytest.approx(700.0)
    assert half == pytest.approx(0.5 * 700.0 + 0.5 * wait)
    assert half < busy


def test_network_port_power_counts_ports_and_transceivers() -> None:
    # 2 tiers: NIC + 3 switch ports + 4 transceivers (NIC end + 3 switch ends)
    assert energy.network_W_per_port(25.0, 10.0, 12.0, 2) == pytest.approx(25 + 36 + 40)
    # co-packaged optics replace only the switch-side transceivers
    cpo = energy.network_W_per_port(25.0, 10.0, 12.0, 2, cpo_optics_W=3.0)
    assert cpo == pytest.approx(25 + 36 + 10 + 9)
    assert energy.network_W_per_port(25.0, 10.0, 12.0, 0) == 0.0
    tiers = energy.fat_tree_tiers(np.array([1, 8, 64, 65, 2048, 2049, 100_000]))
    assert tiers.tolist() == [0, 1, 1, 2, 2, 3, 3]


def test_job_energy_hand_case() -> None:
    prof = energy.EnergyProfile(
        idle_W=70,
        tdp_W=700,
        host_W_per_gpu=0,
        network_W_per_gpu=0,
        pue=1.0,
        g_co2_per_kWh=480,
        price_per_kWh_usd=0.1,
    )
    out = energy.job_energy(prof, power_W_per_gpu=1000.0, gpus=8, seconds=3600.0, tokens=8e6)
    assert out["energy_kwh"] == pytest.approx(8.0)
    assert out["joules_per_token"] == pytest.approx(3.6)
    assert out["tokens_per_kwh"] == pytest.approx(1e6)
    assert out["energy_cost_usd"] == pytest.approx(0.8)
    assert out["co2_kg"] == pytest.approx(3.84)


def test_training_power_hand_case() -> None:
    prof = energy.EnergyProfile(
        idle_W=70,
        tdp_W=700,
        host_W_per_gpu=290,
        network_W_per_gpu=10.0,
        pue=1.2,
        g_co2_per_kWh=0,
        price_per_kWh_usd=0,
    )
    peak = 1e15
    # compute half the step at 0.3 of peak: u = 0.5 -> 385 W; the other half waits
    got = energy.training_power_W(
        prof, step_s=1.0, compute_s=0.5, flops_per_gpu_step=0.5 * 0.3 * peak, peak_flops=peak
    )
    wait = 70 + 630 * energy.WAIT_UTILISATION
    assert got == pytest.approx(1.2 * (0.5 * 385 + 0.5 * wait + 290 + 10))


def test_power_catalog_covers_every_gpu_and_provider_with_sources() -> None:
    pw = load_power()
    cat = load_catalog()
    for name, gpu in cat.gpus.items():
        entry = pw.gpu(name)
        assert 0 < entry.idle_W < gpu.tdp_W
    for prov in cat.providers.values():
        assert pw.site(prov.kind.value).pue >= 1.0
    rows = power_table()
    assert all(len(r["source"]) > 10 and r["as_of"] for r in rows)
    assert {r["kind"] for r in rows} == {"gpu", "site", "network", "grid"}


def test_energy_validated_against_mlperf_power() -> None:
    """MLPerf Inference v4.0/v4.1 Power (8-GPU servers, AC) and MLPerf Training v4.0 Power
    (Sustainable Metal Cloud H100): predicted power per GPU within a 10% median error (5.7%
    when written; docs/energy.md). No energy constant is fitted to these rows."""
    rows = validate_energy()
    assert len(rows) >= 5
    summary = error_summary([r["error"] for r in rows])
    assert summary["median_abs_error"] <= 0.10, rows
    assert summary["max_abs_error"] <= 0.40, rows


def test_a_bad_power_row_is_one_line_naming_file_table_entry_and_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """power.toml reads through the catalog's one row validator: a GPU row with a negative
    idle draw stops the load with the file, the table, the entry and the field."""
    from bandwall.catalog import power
    from bandwall.errors import CatalogError

    real = power.raw_rows

    def rows(*where: str) -> list[dict[str, object]]:
        out = list(real(*where))
        if where[-1] == "gpu":
            out[0] = {**out[0], "idle_W": -5}
        return out

    monkeypatch.setattr(power, "raw_rows", rows)
    power.load_power.cache_clear()
    try:
        with pytest.raises(CatalogError) as err:
            power.load_power()
    finally:
        power.load_power.cache_clear()
    msg = str(err.value)
    assert msg.startswith("power.toml [[gpu]]: entry ") and ": idle_W: " in msg, msg
    assert "\n" not in msg
