"""The constants fitted on published runs are what their fit finds, and the ranges every
prediction carries come from the current model's residuals (benchmarks/fit_published.py)."""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import pytest

from bandwall.measure.calibrate.runs import load_runs
from bandwall.model import calibration

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import fit_published


@pytest.fixture(scope="module")
def fit_results() -> list[fit_published.RunResult]:
    rows = [r for r in load_runs() if r["split"] == "fit" and r["measured_step_s"]]
    return [r for r in fit_published.all_results(rows) if r.split == "fit"]


def test_residual_table_is_current(fit_results: list[fit_published.RunResult]) -> None:
    """model/calibration.py holds the residual quantiles of the current model on the fit
    runs: regenerate with `python benchmarks/fit_published.py --write` when the model moves."""
    assert fit_published.residual_table(fit_results) == calibration.STEP_RESIDUALS


def _in_group(r: fit_published.RunResult, group: str) -> bool:
    if group == "moe":
        return r.moe
    if r.moe:
        return False
    if group == "fp8":
        return r.precision == "fp8"
    return r.precision != "fp8" and fit_published.arch_of(r.gpu) == group


@pytest.mark.parametrize("group", ["ampere", "hopper", "fp8", "moe"])
def test_fitted_constants_leave_no_bias_where_they_were_fitted(
    fit_results: list[fit_published.RunResult], group: str
) -> None:
    """Each constant is fitted so the median log residual of its group is zero (the dense
    16-bit runs of an architecture for its in-step efficiency, the dense fp8 runs for the fp8
    one, the MoE runs for the expert path's): a constant edited by hand, or a model that moved
    without a refit, shows up here. The MoE group has 4 fit runs (all DeepSeek-V3: the
    held-out Qwen3, gpt-oss and later DeepSeek-V3 runs test how it carries over)."""
    logs = [
        math.log(r.measured_step_s / r.predicted_step_s) for r in fit_results if _in_group(r, group)
    ]
    assert len(logs) >= (4 if group == "moe" else calibration.MIN_ARCH_RUNS), group
    assert abs(statistics.median(logs)) <= 0.015, (group, calibration.IN_STEP_EFFICIENCY_BY_ARCH)


def test_each_fitted_architecture_has_enough_runs_and_no_other_does() -> None:
    """An architecture gets its own in-step efficiency only with MIN_ARCH_RUNS 16-bit fit runs
    (no constant fitted to one or two rows); the others use the pooled one."""
    rows = [r for r in load_runs() if r["split"] == "fit" and r["measured_step_s"]]
    assert fit_published.fitted_archs(rows) == sorted(calibration.IN_STEP_EFFICIENCY_BY_ARCH)
    assert calibration.in_step_efficiency("blackwell") == calibration.IN_STEP_EFFICIENCY


def test_ranges_cover_the_fit_runs_as_claimed(fit_results: list[fit_published.RunResult]) -> None:
    """The p10-p90 range holds about 80% of the runs it was drawn from (shrinkage to the pool
    moves it a little)."""
    assert 0.65 <= fit_published.coverage(fit_results) <= 0.9
