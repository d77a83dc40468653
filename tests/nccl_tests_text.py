"""nccl-tests output as tests write it (all_reduce_perf of nccl-tests 2.x with validation):
the run header, one '# Rank' line per device and the two-line table header, so each test
states only its rows."""

from __future__ import annotations

RUN_HEADER = (
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 "
    "iters: 20 agg iters: 1 validation: 1 graph: 0\n"
)
TABLE_HEADER = (
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
    "     (us)  (GB/s)  (GB/s)\n"
)
FOOTER = "# Out of bounds values : 0 OK\n"


def devices(host: str = "node1", gpu: str = "NVIDIA H100 80GB HBM3", n: int = 2) -> str:
    """One '# Rank' line per device, one process each."""
    return "".join(
        f"#  Rank {i:2d} Group  0 Pid {1234 + i:6d} on {host} device {i:2d} [0x{27 + i:x}] {gpu}\n"
        for i in range(n)
    )


def log(rows: str, *, host: str = "node1", footer: bool = True) -> str:
    """A whole all_reduce_perf output around `rows`."""
    return RUN_HEADER + devices(host) + TABLE_HEADER + rows + (FOOTER if footer else "")


def row(size: int, time_us: float, algbw: float, busbw: float) -> str:
    """One all_reduce float row, out-of-place and in-place alike."""
    half = f"{time_us:9.2f} {algbw:7.2f} {busbw:7.2f}      0"
    return f"  {size:>10}  {size // 4:>10}     float     sum      -1 {half} {half}\n"
