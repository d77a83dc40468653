"""Measure a real cluster: collectives and links over torch.distributed, probe, monitor."""

from bandwall.measure.bench.runner import BenchConfig, bench_worker, count_wrong
from bandwall.measure.bench.store import Store, default_db_path

__all__ = ["BenchConfig", "Store", "bench_worker", "count_wrong", "default_db_path"]
