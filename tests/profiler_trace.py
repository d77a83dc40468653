"""torch.profiler (Kineto) trace events for tests: profiler steps with the kernels a test asks
for, so each test states only what its trace differs in."""

from __future__ import annotations

from typing import Any


def profiler_steps(
    steps: int = 5, gemm_us: float = 50_000, allreduce_us: float | None = None
) -> list[dict[str, Any]]:
    """Per 100 ms step: a 90 ms `ProfilerStep#N` annotation, a bf16 GEMM kernel of `gemm_us`
    from 0.2 ms and, when `allreduce_us` is given, an NCCL all-reduce kernel of it from 40 ms."""
    events: list[dict[str, Any]] = []
    for s in range(steps):
        t0 = s * 100_000
        events += [
            {"ph": "X", "name": f"ProfilerStep#{s}", "cat": "user_annotation", "ts": t0,
             "dur": 90_000, "pid": 0, "tid": 1},
            {"ph": "X", "name": "sm90_xmma_gemm_bf16", "cat": "kernel", "ts": t0 + 200,
             "dur": gemm_us, "pid": 1, "tid": 7, "args": {"stream": 7, "device": 0}},
        ]  # fmt: skip
        if allreduce_us is not None:
            events.append(
                {"ph": "X", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "cat": "kernel",
                 "ts": t0 + 40_000, "dur": allreduce_us, "pid": 1, "tid": 8,
                 "args": {"stream": 8, "device": 0}}
            )  # fmt: skip
    return events
