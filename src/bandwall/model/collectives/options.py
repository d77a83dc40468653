"""The ways a collective can run on a topology, behind one interface: NCCL's (algorithm,
protocol) pairs, PyTorch's Gloo algorithms and the generic schedules, each an
:class:`Option` with size-independent arrays; which of them a requested algorithm stands for;
why one cannot run; and which never win at any size (pruned before the per-size loop).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from bandwall.errors import ConfigError
from bandwall.model import nccl
from bandwall.model.collectives import links, overheads
from bandwall.model.collectives.levels import Levels, levels
from bandwall.model.collectives.schedules import schedule_time_s
from bandwall.model.collectives.vocab import (
    ALGORITHMS,
    GLOO_ALGORITHMS,
    IN_NETWORK_ALGOS,
    NCCL_ALGOS,
    NCCL_FUNC,
    NO_PROTOCOL,
    WAN_SCHEDULES,
    Algo,
    Op,
)
from bandwall.model.nccl import Proto
from bandwall.model.topology import Backend, Topology, group_shape

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.intp]


@dataclass(frozen=True)
class Option:
    """One way to run the collective, priced as

        latency × plateau ramp(size)
        + inv_bw × (max(own, min(own × channels, chunk_eff)) + min(own, fill))

    with `own` the size over NCCL's interpolated tree correction (the size itself for other
    algorithms): while a message is below one chunk per channel NCCL runs fewer channels, so
    it costs what its chunks do at the per-channel rate (enqueue.cc:2093; `chunk_eff` is a full
    chunk on every channel, in the same corrected bytes). Arrays have the (compressed) context
    shape. NCCL's collectives also carry the tuner's view (`tuner_latency_s`); the others
    (`tuner_latency_s` None) compete on price alone. The per-call overhead is the same for
    every option of a call and is added once (:mod:`.overheads`).
    """

    algo: Algo
    protocol: str
    latency_s: FloatArray
    inv_bw: FloatArray
    tuner_latency_s: FloatArray | None = None
    proto_index: int = 2
    tree_entries: int | None = None
    plateau_bytes: FloatArray | None = None
    plateau_factor: float = 1.0
    channels: FloatArray | None = None
    chunk_eff: FloatArray | None = None
    fill_bytes: FloatArray | None = None
    """NCCL's pipeline fill: channels × :data:`overheads.PIPELINE_FILL_BYTES` (across nodes)
    or :data:`overheads.PIPELINE_FILL_BYTES_IN_NODE`."""
    ladder_bound: BoolArray | None = None
    gloo_ring: tuple[FloatArray, FloatArray, FloatArray] | None = None
    """(α + μ, σ·(H−1), n) per context: time by Gloo's segmented ring, not affine."""

    @property
    def tuned(self) -> bool:
        """Whether NCCL's tuner chooses among this option and its peers."""
        return self.tuner_latency_s is not None

    def expand(
        self, index: IntArray | None, memo: dict[int, Any] | None = None, names: bool = True
    ) -> Option:
        """The option at every element (`index`: each element's context). `memo` shares the
        expansion of an array several options hold; `names` False leaves out what only the
        explanation of the pick needs (the ladder bound)."""
        if index is None:
            return self
        memo = {} if memo is None else memo

        def take(a: Any) -> Any:
            if a is None:
                return None
            key = id(a)
            if key not in memo:
                # np.take, not a[index]: a third faster for a small table and a long index
                memo[key] = (a, np.take(a, index))  # keeps `a` alive: its id stays its own
            return memo[key][1]

        return replace(
            self,
            latency_s=take(self.latency_s),
            inv_bw=take(self.inv_bw),
            tuner_latency_s=take(self.tuner_latency_s),
            plateau_bytes=take(self.plateau_bytes),
            channels=take(self.channels),
            chunk_eff=take(self.chunk_eff),
            fill_bytes=take(self.fill_bytes),
            ladder_bound=take(self.ladder_bound) if names else None,
            gloo_ring=(None if self.gloo_ring is None else tuple(take(a) for a in self.gloo_ring)),
        )

    def worst_fixed_s(self) -> FloatArray:
        """An upper bound on the size-independent part of the price at any size: the
        plateaued latency, the channel floor and the fill (effective bytes <= own + chunk_eff
        + fill)."""
        lat = self.latency_s * (self.plateau_factor if self.plateau_bytes is not None else 1.0)
        floor = 0.0 if self.chunk_eff is None else self.inv_bw * self.chunk_eff
        fill = 0.0 if self.fill_bytes is None else self.inv_bw * self.fill_bytes
        return np.asarray(lat + floor + fill)

    def worst_inv_bw(self) -> FloatArray:
        if self.tree_entries is None:
            return self.inv_bw
        return self.inv_bw / float(nccl.TREE_CORRECTION[self.proto_index].min())


def nccl_options(op: Op, n: FloatArray, topo: Topology) -> list[Option]:
    """NCCL's candidates for `op`, each bounded by every link on its path."""
    sh = nccl.shape_of(n, topo)
    floors: dict[bool, FloatArray] = {}
    fill = np.where(
        sh.group.num_nodes > 1,
        overheads.PIPELINE_FILL_BYTES,
        overheads.PIPELINE_FILL_BYTES_IN_NODE,
    )
    out = []
    for c in nccl.candidates(NCCL_FUNC[op], sh):
        if c.in_network not in floors:
            floors[c.in_network] = links.inv_bw_floor(op, n, topo, c.in_network)
        out.append(
            Option(
                Algo(c.algo.value),
                c.proto.value,
                c.latency_s,
                np.maximum(c.inv_bw, floors[c.in_network]),
                tuner_latency_s=c.nccl_latency_s,
                proto_index=c.proto_index,
                tree_entries=c.tree_entries,
                plateau_bytes=c.plateau_bytes,
                plateau_factor=c.plateau_factor,
                channels=c.channels,
                chunk_eff=_chunk_eff(c),
                fill_bytes=(
                    None
                    if c.exec_channels is None or not fill.any() or overheads.measured(topo)
                    else c.exec_channels * fill
                ),
                ladder_bound=c.ladder_bound,
            )
        )
    return out


def _chunk_eff(c: nccl.Candidate) -> FloatArray | None:
    """A full chunk on every channel, in the bytes the bandwidth term charges."""
    if c.channels is None or c.chunk_bytes is None:
        return None
    full = c.chunk_bytes * c.channels
    if c.tree_entries is None:
        return full
    return full / nccl.tree_correction_smooth(c.chunk_bytes, c.proto_index, c.tree_entries)


def call_overhead_s(topo: Topology, n: FloatArray) -> FloatArray:
    """The per-call overhead every option of a call pays (:mod:`.overheads`)."""
    return overheads.per_call_s(topo, group_shape(n, topo).num_nodes > 1)


def generic_option(
    op: Op, algo: Algo, lv: Levels, topo: Topology, gloo: bool, proto: str
) -> Option:
    """Every α-β schedule is affine in size: its latency at size 0 plus a slope, the slope
    bounded by every link on the path."""
    zero = np.zeros_like(lv.n)
    big = 2.0**30  # the slope from a large size keeps full precision
    t0 = schedule_time_s(op, algo, zero, lv, gloo)
    t1 = schedule_time_s(op, algo, zero + big, lv, gloo)
    slope = np.maximum((t1 - t0) / big, links.inv_bw_floor(op, lv.n, topo, False))
    return Option(algo, proto, t0, slope)


def _multi_site(n: FloatArray, topo: Topology) -> bool:
    if topo.wan is None or topo.nodes_per_site is None:
        return False
    return bool(np.any(group_shape(n, topo).num_sites > 1))


def gloo_options(op: Op, algo: Algo, n: FloatArray, topo: Topology) -> list[Option]:
    """What PyTorch's Gloo runs for `op` (AUTO: its fixed choice)."""
    allowed = GLOO_ALGORITHMS[op]
    chosen = allowed[0] if algo is Algo.AUTO else algo
    if chosen not in allowed:
        raise ConfigError(
            f"{algo.value!r} is not available for {op.value} on gloo; choose one of: "
            + ", ".join(a.value for a in (*allowed, Algo.AUTO)),
            field="algo",
        )
    lv = levels(n, topo, op)
    option = generic_option(op, chosen, lv, topo, True, NO_PROTOCOL)
    if chosen is Algo.RING and op in (Op.ALL_REDUCE, Op.REDUCE_SCATTER):
        hand = (lv.alpha_flat + lv.mu_flat, lv.spread_flat, np.asarray(n, dtype=np.float64))
        option = replace(option, gloo_ring=hand)
    return [option]


def options(  # noqa: C901
    op: Op, algo: Algo, n: FloatArray, topo: Topology, protocol: Proto | None
) -> list[Option]:
    """Every option `algo` stands for on this topology (AUTO: all eligible ones)."""
    if topo.backend_kind is Backend.GLOO:
        if protocol is not None:
            raise ConfigError("protocols are NCCL's; Gloo has none", field="protocol")
        return gloo_options(op, algo, n, topo)
    allowed = ALGORITHMS[op]
    if algo is not Algo.AUTO and algo not in allowed:
        raise ConfigError(
            f"{algo.value!r} is not available for {op.value}; choose one of: "
            + ", ".join(a.value for a in (*allowed, Algo.AUTO)),
            field="algo",
        )
    opts: list[Option] = []
    tree_bcast = op in (Op.BROADCAST, Op.REDUCE) and algo is Algo.TREE
    nccl_family = algo is Algo.AUTO or algo in NCCL_ALGOS or algo is Algo.IN_NETWORK
    if op in NCCL_FUNC and nccl_family and not tree_bcast:
        for opt in nccl_options(op, n, topo):
            if algo is Algo.IN_NETWORK:
                keep = opt.algo in IN_NETWORK_ALGOS
            else:
                keep = algo is Algo.AUTO or opt.algo is algo
            if protocol is not None:
                keep = keep and opt.protocol == protocol.value
            if keep:
                opts.append(opt)
        if algo is not Algo.AUTO and not any(bool(np.any(np.isfinite(o.latency_s))) for o in opts):
            if algo is Algo.IN_NETWORK:
                _no_in_network(topo)
            raise ConfigError(
                f"{algo.value}{'/' + protocol.value if protocol else ''} cannot run {op.value} "
                f"here: {WHY_NOT.get(algo, 'not eligible on this topology')}",
                field="protocol" if protocol and algo is not Algo.RING else "algo",
            )
    generic: tuple[Algo, ...] = ()
    if algo is Algo.AUTO:
        if op in (Op.ALL_TO_ALL, Op.SEND_RECV):
            generic = (Algo.DIRECT,)
        elif _multi_site(n, topo):
            generic = WAN_SCHEDULES.get(op, ())
    elif (algo not in NCCL_ALGOS and algo is not Algo.IN_NETWORK) or tree_bcast:
        generic = (algo,)
    if generic:
        if protocol is not None and protocol is not Proto.SIMPLE:
            raise ConfigError(
                f"{', '.join(a.value for a in generic)} runs NCCL point-to-point with the "
                "Simple protocol",
                field="protocol",
            )
        lv = levels(n, topo, op)
        for a in generic:
            opt = generic_option(op, a, lv, topo, False, Proto.SIMPLE.value)
            if algo is Algo.AUTO and op not in (Op.ALL_TO_ALL, Op.SEND_RECV):
                # the site-level schedules compete only where the group spans sites
                opt = replace(opt, latency_s=np.where(lv.M > 1, opt.latency_s, np.inf))
            opts.append(opt)
    if not opts:
        raise ConfigError(
            f"no {algo.value} option with protocol {protocol.value if protocol else 'any'} "
            f"for {op.value}",
            field="protocol" if protocol else "algo",
        )
    return opts


def check_forced(op: Op, algo: Algo, n: FloatArray, topo: Topology, protocol: Proto | None) -> None:
    """For a table a user asked for (`collective`, /api/collective): a forced algorithm or
    protocol that some of the rank counts cannot run is refused, naming them; the model
    prices those rows at an infinite time, which came out as `inf` µs at exit 0 (`--algo
    nvls_tree --ranks 8,16`, `--protocol LL128` on PCIe; fuzz round 23, B2)."""
    if algo is Algo.AUTO and protocol is None:
        return
    opts = options(op, algo, n, topo, protocol)
    ranks = np.asarray(n, dtype=np.float64)
    runs = np.zeros(ranks.shape, dtype=bool)
    for o in opts:
        runs |= np.broadcast_to(np.isfinite(o.latency_s), ranks.shape)
    if runs.all():
        return
    cannot = sorted({int(r) for r in ranks[~runs]})
    can = sorted({int(r) for r in ranks[runs]})
    shown = ", ".join(f"{r:,}" for r in cannot[:4]) + (", ..." if len(cannot) > 4 else "")
    if algo is not Algo.AUTO:
        what = f"{algo.value}/{protocol.value}" if protocol else algo.value
        why = WHY_NOT.get(algo, "not eligible on this topology")
    else:  # a protocol forced alone (AUTO with none forced returned above)
        assert protocol is not None
        what = protocol.value
        why = (
            WHY_NOT[Algo.RING]
            if protocol is Proto.LL128
            else "no algorithm runs it on this topology"
        )
    where = f" at {shown} ranks ({can[0]:,} can)" if can else " here"
    raise ConfigError(
        f"{what} cannot run {op.value}{where}: {why}",
        field="protocol" if protocol and algo in (Algo.AUTO, Algo.RING) else "algo",
    )


#: Why a forced algorithm cannot run (the eligibility rules of nccl.py, in words).
WHY_NOT = {
    Algo.RING: "LL128 needs NVLink inside the node and GPUDirect RDMA NICs across nodes",
    Algo.TREE: "LL128 needs NVLink inside the node and GPUDirect RDMA NICs across nodes",
    Algo.NVLS: "NVLS needs an NVSwitch with NVLink SHARP (nvlink4/nvlink5, Hopper or later), "
    ">= 2 GPUs per node and in_network not off; across nodes also SHARP on the scale-out "
    "(in_network=True)",
    Algo.NVLS_TREE: "NVLS-tree needs NVLS inside the node (nvlink4/nvlink5) and >= 2 nodes",
    Algo.COLLNET_DIRECT: "CollNet needs SHARP switches enabled (in_network=True on "
    "InfiniBand), >= 2 nodes, <= 8 GPUs per node and an NVSwitch",
    Algo.COLLNET_CHAIN: "CollNet needs SHARP switches enabled (in_network=True on "
    "InfiniBand), >= 2 nodes and <= 8 GPUs per node",
    Algo.PAT: "PAT runs with one GPU per node on >= 2 nodes",
}


def _no_in_network(topo: Topology) -> None:
    levels_ = [link for link in (topo.scale_up, topo.scale_out) if link is not None]
    capable = [link.name for link in levels_ if link.in_network]
    if capable and topo.in_network is not True:
        hint = f"{', '.join(capable)} can reduce in the switch but it is off; set in_network"
    else:
        hint = "this topology has: " + (", ".join(link.name for link in levels_) or "none")
    raise ConfigError(
        f"in_network needs a fabric with in-network reduction (SHARP/NVLS); {hint}",
        field="algo",
    )


def prune(opts: list[Option]) -> list[Option]:
    """Drop options that can neither be the cheapest nor NCCL's tuner's pick at any size, and
    options never eligible. j dominates i when, element-wise, j at its least favourable size
    beats i at its most favourable one in the price (plateaued latency and channel
    floor; bandwidth over the smallest tree correction) and, when both are NCCL's, in the
    tuner's view too; ties keep the first, as NCCL's tuner does."""
    alive = [o for o in opts if bool(np.any(np.isfinite(o.latency_s)))]
    if len(alive) <= 1:
        return alive or opts[:1]
    fixed = [o.worst_fixed_s() for o in alive]
    slope = [o.worst_inv_bw() for o in alive]
    best_fixed = [np.asarray(o.latency_s) for o in alive]
    best_slope = [np.where(np.isfinite(o.latency_s), o.inv_bw, np.inf) for o in alive]
    keep = []
    for i, oi in enumerate(alive):
        dominated = False
        for j, oj in enumerate(alive):
            if j == i or oj.gloo_ring is not None or oi.gloo_ring is not None:
                continue
            if oj.tuned != oi.tuned:
                continue
            price = bool(np.all(fixed[j] <= best_fixed[i]) and np.all(slope[j] <= best_slope[i]))
            if not price:
                continue
            if oi.tuned and oj.tuned:
                assert oi.tuner_latency_s is not None and oj.tuner_latency_s is not None
                lat_j = oj.tuner_latency_s * (
                    oj.plateau_factor if oj.plateau_bytes is not None else 1.0
                )
                if not (np.all(lat_j <= oi.tuner_latency_s) and np.all(slope[j] <= best_slope[i])):
                    continue
            strict = bool(np.any(fixed[j] < best_fixed[i]) or np.any(slope[j] < best_slope[i]))
            if strict or j < i:
                dominated = True
                break
        if not dominated:
            keep.append(oi)
    return keep
