"""The model against the published training runs: its fitted constants, fit and held-out
errors, the residual table behind every prediction's range, and how well those ranges cover
the held-out runs.

    python benchmarks/fit_published.py --fit-only   # tuning: price and print the fit runs only
    python benchmarks/fit_published.py --write      # refit, regenerate model/calibration.py
    python benchmarks/fit_published.py              # print fit and held-out errors

The fit set is the fit third of `published_runs.csv` (sha256(id) % 3 == 0, fixed before any
evaluation) and the five fit rows of Korthikanti et al. 2022 Table 5 (the three of
`TEST_IDS` are held out, as they always were). Only these set anything: IN_STEP_EFFICIENCY
(pooled), IN_STEP_EFFICIENCY_BY_ARCH (architectures with MIN_ARCH_RUNS dense fit runs),
IN_STEP_EFFICIENCY_BY_STACK (stacks other than megatron with as many),
FP8_GEMM_IN_STEP_EFFICIENCY, MOE_EXPERT_IN_STEP_EFFICIENCY (each bisected so the median
signed log error of its group is zero, alternated)
and the residual quantiles of model/calibration.py, which come from a 5-fold
cross-validation inside the fit set (each fit run priced with constants fitted without its
fold), not from the in-sample residuals the constants were chosen to shrink. Held-out rows
are priced and reported, never used.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import importlib
import math
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bandwall.catalog.loader import load_catalog
from bandwall.measure.calibrate.published import SOURCES, load_rows, request_for
from bandwall.measure.calibrate.runs import (
    RunResult,
    load_runs,
    request_stack,
    summarize,
    validate_runs,
)
from bandwall.model import calibration
from bandwall.planning.api import evaluate_points

CALIBRATION_PY = Path(calibration.__file__)
KORTHIKANTI = "korthikanti_table5.csv"
#: Korthikanti rows held out since the first fit (one of each kind across three sizes).
TEST_IDS = ("175b-full", "530b-selective-sp", "1t-full")
CONSTANTS = ("IN_STEP_EFFICIENCY", "FP8_GEMM_IN_STEP_EFFICIENCY", "MOE_EXPERT_IN_STEP_EFFICIENCY")
BY_ARCH = "IN_STEP_EFFICIENCY_BY_ARCH"
BY_STACK = "IN_STEP_EFFICIENCY_BY_STACK"
#: The stack whose runs the architectures' constants stand for (no factor of its own).
REFERENCE_STACK = "megatron"


def korthikanti_results() -> list[RunResult]:
    """Korthikanti et al. Table 5 as RunResults (A100, fp16, dense, Megatron-LM 2022)."""
    out = []
    for row in load_rows(None)[KORTHIKANTI]:
        _, m, _ = evaluate_points(request_for(row, SOURCES[KORTHIKANTI]), {})
        metrics = m.row(0)
        out.append(
            RunResult(
                id=f"korthikanti-{row['id']}",
                split="heldout" if row["id"] in TEST_IDS else "fit",
                stack="megatron",
                gpu=row["gpu"],
                gpus=int(row["gpus"]),
                precision=row["precision"],
                moe=False,
                measured_step_s=float(row["measured_step_s"]),
                predicted_step_s=float(metrics["step_time_s"]),
                mfu=float(metrics["mfu"]),
                memory_ratio=float(metrics["memory_bytes"] / metrics["memory_capacity_bytes"]),
            )
        )
    return out


def all_results(rows: list[dict[str, str]], korthikanti: bool = True) -> list[RunResult]:
    results = validate_runs(rows)
    if korthikanti:
        results += korthikanti_results()
    return results


def with_constants(values: dict[str, Any], fn: Callable[[], list[RunResult]]) -> list[RunResult]:
    saved = {k: getattr(calibration, k) for k in values}
    for k, v in values.items():
        setattr(calibration, k, v)
    try:
        return fn()
    finally:
        for k, v in saved.items():
            setattr(calibration, k, v)


def median_log_residual(results: list[RunResult]) -> float:
    """Median of log(measured / predicted): the signed bias the fit drives to zero."""
    return statistics.median(math.log(r.measured_step_s / r.predicted_step_s) for r in results)


def bisect(f: Callable[[float], float], low: float, high: float, tol: float = 0.001) -> float:
    """The root of a function that falls as its argument grows (a faster model leaves more
    positive residuals: measured > predicted), by bisection to `tol`; an end when none."""
    f_low, f_high = f(low), f(high)
    if f_low <= 0:
        return low
    if f_high >= 0:
        return high
    while high - low > tol:
        mid = (low + high) / 2
        if f(mid) > 0:
            low = mid
        else:
            high = mid
    return round((low + high) / 2, 3)


def arch_of(gpu: str) -> str:
    """The catalog architecture of a run's GPU."""
    return load_catalog().gpu_perf(gpu).arch


def fitted_archs(
    fit_rows: list[dict[str, str]],
    exclude: frozenset[str] = frozenset(),
    stacks: tuple[str, ...] = (),
) -> list[str]:
    """Architectures with at least MIN_ARCH_RUNS dense fit runs of either format
    (Korthikanti's A100 included) on stacks without a factor of their own (`stacks`): each
    gets its own in-step efficiency, fitted on those runs (fp8 runs priced with the fp8
    constant; a generation whose published runs are mostly fp8, as Blackwell's are, is fitted
    on what it has rather than borrowing Hopper's pool)."""
    gpus = [
        r.gpu
        for r in all_results(fit_rows)
        if r.split == "fit" and r.id not in exclude and not r.moe and stack_of(r) not in stacks
    ]
    counts = collections.Counter(arch_of(g) for g in gpus)
    return sorted(a for a, n in counts.items() if n >= calibration.MIN_ARCH_RUNS)


def stack_of(r: RunResult) -> str:
    """The request stack a run is priced with (`runs.STACKS`: nemo -> megatron, ...)."""
    return request_stack(r.stack)[0]


def fitted_stacks(
    fit_rows: list[dict[str, str]], exclude: frozenset[str] = frozenset()
) -> list[str]:
    """Stacks other than the reference with at least MIN_ARCH_RUNS dense fit runs: each gets a
    factor on the in-step efficiency, fitted on those runs jointly with the architectures'
    constants (BigScience's Megatron-DeepSpeed runs are all on A100: without a factor of
    their own their stack's unmodelled work would lower the A100's constant for every stack)."""
    counts = collections.Counter(
        stack_of(r)
        for r in all_results(fit_rows)
        if r.split == "fit" and r.id not in exclude and not r.moe
    )
    return sorted(
        s for s, n in counts.items() if n >= calibration.MIN_ARCH_RUNS and s != REFERENCE_STACK
    )


def fit_constants(
    fit_rows: list[dict[str, str]], exclude: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The constants on the fit set, each so that the median signed log error of its group is
    zero (no bias where it was fitted): the dense runs of each stack with enough of them set
    its IN_STEP_EFFICIENCY_BY_STACK factor, the dense runs (either format) of each
    architecture with enough of them set its IN_STEP_EFFICIENCY_BY_ARCH entry, all dense runs
    priced with one constant the pooled IN_STEP_EFFICIENCY (the other architectures'), then
    the fp8 runs set FP8_GEMM_IN_STEP_EFFICIENCY given them and the MoE runs (either format)
    MOE_EXPERT_IN_STEP_EFFICIENCY; dense runs set the first three and MoE runs only the
    last, so a MoE-specific loss is not spread over dense predictions; repeated until nothing
    moves. Runs in `exclude` are priced but set nothing (cross-validation's left-out fold)."""
    stacks = tuple(fitted_stacks(fit_rows, exclude))
    archs = fitted_archs(fit_rows, exclude, stacks)
    values: dict[str, Any] = {k: float(getattr(calibration, k)) for k in CONSTANTS}
    values[BY_ARCH] = {a: float(calibration.in_step_efficiency(a)) for a in archs}
    values[BY_STACK] = {
        s: float(calibration.IN_STEP_EFFICIENCY_BY_STACK.get(s, 1.0)) for s in stacks
    }

    # which runs each constant reads is metadata (stack, GPU, format, MoE), not a price: found
    # once, so each bisection step prices only its own group's runs (rows are priced one by
    # one, so the group's prices are those of a whole-set pricing; 3-4x faster)
    runs = [r for r in all_results(fit_rows) if r.split == "fit" and r.id not in exclude]

    def residual_for(
        set_x: Callable[[float], dict[str, Any]], keep: Callable[[RunResult], bool]
    ) -> Callable[[float], float]:
        ids = {r.id for r in runs if keep(r)}
        rows = [row for row in fit_rows if row["id"] in ids]
        korthikanti = any(i.startswith("korthikanti-") for i in ids)

        def residual(x: float) -> float:
            res = with_constants(set_x(x), lambda: all_results(rows, korthikanti))
            # a higher efficiency predicts faster steps: the residual rises with x
            return -median_log_residual([r for r in res if r.id in ids])

        return residual

    def dense(arch: str | None) -> Callable[[RunResult], bool]:
        # the architectures' constants stand for the reference stack (and stacks without a
        # factor): BigScience's DeepSpeed runs are all on A100, so a joint fit could not tell
        # the A100's constant from DeepSpeed's factor
        return lambda r: (
            not r.moe and stack_of(r) not in stacks and (arch is None or arch_of(r.gpu) == arch)
        )

    for _ in range(4):
        before = {**values, BY_ARCH: dict(values[BY_ARCH]), BY_STACK: dict(values[BY_STACK])}
        for stack in stacks:
            values[BY_STACK][stack] = bisect(
                residual_for(
                    lambda x, s=stack: {**values, BY_STACK: {**values[BY_STACK], s: x}},
                    lambda r, s=stack: not r.moe and stack_of(r) == s,
                ),
                0.5,
                1.5,
            )
        for arch in archs:
            values[BY_ARCH][arch] = bisect(
                residual_for(
                    lambda x, a=arch: {**values, BY_ARCH: {**values[BY_ARCH], a: x}},
                    dense(arch),
                ),
                0.6,
                1.2,
            )
        # the pooled constant as if every architecture used it (fitted on all dense runs, not
        # on the few whose architecture has no entry of its own)
        values["IN_STEP_EFFICIENCY"] = bisect(
            residual_for(lambda x: {**values, "IN_STEP_EFFICIENCY": x, BY_ARCH: {}}, dense(None)),
            0.6,
            1.2,
        )
        values["FP8_GEMM_IN_STEP_EFFICIENCY"] = bisect(
            residual_for(
                lambda x: {**values, "FP8_GEMM_IN_STEP_EFFICIENCY": x},
                lambda r: r.precision == "fp8" and not r.moe,
            ),
            0.3,
            1.2,
        )
        values["MOE_EXPERT_IN_STEP_EFFICIENCY"] = bisect(
            residual_for(lambda x: {**values, "MOE_EXPERT_IN_STEP_EFFICIENCY": x}, lambda r: r.moe),
            0.2,
            1.2,
        )
        if values == before:
            break
    return values


#: Folds of the cross-validation behind the residual table: sha256("cv:" + run id) % FOLDS.
FOLDS = 5


def fold_of(run_id: str) -> int:
    return int(hashlib.sha256(f"cv:{run_id}".encode()).hexdigest(), 16) % FOLDS


def cross_validated(fit_rows: list[dict[str, str]]) -> list[RunResult]:
    """Every fit run priced with constants fitted without its fold: residuals as a run the
    constants never saw would show them. In-sample residuals are narrower than out-of-sample
    ones (the constants were chosen to shrink them), so ranges drawn from them under-cover
    unseen runs; these set the residual table instead."""
    ids = [r.id for r in all_results(fit_rows) if r.split == "fit"]
    out: list[RunResult] = []
    for k in range(FOLDS):
        left_out = frozenset(i for i in ids if fold_of(i) == k)
        if not left_out:
            continue
        values = fit_constants(fit_rows, exclude=left_out)
        priced = with_constants(values, lambda: all_results(fit_rows))
        out += [r for r in priced if r.id in left_out]
        print(f"fold {k}: {len(left_out)} runs left out, constants {values}", file=sys.stderr)
    return out


def quantile(values: list[float], q: float) -> float:
    """The q-quantile with linear interpolation (numpy's default)."""
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def residual_table(fit: list[RunResult]) -> dict[str, tuple[float, float, int]]:
    """(q10, q90, runs) of log(measured / predicted) per class and pooled, fit runs only."""
    logs = {r.id: math.log(r.measured_step_s / r.predicted_step_s) for r in fit}
    pooled = list(logs.values())
    out: dict[str, tuple[float, float, int]] = {
        "pooled": (quantile(pooled, 0.1), quantile(pooled, 0.9), len(pooled))
    }
    for c in sorted({calibration.run_class(r.precision, r.moe) for r in fit}):
        xs = [logs[r.id] for r in fit if calibration.run_class(r.precision, r.moe) == c]
        out[c] = (quantile(xs, 0.1), quantile(xs, 0.9), len(xs))
    return {k: (round(a, 4), round(b, 4), n) for k, (a, b, n) in out.items()}


def generated_block(table: dict[str, tuple[float, float, int]], values: dict[str, Any]) -> str:
    text = CALIBRATION_PY.read_text()
    block = re.search(r"# BEGIN GENERATED.*?# END GENERATED", text, re.S)
    assert block is not None
    out = block.group(0)
    for name, value in values.items():
        if name in (BY_ARCH, BY_STACK):
            entries = "".join(f'    "{a}": {v},\n' for a, v in sorted(value.items()))
            replacement = f"{name}: dict[str, float] = {{\n{entries}}}"
            out = re.sub(
                rf"^{name}: dict\[str, float\] = \{{.*?\}}$",
                lambda _, r=replacement: r,
                out,
                flags=re.M | re.S,
            )
            continue
        out = re.sub(rf"^{name} = .*$", f"{name} = {value}", out, flags=re.M)
    table_lines = "\n".join(f'    "{k}": ({a}, {b}, {n}),' for k, (a, b, n) in table.items())
    return re.sub(
        r"(STEP_RESIDUALS: dict\[str, tuple\[float, float, int\]\] = \{\n).*?(\n\})",
        lambda m: m.group(1) + table_lines + m.group(2),
        out,
        flags=re.S,
    )


def write_table(table: dict[str, tuple[float, float, int]], values: dict[str, Any]) -> None:
    text = CALIBRATION_PY.read_text()
    pattern = re.compile(r"# BEGIN GENERATED.*?# END GENERATED", re.S)
    block = generated_block(table, values)
    CALIBRATION_PY.write_text(pattern.sub(lambda _: block, text))


def coverage(results: list[RunResult]) -> float:
    """Share of runs whose measured step lies inside the model's [p10, p90]."""
    inside = 0
    for r in results:
        low, high = calibration.step_range_factors(r.precision, r.moe)
        inside += r.predicted_step_s * low <= r.measured_step_s <= r.predicted_step_s * high
    return inside / max(len(results), 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--write", action="store_true", help="refit; regenerate model/calibration.py")
    ap.add_argument(
        "--fit-only", action="store_true", help="price and print the fit runs only (tuning)"
    )
    args = ap.parse_args(argv)
    rows = load_runs()
    fit_rows = [r for r in rows if r["split"] == "fit" and r["measured_step_s"]]
    if args.write:
        values = fit_constants(fit_rows)
        for k, v in values.items():
            setattr(calibration, k, v)
        print("fitted on the fit runs:", values)
    results = all_results(fit_rows if args.fit_only else rows)
    fit = [r for r in results if r.split == "fit"]
    held = [] if args.fit_only else [r for r in results if r.split == "heldout"]
    for name, part in (("fit", fit), ("held out", held)):
        if not part:
            continue
        s = summarize(part)
        print(
            f"{name:9s} {s['rows']:3.0f} runs  median |err| {s['median_abs_error']:6.1%}  "
            f"mean {s['mean_abs_error']:6.1%}  bias {s['bias']:+6.1%}  "
            f"within 10% {s['within_10pct']:4.0%}"
        )
    out_of_fold = cross_validated(fit_rows)
    table = residual_table(out_of_fold)
    print(f"residuals (fit runs, {FOLDS}-fold cross-validated):", table)
    if args.write:
        write_table(table, {k: getattr(calibration, k) for k in (*CONSTANTS, BY_ARCH, BY_STACK)})
        importlib.reload(calibration)
        print(f"wrote {CALIBRATION_PY}")
    if table == calibration.STEP_RESIDUALS:
        parts = (("fit, out of fold", out_of_fold), ("fit", fit), ("held out", held))
        covered = [f"{n} {coverage(part):.0%}" for n, part in parts if part]
        print(f"p10-p90 coverage (80% expected): {', '.join(covered)}")
    else:
        print("model/calibration.py is not current: run with --write")
    return 0


if __name__ == "__main__":
    sys.exit(main())
