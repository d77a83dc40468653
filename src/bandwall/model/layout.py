"""Parallel layouts as arrays, and the one validity mask every caller uses.

A layout is (tp, pp, cp, ep, etp, zero, micro_batch, virtual_stages) for a given GPU count and
global batch; arrays of layouts broadcast together. `check_layouts` returns, per layout, the
first rule it breaks (0 if none); `explain` turns a broken rule into the one-line message and
the request field it is about. `plan`, `sweep`, the layout search, `scale`, `compare` and
`calibrate` all go through these two functions, so they refuse the same layouts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from bandwall.errors import LayoutError
from bandwall.model.cluster import Cluster
from bandwall.model.vocab import Mitigation, Recompute, Schedule
from bandwall.workloads import Transformer, Workload

IntArray = npt.NDArray[np.int64]


__all__ = [
    "LAYOUT_AXES",
    "RULE_FIELD",
    "LayoutArrays",
    "Mitigation",
    "Recompute",
    "Rule",
    "Schedule",
    "check_layouts",
    "explain",
]

LAYOUT_AXES = ("tp", "pp", "cp", "ep", "etp", "zero", "micro_batch", "virtual_stages")


@dataclass(frozen=True)
class LayoutArrays:
    """A batch of layouts to evaluate at once; every field broadcasts with the others."""

    tp: Any
    pp: Any
    cp: Any
    ep: Any
    etp: Any
    """Expert tensor parallelism (Megatron MoE parallel folding; 1 for dense models)."""
    zero: Any
    micro_batch: Any
    virtual_stages: Any

    def floats(self, *others: Any) -> tuple[npt.NDArray[np.float64], ...]:
        """All axes (and `others`) broadcast together as float arrays."""
        arrays = [
            np.asarray(a, dtype=np.float64)
            for a in (*(getattr(self, k) for k in LAYOUT_AXES), *others)
        ]
        shape = np.broadcast(*arrays).shape
        if shape == ():
            return tuple(a[()] for a in arrays)
        return tuple(a if a.shape == shape else np.broadcast_to(a, shape) for a in arrays)


class Rule(IntEnum):
    """Layout rules, in the order they are checked (the first broken one is reported): the
    rules about a single axis come before the ones about how the axes multiply."""

    OK = 0
    CNN_MODEL_PARALLEL = 1
    TP_NEEDS_SCALE_UP = 2
    TP_IN_NODE = 3
    TP_HEADS = 4
    GPUS_DIVISIBLE = 5
    PP_LAYERS = 6
    INTERLEAVE_NEEDS_PP = 7
    INTERLEAVE_SCHEDULE = 8
    CP_SEQUENCE = 9
    EP_DENSE = 10
    EP_DIVIDES = 11
    ETP_IN_NODE = 12
    BATCH_DIVISIBLE = 13
    ASYNC_NEEDS_LOCAL_SGD = 14
    DILOCO_WORKERS = 15
    PP_STAGE_LAYERS = 16


def _uneven_chunks(
    stage_layers: tuple[int | None, int | None], rest: Any, others: Any, v: Any
) -> Any:
    """Whether a stage given its own layer count, or the middle stages' equal share, does not
    split into `v` virtual chunks (Megatron-Core builds each chunk from a whole number)."""
    vv = np.maximum(np.asarray(v, dtype=np.float64), 1.0)
    bad = np.zeros(np.shape(vv), dtype=bool)
    for given in stage_layers:
        if given is not None:
            bad = bad | (np.mod(given, vv) != 0)
    share = np.asarray(rest, dtype=np.float64) / np.maximum(
        np.asarray(others, dtype=np.float64), 1.0
    )
    return bad | ((np.asarray(others) > 0) & (np.mod(share, vv) != 0))


def check_layouts(
    w: Workload,
    cl: Cluster,
    lay: LayoutArrays,
    global_batch: Any,
    *,
    schedule: Schedule,
    local_sgd_steps: int,
    mitigation: Mitigation,
    workers: Any = 1,
    stage_layers: tuple[int | None, int | None] = (None, None),
) -> IntArray:
    """The first broken `Rule` per layout (0 where the layout is valid). Memory fit is not a
    rule here: the engine computes it (`fits`) from the same layouts. `stage_layers` are the
    first and last ranks' layers when given (Megatron --decoder-first/last-pipeline-num-layers,
    which splits the rest over the other ranks; each keeps one or more)."""
    tp, pp, cp, ep, etp, _zero, mb, v, n, gb = lay.floats(cl.num_gpus, global_batch)
    G = float(cl.gpus_per_node)
    model_par = tp * pp * cp
    dp = n / model_par
    is_tf = isinstance(w, Transformer)
    checks: list[tuple[Rule, npt.NDArray[np.bool_]]] = [
        (Rule.CNN_MODEL_PARALLEL, np.full(tp.shape, not is_tf) & (model_par * ep > 1)),
        (Rule.TP_NEEDS_SCALE_UP, (tp > 1) & (G == 1)),
        (Rule.TP_IN_NODE, (tp > G) | (np.mod(G, tp) != 0)),
    ]
    if isinstance(w, Transformer):
        # fewer key-value heads than TP ranks are replicated (each rank holds one), so tp must
        # divide the query heads and either divide or be a multiple of the key-value heads
        kv = float(w.kv_heads or w.heads)
        kv_ok = (np.mod(kv, tp) == 0) | (np.mod(tp, kv) == 0)
        checks.append((Rule.TP_HEADS, (np.mod(w.heads, tp) != 0) | ~kv_ok))
    checks.append((Rule.GPUS_DIVISIBLE, np.mod(n, model_par) != 0))
    if isinstance(w, Transformer):
        # Megatron may count the embedding and the loss as a layer each when it splits the
        # model into pp × v chunks (account_for_embedding/loss_in_pipeline_split)
        checks.append((Rule.PP_LAYERS, pp * v > w.layers + 2))
        if stage_layers != (None, None):
            given = sum(x or 0 for x in stage_layers)
            others = pp - sum(x is not None for x in stage_layers)
            rest = w.layers - given
            checks.append(
                (
                    Rule.PP_STAGE_LAYERS,
                    (pp <= 1)
                    | (rest < others)
                    | ((others <= 0) & (rest != 0))
                    # Megatron-Core's TransformerConfig asserts the middle stages split the
                    # rest evenly (80 - 8 - 8 over 6 was priced as 11 each: 82 layers)
                    | ((others > 0) & (np.mod(rest, np.maximum(others, 1)) != 0))
                    # and with virtual stages every stage's layers split into v equal chunks
                    | ((v > 1) & _uneven_chunks(stage_layers, rest, others, v)),
                )
            )
    checks += [
        (Rule.INTERLEAVE_NEEDS_PP, (v > 1) & (pp == 1)),
        (Rule.INTERLEAVE_SCHEDULE, (v > 1) & (schedule is Schedule.ONE_F_ONE_B)),
    ]
    if isinstance(w, Transformer):
        checks += [
            (Rule.CP_SEQUENCE, np.mod(w.seq_len, cp) != 0),
            (Rule.EP_DENSE, ((ep > 1) | (etp > 1)) & (not w.is_moe)),
            # MoE parallel folding (Megatron-Core): the expert layers split the same
            # tp·cp·dp ranks as ep × etp × expert-dp
            (
                Rule.EP_DIVIDES,
                (np.mod(w.experts, ep) != 0) | (np.mod(tp * cp * np.floor(dp), ep * etp) != 0),
            ),
            (Rule.ETP_IN_NODE, (etp > G) | (np.mod(G, etp) != 0) | ((etp > 1) & (not w.is_moe))),
        ]
    checks += [
        (Rule.BATCH_DIVISIBLE, (np.mod(gb, np.maximum(np.floor(dp), 1) * mb) != 0) | (dp < 1)),
        (
            Rule.ASYNC_NEEDS_LOCAL_SGD,
            np.full(tp.shape, mitigation is Mitigation.ASYNC and local_sgd_steps == 1),
        ),
        (
            Rule.DILOCO_WORKERS,
            (np.mod(np.floor(dp), workers) != 0) | (workers > np.maximum(np.floor(dp), 1)),
        ),
    ]
    if np.broadcast(*(b for _, b in checks)).shape == ():
        # one layout: the first broken rule in one pass (np.where per rule costs microseconds)
        flags = np.array([b for _, b in checks])
        first = int(flags.argmax())
        return np.full((), int(checks[first][0]) if flags[first] else 0, dtype=np.int64)
    out = np.zeros(tp.shape, dtype=np.int64)
    for rule, broken in reversed(checks):
        out = np.where(broken, int(rule), out)
    return out


#: The request field a user changes to fix each rule.
RULE_FIELD = {
    Rule.CNN_MODEL_PARALLEL: "tp",
    Rule.TP_NEEDS_SCALE_UP: "tp",
    Rule.TP_IN_NODE: "tp",
    Rule.TP_HEADS: "tp",
    Rule.GPUS_DIVISIBLE: "gpus",
    Rule.PP_LAYERS: "pp",
    Rule.INTERLEAVE_NEEDS_PP: "virtual_stages",
    Rule.INTERLEAVE_SCHEDULE: "virtual_stages",
    Rule.CP_SEQUENCE: "cp",
    Rule.EP_DENSE: "ep",
    Rule.EP_DIVIDES: "ep",
    Rule.ETP_IN_NODE: "etp",
    Rule.BATCH_DIVISIBLE: "global_batch",
    Rule.ASYNC_NEEDS_LOCAL_SGD: "straggler_mitigation",
    Rule.DILOCO_WORKERS: "diloco_workers",
    Rule.PP_STAGE_LAYERS: "pp_first_stage_layers",
}


def _not_divisible(n: int, degrees: dict[str, int]) -> LayoutError:
    """GPUs not divisible by tp×pp×cp: a degree that alone does not divide the GPUs is the one
    to change (`--pp 1000` on 64 GPUs), with the values it can take; otherwise the count."""
    for name, d in degrees.items():
        rest = math.prod(v for k, v in degrees.items() if k != name)
        if n % d and n % rest == 0:
            m = n // rest
            small = [k for k in range(1, math.isqrt(m) + 1) if m % k == 0]
            fits = sorted({*small, *(m // k for k in small)})
            shown = ", ".join(map(str, fits[:12])) + (", ..." if len(fits) > 12 else "")
            return LayoutError(
                f"{d:,} does not divide the {n:,} GPUs"
                + (f" left by the other degrees ({n // rest:,})" if rest > 1 else "")
                + f"; {name} can be {shown}",
                field=name,
            )
    tp, pp, cp = degrees["tp"], degrees["pp"], degrees["cp"]
    return LayoutError(
        f"{n} is not divisible by tp×pp×cp = {tp}×{pp}×{cp} = {tp * pp * cp}", field="gpus"
    )


def explain(  # noqa: C901
    rule: int,
    w: Workload,
    cl: Cluster,
    layout: dict[str, int],
    global_batch: int,
) -> LayoutError:
    """The error for one broken rule, naming the request field a user changes to fix it."""
    tp, pp, cp, ep = (layout[k] for k in ("tp", "pp", "cp", "ep"))
    v, mb = layout["virtual_stages"], layout["micro_batch"]
    n = int(np.asarray(cl.num_gpus).reshape(-1)[0])
    G = cl.gpus_per_node
    dp = max(n // (tp * pp * cp), 1)
    r = Rule(rule)
    if r is Rule.CNN_MODEL_PARALLEL:
        return LayoutError(
            f"{w.key} is a CNN; only data parallelism (with --zero) is modelled, so tp, pp, "
            "cp and ep must be 1",
            field="tp",
        )
    if r is Rule.GPUS_DIVISIBLE:
        return _not_divisible(n, {"pp": pp, "cp": cp, "tp": tp})
    if r is Rule.TP_NEEDS_SCALE_UP:
        return LayoutError(
            f"{tp} needs a scale-up fabric inside a node, but the nodes here hold 1 GPU; use "
            "pp or dp across nodes",
            field="tp",
        )
    if r is Rule.TP_IN_NODE:
        return LayoutError(
            f"{tp} must divide the {G} GPUs of a node (the scale-up domain); tensor "
            "parallelism over the scale-out fabric is not modelled",
            field="tp",
        )
    assert isinstance(w, Transformer) or r not in (
        Rule.TP_HEADS,
        Rule.PP_LAYERS,
        Rule.CP_SEQUENCE,
        Rule.PP_STAGE_LAYERS,
    )
    if r is Rule.TP_HEADS and isinstance(w, Transformer):
        kv = w.kv_heads or w.heads
        return LayoutError(
            f"{tp} must divide the {w.heads} attention heads, and divide or be a multiple of "
            f"the {kv} key-value heads",
            field="tp",
        )
    if r is Rule.PP_LAYERS and isinstance(w, Transformer):
        return LayoutError(
            f"{pp} stages × {v} virtual stages exceed the {w.layers} layers (+ the embedding "
            "and the loss)",
            field="pp",
        )
    if r is Rule.INTERLEAVE_NEEDS_PP:
        return LayoutError(f"{v} needs pipeline parallelism (pp > 1)", field="virtual_stages")
    if r is Rule.INTERLEAVE_SCHEDULE:
        return LayoutError(
            f"{v} needs --schedule interleaved; 1f1b has one stage per GPU", field="virtual_stages"
        )
    if r is Rule.CP_SEQUENCE and isinstance(w, Transformer):
        return LayoutError(f"{cp} does not divide the sequence length {w.seq_len}", field="cp")
    if r is Rule.EP_DENSE:
        if ep == 1:
            return LayoutError(
                f"{w.key} is dense; expert tensor parallelism needs an MoE model", field="etp"
            )
        return LayoutError(f"{w.key} is dense; expert parallelism needs an MoE model", field="ep")
    if r is Rule.EP_DIVIDES and isinstance(w, Transformer):
        etp = layout.get("etp", 1)
        return LayoutError(
            f"{ep} must divide the {w.experts} experts, and ep × etp = {ep * etp} the "
            f"tp × cp × dp = {tp * cp * dp} ranks the expert layers fold over",
            field="ep",
        )
    if r is Rule.ETP_IN_NODE:
        etp = layout.get("etp", 1)
        if isinstance(w, Transformer) and not w.is_moe:
            return LayoutError(f"{w.key} is dense; expert TP needs an MoE model", field="etp")
        return LayoutError(f"{etp} must divide the {G} GPUs of a node", field="etp")
    if r is Rule.BATCH_DIVISIBLE:
        return LayoutError(
            f"{global_batch} is not divisible by dp × micro-batch = {dp} × {mb}",
            field="global_batch",
        )
    if r is Rule.PP_STAGE_LAYERS and isinstance(w, Transformer):
        return LayoutError(
            f"the layers given to the first/last stages must leave the other stages an equal "
            f"share of the {w.layers} layers, at least one each (none over when both are given "
            f"and pp = 2), and need pp > 1 (pp = {pp} here)",
            field="pp_first_stage_layers",
        )
    if r is Rule.ASYNC_NEEDS_LOCAL_SGD:
        return LayoutError(
            "async outer steps need local SGD; set --local-sgd-steps H > 1",
            field="straggler_mitigation",
        )
    return LayoutError(
        f"must divide the {dp} data-parallel replicas (each DiLoCo worker runs whole replicas)",
        field="diloco_workers",
    )
