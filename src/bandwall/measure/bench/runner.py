"""What each rank runs: nccl-tests-style collective timing and a pairwise link matrix.

Runs inside a torch.distributed process group (set up by torchrun, Slurm/Kubernetes through
torchrun, or `--local N` through torch's own elastic launcher). Rank 0 computes statistics,
writes every finished size to the results store and streams it as an nccl-tests row; every
rank takes part in every measurement.

A lost rank is named, not guessed: every rank publishes a heartbeat and where it is in the
c10d store, so the rank whose collective times out can tell a frozen peer (no heartbeat) from
a slow one, and says which it was.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import os
import platform
import re
import signal
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from bandwall.errors import BenchmarkError, ConfigError
from bandwall.measure.bench import nccl_format
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
    #: None measures both, out-of-place then in-place, as nccl-tests does; True / False one.
    inplace: bool | None = None
    check: bool = True
    backend: str = "auto"
    timeout_s: float = 300.0
    db: str | None = None
    link_size: int = 16 << 20
    link_iters: int = 10
    inject_error: bool = False
    progress: bool = True
    #: Print nccl-tests rows on rank 0's stdout as each size finishes.
    stream: bool = False
    debug: bool = False
    args: dict[str, Any] = field(default_factory=dict)


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise BenchmarkError(
            "torch is not installed; pip install 'bandwall[bench]' (torch>=2.4,<3: a "
            "cluster keeps the CUDA build it has)"
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
        self,
        op: Op,
        size: int,
        cfg: BenchConfig,
        rank: int,
        world: int,
        device: Any,
        inplace: bool = False,
    ) -> None:
        torch = _torch()
        self.torch = torch
        self.dtype = getattr(torch, cfg.dtype)
        elem = torch.empty((), dtype=self.dtype).element_size()
        count = max(size // elem, 1)
        if op in (Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALL_TO_ALL):
            count = max(count // world, 1) * world
        self.op, self.count, self.elem = op, count, elem
        self.rank, self.world, self.inplace = rank, world, inplace
        self.chunk = count // world

        def mk(n: int) -> Any:
            return torch.zeros(n, dtype=self.dtype, device=device)

        if op is Op.ALL_GATHER:
            self.recv = mk(count)
            self.send = (
                self.recv.narrow(0, rank * self.chunk, self.chunk) if inplace else mk(self.chunk)
            )
        elif op is Op.REDUCE_SCATTER:
            self.send = mk(count)
            self.recv = (
                self.send.narrow(0, rank * self.chunk, self.chunk) if inplace else mk(self.chunk)
            )
        elif op is Op.ALL_TO_ALL:
            # torch's all_to_all_single and send/recv pairs cannot share one buffer, and
            # torch's all_reduce / broadcast / reduce are in-place by construction: for these
            # the two nccl-tests columns time the same call.
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
            _gather_scatter_fns()[0](self.recv, self.send)
        elif op is Op.REDUCE_SCATTER:
            _gather_scatter_fns()[1](self.recv, self.send)
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


@functools.cache
def _gather_scatter_fns() -> tuple[Any, Any]:
    """torch 2.13 renamed the flat-tensor collectives; use whichever this torch has. Looked
    up on first use: importing torch takes seconds, and `results`, `import` and the dashboard
    import this module without running a collective."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None, None
    ag = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    rs = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    return ag, rs


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
    op: Op,
    size: int,
    cfg: BenchConfig,
    rank: int,
    world: int,
    device: Any,
    inplace: bool = False,
) -> dict[str, Any] | None:
    import torch.distributed as dist

    torch = _torch()
    buf = _Buffers(op, size, cfg, rank, world, device, inplace)
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
        if cfg.inject_error and rank == 0 and inplace == bool(cfg.inplace):  # one side
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
        "inplace": int(inplace),
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


#: Bulk messages sent back to back per bandwidth sample, before the one-element ack: the
#: ack's latency is paid once per burst, so a message of a few latencies still resolves.
LINK_BURST = 8
#: Share of a burst's time the transfers must take (beyond the ack's median latency) for the
#: rate to count as measured; below it the rate is the burst's, a lower bound, and flagged.
LINK_MIN_SENDING_SHARE = 0.25


def _measure_link(
    src: int, dst: int, cfg: BenchConfig, rank: int, device: Any
) -> dict[str, Any] | None:
    """Ping-pong between two ranks: 1-element round trips for latency (half the RTT), then
    bursts of LINK_BURST one-way bulk transfers acknowledged by one element, for bandwidth
    ((burst − ack latency) / LINK_BURST per message)."""
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
        for _ in range(LINK_BURST):
            if rank == src:
                dist.send(bulk, peer)
            else:
                dist.recv(bulk, peer)
        if rank == src:
            dist.recv(tiny, peer)
        else:
            dist.send(tiny, peer)
        if i >= 0:
            bw[i] = time.perf_counter() - t0
    if rank != src:
        return None
    size = bulk.numel() * 4
    burst_s, ack_s = float(np.median(bw)), float(np.median(lat))
    sending = burst_s - ack_s
    # the transfers must outlast the acknowledgement's noise to be measured: a bulk no slower
    # than the ping read size / 1 ns (1,048,576 GB/s on loopback; fuzz round 23, B1). Then
    # the burst with its ack is all that is known: a lower bound on the rate, said so.
    resolved = sending > LINK_MIN_SENDING_SHARE * burst_s
    rate = LINK_BURST * size / (sending if resolved else burst_s)
    return {
        "src": src,
        "dst": dst,
        "size_bytes": size,
        "bw_GBps": float(rate / 1e9),
        "latency_bound": not resolved,
        "latency_p50_s": ack_s,
        "latency_p90_s": float(np.percentile(lat, 90)),
        "latency_p99_s": float(np.percentile(lat, 99)),
        "jitter_s": float(np.percentile(lat, 90) - np.percentile(lat, 10)),
    }


def _record(fn: Any) -> Any:
    """torch elastic's @record: a failing rank writes its error where the launcher reads it.
    Applied when the rank runs, so importing this module does not import torch (seconds)."""

    @functools.wraps(fn)
    def rank(*args: Any, **kwargs: Any) -> Any:
        try:
            from torch.distributed.elastic.multiprocessing.errors import record
        except ImportError:
            return fn(*args, **kwargs)
        return record(fn)(*args, **kwargs)

    return rank


def modes(cfg: BenchConfig) -> tuple[bool, ...]:
    """The in-place settings each size is measured with (nccl-tests: both)."""
    return (False, True) if cfg.inplace is None else (bool(cfg.inplace),)


def _device_info(device: Any, local: int) -> dict[str, Any]:
    if device.type == "cuda":
        torch = _torch()
        props = torch.cuda.get_device_properties(device)
        bus = (
            f"{getattr(props, 'pci_domain_id', 0):04x}:{getattr(props, 'pci_bus_id', 0):02x}:"
            f"{getattr(props, 'pci_device_id', 0):02x}"
        )
        return {"device": device.index, "bus": bus, "device_name": props.name}
    return {"device": local, "bus": "0000:00:00", "device_name": "cpu (gloo)"}


def _default_store() -> Any:
    """The c10d store the process group was built on (torchrun's / the elastic agent's)."""
    try:
        from torch.distributed.distributed_c10d import _get_default_store

        return _get_default_store()
    except Exception:  # private API: without it there is no heartbeat, only the timeout
        return None


class Beacon:
    """Heartbeat and position of every rank, kept in the c10d store.

    A background thread bumps ``bandwall/beat/<rank>`` every ``interval`` seconds with a
    counter and where the rank is. A rank frozen by SIGSTOP, a debugger or a dead host stops
    counting; a rank that is merely behind keeps counting but names an earlier step. The store
    lives in the launcher (torchrun / elastic agent), so it still answers when a rank hangs.
    """

    PREFIX = "bandwall/beat/"

    def __init__(self, rank: int, world: int, interval_s: float = 0.25) -> None:
        self.rank, self.world, self.interval_s = rank, world, interval_s
        self.where = "setup"
        self.store = _default_store()
        self._stop = threading.Event()
        self._beats = 0
        self._thread: threading.Thread | None = None
        if self.store is not None:
            self._publish()
            self._thread = threading.Thread(target=self._run, name="bandwall-beat", daemon=True)
            self._thread.start()

    def at(self, where: str) -> str:
        """Say where this rank is now (published at once: the step a rank froze in is the
        one it announced last)."""
        self.where = where
        self._publish()
        return where

    def _publish(self) -> None:
        if self.store is None:
            return
        self._beats += 1
        with contextlib.suppress(Exception):  # a store hiccup must not end the benchmark
            self.store.set(f"{self.PREFIX}{self.rank}", f"{self._beats}|{self.where}")

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._publish()

    def _read(self) -> dict[int, tuple[int, str]]:
        out: dict[int, tuple[int, str]] = {}
        for r in range(self.world):
            key = f"{self.PREFIX}{r}"
            with contextlib.suppress(Exception):
                if r != self.rank and self.store.check([key]):
                    beats, _, where = self.store.get(key).decode().partition("|")
                    out[r] = (int(beats), where)
        return out

    def diagnose(self, watch_s: float = 1.0) -> list[dict[str, Any]]:
        """The other ranks that are frozen (no heartbeat over ``watch_s``) or never beat."""
        if self.store is None:
            return []
        with contextlib.suppress(Exception):
            self.store.set_timeout(dt.timedelta(seconds=2))
        first = self._read()
        time.sleep(max(watch_s, 4 * self.interval_s))
        second = self._read()
        out = []
        for r in range(self.world):
            if r == self.rank:
                continue
            if r not in second:
                out.append({"rank": r, "where": "setup", "state": "never started"})
            elif r in first and second[r][0] == first[r][0]:
                out.append({"rank": r, "where": second[r][1], "state": "hung"})
        return out

    def close(self) -> None:
        self._stop.set()


def _is_timeout(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "timed out" in text or "timeout" in text or type(exc).__name__ == "DistBackendError"


def _blame(
    exc: BaseException,
    rank: int,
    where: str,
    cfg: BenchConfig,
    beacon: Beacon | None,
    everyone: list[Any],
) -> tuple[str, list[int]]:
    """One line saying which rank stopped the run, and the PIDs of frozen peers on this host.

    A timed-out rank looks at the heartbeats: a peer whose counter stopped is blamed (and its
    PID returned, so it can be killed once the diagnosis is recorded: SIGKILL works on a
    stopped process, and the launcher then does not wait out its grace period for it).
    Otherwise the error is this rank's own."""
    text = re.sub(r"^\[[^\]]*\]\s*", "", (str(exc).splitlines() or [""])[0])[:300]
    own = f"rank {rank}: {where}: {type(exc).__name__}: {text}"
    if beacon is None or not _is_timeout(exc):
        return own, []
    frozen = beacon.diagnose()
    if not frozen:
        return own, []
    host = socket.gethostname()
    pids = []
    for f in frozen:
        peer = next((p for p in everyone if p and p.get("rank") == f["rank"]), None)
        if peer and peer.get("hostname") == host and peer.get("pid") not in (None, os.getpid()):
            pids.append(int(peer["pid"]))
    culprits = "; ".join(f"rank {f['rank']} {f['state']} during {f['where']}" for f in frozen)
    return f"{culprits} (rank {rank} Timed out after {cfg.timeout_s:g} s waiting in {where})", pids


def _leave_diagnosis(rank: int, msg: str) -> None:
    """Hand the diagnosis to `--local`'s launcher before anything else can stop this rank."""
    folder = os.environ.get("BANDWALL_DIAG_DIR")
    if folder:
        with contextlib.suppress(OSError), open(os.path.join(folder, f"rank-{rank}.txt"), "w") as f:
            f.write(msg)
    elif rank != 0:
        sys.stderr.write(f"error: {msg}\n")


@_record
def bench_worker(cfg: BenchConfig) -> dict[str, Any] | None:  # noqa: C901
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
    beacon = Beacon(rank, world)
    store = run_id = None
    everyone: list[Any] = [None] * world
    rows: list[dict[str, Any]] = []
    where = "setup"
    progress = _Progress(cfg, world, enabled=rank == 0 and cfg.progress)
    out = _Stream(cfg, world, enabled=rank == 0 and cfg.stream and cfg.kind == "collectives")
    try:
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
        me = {
            "rank": rank,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            **_device_info(device, local),
        }
        dist.all_gather_object(everyone, me)
        if store and run_id:
            store.set_ranks(run_id, everyone)
        if cfg.kind == "links":
            for src in range(world):
                for dst in range(world):
                    if src == dst:
                        continue
                    where = beacon.at(f"link {src}->{dst}")
                    row = _measure_link(src, dst, cfg, rank, device)
                    dist.barrier()
                    rows.extend(_gather_rows(row, rank, world, device))
                    if rank == 0 and store and run_id:
                        for r in rows[len(rows) - 1 :]:
                            store.add_link(run_id, r)
                    if rank == 0 and rows and rows[-1].get("latency_bound"):
                        print(
                            f"warning: link {src}->{dst}: {cfg.link_size:,} B move no slower "
                            "than the one-element ack; the rate shown is a lower bound "
                            "(ack included): give a larger --size",
                            file=sys.stderr,
                        )
                    progress.advance(where)
        else:
            for name in cfg.ops:
                op = Op(name)
                out.begin(op, everyone)
                for size in cfg.sizes:
                    done: dict[bool, dict[str, Any]] = {}
                    for inplace in modes(cfg):
                        where = beacon.at(
                            f"{op.value} at {size} bytes"
                            + (" in-place" if inplace and cfg.inplace is None else "")
                        )
                        row = _measure(op, size, cfg, rank, world, device, inplace)
                        if row is not None and store and run_id:
                            store.add_result(run_id, row)
                            rows.append(row)
                            done[inplace] = row
                    out.row(op, done.get(False), done.get(True))
                    progress.advance(where)
                out.end(op)
        if store and run_id:
            store.finish_run(run_id, "complete")
    except Exception as exc:  # a lost rank or a timeout surfaces as a backend error
        msg, frozen = _blame(exc, rank, where, cfg, beacon, everyone)
        if store and run_id:
            with contextlib.suppress(BenchmarkError, ConfigError):
                store.finish_run(run_id, "failed", msg)
        if frozen:
            _leave_diagnosis(rank, msg)
        for pid in frozen:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        raise BenchmarkError(msg) from (exc if cfg.debug else None)
    finally:
        beacon.close()
        progress.close()
        if store:
            store.close()
    dist.destroy_process_group()
    return {"run_id": run_id, "rows": rows} if rank == 0 else None


class _Stream:
    """nccl-tests rows on rank 0's stdout, one line as each size finishes (both modes)."""

    def __init__(self, cfg: BenchConfig, world: int, enabled: bool) -> None:
        self.cfg, self.world, self.enabled = cfg, world, enabled
        self.sides: list[dict[str, Any]] = []

    def _write(self, text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def begin(self, op: Op, ranks: list[Any]) -> None:
        if not self.enabled:
            return
        self.sides = []
        cfg = self.cfg
        note = (
            f"bandwall: {len(ranks)} ranks; time = median over {cfg.iters} iterations of the "
            "slowest rank (nccl-tests prints the mean)"
        )
        self._write(
            nccl_format.preamble(
                op, cfg.sizes, cfg.warmup, cfg.iters, cfg.check, [r for r in ranks if r], note
            )
        )

    def row(self, op: Op, out_of_place: dict[str, Any] | None, in_place: Any) -> None:
        if not self.enabled or (out_of_place is None and in_place is None):
            return
        self.sides += [s for s in (out_of_place, in_place) if s is not None]
        self._write(nccl_format.result_line(op, self.world, out_of_place, in_place, self.cfg.check))

    def end(self, op: Op) -> None:
        if self.enabled:
            self._write(nccl_format.footer(op, self.sides, self.cfg.check))


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
