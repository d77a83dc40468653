"""Speed targets of the planner, printed as ratios (not asserted):

- `sweep`: >= 1,000,000 fully priced plans per second on one core (every layout axis fixed, so
  each row is one plan: step, memory, faults, cost);
- one `plan` (with the layout search) and one `bandwall plan` command: <= 1 s wall;
- `bandwall --help`: <= 0.5 s, and both start times as a ratio to `python -c pass`.

Run: taskset -c 0 python benchmarks/plan_throughput.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import numpy as np

from bandwall.planning.api import plan, sweep
from bandwall.planning.request import make_request

TARGET_PLANS_PER_S = 1_000_000
TARGET_PLAN_S = 1.0
TARGET_HELP_S = 0.5


def _wall(argv: list[str], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    req = make_request(
        model="llama3-70b", gpus=1024, preset="ai-factory-ib", ep=1, cp=1, virtual_stages=1
    )
    grid = {
        "gpus": [float(2**i) for i in range(6, 15)],
        "bandwidth_Gbps": list(np.geomspace(1, 800, 100)),
        "tp": [1, 2, 4, 8],
        "pp": [1, 2, 4, 8, 16],
        "zero": [1, 3],
        "micro_batch": [1, 2, 4],
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
        searched = make_request(model=model, gpus=16384, preset="ai-factory-ib")
        plan(searched)
        start = time.perf_counter()
        p = plan(searched)
        dt = time.perf_counter() - start
        lay = p.layout
        print(
            f"plan {model} on 16,384 GPUs, layout searched over {p.search.tried:,} candidates: "
            f"{dt:.3f} s (target <= {TARGET_PLAN_S:.0f} s, ratio {TARGET_PLAN_S / dt:.1f}x); "
            f"tp={lay['tp']} pp={lay['pp']} cp={lay['cp']} ep={lay['ep']} dp={lay['dp']} "
            f"MFU {p.metrics['mfu']:.1%}"
        )
    python = _wall([sys.executable, "-c", "pass"])
    help_s = _wall([sys.executable, "-m", "bandwall", "--help"])
    plan_s = _wall(
        [sys.executable, "-m", "bandwall", "plan", "--model", "llama3-8b", "--gpus", "64"]
    )
    print(
        f"start: python -c pass {python * 1e3:.0f} ms; bandwall --help {help_s * 1e3:.0f} ms "
        f"({help_s / python:.1f}x python; target <= {TARGET_HELP_S} s, ratio "
        f"{TARGET_HELP_S / help_s:.2f}x); bandwall plan {plan_s * 1e3:.0f} ms "
        f"({plan_s / python:.1f}x python; target <= {TARGET_PLAN_S:.0f} s, ratio "
        f"{TARGET_PLAN_S / plan_s:.2f}x)"
    )


if __name__ == "__main__":
    main()
