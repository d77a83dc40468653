"""The work budget (`bandwall.planning.budget`): counted before the work, refused over the
limit naming the largest axis and the override, and the documented commands fit in it."""

from __future__ import annotations

import time

import pytest

from bandwall.errors import ConfigError
from bandwall.planning.budget import (
    DEFAULT_MAX_POINTS,
    LOOP_POINTS,
    VALUE_POINTS,
    Work,
    check_work,
    sweep_work,
)
from bandwall.planning.request import make_request


def test_points_count_rows_layouts_loops_and_values() -> None:
    # 3 preset values (looped) x 4 bandwidths (vector), 10 layouts each:
    # rows 12 x 10 + 3 loops + 7 axis values
    w = Work(rows=12, loops=3, layouts=10, values=7)
    assert w.points == 12 * 10 + 3 * LOOP_POINTS + 7 * VALUE_POINTS


def test_a_fixed_layout_searches_one() -> None:
    req = make_request(tp=1, pp=1, cp=1, ep=1, zero=1, micro_batch=1, virtual_stages=1)
    assert sweep_work(req, {"bandwidth_Gbps": [1.0, 2.0]}).layouts == 1
    searched = sweep_work(make_request(), {"bandwidth_Gbps": [1.0, 2.0]})
    assert searched.layouts > 100  # the default llama3-8b on 8 GPUs searches ~1,700


def test_over_the_budget_names_the_axis_and_the_override() -> None:
    with pytest.raises(ConfigError) as err:
        check_work(Work(rows=10_000, loops=1, layouts=1_000), None, "gpus")
    assert err.value.field == "gpus" and "--max-points" in str(err.value)
    check_work(Work(rows=10_000, loops=1, layouts=1_000), 20_000_000, "gpus")  # raised
    with pytest.raises(ConfigError, match="max-points"):
        check_work(Work(1, 1, 1), 0, "gpus")


def test_readme_sweep_fits_the_default_budget() -> None:
    req = make_request(model="llama3-70b")
    axes = {
        "gpus": [64, 128, 256, 512, 1024],
        "bandwidth_Gbps": [10.0, 40.0, 160.0, 640.0],
        "tp": [4, 8],
        "pp": [1, 2, 4],
    }
    assert sweep_work(req, axes).points < DEFAULT_MAX_POINTS


def test_measured_cost_per_point(capsys: pytest.CaptureFixture[str]) -> None:
    """Prints the seconds per point on this machine (the weights in budget.py came from
    such runs); a ratio to read, not a timing assert."""
    from bandwall.planning.api import sweep

    req = make_request()
    axes = {"gpus": [8, 16, 32, 64]}
    work = sweep_work(req, axes)
    start = time.perf_counter()
    sweep(req, axes)
    elapsed = time.perf_counter() - start
    with capsys.disabled():
        print(f"\n{work.describe()} in {elapsed:.2f} s: {elapsed / work.points * 1e6:.1f} µs/point")
