"""Fit the serving model's constant on the fit third of the published serving rows.

The split is fixed before any fit (`bandwall.measure.calibrate.serving_runs.split_of`:
sha256(id) % 3 == 0 -> fit). A search over ITERATION_EFFICIENCY (0.80-1.00, step 0.01;
DECODE_STREAM_SHARE at 1.0, where a coarse 2-D grid put it, `--grid`) minimises the median
|log(predicted / measured)| over the fit rows only; then both parts are printed, fit and
held out, with the signed bias.

    python benchmarks/fit_serving.py            # refit and print
    python benchmarks/fit_serving.py --current  # the shipped constants' errors only
    python benchmarks/fit_serving.py --grid     # also search DECODE_STREAM_SHARE
"""

from __future__ import annotations

import argparse
import math
import statistics

import numpy as np

from bandwall.measure.calibrate import serving_runs as sr
from bandwall.model.serving import ServingCalibration


def _median_log(checks: list[sr.Check]) -> float:
    return statistics.median(abs(math.log(c.predicted / c.measured)) for c in checks)


def _fit_checks(cal: ServingCalibration) -> list[sr.Check]:
    return [c for c in sr.validate_serving(cal) if c.split == "fit"]


def _print(label: str, checks: list[sr.Check]) -> None:
    for split in ("fit", "heldout"):
        s = sr.summarize([c for c in checks if c.split == split])
        print(
            f"{label:>8} {split:8} rows {s['rows']:3.0f}  median |err| "
            f"{s['median_abs_error']:6.1%}  bias {s['bias']:+6.1%}  mean |err| "
            f"{s['mean_abs_error']:6.1%}  max {s['max_abs_error']:6.1%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--current", action="store_true", help="no refit")
    parser.add_argument("--grid", action="store_true", help="search the stream share too")
    args = parser.parse_args()
    current = ServingCalibration()
    _print("current", sr.validate_serving(current))
    if args.current:
        return
    shares = np.arange(0.70, 1.0001, 0.05) if args.grid else np.array([1.0])
    effs = np.arange(0.80, 1.0501, 0.025) if args.grid else np.arange(0.80, 1.0001, 0.01)
    best: tuple[float, ServingCalibration] | None = None
    for share in shares:
        for eff in effs:
            cal = ServingCalibration(
                stream_share=round(float(share), 3), iteration_efficiency=round(float(eff), 3)
            )
            score = _median_log(_fit_checks(cal))
            if best is None or score < best[0]:
                best = (score, cal)
    assert best is not None
    cal = best[1]
    print(f"best: stream share {cal.stream_share}, iteration efficiency {cal.iteration_efficiency}")
    _print("fitted", sr.validate_serving(cal))


if __name__ == "__main__":
    main()
