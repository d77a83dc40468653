"""Vectorised cost model of collectives: NCCL's own tuner model, PyTorch's Gloo algorithms,
and hierarchical schedules for multi-site (WAN) clusters.

Every function broadcasts over numpy arrays of message sizes and rank counts, so one call
prices a whole nccl-tests sweep or a plan grid. Conventions follow nccl-tests: `size` is the
total buffer (the output of all_gather, the input of reduce_scatter), algbw = size / time, and
busbw = algbw × a per-op factor that makes it comparable with the link rate.

Which model prices a collective depends on the topology's backend:

- **NCCL** (GPUs): :mod:`bandwall.model.nccl` — per algorithm × protocol a latency and a
  bandwidth from NCCL 2.30.7's tuning constants. What runs is what NCCL's tuner picks (its own
  prediction, step functions and all); its price is continuous and monotone (the step
  functions interpolated, the channels NCCL runs at each size, per-call overheads fitted on
  published nccl-tests curves). Where the tuner's pick is not the cheapest pair, the result
  says so. all_to_all and send_recv are NCCL point-to-point (`direct`). On multi-site
  topologies the hierarchical and halving-doubling schedules also compete.
- **Gloo** (CPUs over TCP): what PyTorch's ProcessGroupGloo runs, with no tuner
  (:mod:`.schedules`, :mod:`.gloo`).

Every option is bounded by every link on its path (:mod:`.links`). The package, one concept
per module: :mod:`.vocab` (ops, algorithms), :mod:`.levels` (the hierarchy per level),
:mod:`.schedules` (α-β schedules keyed by (op, algo)), :mod:`.gloo`, :mod:`.links`,
:mod:`.overheads` (fitted per-call overheads), :mod:`.options` (what can run, pruning),
:mod:`.pricing` (per size: price, cheapest, tuner's pick), :mod:`.calibrated` (profiles from
`bandwall calibrate`), :mod:`.dedupe` and :mod:`.fast` (the caches), :mod:`.api`.
"""

from bandwall.model.collectives.api import (
    LADDER_NOTE,
    CollectiveResult,
    Selection,
    auto_select,
    collective_time_s,
    evaluate_collective,
    fabric_congestion,
    select,
    selection,
)
from bandwall.model.collectives.gloo import (
    GLOO_SEGMENT_BYTES,
    gloo_ring_all_reduce_s,
    gloo_ring_branches,
)
from bandwall.model.collectives.vocab import (
    ALGORITHMS,
    GLOO_ALGORITHMS,
    NO_PROTOCOL,
    Algo,
    Op,
    busbw_factor,
    parse_algo,
    parse_op,
    parse_protocol,
)
from bandwall.model.jitter import EULER_GAMMA, expected_max_jitter_s, harmonic
from bandwall.model.nccl import Proto

__all__ = [
    "ALGORITHMS",
    "EULER_GAMMA",
    "GLOO_ALGORITHMS",
    "GLOO_SEGMENT_BYTES",
    "LADDER_NOTE",
    "NO_PROTOCOL",
    "Algo",
    "CollectiveResult",
    "Op",
    "Proto",
    "Selection",
    "auto_select",
    "busbw_factor",
    "collective_time_s",
    "evaluate_collective",
    "expected_max_jitter_s",
    "fabric_congestion",
    "gloo_ring_all_reduce_s",
    "gloo_ring_branches",
    "harmonic",
    "parse_algo",
    "parse_op",
    "parse_protocol",
    "select",
    "selection",
]
