"""How many (op, algo, size, ranks) evaluations per second the vectorised model does.

Target (issue 2): >= 1,000,000 per second on one core. Run: python benchmarks/collective_model.py
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
from bandwall.collectives import ALGORITHMS, build_topology, collective_time_s

TARGET_PER_S = 1_000_000


def main() -> None:
    topo = build_topology(
        gpus_per_node=8, scale_out="ib-ndr", wan="internet-10g", nodes_per_site=64
    )
    sizes = np.logspace(3, 33, 64, base=2)
    ranks = np.arange(2, 16386, 16, dtype=np.float64)
    size_grid, rank_grid = np.meshgrid(sizes, ranks)
    pairs = [(op, algo) for op, algos in ALGORITHMS.items() for algo in algos]
    for op, algo in pairs:  # warm up
        collective_time_s(op, algo, size_grid[:2], rank_grid[:2], topo)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for op, algo in pairs:
            collective_time_s(op, algo, size_grid, rank_grid, topo)
        best = min(best, time.perf_counter() - start)
    evaluations = len(pairs) * size_grid.size
    rate = evaluations / best
    print(
        f"collective model: {evaluations:,} evaluations ({len(pairs)} op/algo pairs x "
        f"{sizes.size} sizes x {ranks.size} rank counts) in {best * 1e3:.1f} ms"
    )
    print(
        f"rate: {rate:,.0f} evaluations/s; target {TARGET_PER_S:,}/s; "
        f"ratio {rate / TARGET_PER_S:.1f}x"
    )


if __name__ == "__main__":
    main()
