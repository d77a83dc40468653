"""The collectives' vocabulary: ops, algorithms, which algorithms run which op on each
backend, and nccl-tests' bus-bandwidth factors."""

from __future__ import annotations

from enum import StrEnum

import numpy as np
import numpy.typing as npt

from bandwall.errors import parse_choice, unknown_choice
from bandwall.model.nccl import NcclAlgo, NcclFunc, Proto

FloatArray = npt.NDArray[np.float64]


class Op(StrEnum):
    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALL_TO_ALL = "all_to_all"
    SEND_RECV = "send_recv"


class Algo(StrEnum):
    RING = "ring"
    TREE = "tree"
    NVLS = "nvls"
    NVLS_TREE = "nvls_tree"
    COLLNET_DIRECT = "collnet_direct"
    COLLNET_CHAIN = "collnet_chain"
    PAT = "pat"
    HALVING_DOUBLING = "halving_doubling"
    HIERARCHICAL = "hierarchical"
    IN_NETWORK = "in_network"
    """The fastest in-network reduction the hardware offers: NVLS, NVLS-tree or CollNet."""
    DIRECT = "direct"
    AUTO = "auto"


#: Protocol label of schedules that are not NCCL collectives (Gloo, generic schedules).
NO_PROTOCOL = "-"

NCCL_ALGOS = {
    Algo.RING: NcclAlgo.RING,
    Algo.TREE: NcclAlgo.TREE,
    Algo.NVLS: NcclAlgo.NVLS,
    Algo.NVLS_TREE: NcclAlgo.NVLS_TREE,
    Algo.COLLNET_DIRECT: NcclAlgo.COLLNET_DIRECT,
    Algo.COLLNET_CHAIN: NcclAlgo.COLLNET_CHAIN,
    Algo.PAT: NcclAlgo.PAT,
}
IN_NETWORK_ALGOS = (Algo.NVLS, Algo.NVLS_TREE, Algo.COLLNET_DIRECT, Algo.COLLNET_CHAIN)
NCCL_FUNC = {
    Op.ALL_REDUCE: NcclFunc.ALL_REDUCE,
    Op.ALL_GATHER: NcclFunc.ALL_GATHER,
    Op.REDUCE_SCATTER: NcclFunc.REDUCE_SCATTER,
    Op.BROADCAST: NcclFunc.BROADCAST,
    Op.REDUCE: NcclFunc.REDUCE,
}

#: Algorithms that implement each op on the NCCL backend (first: NCCL's default family).
ALGORITHMS: dict[Op, tuple[Algo, ...]] = {
    Op.ALL_REDUCE: (
        Algo.RING,
        Algo.TREE,
        Algo.NVLS,
        Algo.NVLS_TREE,
        Algo.COLLNET_DIRECT,
        Algo.COLLNET_CHAIN,
        Algo.IN_NETWORK,
        Algo.HALVING_DOUBLING,
        Algo.HIERARCHICAL,
    ),
    Op.ALL_GATHER: (
        Algo.RING,
        Algo.NVLS,
        Algo.COLLNET_DIRECT,
        Algo.PAT,
        Algo.IN_NETWORK,
        Algo.HALVING_DOUBLING,
        Algo.HIERARCHICAL,
    ),
    Op.REDUCE_SCATTER: (
        Algo.RING,
        Algo.NVLS,
        Algo.COLLNET_DIRECT,
        Algo.PAT,
        Algo.IN_NETWORK,
        Algo.HALVING_DOUBLING,
        Algo.HIERARCHICAL,
    ),
    Op.BROADCAST: (Algo.RING, Algo.TREE),
    Op.REDUCE: (Algo.RING, Algo.TREE),
    Op.ALL_TO_ALL: (Algo.DIRECT,),
    Op.SEND_RECV: (Algo.DIRECT,),
}
#: What PyTorch's Gloo backend runs per op (AUTO), then what else may be forced on it.
GLOO_ALGORITHMS: dict[Op, tuple[Algo, ...]] = {
    Op.ALL_REDUCE: (Algo.RING, Algo.HALVING_DOUBLING, Algo.HIERARCHICAL),
    Op.ALL_GATHER: (Algo.RING, Algo.HALVING_DOUBLING, Algo.HIERARCHICAL),
    Op.REDUCE_SCATTER: (Algo.RING,),
    Op.BROADCAST: (Algo.TREE, Algo.RING),
    Op.REDUCE: (Algo.RING,),
    Op.ALL_TO_ALL: (Algo.DIRECT,),
    Op.SEND_RECV: (Algo.DIRECT,),
}
#: Generic schedules that compete with NCCL's algorithms on multi-site topologies (frameworks
#: such as DiLoCo-style trainers run them over the WAN themselves).
WAN_SCHEDULES: dict[Op, tuple[Algo, ...]] = {
    Op.ALL_REDUCE: (Algo.HIERARCHICAL, Algo.HALVING_DOUBLING),
    Op.ALL_GATHER: (Algo.HIERARCHICAL, Algo.HALVING_DOUBLING),
    Op.REDUCE_SCATTER: (Algo.HIERARCHICAL, Algo.HALVING_DOUBLING),
}


def parse_op(text: str) -> Op:
    return parse_choice(Op, text.replace("-", "_"), "op")


def parse_algo(text: str) -> Algo:
    key = text.strip().lower().replace("-", "_")
    key = {"collnet": "collnet_direct", "nvlstree": "nvls_tree"}.get(key, key)
    try:
        return Algo(key)
    except ValueError:
        raise unknown_choice("algo", text, [a.value for a in Algo]) from None


def parse_protocol(text: str) -> Proto:
    """NCCL_PROTO spelling: LL, LL128 or Simple (any case)."""
    folded = {p.value.lower(): p for p in Proto}
    found = folded.get(text.strip().lower())
    if found is None:
        raise unknown_choice("protocol", text, [p.value for p in Proto])
    return found


def busbw_factor(op: Op, ranks: npt.ArrayLike) -> FloatArray:
    """nccl-tests bus-bandwidth factor: busbw = algbw × factor.

    >>> float(busbw_factor(Op.ALL_REDUCE, 8))
    1.75
    """
    n = np.asarray(ranks, dtype=np.float64)
    if op is Op.ALL_REDUCE:
        return 2 * (n - 1) / n
    if op in (Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALL_TO_ALL):
        return (n - 1) / n
    return np.ones_like(n)
