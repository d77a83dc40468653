"""What each rank runs: nccl-tests-style collective timing and a pairwise link matrix.

Runs inside a torch.distributed process group (set up by torchrun, Slurm/Kubernetes through
torchrun, or `--local N` through torch's own elastic launcher). Rank 0 computes statistics,
writes every finished size to the results store and shows progress; every rank takes part in
every measurement.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import platform
import re
import socket
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from bandwall.errors import BenchmarkError
from bandwall.measure.bench.store import Store
from bandwall.model.collectives import Op, busbw_factor

DTYPES = ("float32", "float64", "bfloat16", "float16", "int32")
PATTERN_PERIOD = 13


@dataclass(frozen=True)
class BenchConfig:
    """Everything a rank needs; plain data so it can cross a process spawn."""

    kind: str = "collectives"
    ops: tuple[str, ...] = ("all_reduce",)
    sizes: tuple[int, ...] = (1 << 20,)
    warmup: int = 5
    iters: int = 20
    dtype: str = "float32"
    inplace: bool = False
    check: bool = True
    backend: str = "auto"
    timeout_s: float = 300.0
    db: str | None = None
    link_size: int = 16 << 20
    link_iters: int = 10
    inject_error: bool = False
    progress: bool = True
    args: dict[str, Any] = field(default_factory=dict)


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise BenchmarkError(
            "torch is not installed; pip install 'bandwall[bench]' (pins torch==2.13.0)"
        ) from None
    return torch


def pick_backend(requested: str) -> str:
    """nccl on CUDA machines, gloo elsewhere, unless forced."""
    torch = _torch()
    import torch.distributed as dist

    if requested not in ("auto", "nccl", "gloo"):
        raise BenchmarkError(
            f"unknown value {requested!r}; choose auto, nccl or gloo", field="backend"
        )
    if requested == "auto":
        return "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    if requested == "nccl" and not (torch.cuda.is_available() and dist.is_nccl_available()):
        raise BenchmarkError("nccl needs CUDA GPUs and an NCCL build of torch", field="backend")
    return requested


def host_info() -> dict[str, Any]:
    torch = _torch()
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
    }
    if torch.cuda.is_available():
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    if os.environ.get("BANDWALL_LAB"):
        info["lab"] = {
            "name": os.environ["BANDWALL_LAB"],
            "rates_Gbps": [
                float(r) for r in os.environ.get("BANDWALL_LAB_RATES_GBPS", "").split(",") if r
            ],
        }
    return info


def versions() -> dict[str, Any]:
    torch = _torch()
    from bandwall import __version__

    v: dict[str, Any] = {"bandwall": __version__, "torch": torch.__version__}
    if torch.cuda.is_available():
        v["cuda"] = torch.version.cuda
        with contextlib.suppress(Exception):  # version probing is best effort
            v["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
    return v


class _Buffers:
    """Send/receive tensors for one (op, size), following nccl-tests' size conventions."""

    def __init__(
        self, op: Op, size: int, cfg: BenchConfig, rank: int, world: int, device: Any
    ) -> None:
        torch = _torch()
        self.torch = torch
        self.dtype = getattr(torch, cfg.dtype)
        elem = torch.empty((), dtype=self.dtype).element_size()
        count = max(size // elem, 1)
        if op in (Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALL_TO_ALL):
            count = max(count // world, 1) * world
        self.op, self.count, self.elem = op, count, elem
        self.rank, self.world, self.inplace = rank, world, cfg.inplace
        self.chunk = count // world

        def mk(n: int) -> Any:
            return torch.zeros(n, dtype=self.dtype, device=device)

        if op is Op.ALL_GATHER:
            self.recv = mk(count)
            self.send = (
                self.recv.narrow(0, rank * self.chunk, self.chunk)
                if cfg.inplace
                else mk(self.chunk)
            )
        elif op is Op.REDUCE_SCATTER:
            self.send = mk(count)
            self.recv = (
                self.send.narrow(0, rank * self.chunk, self.chunk)
                if cfg.inplace
                else mk(self.chunk)
            )
        elif op is Op.ALL_TO_ALL:
            self.send, self.recv = mk(count), mk(count)
        else:
            self.send = mk(count)
            self.recv = self.send if op is not Op.SEND_RECV else mk(count)

    @property
    def size_bytes(self) -> int:
        return int(self.count * self.elem)

    def pattern(self, n: int, offset: int = 0) -> Any:
        idx = self.torch.arange(offset, offset + n, device=self.send.device)
        return (idx % PATTERN_PERIOD + 1).to(self.dtype)

    def fill(self) -> None:
        """Rank r sends (r + 1) · p_i, with p_i = i mod 13 + 1 over the full buffer index."""
        offset = self.rank * self.chunk if self.op is Op.ALL_GATHER else 0
        self.send.copy_(self.pattern(self.send.numel(), offset) * (self.rank + 1))

    def expected(self) -> Any | None:
        n, r, c = self.world, self.rank, self.chunk
        total = n * (n + 1) / 2
        if self.op is Op.ALL_REDUCE:
            return self.pattern(self.count) * total
        if self.op is Op.ALL_GATHER:
            owner = self.torch.arange(self.count, device=self.send.device) // c + 1
            return self.pattern(self.count) * owner.to(self.dtype)
        if self.op is Op.REDUCE_SCATTER:
            return self.pattern(c, r * c) * total
        if self.op is Op.ALL_TO_ALL:
            sender = self.torch.arange(self.count, device=self.send.device) // c + 1
            idx = self.torch.arange(self.count, device=self.send.device) % c + r * c
            return (idx % PATTERN_PERIOD + 1).to(self.dtype) * sender.to(self.dtype)
        if self.op is Op.BROADCAST:
            return self.pattern(self.count)
        if self.op is Op.REDUCE:
            return self.pattern(self.count) * total if r == 0 else None
        prev = (r - 1) % n
        return self.pattern(self.count) * (prev + 1)

    def run(self) -> None:
        import torch.distributed as dist

        op = self.op
        if op is Op.ALL_REDUCE:
            dist.all_reduce(self.send)
        elif op is Op.ALL_GATHER:
            _ALL_GATHER(self.recv, self.send)
        elif op is Op.REDUCE_SCATTER:
            _REDUCE_SCATTER(self.recv, self.send)
        elif op is Op.ALL_TO_ALL:
            dist.all_to_all_single(self.recv, self.send)
        elif op is Op.BROADCAST:
            dist.broadcast(self.send, src=0)
        elif op is Op.REDUCE:
            dist.reduce(self.send, dst=0)
        else:
            nxt, prev = (self.rank + 1) % self.world, (self.rank - 1) % self.world
            reqs = dist.batch_isend_irecv(
                [dist.P2POp(dist.isend, self.send, nxt), dist.P2POp(dist.irecv, self.recv, prev)]
            )
            for req in reqs:
                req.wait()


def _gather_scatter_fns() -> tuple[Any, Any]:
    """torch 2.13 renamed the flat-tensor collectives; use whichever this torch has."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None, None
    ag = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    rs = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    return ag, rs


_ALL_GATHER, _REDUCE_SCATTER = _gather_scatter_fns()


def count_wrong(got: Any, want: Any | None) -> int:
    """Elements that differ from the expected result (relative 1e-2 for 16-bit types)."""
    if want is None:
        return 0
    torch = _torch()
    tol = 1e-2 if got.dtype in (torch.bfloat16, torch.float16) else 1e-6
    diff = (got.double() - want.double()).abs() > tol * want.double().abs().clamp(min=1.0)
    return int(diff.sum().item())


def straggler_delay_s() -> float:
    """Rank-level straggler emulation (`lab run --straggler RANK:SECONDS`)."""
    try:
        return max(float(os.environ.get("BANDWALL_STRAGGLER_DELAY_S", "0")), 0.0)
    except ValueError:
        return 0.0


def _sync(device: Any) -> None:
    if device.type == "cuda":
        _torch().cuda.synchronize(device)


def _measure(
    op: Op, size: int, cfg: BenchConfig, rank: int, world: int, device: Any
) -> dict[str, Any] | None:
    import torch.distributed as dist

    torch = _torch()
    buf = _Buffers(op, size, cfg, rank, world, device)
    buf.fill()
    for _ in range(cfg.warmup):
        buf.run()
    _sync(device)
    dist.barrier()
    times = np.empty(cfg.iters)
    clock = time.perf_counter
    delay = straggler_delay_s()
    for i in range(cfg.iters):
        if delay:
            time.sleep(delay)  # this rank arrives late; the others' times include the wait
        t0 = clock()
        buf.run()
        _sync(device)
        times[i] = clock() - t0
    wrong = 0
    if cfg.check:
        buf.fill()
        buf.run()
        _sync(device)
        got = buf.recv if op is not Op.ALL_REDUCE else buf.send
        if op in (Op.BROADCAST, Op.REDUCE):
            got = buf.send
        if cfg.inject_error and rank == 0:
            got.view(-1)[0] += 1
        wrong = count_wrong(got, buf.expected())
    stats = torch.tensor(np.append(times, 0.0), dtype=torch.float64, device=device)
    dist.all_reduce(stats, op=dist.ReduceOp.MAX)  # a collective ends when its last rank does
    wrong_t = torch.tensor([wrong], dtype=torch.int64, device=device)
    dist.all_reduce(wrong_t)
    if rank != 0:
        return None
    slowest = stats[:-1].cpu().numpy()
    median = float(np.median(slowest))
    algbw = buf.size_bytes / median / 1e9
    return {
        "op": op.value,
        "size_bytes": buf.size_bytes,
        "count": buf.count,
        "dtype": cfg.dtype,
        "inplace": int(cfg.inplace),
        "iters": cfg.iters,
        "time_p10_s": float(np.percentile(slowest, 10)),
        "time_median_s": median,
        "time_p90_s": float(np.percentile(slowest, 90)),
        "time_p99_s": float(np.percentile(slowest, 99)),
        "time_min_s": float(slowest.min()),
        "algbw_GBps": algbw,
        "busbw_GBps": float(algbw * busbw_factor(op, world)),
        "wrong": int(wrong_t.item()),
    }


def _measure_link(
    src: int, dst: int, cfg: BenchConfig, rank: int, device: Any
) -> dict[str, Any] | None:
    """Ping-pong between two ranks: 1-element round trips for latency (half the RTT), then
    one-way bulk transfers acknowledged by one element, for bandwidth."""
    import torch.distributed as dist

    torch = _torch()
    if rank not in (src, dst):
        return None
    peer = dst if rank == src else src
    tiny = torch.zeros(1, device=device)
    bulk = torch.zeros(max(cfg.link_size // 4, 1), device=device)
    lat = np.empty(max(cfg.link_iters * 5, 10))
    for i in range(-2, len(lat)):
        t0 = time.perf_counter()
        if rank == src:
            dist.send(tiny, peer)
            dist.recv(tiny, peer)
        else:
            dist.recv(tiny, peer)
            dist.send(tiny, peer)
        if i >= 0:
            lat[i] = (time.perf_counter() - t0) / 2
    bw = np.empty(cfg.link_iters)
    for i in range(-1, cfg.link_iters):
        t0 = time.perf_counter()
        if rank == src:
            dist.send(bulk, peer)
            dist.recv(tiny, peer)
        else:
            dist.recv(bulk, peer)
            dist.send(tiny, peer)
        if i >= 0:
            bw[i] = time.perf_counter() - t0
    if rank != src:
        return None
    one_way = np.maximum(np.median(bw) - np.median(lat), 1e-9)
    return {
        "src": src,
        "dst": dst,
        "size_bytes": bulk.numel() * 4,
        "bw_GBps": float(bulk.numel() * 4 / one_way / 1e9),
        "latency_p50_s": float(np.median(lat)),
        "latency_p90_s": float(np.percentile(lat, 90)),
        "latency_p99_s": float(np.percentile(lat, 99)),
        "jitter_s": float(np.percentile(lat, 90) - np.percentile(lat, 10)),
    }


def _record(fn: Any) -> Any:
    """torch elastic's @record: a failing rank writes its error where the launcher reads it."""
    try:
        from torch.distributed.elastic.multiprocessing.errors import record
    except ImportError:
        return fn
    return record(fn)


@_record
def bench_worker(cfg: BenchConfig) -> dict[str, Any] | None:
    """Entry point of one rank. Returns, on rank 0, the run id and the rows measured."""
    torch = _torch()
    import torch.distributed as dist

    backend = pick_backend(cfg.backend)
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=dt.timedelta(seconds=cfg.timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)
    store = run_id = None
    if rank == 0:
        store = Store(cfg.db)
        run_id = store.start_run(
            cfg.kind,
            world,
            backend,
            host_info(),
            versions(),
            {**cfg.args, **asdict(cfg), "token": os.environ.get("BANDWALL_RUN_TOKEN")},
        )
    me = {"rank": rank, "hostname": socket.gethostname(), "pid": os.getpid()}
    everyone: list[Any] = [None] * world
    dist.all_gather_object(everyone, me)
    if store and run_id:
        store.set_ranks(run_id, everyone)
    rows: list[dict[str, Any]] = []
    where = "setup"
    progress = _Progress(cfg, world, enabled=rank == 0 and cfg.progress)
    try:
        if cfg.kind == "links":
            for src in range(world):
                for dst in range(world):
                    if src == dst:
                        continue
                    where = f"link {src}->{dst}"
                    row = _measure_link(src, dst, cfg, rank, device)
                    dist.barrier()
                    rows.extend(_gather_rows(row, rank, world, device))
                    if rank == 0 and store and run_id:
                        for r in rows[len(rows) - 1 :]:
                            store.add_link(run_id, r)
                    progress.advance(where)
        else:
            for name in cfg.ops:
                op = Op(name)
                for size in cfg.sizes:
                    where = f"{op.value} at {size} bytes"
                    row = _measure(op, size, cfg, rank, world, device)
                    if row is not None and store and run_id:
                        store.add_result(run_id, row)
                        rows.append(row)
                    progress.advance(where)
        if store and run_id:
            store.finish_run(run_id, "complete")
    except Exception as exc:  # a lost rank or a timeout surfaces as a backend error
        text = re.sub(r"^\[[^\]]*\]\s*", "", str(exc).splitlines()[0])  # gloo source path
        msg = f"rank {rank}: {where}: {type(exc).__name__}: {text[:300]}"
        if store and run_id:
            store.finish_run(run_id, "failed", msg)
        progress.close()
        raise BenchmarkError(msg) from exc
    finally:
        progress.close()
        if store:
            store.close()
    dist.destroy_process_group()
    return {"run_id": run_id, "rows": rows} if rank == 0 else None


def _gather_rows(
    row: dict[str, Any] | None, rank: int, world: int, device: Any
) -> list[dict[str, Any]]:
    """Move the src rank's link row to rank 0 (object collectives, small)."""
    import torch.distributed as dist

    out: list[Any] = [None] * world
    dist.all_gather_object(out, row)
    return [r for r in out if r is not None] if rank == 0 else []


class _Progress:
    """A Rich progress bar on rank 0's stderr; silent elsewhere."""

    def __init__(self, cfg: BenchConfig, world: int, enabled: bool) -> None:
        self.bar: Any = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        total = world * (world - 1) if cfg.kind == "links" else len(cfg.ops) * len(cfg.sizes)
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self.task = self.bar.add_task(cfg.kind, total=total)
        self.bar.start()

    def advance(self, what: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, advance=1, description=what)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
