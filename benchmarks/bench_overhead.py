"""busbw reported by `bandwall bench collectives` against a minimal raw dist.all_reduce loop.

Same 2 local gloo ranks, same sizes, the two measurements interleaved round by round so drift
hits both. Target (issue 4): ratio >= 0.97 at sizes >= 1 MB.
Run: python benchmarks/bench_overhead.py
"""

from __future__ import annotations

import datetime as dt
import os
import time
from typing import Any

import numpy as np

SIZES = [1 << 20, 4 << 20, 16 << 20, 64 << 20]
ROUNDS = 5
ITERS = 10
TARGET = 0.97


def _worker() -> dict[int, list[tuple[float, float]]] | None:
    import torch
    import torch.distributed as dist

    from bandwall.measure.bench.runner import BenchConfig, _measure
    from bandwall.model.collectives import Op

    dist.init_process_group("gloo", timeout=dt.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    cfg = BenchConfig(iters=ITERS, warmup=2, check=False, progress=False, inplace=False)
    out: dict[int, list[tuple[float, float]]] = {s: [] for s in SIZES}
    for _ in range(ROUNDS):
        for size in SIZES:
            row = _measure(Op.ALL_REDUCE, size, cfg, rank, world, torch.device("cpu"))
            t = torch.zeros(size // 4)
            for _ in range(2):
                dist.all_reduce(t)
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(ITERS):
                dist.all_reduce(t)
            raw = torch.tensor([(time.perf_counter() - t0) / ITERS], dtype=torch.float64)
            dist.all_reduce(raw, op=dist.ReduceOp.MAX)
            if rank == 0 and row is not None:
                raw_busbw = size / float(raw) / 1e9 * 2 * (world - 1) / world
                out[size].append((row["busbw_GBps"], raw_busbw))
    dist.destroy_process_group()
    return out if rank == 0 else None


def main() -> None:
    import shutil
    import tempfile

    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    from bandwall.measure.bench.launch import _free_port

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    cfg = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=2,
        run_id="overhead",
        rdzv_backend="c10d",
        rdzv_endpoint=f"127.0.0.1:{_free_port()}",
        max_restarts=0,
        start_method="spawn",
        logs_specs=DefaultLogsSpecs(log_dir=(logs := tempfile.mkdtemp(prefix="bandwall-ranks-"))),
    )
    try:
        res: Any = elastic_launch(cfg, _worker)()[0]
    finally:
        shutil.rmtree(logs, ignore_errors=True)
    ratios = []
    for size, pairs in res.items():
        ours = float(np.median([p[0] for p in pairs]))
        raw = float(np.median([p[1] for p in pairs]))
        ratios.append(ours / raw)
        print(
            f"{size / 2**20:>5.0f} MiB: bandwall busbw {ours:.3f} GB/s, raw loop {raw:.3f} "
            f"GB/s, ratio {ours / raw:.3f}"
        )
    print(f"median ratio at >= 1 MB: {float(np.median(ratios)):.3f} (target >= {TARGET})")


if __name__ == "__main__":
    main()
