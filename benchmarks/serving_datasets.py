"""Recompute a row of planning/data/serving_datasets.toml from per-sample token lengths.

The input is a CSV with `input_length,output_length` per sample, as extracted from the
MLCommons dataset pickles in openshift-psap/performance-dashboard mlperf-data/summaries/*.csv.
OUTPUT_MEAN rescales the output lengths to what the served model generates (Llama-2-70B-Chat
answers OpenOrca in 294.45 tokens on average, MLPerf's tokens_per_sample, against 218.9 for
the GPT-4 reference answers in the file).

    python benchmarks/serving_datasets.py llama2-70b-99.csv 294.45
"""

from __future__ import annotations

import sys

import numpy as np


def stats(path: str, output_mean: float | None = None) -> dict[str, object]:
    data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    p, o = data[:, 0], np.maximum(data[:, 1], 1.0)
    if output_mean:
        o = o * output_mean / o.mean()
    probs = [0.5, 0.9, 0.99]
    return {
        "rows": len(p),
        "prompt_tokens": round(float(p.mean()), 1),
        "output_tokens": round(float(o.mean()), 2),
        "decode_context_tokens": round(float((o * (p + o / 2)).mean() / o.mean()), 1),
        "prompt_cv": round(float(p.std() / p.mean()), 3),
        "prompt_quantiles": [round(float(x)) for x in np.quantile(p, probs)],
        "output_quantiles": [round(float(x)) for x in np.quantile(o, probs)],
        "max_tokens": round(float((p + o).max())),
    }


if __name__ == "__main__":
    mean = float(sys.argv[2]) if len(sys.argv) > 2 else None
    for key, value in stats(sys.argv[1], mean).items():
        print(f"{key} = {value}")
