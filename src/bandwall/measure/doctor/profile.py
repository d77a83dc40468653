"""Record torch.profiler traces of a few real DDP steps, one Chrome trace per rank, for
`bandwall doctor` to read: on a GPU node (NCCL), in the lab (gloo across network namespaces,
`bandwall lab run NAME -- python -m bandwall.measure.doctor.profile --out DIR`) or on loopback
(`--local N`). `--straggler RANK:SECONDS` (or the lab's own `--straggler`, through
BANDWALL_STRAGGLER_DELAY_S) holds that rank back at the start of every step, as a slow host
would.

Each trace gets a top-level "bandwall" member with the rank, host (the lab's namespace name in
the lab, where every rank shares one hostname), model, parameter count and gradient bytes, so
doctor can name the straggler's host and price the job's own all-reduce.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DEFAULT_STEPS = 6
DEFAULT_WARMUP = 2


def host_name() -> str:
    """The lab host (its namespace) or the machine's name."""
    lab = os.environ.get("BANDWALL_LAB")
    if lab:
        return f"bw-{lab}-h{os.environ.get('RANK', '0')}"
    return socket.gethostname()


def _delay(rank: int, spec: str | None) -> float:
    if spec:
        for part in spec.split(","):
            r, _, s = part.partition(":")
            if r.strip().isdigit() and int(r) == rank:
                return max(float(s), 0.0)
        return 0.0
    from bandwall.measure.bench.runner import straggler_delay_s

    return straggler_delay_s()


def probe_model(width: int, depth: int) -> tuple[Any, Any]:
    """A small MLP whose gradients (depth × width² × 4 bytes) dominate its compute on a CPU:
    the default 4 × 512² is 4 MiB of all-reduce per step against a few ms of matmuls."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    layers = [m for _ in range(depth) for m in (nn.Linear(width, width), nn.ReLU())]
    return nn.Sequential(*layers), lambda: (torch.randn(16, width), torch.randn(16, width))


def worker(rank: int, world: int, opts: dict[str, Any]) -> str:
    """One rank: build the model, run warmup + recorded steps under the profiler, write the
    trace; returns its path."""
    import datetime as dt

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: N817

    from bandwall.measure.bench.train import build_model

    backend = opts["backend"]
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(
        backend, rank=rank, world_size=world, timeout=dt.timedelta(seconds=opts["timeout"])
    )
    local = int(os.environ.get("LOCAL_RANK", str(rank)))
    device = torch.device("cuda", local) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    model, batch = (
        probe_model(opts["width"], opts["depth"])
        if opts["model"] == "probe"
        else build_model(opts["model"])
    )
    model = model.to(device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    optim = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    params = sum(p.numel() for p in model.parameters())
    delay = _delay(rank, opts.get("straggler"))
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    out = Path(opts["out"])
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"trace-rank{rank}.json"
    schedule = torch.profiler.schedule(
        wait=0, warmup=opts["warmup"], active=opts["steps"], repeat=1
    )
    with torch.profiler.profile(activities=activities, schedule=schedule) as prof:
        for _ in range(opts["warmup"] + opts["steps"]):
            x, _y = (t.to(device) for t in batch())
            if delay:
                time.sleep(delay)
            optim.zero_grad(set_to_none=True)
            ddp(x).float().pow(2).mean().backward()
            optim.step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            prof.step()
    prof.export_chrome_trace(str(path))
    data = json.loads(path.read_text())
    data["bandwall"] = {
        "rank": rank,
        "world_size": world,
        "host": host_name(),
        "backend": backend,
        "model": opts["model"],
        "params": params,
        "grad_bytes": params * 4,
        "straggler_delay_s": delay,
        "device": str(device),
    }
    path.write_text(json.dumps(data))
    dist.destroy_process_group()
    return str(path)


def _spawned(rank: int, world: int, port: int, opts: dict[str, Any]) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
    )
    worker(rank, world, opts)


def run_local(n: int, opts: dict[str, Any]) -> list[str]:
    """Spawn n ranks on loopback; the traces' paths."""
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_spawned, args=(n, port, opts), nprocs=n, join=True)  # type: ignore[attr-defined,no-untyped-call]
    return [str(Path(opts["out"]) / f"trace-rank{r}.json") for r in range(n)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bandwall.measure.doctor.profile", description=__doc__
    )
    ap.add_argument("--out", required=True, help="Folder for trace-rankN.json.")
    ap.add_argument(
        "--model", default="probe", help="probe (--width, --depth), mlp, resnet-tiny or gpt-tiny."
    )
    ap.add_argument("--width", type=int, default=512, help="probe: layer width.")
    ap.add_argument("--depth", type=int, default=4, help="probe: layers.")
    ap.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="Recorded steps.")
    ap.add_argument("--warmup", type=int, default=DEFAULT_WARMUP, help="Unrecorded steps first.")
    ap.add_argument("--backend", default="auto", help="auto, nccl or gloo.")
    ap.add_argument("--local", type=int, default=None, help="Spawn N ranks on loopback.")
    ap.add_argument("--straggler", default=None, help="RANK:SECONDS held back every step.")
    ap.add_argument("--timeout", type=float, default=300.0, help="Collective timeout (s).")
    a = ap.parse_args(argv)
    keys = ("out", "model", "width", "depth", "steps", "warmup", "backend", "straggler", "timeout")
    opts = {k: getattr(a, k) for k in keys}
    # torch.profiler makes an inductor cache (torchinductor_USER) in the temp dir; unless the
    # caller chose a place for it, it goes to a folder removed when the recording ends
    own_cache = None
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        own_cache = tempfile.mkdtemp(prefix="bandwall-profile-cache-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = own_cache
    try:
        return _record(a, opts)
    finally:
        if own_cache is not None:
            shutil.rmtree(own_cache, ignore_errors=True)


def _record(a: argparse.Namespace, opts: dict[str, Any]) -> int:
    if a.local:
        paths = run_local(a.local, opts)
    elif "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        paths = [worker(rank, world, opts)]
        if rank != 0:
            return 0
    else:
        print("error: not under torchrun or `bandwall lab run`; give --local N", file=sys.stderr)
        return 2
    print("\n".join(paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
