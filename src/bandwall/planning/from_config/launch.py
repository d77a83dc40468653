"""Launch lines: how many nodes and GPUs per node a job runs on (torchrun, Slurm's sbatch and
srun, the deepspeed launcher, mpirun, accelerate launch).

Keys are `program.option` (`torchrun.nproc_per_node`, `srun.nodes`). GPUs per node come from
the processes the launcher starts on each node (one per GPU), else from what Slurm allocates;
nodes from the launcher, else Slurm; the total is their product, or a total the launcher gives.
"""

from __future__ import annotations

import re
from typing import Any

from bandwall.planning.from_config.common import (
    Context,
    Default,
    FormatSpec,
    Mapped,
    Problem,
    Rule,
    Values,
    choice,
    positive_int,
    unresolved,
)

_NOT_COST = "a launcher option that does not change the job's step"
_DERIVED = Rule(None)

#: program.option -> Rule (gpus and GPUs per node are derived from several, below).
TABLE: dict[str, Rule | str] = {
    # torchrun (torch.distributed.run; docs.pytorch.org/docs/stable/elastic/run.html)
    "torchrun.nproc_per_node": _DERIVED,
    "torchrun.nnodes": _DERIVED,
    "torchrun.node_rank": "which node this process is on",
    "torchrun.master_addr": "rendezvous address",
    "torchrun.master_port": "rendezvous port",
    "torchrun.rdzv_endpoint": "rendezvous address",
    "torchrun.rdzv_backend": "rendezvous backend",
    "torchrun.rdzv_id": "rendezvous id",
    "torchrun.standalone": "single-node rendezvous",
    "torchrun.max_restarts": "restart policy (failures are modelled from the provider)",
    # Slurm (slurm.schedmd.com/sbatch.html)
    "srun.nodes": _DERIVED,
    "srun.N": _DERIVED,
    "srun.ntasks_per_node": _DERIVED,
    "srun.gpus_per_node": _DERIVED,
    "srun.gres": _DERIVED,
    "srun.gpus": _DERIVED,
    "srun.G": _DERIVED,
    "srun.ntasks": _DERIVED,
    "srun.n": _DERIVED,
    "srun.time": "wall-clock limit",
    "srun.partition": "scheduler partition",
    "srun.account": "scheduler account",
    "srun.job_name": "job name",
    "srun.output": "log file",
    "srun.error": "log file",
    "srun.cpus_per_task": "CPU cores per task",
    "srun.exclusive": "node sharing policy",
    "srun.qos": "scheduler quality of service",
    "srun.constraint": "node feature constraint (give --gpu for the GPU model)",
    # the deepspeed launcher (deepspeed.ai/getting-started/#resource-configuration-multi-node)
    "deepspeed.num_gpus": _DERIVED,
    "deepspeed.num_nodes": _DERIVED,
    "deepspeed.hostfile": "host list (give --gpus if it sets the node count)",
    "deepspeed.master_port": "rendezvous port",
    "deepspeed.master_addr": "rendezvous address",
    # mpirun (Open MPI: -np total processes, -N/--npernode processes per node)
    "mpirun.np": _DERIVED,
    "mpirun.n": _DERIVED,
    "mpirun.N": _DERIVED,
    "mpirun.npernode": _DERIVED,
    # accelerate launch (huggingface.co/docs/accelerate/package_reference/cli)
    "accelerate.num_processes": _DERIVED,
    "accelerate.num_machines": _DERIVED,
    "accelerate.mixed_precision": Rule(
        "precision",
        choice({"bf16": "bf16", "fp8": "fp8", "fp16": "bf16"}),
        "fp16 is priced as bf16 (same matmul rate)",
    ),
}

_GRES = re.compile(r"(?:^|,)gpu(?::[\w-]+)?:(\d+)")


def _gres_gpus(value: Any) -> int:
    m = _GRES.search(str(value))
    if not m:
        raise ValueError(f"no GPU count in {value!r} (expected gpu:N)")
    return positive_int(m.group(1))


def _first(values: Values, keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if k in values), None)


def _count(values: Values, mapped: Mapped, key: str, what: str) -> int | None:
    """A whole number from a launch key, or a Problem (for --gpus) when it is a variable or
    not a number (`--nnodes $NUM_NODES`, `--nproc_per_node gpu`, `--nnodes 1:4`)."""
    raw = values.get(key)
    if key == "srun.gres":
        return int(values.convert(key, _gres_gpus))
    text = str(raw)
    if "$" in text or not re.fullmatch(r"\d[\d_]*", text.strip()):
        why = (
            unresolved(text, values.src(key)) if "$" in text else f"is {text!r}, not a fixed count"
        )
        mapped.problems.append(
            Problem("gpus", f"the {what} {why}; give --gpus (and --gpus-per-node)", values.src(key))
        )
        return None
    return int(values.convert(key, positive_int))


def derive(values: Values, mapped: Mapped, ctx: Context) -> list[Default]:
    """GPUs per node, nodes and the total."""
    per_node_key = _first(
        values,
        (
            "torchrun.nproc_per_node",
            "deepspeed.num_gpus",
            "accelerate.num_processes_per_node",
            "mpirun.N",
            "mpirun.npernode",
            "srun.gpus_per_node",
            "srun.gres",
        ),
    )
    # one task per GPU when no per-node launcher runs under srun
    launcher = any(k.startswith(("torchrun.", "deepspeed.")) for k in values.entries)
    if per_node_key is None and "srun.ntasks_per_node" in values and not launcher:
        per_node_key = "srun.ntasks_per_node"
    nodes_key = _first(
        values,
        (
            "torchrun.nnodes",
            "deepspeed.num_nodes",
            "accelerate.num_machines",
            "srun.nodes",
            "srun.N",
        ),
    )
    total_key = _first(
        values, ("srun.gpus", "srun.G", "mpirun.np", "mpirun.n", "accelerate.num_processes")
    )
    per_node = _count(values, mapped, per_node_key, "GPUs per node") if per_node_key else None
    nodes = _count(values, mapped, nodes_key, "node count") if nodes_key else None
    total = _count(values, mapped, total_key, "process count") if total_key else None
    if per_node is not None:
        mapped.assigns.append(values.assign("gpus_per_node", per_node, per_node_key or ""))
    if total is not None:
        mapped.assigns.append(values.assign("gpus", total, total_key or ""))
    elif per_node is not None and nodes is not None:
        mapped.assigns.append(
            values.assign(
                "gpus",
                per_node * nodes,
                nodes_key or "",
                per_node_key or "",
                note=f"{nodes:,} nodes × {per_node:,} GPUs",
            )
        )
    elif (
        per_node is not None
        and nodes_key is None
        and per_node_key
        in (
            "torchrun.nproc_per_node",
            "deepspeed.num_gpus",
        )
    ):
        mapped.assigns.append(
            values.assign("gpus", per_node, per_node_key, note="one node (no node count given)")
        )
    # the allocation, when the launcher gives the process count, only explains it
    for key in ("srun.gres", "srun.gpus_per_node", "srun.ntasks_per_node"):
        values.used.add(key)
    return []


SPEC = FormatSpec(
    "launch",
    "launch line (torchrun, Slurm, deepspeed, mpirun, accelerate)",
    TABLE,
    derive,
    _NOT_COST,
)

#: Launcher options that may appear without their program (inside a bash array passed to
#: torchrun, as Megatron-LM's example scripts do).
BARE = {
    name.split(".", 1)[1]: name for name in TABLE if name.startswith(("torchrun.", "deepspeed."))
}

__all__ = ["BARE", "SPEC", "TABLE"]
