"""Real DistributedDataParallel steps: step time, compute time (a no_sync step) and the
communication left exposed, on small models that fit a CPU (gloo) or a GPU (nccl)."""

from __future__ import annotations

import gc
import os
import time
from typing import Any

import numpy as np

from bandwall.errors import BenchmarkError
from bandwall.measure.bench.runner import BenchConfig, _record, host_info, pick_backend, versions
from bandwall.measure.bench.store import Store

MODELS = ("mlp", "resnet-tiny", "gpt-tiny")


def build_model(name: str) -> tuple[Any, Any]:
    """A model and a function making one synthetic batch for it."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    if name == "mlp":
        width = 1024
        model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(width, width), nn.ReLU())])
        return model, lambda: (torch.randn(32, width), torch.randn(32, width))
    if name == "resnet-tiny":

        def block(c: int) -> Any:
            return nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU())

        model = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1),
            block(64),
            block(64),
            nn.Conv2d(64, 128, 3, stride=2, padding=1),
            block(128),
            block(128),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(128, 10),
        )
        return model, lambda: (torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,)))
    if name == "gpt-tiny":
        vocab, d, seq = 4096, 256, 128

        class Gpt(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.emb = nn.Embedding(vocab, d)
                layer = nn.TransformerEncoderLayer(d, 4, 4 * d, batch_first=True)
                self.body = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
                self.head = nn.Linear(d, vocab)

            def forward(self, x: Any) -> Any:
                return self.head(self.body(self.emb(x)))

        return Gpt(), lambda: (torch.randint(0, vocab, (4, seq)), torch.randint(0, vocab, (4, seq)))
    raise BenchmarkError(
        f"unknown value {name!r}; choose one of: {', '.join(MODELS)}", field="model"
    )


def _loss(name: str, out: Any, y: Any) -> Any:
    import torch.nn.functional as F  # noqa: N812 - the conventional name

    if name == "mlp":
        return F.mse_loss(out, y)
    if name == "gpt-tiny":
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    return F.cross_entropy(out, y)


@_record
def train_worker(cfg: BenchConfig, model_name: str) -> dict[str, Any] | None:
    import datetime as dt

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: N817

    from bandwall.measure.bench.runner import straggler_delay_s

    backend = pick_backend(cfg.backend)
    dist.init_process_group(backend, timeout=dt.timedelta(seconds=cfg.timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()
    device = (
        torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        if backend == "nccl"
        else torch.device("cpu")
    )
    model, batch = build_model(model_name)
    model = model.to(device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    params = sum(p.numel() for p in model.parameters())
    delay = straggler_delay_s()

    def step(sync: bool, ddp: Any, opt: Any) -> float:
        x, y = (t.to(device) for t in batch())
        dist.barrier()
        t0 = time.perf_counter()
        if delay:
            time.sleep(delay)
        opt.zero_grad(set_to_none=True)
        if sync:
            _loss(model_name, ddp(x), y).backward()
        else:
            with ddp.no_sync():
                _loss(model_name, ddp(x), y).backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - t0

    for _ in range(cfg.warmup):
        step(True, ddp, opt)
        step(False, ddp, opt)
    steps, compute = [], []
    for _ in range(cfg.iters):  # interleaved, so drift hits both
        steps.append(step(True, ddp, opt))
        compute.append(step(False, ddp, opt))
    t = torch.tensor(steps + compute, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    # DDP's reducer keeps the process group and its gloo work alive past destroy; torn down
    # at interpreter exit instead, a gloo thread can abort the rank ("terminate called
    # without an active exception", seen once in CI; pytorch/pytorch#190489): drop it first
    del ddp, opt
    gc.collect()
    dist.destroy_process_group()
    if rank != 0:
        return None
    arr = t.cpu().numpy()
    s, c = arr[: cfg.iters], arr[cfg.iters :]
    row = {
        "model": model_name,
        "params": params,
        "grad_bytes": params * 4,
        "iters": cfg.iters,
        "step_median_s": float(np.median(s)),
        "step_p90_s": float(np.percentile(s, 90)),
        "compute_median_s": float(np.median(c)),
        "exposed_s": float(max(np.median(s) - np.median(c), 0.0)),
        "world_size": world,
    }
    with Store(cfg.db) as store:
        run_id = store.start_run(
            "train", world, backend, host_info(), versions(), {**cfg.args, "model": model_name}
        )
        store.add_train(run_id, row)
        store.finish_run(run_id, "complete")
    return {"run_id": run_id, "rows": [row]}
