"""Per-call overheads fitted on published nccl-tests curves: the data, the split, the fit and
its held-out errors (measure/calibrate/collective_fit.py, docs/network.md)."""

from __future__ import annotations

import csv
import hashlib
import itertools
import math
from importlib import resources

import pytest

from bandwall.measure.calibrate import collective_fit as cf
from bandwall.model.collectives import overheads


def _raw() -> list[dict[str, str]]:
    text = resources.files("bandwall.measure.calibrate").joinpath("data", cf.FILE).read_text()
    return list(csv.DictReader(text.splitlines()))


def test_every_row_names_its_source_and_date_and_the_split_fits_a_third() -> None:
    rows = _raw()
    assert len({r["id"] for r in rows}) == len(rows)
    assert all(r["url"].startswith("https://github.com/") and r["date"][:2] == "20" for r in rows)
    assert all(r["op"] == "all_reduce" and float(r["time_us"]) > 0 for r in rows)
    fitted = [r for r in rows if cf.is_fit_row(r["id"])]
    assert 0.25 <= len(fitted) / len(rows) <= 1 / 3 + 0.02
    # the rule is sha256 of the id, so it cannot move with the data or the model
    for r in rows[:20]:
        digest = int(hashlib.sha256(r["id"].encode()).hexdigest(), 16)
        assert cf.is_fit_row(r["id"]) is (digest % 3 == 0)


def test_rows_printed_with_too_few_digits_are_not_used() -> None:
    usable = {r.id for r in cf.load_rows()}
    for r in _raw():
        coarse = r["measured"] == "busbw" and float(r["busbw_GBps"]) < cf.MIN_BUSBW_GBPS
        assert (r["id"] in usable) is not coarse


@pytest.fixture(scope="module")
def shipped() -> tuple[list[cf.Row], dict[str, float]]:
    """Every usable row and its model time with the pipeline fill as shipped and no per-call
    constants (those add to it)."""
    rows = cf.load_rows()
    with cf._fill(overheads.PIPELINE_FILL_BYTES, overheads.PIPELINE_FILL_BYTES_IN_NODE):
        base = cf.model_s(rows)
    return rows, base


def _loss(
    rows: list[cf.Row],
    base: dict[str, float],
    launch: dict[str, float],
    net: dict[str, float],
    harness: dict[str, float],
) -> float:
    fit = [r for r in rows if r.fitted and cf.FIT_BYTES[0] <= r.size_bytes <= cf.FIT_BYTES[1]]
    return sum(
        abs(math.log((base[r.id] + cf._overhead_s(r, launch, net, harness)) / r.measured_s))
        for r in fit
    )


def test_shipped_constants_are_the_fit(shipped: tuple[list[cf.Row], dict[str, float]]) -> None:
    """overheads.py holds what collective_fit finds: each per-call constant at the minimum of
    the fitted rows' Σ|log error| (a 0.1 µs step either way is no better) and the fill at the
    minimum of its 16 KiB grid, each of the two (across nodes, within one)."""
    rows, base = shipped
    launch = {a.value: v for a, v in overheads.LAUNCH_US.items()}
    net = dict(overheads.NETWORK_CALL_US)
    harness = dict(overheads.HARNESS_CALL_US)
    best = _loss(rows, base, launch, net, harness)
    used = {r.arch for r in rows} | {r.transport for r in rows} | {r.tool for r in rows}
    for table in (launch, net, harness):
        for key in list(table):
            if key not in used:
                continue
            for step in (-0.1, 0.1):
                if table[key] + step < 0:
                    continue
                table[key] += step
                assert _loss(rows, base, launch, net, harness) >= best - 1e-9, (key, step)
                table[key] -= step
    fit = [r for r in rows if r.fitted and cf.FIT_BYTES[0] <= r.size_bytes <= cf.FIT_BYTES[1]]
    for which, step in itertools.product((0, 1), (-16 * 2**10, 16 * 2**10)):
        fills = [overheads.PIPELINE_FILL_BYTES, overheads.PIPELINE_FILL_BYTES_IN_NODE]
        fills[which] += step
        with cf._fill(*fills):
            other = cf.model_s(fit)
        *_, loss = cf._additive(fit, other, 0.1, 2)
        assert loss >= best - 1e-6, (which, step)


def test_fit_and_held_out_errors(shipped: tuple[list[cf.Row], dict[str, float]]) -> None:
    """The errors docs/network.md reports, fit and held out apart (a regression guard: the
    held-out third was not looked at by the fit). Since the 2-8 node NDR curves of
    nccl-tests#309 joined (2026-12-06; scored once first: held out 13.6%, bias +1.9%) no goal
    is met: 32 KiB-16 MiB held out 12.2% (goal 10%), max 64.4% (50%: the 4-node B200 curve
    timed through torch), 8 B-1 MiB 20.4% (15%): the published curves disagree with each
    other by more than that (docs). (12.7% and 22.3% before torch.distributed's timing loop
    was converted as its own per-call constant, 2026-12-07.)"""
    rows, base = shipped
    launch = {a.value: v for a, v in overheads.LAUNCH_US.items()}
    net = dict(overheads.NETWORK_CALL_US)
    harness = dict(overheads.HARNESS_CALL_US)
    errors = {
        r.id: (base[r.id] + cf._overhead_s(r, launch, net, harness)) / r.measured_s - 1
        for r in rows
    }
    summary = cf.OverheadFit(
        launch,
        net,
        harness,
        overheads.PIPELINE_FILL_BYTES,
        overheads.PIPELINE_FILL_BYTES_IN_NODE,
        errors,
        rows,
        0.0,
    ).summary()
    mid = summary["32KiB-16MiB"]
    assert mid["fit"]["median_abs_error"] <= 0.15
    assert mid["held_out"]["median_abs_error"] <= 0.125
    assert mid["held_out"]["max_abs_error"] <= 0.66
    assert abs(mid["held_out"]["bias"]) <= 0.025
    small = summary["8B-1MiB"]
    assert small["fit"]["median_abs_error"] <= 0.205
    assert small["held_out"]["median_abs_error"] <= 0.21
