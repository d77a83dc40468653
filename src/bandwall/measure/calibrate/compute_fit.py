"""Fit the compute model's one training constant to published runs, with a held-out third.

`TRAINING_GEMM_FACTOR` (bandwall.model.compute) scales every GPU's microbenchmark GEMM
efficiency to what GEMMs sustain in a training step. It is fitted on the TRAIN rows of
Korthikanti et al. 2022 Table 5 (A100) by minimising the mean absolute error of the step time;
the TEST rows (a third, spanning the model sizes) and every other published set are held out.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from bandwall.catalog import load_catalog
from bandwall.measure.calibrate.published import SOURCES, load_rows, request_for
from bandwall.planning.api import plan

FILE = "korthikanti_table5.csv"
#: Held out from the fit: one row of each kind (full / selective) across three sizes.
TEST_IDS = ("175b-full", "530b-selective-sp", "1t-full")


@dataclass(frozen=True)
class Fit:
    factor: float
    train_mean_abs_error: float
    train_max_abs_error: float
    test_mean_abs_error: float
    test_max_abs_error: float
    errors: dict[str, float]


def _errors(rows: list[dict[str, str]], efficiency: float) -> dict[str, float]:
    stack = SOURCES[FILE]
    out = {}
    for row in rows:
        req = request_for(row, stack).model_copy(update={"gemm_efficiency": efficiency})
        step = float(plan(req).metrics["step_time_s"])
        out[row["id"]] = step / float(row["measured_step_s"]) - 1
    return out


def fit_gemm_factor(grid_step: float = 0.001) -> Fit:
    """Scan the factor on the train rows (the error is not smooth enough for a gradient)."""
    rows = load_rows(None)[FILE]
    train = [r for r in rows if r["id"] not in TEST_IDS]
    gpu = {r["gpu"] for r in rows}
    assert len(gpu) == 1, "the fit assumes one GPU model"
    base = load_catalog().gpu_perf(gpu.pop()).gemm_efficiency

    def loss(factor: float) -> float:
        return statistics.fmean(abs(e) for e in _errors(train, base * factor).values())

    candidates = [0.80 + grid_step * i for i in range(int(0.25 / grid_step) + 1)]
    coarse = min(candidates[:: max(1, int(0.01 / grid_step))], key=loss)
    fine = [c for c in candidates if abs(c - coarse) <= 0.01]
    factor = min(fine, key=loss)
    errors = _errors(rows, base * factor)
    train_e = [abs(v) for k, v in errors.items() if k not in TEST_IDS]
    test_e = [abs(v) for k, v in errors.items() if k in TEST_IDS]
    return Fit(
        factor=round(factor, 3),
        train_mean_abs_error=statistics.fmean(train_e),
        train_max_abs_error=max(train_e),
        test_mean_abs_error=statistics.fmean(test_e),
        test_max_abs_error=max(test_e),
        errors=errors,
    )


def describe(fit: Fit) -> dict[str, Any]:
    return {
        "factor": fit.factor,
        "train": {"mean": fit.train_mean_abs_error, "max": fit.train_max_abs_error},
        "test": {"mean": fit.test_mean_abs_error, "max": fit.test_max_abs_error},
        "errors": fit.errors,
    }
