"""Full plans evaluated per second by `sweep`, and the time of an --auto search on 16,384 GPUs.

Targets (issue 3): >= 100,000 plans/s on one core; --auto on 16,384 GPUs under 1 s.
Run: taskset -c 0 python benchmarks/plan_throughput.py
"""

from __future__ import annotations

import time

import numpy as np
from bandwall.planning.sweep import sweep

from bandwall.planning import make_plan, request_from_fields

TARGET_PLANS_PER_S = 100_000
TARGET_AUTO_S = 1.0


def main() -> None:
    req = request_from_fields(model="llama3-70b", gpus=1024, preset="ai-factory-ib")
    grid = {
        "gpus": [float(2**i) for i in range(6, 15)],
        "bandwidth_Gbps": list(np.geomspace(1, 800, 40)),
        "tp": [1, 2, 4, 8],
        "pp": [1, 2, 4, 8, 16],
        "zero": [1, 3],
        "micro_batch": [1, 2, 4],
        "virtual_stages": [1, 2],
    }
    sweep(req, {k: v[:2] for k, v in grid.items()})  # warm up
    best = float("inf")
    rows = 0
    for _ in range(3):
        start = time.perf_counter()
        out = sweep(req, grid)
        best = min(best, time.perf_counter() - start)
        rows = len(out["step_time_s"])
    rate = rows / best
    print(
        f"sweep: {rows:,} plans in {best:.3f} s = {rate:,.0f} plans/s; target "
        f"{TARGET_PLANS_PER_S:,}/s; ratio {rate / TARGET_PLANS_PER_S:.2f}x"
    )
    for model in ("llama3-405b", "deepseek-v3"):
        auto = request_from_fields(model=model, gpus=16384, preset="ai-factory-ib", auto=True)
        make_plan(auto)
        start = time.perf_counter()
        p = make_plan(auto)
        dt = time.perf_counter() - start
        lay = p.layout
        print(
            f"--auto {model} on 16,384 GPUs: {dt:.3f} s (target < {TARGET_AUTO_S:.0f} s, "
            f"ratio {TARGET_AUTO_S / dt:.1f}x); best tp={lay['tp']} pp={lay['pp']} "
            f"cp={lay['cp']} ep={lay['ep']} dp={lay['dp']} MFU {p.metrics['mfu']:.1%}"
        )


if __name__ == "__main__":
    main()
