"""The HTML report reads like a recommendation: a summary first (which preset, by which rule,
why, at what cost), then tables whose every number carries its unit and thousands
separators."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("matplotlib", reason="the report embeds plots")

from bandwall.errors import ConfigError
from bandwall.measure.bench.store import Run
from bandwall.planning.api import compare, scale
from bandwall.planning.presets import presets
from bandwall.planning.request import PlanRequest
from bandwall.report import html


@pytest.fixture(scope="module")
def plans() -> list[Any]:
    return compare(PlanRequest(model="llama3-70b", gpus=512), list(presets()))


def _cells(text: str) -> list[str]:
    return re.findall(r"<td>([^<]*)</td>", text)


def _raw_numbers(cells: list[str]) -> list[str]:
    """Cells that are a bare float with noise or a long number without separators."""
    return [c for c in cells if re.fullmatch(r"-?\d*\.\d{4,}|\d{5,}|\d+\.\d+e[-+]\d+", c)]


def test_summary_recommends_the_cheapest_and_says_why(plans: list[Any]) -> None:
    text = html.summary_section(plans, "cheapest")
    best = min(plans, key=lambda p: p.metrics["cost_usd"])
    fastest = min(plans, key=lambda p: p.metrics["time_to_train_s"])
    assert f"Recommended: {best.cluster.preset}" in text
    assert "Rule: cheapest" in text and "lowest total cost" in text
    assert f"<strong>{html.money(best.metrics['cost_usd'])}</strong>" in text
    assert re.search(r"\$\d{1,3}(,\d{3})+", text)  # the cost with thousands separators
    assert "GPU-hours" in text and "communication efficiency" in text
    if fastest is not best and fastest.metrics["time_to_train_s"] < best.metrics["time_to_train_s"]:
        assert f"The fastest, {fastest.cluster.preset}" in text


def test_summary_can_prefer_the_fastest(plans: list[Any]) -> None:
    text = html.summary_section(plans, "fastest")
    fastest = min(plans, key=lambda p: p.metrics["time_to_train_s"])
    assert f"Recommended: {fastest.cluster.preset}" in text and "Rule: fastest" in text
    assert html.recommend(plans, "fastest") is fastest
    with pytest.raises(ConfigError) as err:
        html.recommend(plans, "prettiest")
    assert err.value.field == "prefer"


def test_the_geo_preset_is_never_recommended_as_cheapest(plans: list[Any]) -> None:
    """A sanity anchor: on 512 GPUs the WAN-split preset is the slowest and the dearest."""
    assert html.recommend(plans, "cheapest").cluster.preset != "decentralized-geo"
    assert html.recommend(plans, "fastest").cluster.preset != "decentralized-geo"


def test_tables_print_units_and_separators_not_raw_floats(plans: list[Any]) -> None:
    curves = {"ai-factory-ib": scale(PlanRequest(model="llama3-8b", gpus=64), [64, 128, 256])}
    run = Run(7, "2025-01-01T00:00:00", "collectives", "complete", None, 4, "gloo", {}, {}, {})
    rows = [
        {
            "op": "all_reduce",
            "size_bytes": 2**e,
            "time_median_s": 2**e / 1.1e9,
            "time_p90_s": 2**e / 1.0e9,
            "algbw_GBps": 1.1 / 1.5,
            "busbw_GBps": 1.1,
            "wrong": 0,
        }
        for e in (10, 20, 30)
    ]
    links = [
        {"src": 0, "dst": 1, "bw_GBps": 1.234567, "latency_p50_s": 5e-5, "latency_p99_s": 0.0012}
    ]
    body = "".join(
        [
            html.plans_section(plans),
            html.scaling_section(curves),
            html.results_section(run, rows, links, None, 10.0),
        ]
    )
    cells = _cells(body)
    assert len(cells) > 80
    assert _raw_numbers(cells) == []
    assert "1 KiB" in cells and "1 MiB" in cells and "1 GiB" in cells
    assert "1.23 GB/s" in cells and "50.00 µs" in cells and "1.20 ms" in cells
    assert any(re.fullmatch(r"\$\d{1,3}(,\d{3})+", c) for c in cells)
    assert any(re.fullmatch(r"\d{1,3}(,\d{3})+", c) for c in cells)  # GPU-hours


def test_the_raw_number_check_sees_raw_numbers() -> None:
    assert _raw_numbers(["0.123456", "1234567", "1.5e-05", "1,234", "12.3 s"]) == [
        "0.123456",
        "1234567",
        "1.5e-05",
    ]
