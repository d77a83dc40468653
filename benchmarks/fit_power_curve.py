"""Fit each GPU family's power curve (catalog/data/power.toml [[curve]]) on ML.ENERGY's
measured serving power.

The points (planning/data/power_curve_points.csv) are the ML.ENERGY Leaderboard v3
measurements of Llama 3.1 8B, 70B and 405B-FP8 served by vLLM on H100 and B200 at batch sizes
8 to 2,048 (ml-energy/leaderboard public/data/models/*__lm-arena-chat.json, commit 0cd52da,
2026-02-27): average GPU power, batch, output length. For each point the serving model gives
the GPU's activity u (flop_util / 0.6 + 0.3 · hbm_util, `bandwall.model.energy`) at that
batch (LMArena prompts taken as 200 tokens: the data gives no input lengths), and the
measurement gives the share of the idle-to-TDP range, (W − idle) / (TDP − idle). A
piecewise-linear curve with knots at u = 0, 0.2, 0.4, 0.6, 0.8, 1 (0 at idle, 1 at the TDP)
is fitted by least squares and made non-decreasing.

    python benchmarks/fit_power_curve.py
"""

from __future__ import annotations

import csv
from importlib import resources

import numpy as np

from bandwall.catalog.power import load_power
from bandwall.model import energy
from bandwall.model.serving import evaluate_serving
from bandwall.planning.infer import serve_options
from bandwall.planning.request import make_infer_request
from bandwall.planning.resolve import resolve_cluster, resolve_workload
from bandwall.workloads import Transformer

KNOTS = np.array([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
PROMPT_TOKENS = 200
FAMILY = {"H100-SXM": "hopper", "B200": "blackwell"}


def points() -> list[dict[str, str]]:
    text = resources.files("bandwall.planning").joinpath("data", "power_curve_points.csv")
    return list(csv.DictReader(text.read_text("utf-8").splitlines()))


def activity_and_share(row: dict[str, str]) -> tuple[float, float]:
    tp = int(row["tp"])
    req = make_infer_request(
        model=row["model"],
        gpu=row["gpu"],
        gpus=tp,
        tp=tp,
        pp=1,
        precision=row["precision"],
        prompt_tokens=PROMPT_TOKENS,
        output_tokens=int(row["avg_output_tokens"]),
        runtime="vllm",
        max_concurrency=4096,
    )
    w, cl = resolve_workload(req), resolve_cluster(req)
    assert isinstance(w, Transformer)
    m = evaluate_serving(w, cl, tp, 1, float(row["avg_batch_size"]), serve_options(req))
    u = float(np.ravel(energy.power_utilisation(m.flop_util, m.hbm_util))[0])
    idle = load_power().gpu(cl.gpu.name).idle_W
    share = (float(row["watts_per_gpu"]) - idle) / (cl.gpu.tdp_W - idle)
    return u, share


def fit(us: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """Knot values (ends fixed at 0 and 1) minimising the squared error, non-decreasing."""
    basis = np.stack([np.interp(us, KNOTS, np.eye(len(KNOTS))[i]) for i in range(len(KNOTS))])
    inner = basis[1:-1].T
    target = shares - basis[-1]
    vals, *_ = np.linalg.lstsq(inner, target, rcond=None)
    knots = np.concatenate(([0.0], vals, [1.0]))
    return np.clip(np.maximum.accumulate(knots), 0.0, 1.0)


def main() -> None:
    by_family: dict[str, list[tuple[float, float]]] = {}
    for row in points():
        u, share = activity_and_share(row)
        by_family.setdefault(FAMILY[row["gpu"]], []).append((u, share))
        print(
            f"{row['model']:12} {row['gpu']:9} tp{row['tp']} batch {row['avg_batch_size']:>7}"
            f"  u {u:.3f}  measured share {share:.2f}"
        )
    for fam, pts in by_family.items():
        us, shares = (np.array(x) for x in zip(*pts, strict=True))
        knots = fit(us, shares)
        resid = shares - np.interp(us, KNOTS, knots)
        linear = shares - us
        print(
            f"{fam}: power_share = {[round(float(k), 3) for k in knots]} at {KNOTS.tolist()}"
            f"  (rms {np.sqrt(np.mean(resid**2)):.3f}; linear idle-to-TDP rms "
            f"{np.sqrt(np.mean(linear**2)):.3f}, {len(us)} points)"
        )


if __name__ == "__main__":
    main()
