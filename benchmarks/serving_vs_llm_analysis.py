"""bandwall's serving model and llm-analysis (cli99/llm-analysis 0.2.2) on the published rows.

For every row of planning/data/serving_validation.toml: the published value, bandwall's
prediction and error, and llm-analysis's `infer()` prediction and error for the same model,
GPU, precision, TP size, batch and sequence lengths (llm-analysis has no H100 FP8 of its own:
it runs with dtype w8a16e16 there, its closest 8-bit-weight format, and at its default
efficiencies of 1.0). llm-analysis 0.2.2 models a 2-matrix MLP whose width is a multiple of the
hidden size, so a SwiGLU MLP of width f (3 matrices) is given as the nearest multiple of hidden
to 1.5 f (Llama 2 7B: 16,384 for 16,512, -0.8 % MLP weights; 70B: 40,960 for 43,008, -4.8 %).

    python benchmarks/serving_vs_llm_analysis.py          # the comparison
    python benchmarks/serving_vs_llm_analysis.py --fit    # refit DECODE_HBM_FACTOR and
                                                          # FP8_GEMM_FACTOR on 2/3 of the rows
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from _peers import available
from bandwall.planning.infer import (
    error_summary,
    holdout,
    validate_energy,
    validate_serving,
    validation_rows,
)

LLAMA2_7B = {"layers": 32, "hidden": 4096, "heads": 32, "ffn": 11008, "vocab": 32000}
MODELS = {
    "llama2-70b": {
        "layers": 80,
        "hidden": 8192,
        "heads": 64,
        "kv_heads": 8,
        "ffn": 28672,
        "vocab": 32000,
    },
    "llama3-70b": {
        "layers": 80,
        "hidden": 8192,
        "heads": 64,
        "kv_heads": 8,
        "ffn": 28672,
        "vocab": 128256,
    },
}


def _llm_analysis(row: dict[str, Any], tmp: Path) -> float | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from llm_analysis.analysis import infer
    except Exception:
        return None
    dims = MODELS.get(row.get("model", ""), {k: row[k] for k in LLAMA2_7B if k in row})
    heads = int(dims["heads"])
    cfg = {
        "name": row["id"],
        "num_layers": int(dims["layers"]),
        "n_head": heads,
        "hidden_dim": int(dims["hidden"]),
        "vocab_size": int(dims["vocab"]),
        "max_seq_len": 8192,
        "num_key_value_heads": int(dims.get("kv_heads", heads)),
        "ffn_embed_dim": round(1.5 * int(dims["ffn"]) / int(dims["hidden"])) * int(dims["hidden"]),
    }
    path = tmp / f"{row['id']}.json"
    path.write_text(json.dumps(cfg))
    a100 = row["gpu"].startswith("A100")
    fp8 = row.get("precision") == "fp8"
    tp = int(row.get("tp", 1))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = infer(
                model_name=str(path),
                gpu_name="a100-sxm-80gb" if a100 else "h100-sxm-80gb",
                dtype_name="w8a16e16" if fp8 else "w16a16e16",
                log_level="ERROR",
                batch_size_per_gpu=int(row["batch"]),
                tp_size=tp,
                seq_len=int(row["prompt_tokens"]),
                num_tokens_to_generate=int(row["output_tokens"]),
            )
    except Exception as exc:  # llm-analysis refuses some shapes (memory, dtype)
        print(f"  llm-analysis: {row['id']}: {exc}")
        return None
    metric = row["metric"]
    if metric == "ttft_ms":
        return float(out["prefill_latency"]) * 1e3
    if metric == "itl_ms":
        return float(out["decode_latency"]) * 1e3
    # static batch: batch × output tokens over the whole batch's latency, per GPU
    return float(row["batch"]) * int(row["output_tokens"]) / float(out["total_latency"]) / tp


def compare() -> None:
    available()
    ours = {r["id"]: r for r in validate_serving()}
    errs: dict[str, list[float]] = {"bandwall": [], "llm-analysis": []}
    print(
        f"{'row':40s} {'published':>10s} {'bandwall':>10s} {'err':>7s} {'llm-a':>10s} {'err':>7s}"
    )
    with tempfile.TemporaryDirectory() as tmp_name:
        for row in validation_rows("serving"):
            mine = ours[row["id"]]
            theirs = _llm_analysis(row, Path(tmp_name))
            meas = float(row["measured"])
            errs["bandwall"].append(mine["error"])
            t_err = (theirs / meas - 1) if theirs else float("nan")
            if theirs:
                errs["llm-analysis"].append(t_err)
            print(
                f"{row['id'][:40]:40s} {meas:10,.1f} {mine['predicted']:10,.1f} "
                f"{mine['error']:+7.1%} {(theirs or float('nan')):10,.1f} {t_err:+7.1%}"
            )
    for name, e in errs.items():
        if e:
            s = error_summary(e)
            print(
                f"{name}: median |error| {s['median_abs_error']:.1%}, mean "
                f"{s['mean_abs_error']:.1%}, max {s['max_abs_error']:.1%} over {len(e)} rows"
            )
    fit, held = holdout(list(ours.values()))
    for name, part in (("fit rows", fit), ("held-out rows", held)):
        s = error_summary([r["error"] for r in part])
        print(f"bandwall {name}: median |error| {s['median_abs_error']:.1%} over {len(part)}")
    print("\nenergy (W per GPU, server/system AC, PUE 1):")
    en = validate_energy()
    for r in en:
        jpt = ""
        if "measured_J_per_token" in r:
            jpt = f"  J/token {r['measured_J_per_token']:.3f} vs {r['predicted_J_per_token']:.3f}"
        print(
            f"{r['id'][:40]:40s} {r['measured_W_per_gpu']:8,.1f} {r['predicted_W_per_gpu']:8,.1f} "
            f"{r['error']:+7.1%}{jpt}"
        )
    s = error_summary([r["error"] for r in en])
    print(f"energy: median |error| {s['median_abs_error']:.1%}, max {s['max_abs_error']:.1%}")


def fit() -> None:
    """Grid search of the two serving constants on the fit rows (2/3), both errors printed."""
    best: tuple[float, float, float] | None = None
    for hf in np.arange(0.55, 1.001, 0.025):
        for ff in np.arange(0.40, 1.001, 0.025):
            rows = validate_serving(hbm_factor=float(hf), fp8_gemm_factor=float(ff))
            fit_rows, _ = holdout(rows)
            med = statistics.median(abs(np.log1p(r["error"])) for r in fit_rows)
            if best is None or med < best[0]:
                best = (med, float(hf), float(ff))
    assert best is not None
    rows = validate_serving(hbm_factor=best[1], fp8_gemm_factor=best[2])
    fit_rows, held = holdout(rows)
    print(f"DECODE_HBM_FACTOR = {best[1]:.3f}, FP8_GEMM_FACTOR = {best[2]:.3f}")
    for name, part in (("fit", fit_rows), ("held out", held)):
        s = error_summary([r["error"] for r in part])
        print(
            f"{name}: median |error| {s['median_abs_error']:.1%}, max "
            f"{s['max_abs_error']:.1%} over {len(part)} rows"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="refit the two serving constants")
    args = parser.parse_args()
    fit() if args.fit else compare()
