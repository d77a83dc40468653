"""Every link bounds every op: the least time the bytes that must cross a link need at its
rate, whatever the algorithm.

Three links are on every path: a GPU's own port (its NVLink/NVSwitch port inside a node; a
PCIe GPU's only link, inside the node and out of it), a node's NICs (wire × efficiency and
their PCIe host path, over the oversubscription) and a site's uplink. For each op, a lower
bound on the bytes one GPU, one node or one site must receive or send (in units of the
buffer size S, nccl-tests' convention), from a cut argument:

| op | a GPU port | a node (g of n ranks on it) / a site |
|---|---|---|
| all_reduce | 2(n−1)/n; 1 reducing in the switch | 1: each result element needs remote data |
| all_gather, reduce_scatter | (n−1)/n | (n−g)/n: the other nodes' shards, in or out |
| all_to_all | (n−1)/n | g(n−g)/n: its ranks' data for the other nodes |
| broadcast, reduce, send_recv | 1 | 1 |

The least-populated node (a partial last node) binds the gather bounds, and its ranks can
only use its own NICs. Algorithm bandwidths are capped by bytes/rate (:func:`inv_bw_floor`),
so no option reports more bus bandwidth than a link on its path carries.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from bandwall.model.collectives.vocab import Op
from bandwall.model.topology import Topology, group_shape

FloatArray = npt.NDArray[np.float64]


def _port_bytes(op: Op, n: FloatArray, in_switch: bool) -> FloatArray:
    if op is Op.ALL_REDUCE:
        return np.ones_like(n) if in_switch else 2 * (n - 1) / n
    if op in (Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALL_TO_ALL):
        return (n - 1) / n
    return np.ones_like(n)


def _member_bytes(op: Op, n: FloatArray, g: FloatArray) -> FloatArray:
    """Bytes (× S) a member holding g of the n ranks must move across its boundary."""
    if op in (Op.ALL_GATHER, Op.REDUCE_SCATTER):
        return (n - g) / n
    if op is Op.ALL_TO_ALL:
        return g * (n - g) / n
    return np.ones_like(n)


def inv_bw_floor(op: Op, ranks: FloatArray, topo: Topology, in_switch: bool) -> FloatArray:
    """Seconds per byte of S no algorithm of `op` can beat on `topo`'s links (0 where no
    link binds). `in_switch`: the option reduces inside the NVSwitch (NVLS)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _floor(op, ranks, topo, in_switch)


def _floor(op: Op, ranks: FloatArray, topo: Topology, in_switch: bool) -> FloatArray:
    shape = group_shape(ranks, topo)
    n = shape.num_ranks
    floor = np.zeros_like(n)
    if not bool(np.any(n > 1)):
        return floor
    up, out, wan = topo.scale_up, topo.scale_out, topo.wan
    multi = shape.num_nodes > 1
    if up is not None:
        port_Bps = np.asarray(up.bandwidth_Bps, dtype=np.float64) * up.efficiency
        # inside a node every byte a GPU moves crosses its port; a PCIe GPU has no other
        binds = ~multi if up.transport != "pcie" else np.ones_like(multi)
        per_port = _port_bytes(op, n, in_switch) / port_Bps
        floor = np.where(binds & (n > 1), np.maximum(floor, per_port), floor)
    if out is not None:
        host = np.asarray(out.host_Bps, dtype=np.float64)
        nic_Bps = np.minimum(np.asarray(out.bandwidth_Bps, dtype=np.float64) * out.efficiency, host)
        nic_Bps = nic_Bps / np.asarray(topo.oversubscription, dtype=np.float64)
        nics = np.asarray(topo.nics_per_node, dtype=np.float64)
        G = np.asarray(topo.gpus_per_node, dtype=np.float64)
        for g in (np.minimum(G, n), shape.last_node_ranks):
            own_nics = np.minimum(nics, np.maximum(g, 1.0)) if op is not Op.SEND_RECV else 1.0
            node = _member_bytes(op, n, g) / (np.minimum(own_nics, nics) * nic_Bps)
            floor = np.where(multi, np.maximum(floor, node), floor)
    if wan is not None and topo.nodes_per_site is not None:
        uplink_Bps = np.asarray(wan.bandwidth_Bps, dtype=np.float64) * wan.efficiency
        per_site = np.asarray(topo.gpus_per_node, dtype=np.float64) * np.asarray(
            topo.nodes_per_site, dtype=np.float64
        )
        last_site = n - per_site * (shape.num_sites - 1)
        for g in (np.minimum(per_site, n), last_site):
            site = _member_bytes(op, n, g) / uplink_Bps
            floor = np.where(shape.num_sites > 1, np.maximum(floor, site), floor)
    return np.nan_to_num(floor, nan=0.0, posinf=np.inf)
