"""Starting ranks with the real engines: torchrun's environment, torch's elastic launcher for
`--local N`, and sbatch / Kubernetes templates that call torchrun. No home-made launcher."""

from __future__ import annotations

import os
import signal
import socket
import uuid
from typing import Any

from bandwall.errors import BenchmarkError, ConfigError
from bandwall.measure.bench.runner import BenchConfig, bench_worker
from bandwall.measure.bench.store import Store

TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def under_torchrun() -> bool:
    return all(v in os.environ for v in TORCHRUN_VARS)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_local(
    cfg: BenchConfig, nprocs: int, worker: Any = bench_worker, worker_args: tuple[Any, ...] = ()
) -> dict[str, Any]:
    """Run `nprocs` ranks on this machine through torch.distributed's elastic agent (the
    engine behind torchrun). A rank that dies or times out ends the run with a message naming
    it; the sizes already measured stay in the store."""
    if nprocs < 2:
        raise ConfigError(f"needs at least 2 ranks, got {nprocs}", field="local")
    try:
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        from torch.distributed.launcher.api import LaunchConfig, elastic_launch
    except ImportError:
        raise BenchmarkError(
            "torch is not installed; pip install 'bandwall[bench]' (pins torch==2.13.0)"
        ) from None
    token = uuid.uuid4().hex
    os.environ["BANDWALL_RUN_TOKEN"] = token
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=nprocs,
        run_id=token,
        rdzv_backend="c10d",
        rdzv_endpoint=f"127.0.0.1:{_free_port()}",
        max_restarts=0,
        monitor_interval=0.2,
        start_method="spawn",
    )
    try:
        results = elastic_launch(config, worker)(cfg, *worker_args)
    except ChildFailedError as exc:
        msg = _describe_failure(exc)
        raise BenchmarkError(msg + _mark_failed(cfg, token, msg)) from None
    out = results.get(0)
    if not out:
        raise BenchmarkError("rank 0 returned no results")
    return dict(out)


def _describe_failure(exc: Any) -> str:
    parts = []
    for rank, failure in sorted(exc.failures.items()):
        code = failure.exitcode
        if code is not None and code < 0:
            try:
                what = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                what = f"killed by signal {-code}"
        else:
            what = f"exited with code {code}"
        detail = ""
        err = failure.error_file_data if isinstance(failure.error_file_data, dict) else {}
        message = err.get("message", {})
        if isinstance(message, dict):
            detail = str(message.get("message", "")).splitlines()[0][:300] if message else ""
        parts.append(f"rank {rank} {what}" + (f" ({detail})" if detail else ""))
    return "benchmark stopped: " + "; ".join(parts)


def _mark_failed(cfg: BenchConfig, token: str, msg: str) -> str:
    """Close the run the dead job left open and say where it stopped and what it kept."""
    with Store(cfg.db) as store:
        for run in reversed(store.runs()):
            if run.args.get("token") == token:
                seen = f"; {run.error}" if run.error else ""
                store.finish_run(run.id, "failed", msg + seen)
                kept = store.count_rows(run.id)
                where = f" during {run.error.split(':', 2)[1].strip()}" if run.error else ""
                return (
                    f"{where}; {kept} measurement(s) finished before it are kept in run "
                    f"{run.id} (bandwall results show {run.id} --db {store.path})"
                )
    return "; nothing was stored"


def slurm_script(
    nodes: int, gpus_per_node: int, command: str, partition: str | None, time_limit: str
) -> str:
    """An sbatch script: one torchrun per node, rendezvous on the first node (c10d)."""
    part = f"#SBATCH --partition={partition}\n" if partition else ""
    return f"""#!/bin/bash
#SBATCH --job-name=bandwall
#SBATCH --nodes={nodes}
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node={gpus_per_node}
#SBATCH --cpus-per-task=16
#SBATCH --time={time_limit}
{part}#SBATCH --output=bandwall-%j.out
set -euo pipefail
head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export OMP_NUM_THREADS=1
srun torchrun \\
    --nnodes={nodes} --nproc-per-node={gpus_per_node} \\
    --rdzv-id="$SLURM_JOB_ID" --rdzv-backend=c10d --rdzv-endpoint="$head_node:29500" \\
    -m bandwall {command}
"""


def _k8s_replica(role: str, replicas: int, image: str, gpus: int, args: str) -> str:
    return f"""    {role}:
      replicas: {replicas}
      restartPolicy: Never
      template:
        spec:
          containers:
            - name: pytorch
              image: {image}
              command: ["torchrun", "--nproc-per-node={gpus}", "-m", "bandwall"]
              args: [{args}]
              resources:
                limits:
                  nvidia.com/gpu: {gpus}
"""


def k8s_manifest(nodes: int, gpus_per_node: int, command: str, image: str, name: str) -> str:
    """A Kubeflow PyTorchJob: the training operator sets the torchrun environment."""
    args = ", ".join(f'"{a}"' for a in command.split())
    replicas = _k8s_replica("Master", 1, image, gpus_per_node, args)
    if nodes > 1:
        replicas += _k8s_replica("Worker", nodes - 1, image, gpus_per_node, args)
    return f"""apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: {name}
spec:
  nprocPerNode: "{gpus_per_node}"
  pytorchReplicaSpecs:
{replicas}"""
