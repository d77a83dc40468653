"""Starting ranks with the real engines: torchrun's environment, torch's elastic launcher for
`--local N`, and sbatch / Kubernetes templates that call torchrun. No home-made launcher.

The templates take user strings (the command, partition, image, job name) and put them in a
shell script and a YAML document: the command is split and re-quoted with shlex, Slurm and
Kubernetes fields are checked against their own grammars, and the manifest is emitted with
every string as a JSON-quoted (so YAML-safe) scalar.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any

from bandwall.errors import BenchmarkError, ConfigError
from bandwall.measure.bench.runner import BenchConfig, bench_worker, modes
from bandwall.measure.bench.store import Store

TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
#: The image the repository's Dockerfile builds (`docker build -t bandwall .`); for GPU runs
#: build it with `--build-arg BASE_IMAGE=nvidia/cuda:...` (see the Dockerfile).
DEFAULT_IMAGE = "bandwall:latest"


def under_torchrun() -> bool:
    return all(v in os.environ for v in TORCHRUN_VARS)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _quiet(debug: bool) -> Iterator[None]:
    """Keep torch's launcher logs and C++ warnings (tracebacks of every rank) away from the
    user unless --debug: the failure is summarised in one line instead."""
    if debug:
        yield
        return
    loggers = [logging.getLogger(n) for n in ("torch.distributed", "torch.multiprocessing")]
    levels = [lg.level for lg in loggers]
    old_env = os.environ.get("TORCH_CPP_LOG_LEVEL")
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    os.environ["TORCH_CPP_LOG_LEVEL"] = "ERROR"
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
        if old_env is None:
            os.environ.pop("TORCH_CPP_LOG_LEVEL", None)
        else:
            os.environ["TORCH_CPP_LOG_LEVEL"] = old_env


@contextlib.contextmanager
def _temp_dir(folder: str) -> Iterator[None]:
    """The temp dir, for this process and the ranks it spawns, is `folder` (removed after):
    torch leaves files there when a rank dies (pytorch-errorfile-*.pickle) and makes its
    inductor cache there (torchinductor_USER), none of which outlives the run."""
    old_env, old_dir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = tempfile.tempdir = folder
    try:
        yield
    finally:
        tempfile.tempdir = old_dir
        if old_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old_env


def run_local(
    cfg: BenchConfig, nprocs: int, worker: Any = bench_worker, worker_args: tuple[Any, ...] = ()
) -> dict[str, Any]:
    """Run `nprocs` ranks on this machine through torch.distributed's elastic agent (the
    engine behind torchrun). A rank that dies or hangs ends the run with one line naming it;
    the sizes already measured stay in the store."""
    if nprocs < 2:
        raise ConfigError(f"needs at least 2 ranks, got {nprocs}", field="local")
    with Store(cfg.db):  # a bad --db is one line now, not a failed rank after the spawn
        pass
    try:
        from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        from torch.distributed.launcher.api import LaunchConfig, elastic_launch
    except ImportError:
        raise BenchmarkError(
            "torch is not installed; pip install 'bandwall[bench]' (torch>=2.4,<3: a "
            "cluster keeps the CUDA build it has)"
        ) from None
    token = uuid.uuid4().hex
    os.environ["BANDWALL_RUN_TOKEN"] = token
    diag = tempfile.mkdtemp(prefix="bandwall-diag-")
    os.environ["BANDWALL_DIAG_DIR"] = diag
    # the agent's per-rank logs and error files: in a folder of ours, removed below (left to
    # itself it makes a torchelastic_* folder in the temp dir per run and never removes it)
    logs = tempfile.mkdtemp(prefix="bandwall-ranks-")
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
        logs_specs=DefaultLogsSpecs(log_dir=logs),
    )
    try:
        with _quiet(cfg.debug), _temp_dir(logs):
            results = elastic_launch(config, worker)(cfg, *worker_args)
    except ChildFailedError as exc:
        if cfg.debug:
            sys.stderr.write(f"{exc}\n")
        found = _diagnoses(diag)
        raise BenchmarkError(
            _mark_failed(cfg, token, describe_failure(exc.failures, found))
        ) from None
    finally:
        os.environ.pop("BANDWALL_DIAG_DIR", None)
        shutil.rmtree(diag, ignore_errors=True)
        shutil.rmtree(logs, ignore_errors=True)
    out = results.get(0)
    if not out:
        raise BenchmarkError("rank 0 returned no results")
    return dict(out)


def _diagnoses(folder: str) -> list[str]:
    """What timed-out ranks found (a frozen peer), written before they were stopped."""
    out = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        with contextlib.suppress(OSError), open(os.path.join(folder, name)) as fh:
            out.append(fh.read().strip())
    return [m for m in out if m]


def _message(failure: Any) -> str:
    err = failure.error_file_data if isinstance(failure.error_file_data, dict) else {}
    message = err.get("message", {})
    text = str(message.get("message", "")) if isinstance(message, dict) else str(message or "")
    text = (text.splitlines() or [""])[0]
    if text.strip() in ("<NONE>", "<N/A>", "None"):
        return ""
    return re.sub(r"^(bandwall\.errors\.)?BenchmarkError: ", "", text)[:400]


def _how(failure: Any) -> str:
    code = failure.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
            # SIGKILL from nobody in the run is most often the kernel's out-of-memory killer
            # (fuzz round 23, A2: 8 GiB buffers on a CPU host ended as a bare "SIGKILL")
            hint = " (out of memory? the kernel's OOM killer sends it; see dmesg)"
            return f"killed by {name}" + (hint if name == "SIGKILL" else "")
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def describe_failure(failures: dict[int, Any], diagnoses: list[str] | None = None) -> str:
    """The cause, not the casualties: a timed-out rank's diagnosis of a frozen peer wins;
    else the ranks killed by a signal (not the launcher's SIGTERM), else the first to fail.
    Ranks that only lost their connection to a dead peer are not listed."""
    blamed = list(diagnoses or []) + [
        m for m in (_message(f) for f in failures.values()) if " hung during " in m
    ]
    if blamed:
        return "benchmark stopped: " + blamed[0]
    ordered = sorted(failures.items(), key=lambda kv: (kv[1].timestamp, kv[0]))
    # a rank that aborted itself (SIGABRT: gloo/NCCL abort once a peer is gone) is a casualty
    # of the rank something else killed; the killed one is named first even when the abort
    # was recorded earlier
    killed = sorted(
        (
            (r, f)
            for r, f in ordered
            if f.exitcode is not None and f.exitcode < 0 and f.exitcode != -signal.SIGTERM
        ),
        key=lambda kv: kv[1].exitcode == -signal.SIGABRT,
    )
    causes = killed or [(r, f) for r, f in ordered if f.exitcode != -signal.SIGTERM][:1]
    causes = causes or ordered[:1]
    parts = []
    for rank, failure in causes[:3]:
        detail = "" if killed else _message(failure)
        parts.append(f"rank {rank} {_how(failure)}" + (f" ({detail})" if detail else ""))
    return "benchmark stopped: " + "; ".join(parts)


def _next_step(cfg: BenchConfig, finished: int) -> str | None:
    """Where the run stopped: steps run in order (op, size, mode), one stored row each."""
    steps = [
        f"{op} at {size} bytes" + (" in-place" if inplace and cfg.inplace is None else "")
        for op in cfg.ops
        for size in cfg.sizes
        for inplace in modes(cfg)
    ]
    return steps[finished] if finished < len(steps) else None


def _mark_failed(cfg: BenchConfig, token: str, msg: str) -> str:
    """Close the run the dead job left open and say where it stopped and what it kept."""
    with Store(cfg.db) as store:
        for run in reversed(store.runs()):
            if run.args.get("token") != token:
                continue
            stored = run.error or ""
            if " hung during " in stored and " hung during " not in msg:
                msg = "benchmark stopped: " + stored
            if " during " not in msg and cfg.kind == "collectives":
                step = _next_step(cfg, len(store.results(run.id)))
                msg += f" during {step}" if step else ""
            store.finish_run(run.id, "failed", msg)
            kept = store.count_rows(run.id)
            return (
                f"{msg}; {kept} measurement(s) finished before it are kept in run "
                f"{run.id} (bandwall results show {run.id} --db {store.path})"
            )
    return msg + "; nothing was stored"


# --- launch templates -------------------------------------------------------------------

_SLURM_PARTITION = re.compile(r"^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*$")
#: sbatch --time: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
_SLURM_TIME = re.compile(r"^(\d+-)?\d{1,3}(:\d{2}){0,2}$")
#: Kubernetes object names for a PyTorchJob: an RFC 1035 label (the operator derives Service
#: names from it, and those must be DNS-1035 labels), short enough for "-worker-NNN".
_K8S_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")
#: A container image reference: [registry[:port]/]path[:tag][@sha256:digest] (the grammar of
#: distribution/reference, simplified: lower-case path components, no spaces or quotes).
_IMAGE = re.compile(
    r"^(?:[a-zA-Z0-9.-]+(?::\d+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*(?::[\w][\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
)


def _command_args(command: str) -> list[str]:
    try:
        args = shlex.split(command)
    except ValueError as exc:
        raise ConfigError(f"cannot split {command!r}: {exc}", field="command") from None
    if not args:
        raise ConfigError("empty command; e.g. 'bench collectives --ops all'", field="command")
    if any("\n" in a or "\r" in a or "\0" in a for a in args):
        raise ConfigError("newlines are not allowed in the command", field="command")
    if args[0] in ("bandwall", "-m"):
        raise ConfigError(
            f"give the bandwall subcommand only (e.g. 'bench collectives ...'), not {args[0]!r}",
            field="command",
        )
    return args


def check_image(image: str) -> str:
    if not _IMAGE.fullmatch(image) or len(image) > 255:
        raise ConfigError(
            f"{image!r} is not a container image reference (e.g. registry.example.com/"
            "team/bandwall:0.1.0)",
            field="image",
        )
    return image


def slurm_script(
    nodes: int,
    gpus_per_node: int,
    command: str,
    partition: str | None,
    time_limit: str,
    image: str | None = None,
) -> str:
    """An sbatch script: one torchrun per node, rendezvous on the first node (c10d). With
    `image`, srun runs it in that container (pyxis/enroot `--container-image`)."""
    check_counts(nodes, gpus_per_node)
    args = shlex.join(_command_args(command))
    if partition is not None and not _SLURM_PARTITION.fullmatch(partition):
        raise ConfigError(
            f"{partition!r} is not a partition name (letters, digits, '_', '.', '-', commas)",
            field="partition",
        )
    if not _SLURM_TIME.fullmatch(time_limit):
        raise ConfigError(
            f"{time_limit!r} is not a Slurm time (MM, HH:MM:SS or D-HH:MM:SS)", field="time"
        )
    part = f"#SBATCH --partition={partition}\n" if partition else ""
    container = f" --container-image={shlex.quote(check_image(image))}" if image else ""
    return f"""#!/bin/bash
#SBATCH --job-name=bandwall
#SBATCH --nodes={nodes}
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node={gpus_per_node}
#SBATCH --cpus-per-task=16
#SBATCH --time={time_limit}
{part}#SBATCH --output=bandwall-%j.out
# Container: the image bandwall's Dockerfile builds (default {DEFAULT_IMAGE});
# pass `bandwall launch slurm --image REF` to run through pyxis/enroot, else
# bandwall[bench] must be installed on the nodes.
set -euo pipefail
head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export OMP_NUM_THREADS=1
srun{container} torchrun \\
    --nnodes={nodes} --nproc-per-node={gpus_per_node} \\
    --rdzv-id="$SLURM_JOB_ID" --rdzv-backend=c10d \\
    --rdzv-endpoint="$head_node:29500" \\
    -m bandwall {args}
"""


#: Bounds of a launch: more nodes than any cluster has, or GPUs than any node, is a typo.
MAX_NODES = 65_536
MAX_GPUS_PER_NODE = 64
#: The RDMA device plugin resource a pod asks for to open the node's HCAs: the name NVIDIA's
#: Network Operator gives its shared RDMA device plugin by default (resourcePrefix "rdma",
#: resourceName "rdma_shared_device_a"; Mellanox/k8s-rdma-shared-dev-plugin README,
#: github.com/Mellanox/k8s-rdma-shared-dev-plugin, read 2026-12-03).
DEFAULT_RDMA_RESOURCE = "rdma/rdma_shared_device_a"
#: Where the image keeps its results database (the Dockerfile's BANDWALL_DB).
RESULTS_DIR = "/home/bandwall/results"
#: The image's user (Dockerfile `useradd --uid 10001`): owns the results volume via fsGroup.
IMAGE_UID = 10001
_RESOURCE = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[a-zA-Z0-9]([-_.a-zA-Z0-9]*[a-zA-Z0-9])?$"
)
_CLAIM = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?([KMGTPE]i?)?$")
_QUANTITY_BYTES = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


def _at_least_1Mi(quantity: str) -> bool:
    """A Kubernetes quantity (16Gi, 512M, 1.5G) of at least 1 MiB."""
    m = _QUANTITY.fullmatch(quantity)
    if m is None:
        return False
    unit = m.group(2) or ""
    scale = (
        _QUANTITY_BYTES[unit[:1]]
        if not unit.endswith("i")
        else 1024 ** ("KMGTPE".index(unit[0]) + 1)
    )
    number = float(quantity[: len(quantity) - len(unit)] if unit else quantity)
    return number * scale >= 2**20


def check_counts(nodes: int, gpus_per_node: int) -> None:
    if not 1 <= nodes <= MAX_NODES:
        raise ConfigError(f"must be 1 to {MAX_NODES:,}, got {nodes:,}", field="nodes")
    if not 1 <= gpus_per_node <= MAX_GPUS_PER_NODE:
        raise ConfigError(
            f"must be 1 to {MAX_GPUS_PER_NODE}, got {gpus_per_node:,}", field="gpus_per_node"
        )


def k8s_job(
    nodes: int,
    gpus_per_node: int,
    command: str,
    image: str,
    name: str,
    *,
    rdma_resource: str | None = DEFAULT_RDMA_RESOURCE,
    shm_size: str = "16Gi",
    results_claim: str | None = None,
) -> dict[str, Any]:
    """A Kubeflow PyTorchJob (kubeflow.org/v1) as data: the training operator sets the
    torchrun environment (MASTER_ADDR, RANK, ...) in every replica.

    What a cluster needs for NCCL to run at speed, and for results to outlive the pod:
    /dev/shm as a memory-backed emptyDir (the container default of 64 MiB is too small for
    NCCL's shared-memory transport), the RDMA device plugin's resource and the IPC_LOCK
    capability (RDMA pins memory), and on the master (rank 0 writes the results database) a
    PersistentVolumeClaim mounted where the image's BANDWALL_DB points.
    """
    check_counts(nodes, gpus_per_node)
    if not _K8S_NAME.fullmatch(name):
        raise ConfigError(
            f"{name!r} is not a Kubernetes name: lower-case letters, digits and '-', starting "
            "with a letter, at most 40 characters",
            field="name",
        )
    if rdma_resource is not None and not _RESOURCE.fullmatch(rdma_resource):
        raise ConfigError(
            f"{rdma_resource!r} is not a resource name (e.g. {DEFAULT_RDMA_RESOURCE}, or none)",
            field="rdma_resource",
        )
    if not _QUANTITY.fullmatch(shm_size):
        raise ConfigError(f"{shm_size!r} is not a size such as 16Gi", field="shm_size")
    if not _at_least_1Mi(shm_size):
        # NCCL's shared-memory transport maps buffers of megabytes in /dev/shm
        raise ConfigError(
            f"{shm_size!r} is too small for NCCL's shared memory; give at least 1Mi (16Gi is "
            "the default)",
            field="shm_size",
        )
    claim = results_claim or f"{name}-results"
    if not _CLAIM.fullmatch(claim):
        raise ConfigError(
            f"{claim!r} is not a claim name (lower-case letters, digits, '-', at most 63)",
            field="results_claim",
        )
    args = _command_args(command)
    check_image(image)
    limits: dict[str, Any] = {"nvidia.com/gpu": gpus_per_node}
    if rdma_resource is not None:
        limits[rdma_resource] = 1

    def replica(count: int, master: bool) -> dict[str, Any]:
        mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
        volumes: list[dict[str, Any]] = [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm_size}}
        ]
        if master:
            mounts.append({"name": "results", "mountPath": RESULTS_DIR})
            volumes.append({"name": "results", "persistentVolumeClaim": {"claimName": claim}})
        return {
            "replicas": count,
            "restartPolicy": "Never",
            "template": {
                "spec": {
                    "securityContext": {"fsGroup": IMAGE_UID},
                    "containers": [
                        {
                            "name": "pytorch",
                            "image": image,
                            "command": [
                                "torchrun",
                                f"--nproc-per-node={gpus_per_node}",
                                "-m",
                                "bandwall",
                            ],
                            "args": args,
                            "env": [{"name": "BANDWALL_DB", "value": f"{RESULTS_DIR}/results.db"}],
                            "resources": {"limits": limits},
                            "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
                            "volumeMounts": mounts,
                        }
                    ],
                    "volumes": volumes,
                }
            },
        }

    specs = {"Master": replica(1, True)}
    if nodes > 1:
        specs["Worker"] = replica(nodes - 1, False)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"nprocPerNode": str(gpus_per_node), "pytorchReplicaSpecs": specs},
    }


def results_claim(name: str, size: str = "1Gi") -> dict[str, Any]:
    """The PersistentVolumeClaim the master's results database lives on (one writer)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
    }


def to_yaml(value: Any, indent: int = 0) -> str:
    """Block-style YAML where every string is a JSON (double-quoted YAML) scalar: no user text
    can open a new key, document or tag. Only dicts, lists, strings, ints and bools."""
    pad = "  " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            key = _scalar(str(k))
            if isinstance(v, dict | list) and v:
                lines.append(f"{pad}{key}:")
                lines.append(to_yaml(v, indent + 1))
            else:
                lines.append(f"{pad}{key}: {_scalar(v)}")
    elif isinstance(value, list):
        for v in value:
            if isinstance(v, dict) and v:
                inner = to_yaml(v, indent + 1).splitlines()
                lines.append(f"{pad}- {inner[0].lstrip()}")
                lines.extend(inner[1:])
            else:
                lines.append(f"{pad}- {_scalar(v)}")
    else:
        lines.append(pad + _scalar(value))
    return "\n".join(lines)


_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9._/-]*")
#: Words YAML 1.1 readers turn into booleans or null.
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"}


def _scalar(v: Any) -> str:
    """Plain when it can only read back as this string, JSON-quoted otherwise."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, dict | list):
        return "{}" if isinstance(v, dict) else "[]"
    text = str(v)
    if _PLAIN.fullmatch(text) and text.lower() not in _YAML_WORDS:
        return text
    return json.dumps(text)


def k8s_manifest(
    nodes: int,
    gpus_per_node: int,
    command: str,
    image: str,
    name: str,
    *,
    rdma_resource: str | None = DEFAULT_RDMA_RESOURCE,
    shm_size: str = "16Gi",
    results_claim_name: str | None = None,
) -> str:
    """The PyTorchJob, preceded by the claim for its results unless an existing one is named.

    `kubectl apply -f -` reads both documents; `kubectl cp` or any pod mounting the claim
    reads the results after the job's pods are gone."""
    head = (
        "# bandwall PyTorchJob (Kubeflow training operator). The image is bandwall's\n"
        "# Dockerfile built on a CUDA base with the bench extra, e.g.\n"
        "#   docker build --build-arg BASE_IMAGE=nvidia/cuda:12.6.3-runtime-ubuntu24.04 \\\n"
        "#     --build-arg EXTRAS=bench,web -t REGISTRY/bandwall:TAG .\n"
        f"# Needs the NVIDIA GPU and RDMA device plugins ({rdma_resource or 'RDMA off'}).\n"
        f"# Results: {RESULTS_DIR}/results.db of the master, on a volume claim.\n"
    )
    job = k8s_job(
        nodes,
        gpus_per_node,
        command,
        image,
        name,
        rdma_resource=rdma_resource,
        shm_size=shm_size,
        results_claim=results_claim_name,
    )
    docs = [] if results_claim_name else [results_claim(f"{name}-results")]
    return head + "".join(f"---\n{to_yaml(d)}\n" for d in [*docs, job])
