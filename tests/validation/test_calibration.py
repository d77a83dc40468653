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


@pytest.mark.parametrize(
    ("name", "group"),
    [("IN_STEP_EFFICIENCY", "16-bit"), ("FP8_GEMM_IN_STEP_EFFICIENCY", "fp8")],
)
def test_fitted_constants_leave_no_bias_where_they_were_fitted(
    fit_results: list[fit_published.RunResult], name: str, group: str
) -> None:
    """Each constant is fitted so the median log residual of its group is zero: a constant
    edited by hand, or a model that moved without a refit, shows up here."""
    logs = [
        math.log(r.measured_step_s / r.predicted_step_s)
        for r in fit_results
        if (r.precision == "fp8") == (group == "fp8")
    ]
    assert len(logs) >= 10, name
    assert abs(statistics.median(logs)) <= 0.015, (name, getattr(calibration, name))


def test_ranges_cover_the_fit_runs_as_claimed(fit_results: list[fit_published.RunResult]) -> None:
    """The p10-p90 range holds about 80% of the runs it was drawn from (shrinkage to the pool
    moves it a little)."""
    assert 0.65 <= fit_published.coverage(fit_results) <= 0.9
