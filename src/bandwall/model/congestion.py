"""Fabric congestion at scale: flow collisions under static ECMP hashing, adaptive routing,
and incast on lossless fabrics.

A scale-out fabric is a Clos of leaf switches with `D` host ports and `U` equal-cost uplinks
(spine paths). Static ECMP pins each flow (RoCE: each queue pair, whose UDP source port is
hashed) to one uplink at random; per-packet adaptive routing (InfiniBand AR, Spectrum-X,
EFA's SRD) spreads every flow over all of them. What the collective model needs is the
*synchronous* price of hashing: a ring or tree moves the same bytes on every flow and waits
for the slowest, and a flow sharing its uplink with `M` others gets 1/M of it (max-min fair
share), so the collective runs at the pace of the busiest uplink of the whole fabric.

Balls into bins. `F` flows leave a leaf; each lands on one of `U` uplinks uniformly at random
(multinomial). P(max load ≤ k) is exact here (:func:`max_load_cdf`): with Y_i iid
Poisson(F/U), P(max ≤ k) = P(ΣY_i = F, all Y_i ≤ k) / P(ΣY_i = F) (the Poisson trick of
Kolchin, Sevast'yanov & Chistyakov, *Random Allocations*, 1978). The fabric has `G`
independent hashed groups (one per leaf and hashing stage), so P(busiest ≤ k) = P(max ≤ k)^G
and E[max] = Σ_k (1 − P(busiest ≤ k)). Beyond `EXACT_MAX_BALLS` flows per leaf the bins are
taken as independent Binomial(F, 1/U) loads; there the busiest grows as
F/U + sqrt(2 (F/U) ln n) for n = U·G bins (Raab & Steger, "Balls into bins — a simple and
tight analysis", RANDOM 1998, Theorem 1, m ≫ n log n). Both are checked against a seeded
flow-level Monte Carlo in tests/model/test_congestion.py.

From loads to bandwidth. A NIC splits its data evenly over its `q` flows (NCCL channels ×
NCCL_IB_QPS_PER_CONNECTION), an uplink carries `s` NICs' worth (its speed over the NIC's), so
a flow runs at min(1/q, s/M) of the NIC rate and the collective's time scales as
max(q, M/s). Perfect balance (spraying) gives max(q, λ/s) with λ = F/U the mean load; the
collision factor, the share of the balanced bandwidth a hashed fabric delivers, is
max(q, λ/s) / E[max(q, M/s)]. Flows that never leave their leaf do not count: which do
depends on where ring neighbours sit (:class:`Placement`) and on the cabling (rail-optimised
leaves carry one NIC of each of `D` hosts; a top-of-rack leaf all NICs of D/nics hosts).

Switches spread a job's flows more evenly than independent draws: published static-ECMP
measurements lose 2-3× less than the uniform law predicts. The busiest link's excess over an
even spread is scaled by a dispersion κ (:func:`hash_dispersion`; 1 = uniform hashing, what
the lab's socket hash and the flow-level oracle check; `SWITCH_HASH_DISPERSION` for switch
fabrics, fitted on 2 of 5 independent figures, docs/congestion.md).

Vendors quote a different number, the *aggregate* throughput when every flow runs on its own
(no synchronisation): the share of offered traffic the hashed links carry,
E[min(K, s·q)] / E[K] for K ~ Binomial(F, 1/U) (:func:`carried_share`); one flow per NIC on
as many uplinks gives 1 − 1/e ≈ 0.63.

Incast. A many-to-one phase on a lossless fabric whose only defence is PFC pauses the
upstream port, stalling every flow behind it, including those bound elsewhere: the network
behaves as an input-queued switch with FIFO queues, whose saturation throughput under
uniform destinations is 0.75 for 2 inputs, 0.6184 for 8 and 2 − √2 ≈ 0.586 for many (Karol,
Hluchyj & Morgan, "Input versus output queueing on a space-division packet switch", IEEE
Trans. Commun. 35(12), 1987). Per-flow end-to-end congestion control (IB credits
and congestion control, DCQCN's ECN feedback, Spectrum-X telemetry, EFA SRD) keeps queues
below the pause threshold in steady state (Zhu et al., "Congestion control for large-scale
RDMA deployments", SIGCOMM 2015), so the penalty is off on those fabrics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from bandwall.model.faults import max_bin_load
from bandwall.model.topology import FabricCC, Link, LoadBalancing, Placement, Topology

FloatArray = npt.NDArray[np.float64]


#: NCCL_NCHANNELS_PER_NET_PEER default: point-to-point channels to one remote peer.
NCCL_P2P_CHANNELS_PER_PEER = 2
#: NCCL runs twice the channels its ring search found for collectives (coll channels = 2 ×
#: ring channels, nccl.py `coll_ch`): flows per NIC per searched channel.
NCCL_COLL_CHANNEL_FACTOR = 2
#: Above this many flows per leaf the per-leaf distribution is not convolved exactly.
EXACT_MAX_BALLS = 4096
#: Euler–Mascheroni constant (mean of the standard Gumbel law).
EULER_GAMMA = 0.5772156649015329
#: Quantile reported as the "bad luck" case of a hashed fabric.
WORST_QUANTILE = 0.99
#: Dispersion of switch ECMP (:func:`hash_dispersion`), fitted to 2 of the 5 independent
#: published static-ECMP measurements (docs/congestion.md, "Which figures set what";
#: tests/model/test_congestion_published.py): real switches spread a job's flows more
#: evenly than independent uniform draws.
SWITCH_HASH_DISPERSION = 0.27

#: Saturation throughput of an N-input FIFO input-queued switch under uniform traffic
#: (Karol, Hluchyj & Morgan 1987); N → ∞: 2 − √2.
HOL_THROUGHPUT = {1: 1.0, 2: 0.75, 3: 0.6825, 4: 0.6553, 5: 0.6399, 6: 0.6302, 7: 0.6234, 8: 0.6184}
HOL_LIMIT = 2 - math.sqrt(2)


# --- balls into bins ------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def max_load_cdf(balls: int, bins: int) -> tuple[int, FloatArray]:
    """P(max load ≤ k) of `balls` thrown uniformly into `bins`, for k = k0, k0 + 1, ...
    (below k0 it is 0; past the end of the array 1).

    Exact up to `EXACT_MAX_BALLS` balls (conditioned Poisson, the convolution power taken by
    FFT); beyond, bins are independent Binomial(balls, 1/bins) loads.

    >>> k0, cdf = max_load_cdf(2, 2)  # both in one bin with probability 1/2
    >>> k0, [round(float(p), 6) for p in cdf]
    (1, [0.5, 1.0])
    """
    if balls <= 0:
        return 0, np.ones(1)
    if bins <= 1:
        return balls, np.ones(1)
    k0 = -(-balls // bins)  # ceil: some bin holds at least the mean
    if balls > EXACT_MAX_BALLS:
        return _binomial_max_cdf(balls, bins, k0)
    lam = balls / bins
    j = np.arange(balls + 1, dtype=np.float64)
    log_fact = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, balls + 1)))))
    pois = np.exp(j * math.log(lam) - lam - log_fact)
    # P(sum of `bins` Poisson(lam) = balls) = Poisson(balls) pmf at balls
    denom = math.exp(balls * math.log(balls) - balls - float(log_fact[balls]))
    out: list[float] = []
    for k in range(k0, balls + 1):
        n = 1 << int(bins * k).bit_length()  # > bins·k: no wrap-around in the FFT
        spec = np.fft.rfft(pois[: k + 1], n)
        value = float(np.fft.irfft(spec**bins, n)[balls]) / denom
        out.append(min(max(value, 0.0), 1.0))
        if out[-1] >= 1.0 - 1e-15:
            break
    cdf = np.maximum.accumulate(np.asarray(out))
    cdf[-1] = 1.0
    return k0, cdf


def _binomial_max_cdf(balls: int, bins: int, k0: int) -> tuple[int, FloatArray]:
    """P(max ≤ k) with independent Binomial(balls, 1/bins) bins, from k0 to the far tail."""
    p = 1.0 / bins
    lam = balls * p
    sd = math.sqrt(lam * (1 - p))
    hi = min(balls, int(lam + 14 * sd + 20))
    lo = max(0, int(lam - 40 * sd))
    k = np.arange(lo, hi + 1, dtype=np.float64)
    log_pmf = (
        math.lgamma(balls + 1)
        - np.array([math.lgamma(x + 1) + math.lgamma(balls - x + 1) for x in k])
        + k * math.log(p)
        + (balls - k) * math.log1p(-p)
    )
    cdf_bin = np.minimum(np.cumsum(np.exp(log_pmf)), 1.0)
    cdf = cdf_bin[k0 - lo :] ** bins
    cdf = np.maximum.accumulate(cdf)
    cdf[-1] = 1.0
    return k0, cdf


def max_load_stats(
    balls: Any, bins: Any, groups: Any, floor: Any = 0.0, capacity: Any = 1.0
) -> tuple[FloatArray, FloatArray]:
    """E[max(floor, M/capacity)] and its `WORST_QUANTILE` quantile, where M is the busiest
    of `groups` independent groups of `balls` flows hashed onto `bins` paths each.

    Broadcasts; `balls` and `bins` are rounded to whole flows and paths. Up to
    `EXACT_MAX_BALLS` balls per group from :func:`max_load_cdf`; beyond, the busiest of the
    n = bins·groups loads, each about normal with mean λ = balls/bins and variance
    λ(1 − 1/bins), is λ + σ·(b_n + γ·a_n) (Gumbel limit of the normal maximum, a_n =
    1/sqrt(2 ln n), b_n = sqrt(2 ln n) − (ln ln n + ln 4π)·a_n/2), floored after.

    >>> e, _ = max_load_stats(2, 2, 1)  # two flows, two paths: 1 or 2 on the busiest
    >>> float(e)
    1.5
    """
    arrays = np.broadcast_arrays(
        np.rint(np.asarray(balls, dtype=np.float64)),
        np.rint(np.maximum(np.asarray(bins, dtype=np.float64), 1.0)),
        np.maximum(np.asarray(groups, dtype=np.float64), 1.0),
        np.asarray(floor, dtype=np.float64),
        np.asarray(capacity, dtype=np.float64),
    )
    shape = arrays[0].shape
    # a sweep repeats few distinct (flows, paths, groups, floor, speed): price each once
    rows, back = np.unique(
        np.stack([np.ascontiguousarray(a).ravel() for a in arrays], axis=1),
        axis=0,
        return_inverse=True,
    )
    back = back.reshape(-1)
    b, u, g, fl, cap = rows.T
    mean = np.empty(b.size)
    worst = np.empty(b.size)
    big = b > EXACT_MAX_BALLS
    if bool(np.any(big)):
        lam = b[big] / u[big]
        sd = np.sqrt(lam * (1.0 - 1.0 / u[big]))
        log_n = np.log(np.maximum(u[big] * g[big], 3.0))
        a_n = 1.0 / np.sqrt(2.0 * log_n)
        b_n = np.sqrt(2.0 * log_n) - (np.log(log_n) + math.log(4 * math.pi)) * a_n / 2.0
        top = lam + sd * (b_n + EULER_GAMMA * a_n)
        tail = lam + sd * (b_n - a_n * math.log(-math.log(WORST_QUANTILE)))
        mean[big] = np.maximum(fl[big], top / cap[big])
        worst[big] = np.maximum(fl[big], np.ceil(tail) / cap[big])
    small = np.flatnonzero(~big)
    if small.size:
        key = b[small] * (1 << 20) + u[small]
        uniq, inverse = np.unique(key, return_inverse=True)
        cdfs = [max_load_cdf(int(k // (1 << 20)), int(k % (1 << 20))) for k in uniq]
        table = np.ones((len(cdfs), max(cdf.size for _, cdf in cdfs)))
        for i, (_, cdf) in enumerate(cdfs):
            table[i, : cdf.size] = cdf
        k0 = np.array([k for k, _ in cdfs], dtype=np.float64)[inverse.reshape(-1)]
        ks = k0[:, None] + np.arange(table.shape[1], dtype=np.float64)[None, :]
        busiest = table[inverse.reshape(-1)] ** g[small, None]  # P(busiest ≤ k)
        pmf = np.diff(busiest, axis=1, prepend=0.0)
        value = np.maximum(fl[small, None], ks / cap[small, None])
        mean[small] = np.sum(pmf * value, axis=1)
        pick = np.argmax(busiest >= WORST_QUANTILE, axis=1)
        worst[small] = np.maximum(fl[small], ks[np.arange(small.size), pick] / cap[small])
    return mean[back].reshape(shape), worst[back].reshape(shape)


def carried_share(balls: Any, bins: Any, capacity: Any = 1.0) -> FloatArray:
    """Share of offered traffic hashed links carry when flows run independently: each link
    carries min(K, capacity) of its K flows' demand, K ~ Binomial(balls, 1/bins).

    >>> round(float(carried_share(1000, 1000)), 3)  # one flow per link on average: 1 - 1/e
    0.632
    """
    b, u, cap = np.broadcast_arrays(
        np.rint(np.asarray(balls, dtype=np.float64)),
        np.rint(np.maximum(np.asarray(bins, dtype=np.float64), 1.0)),
        np.asarray(capacity, dtype=np.float64),
    )
    out = np.ones(b.shape)
    flat_b, flat_u, flat_c, flat_o = b.ravel(), u.ravel(), cap.ravel(), out.reshape(-1)
    for i in range(flat_b.size):
        nb, nu, c = int(flat_b[i]), int(flat_u[i]), float(flat_c[i])
        if nb <= 0:
            continue
        p = 1.0 / nu
        lam = nb * p
        hi = min(nb, int(lam + 14 * math.sqrt(lam) + 20))
        k = np.arange(hi + 1, dtype=np.float64)
        log_pmf = (
            math.lgamma(nb + 1)
            - np.array([math.lgamma(x + 1) + math.lgamma(nb - x + 1) for x in k])
            + k * math.log(p)
            + (nb - k) * (math.log1p(-p) if p < 1 else 0.0)
        )
        if p >= 1:
            log_pmf = np.where(k == nb, 0.0, -np.inf)
        flat_o[i] = float(np.sum(np.exp(log_pmf) * np.minimum(k, c)) / lam)
    return out


# --- the fabric ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Collisions:
    """What static hashing does to one traffic pattern, per element.

    `balls` flows leave each leaf over `paths` uplinks of `path_speed` NIC rates; `groups`
    independent hashed groups make up the fabric the job uses (`groups` × `paths` links).
    `expected_max` and `worst_max` are the busiest link's load in flows (expected and
    99th percentile), `mean_load` the average; `factor` is the share of perfectly balanced
    bandwidth the synchronous collective gets, `carried` the aggregate share (vendor
    "effective bandwidth").
    """

    flows_per_nic: FloatArray
    host_ports: FloatArray
    paths: FloatArray
    path_speed: FloatArray
    crossing: FloatArray
    balls: FloatArray
    groups: FloatArray
    mean_load: FloatArray
    expected_max: FloatArray
    worst_max: FloatArray
    factor: FloatArray
    worst_factor: FloatArray
    carried: FloatArray

    def summary(self) -> dict[str, float]:
        """Scalars for `--json` (the largest element where the inputs are arrays)."""

        def top(a: FloatArray) -> float:
            return float(np.max(a))

        def low(a: FloatArray) -> float:
            return float(np.min(a))

        return {
            "ecmp_flows_per_nic": top(self.flows_per_nic),
            "ecmp_paths_per_leaf": top(self.paths),
            "ecmp_path_speed": top(self.path_speed),
            "ecmp_crossing_share": top(self.crossing),
            "ecmp_flows_per_leaf": top(self.balls),
            "ecmp_links": top(self.groups * self.paths),
            "ecmp_mean_load": top(self.mean_load),
            "ecmp_expected_max_load": top(self.expected_max),
            "ecmp_p99_max_load": top(self.worst_max),
            "collision_factor": low(self.factor),
            "collision_factor_p99": low(self.worst_factor),
            "ecmp_carried_share": low(self.carried),
        }


def leaf_geometry(topo: Topology) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Host ports D (at the NIC's rate), uplinks U and uplink speed s (in NIC rates) of a
    leaf of the scale-out fabric's switch, split so that D / (U·s) = oversubscription:
    D·r + U·s·r = switch capacity (without a switch spec, 64 ports at the NIC's rate).
    `topo.leaf_ports` and `topo.ecmp_paths` override D and U (e.g. a leaf with more
    uplinks than host ports). The split follows the NIC rate the leaf was laid out for
    (`Link.layout_Bps`): a what-if NIC rate must not move ports between hosts and uplinks,
    or a faster NIC could land on a leaf with one host port less and price slower."""
    link = topo.scale_out
    assert link is not None
    laid_out = link.bandwidth_Bps if link.layout_Bps is None else link.layout_Bps
    nic = np.asarray(laid_out, dtype=np.float64) + 0 * np.asarray(link.bandwidth_Bps)
    o = np.maximum(np.asarray(topo.oversubscription, dtype=np.float64), 1.0)
    if link.switch_Bps is None or link.switch_port_Bps is None:
        capacity = 64.0 * nic
        port = nic
    else:
        capacity = np.asarray(link.switch_Bps, dtype=np.float64) + 0 * nic
        port = np.asarray(link.switch_port_Bps, dtype=np.float64) + 0 * nic
    s = np.maximum(port / nic, 1.0)
    up_Bps = capacity / (1.0 + o)
    paths = np.maximum(np.floor(up_Bps / (s * nic)), 1.0)
    hosts = np.maximum(np.floor(o * up_Bps / nic), 1.0)
    if topo.leaf_ports is not None:
        hosts = np.asarray(topo.leaf_ports, dtype=np.float64) + 0 * hosts
    if topo.ecmp_paths is not None:
        paths = np.asarray(topo.ecmp_paths, dtype=np.float64) + 0 * paths
    return hosts, paths, s


def _tiers(fabric_nics: FloatArray, hosts: FloatArray, paths: FloatArray) -> FloatArray:
    """2 while one spine layer joins every leaf (at most `hosts` × spine radix NICs, the
    spine radix taken as twice the leaf's uplinks), else 3."""
    two_tier = hosts * 2.0 * paths
    return np.where(fabric_nics <= two_tier, 2.0, 3.0)


def _hashing(link: Link | None, topo: Topology) -> LoadBalancing:
    if topo.load_balancing is not None:
        return LoadBalancing(topo.load_balancing)
    if link is None:
        return LoadBalancing.ADAPTIVE
    return LoadBalancing(link.load_balancing)


def _balanced(link: Link, topo: Topology) -> float:
    """The adaptive case: the fabric's own balance where its efficiency was measured with
    adaptive routing on; the stated spraying cost where it was switched on here."""
    if link.load_balancing == LoadBalancing.ADAPTIVE.value:
        return 1.0
    return link.adaptive_efficiency


def _floor_sum(y: FloatArray, h: FloatArray) -> FloatArray:
    """Σ_{j=0}^{y−1} floor(j / h) for whole y, h ≥ 1: h·q(q − 1)/2 + q·r, y = q·h + r."""
    q = np.floor(y / h)
    return h * q * (q - 1.0) / 2.0 + q * (y - q * h)


def packed_ring_crossing(nodes: Any, spacing: Any, hosts: Any) -> FloatArray:
    """Share of a packed ring's hops that leave their leaf.

    The job starts on a leaf boundary (a topology-aware scheduler) and fills leaves of
    `hosts` nodes in rank order; a group's N members sit `spacing` nodes apart, the
    interleaved groups at offsets o = 0 … spacing − 1. Between its first and last member a
    group crosses C(o) = floor((o + x)/H) − floor(o/H) leaf boundaries (x = (N − 1)·spacing),
    whose mean over the offsets is exact in closed form (:func:`_floor_sum`); the hop that
    closes the ring crosses when C > 0, probability min(1, E[C]) (C is 0 or 1 while x < H,
    at least 1 beyond). The share is (E[C] + P(wrap)) / N, at most 1.

    >>> [round(float(x), 3) for x in packed_ring_crossing([4, 8, 5, 4], [1, 1, 1, 4], 4)]
    [0.0, 0.25, 0.4, 1.0]
    """
    n = np.maximum(np.asarray(nodes, dtype=np.float64), 1.0)
    sp = np.maximum(np.ceil(np.asarray(spacing, dtype=np.float64)), 1.0)
    h = np.maximum(np.floor(np.asarray(hosts, dtype=np.float64)), 1.0)
    x = (n - 1.0) * sp
    linear = (_floor_sum(x + sp, h) - _floor_sum(x, h) - _floor_sum(sp, h)) / sp
    wrap = np.minimum(1.0, linear)
    out: FloatArray = np.where(n > 1, np.minimum(1.0, (linear + wrap) / n), 0.0)
    return out


def packed_peer_crossing(nodes: Any, spacing: Any, hosts: Any) -> FloatArray:
    """Share of a member's peers under other leaves when it talks to all N − 1 others
    (all-to-all), packed: a leaf of H nodes holds min(N, max(1, H/spacing)) of the group.

    >>> [round(float(x), 3) for x in packed_peer_crossing([4, 8, 8], [1, 1, 4], 4)]
    [0.0, 0.571, 1.0]
    """
    n = np.maximum(np.asarray(nodes, dtype=np.float64), 1.0)
    sp = np.maximum(np.asarray(spacing, dtype=np.float64), 1.0)
    h = np.maximum(np.asarray(hosts, dtype=np.float64), 1.0)
    mates = np.clip(np.floor(h / sp), 1.0, n)
    out: FloatArray = np.where(n > 1, (n - mates) / np.maximum(n - 1.0, 1.0), 0.0)
    return out


def collisions(
    topo: Topology,
    *,
    nodes: Any,
    flows_per_nic: Any,
    peers: Any = 1.0,
    full: bool = False,
) -> Collisions:
    """Balls into bins for one traffic pattern on `topo`'s scale-out fabric
    (:func:`layout_collisions`). Packed placement is a scheduler that knows the cabling: it can
    always fall back to an allocation blind to it, so packed is priced as the better of the
    ordered layout and the scattered one, element by element (packed is never slower). The
    callers charge oversubscription to every cross-node byte whatever the placement, so the
    two compare by their share of balanced bandwidth.
    """
    ordered = layout_collisions(
        topo, nodes=nodes, flows_per_nic=flows_per_nic, peers=peers, full=full
    )
    if Placement(topo.placement) is not Placement.PACKED:
        return ordered
    blind = layout_collisions(
        replace(topo, placement=Placement.SCATTERED.value),
        nodes=nodes,
        flows_per_nic=flows_per_nic,
        peers=peers,
        full=full,
    )
    keep = ordered.factor >= blind.factor
    merged = {
        f.name: np.where(keep, getattr(ordered, f.name), getattr(blind, f.name))
        for f in fields(Collisions)
    }
    return Collisions(**merged)


def layout_collisions(
    topo: Topology,
    *,
    nodes: Any,
    flows_per_nic: Any,
    peers: Any = 1.0,
    full: bool = False,
) -> Collisions:
    """Balls into bins for one traffic pattern and one placement.

    The job's NICs (`topo.fabric_nics`, all communicating at once, as the engine assumes of
    a job's groups) fill ceil(nodes / H) leaves of H hosts per rail plane
    (:func:`hosts_per_leaf`). Each NIC sends `flows_per_nic` flows to `peers` remote nodes
    (1: a ring or pipeline neighbour, rail-aligned). A flow leaves its leaf with probability
    `crossing`: scattered, the neighbour is a random other node of the job, so 1 − (m − 1)/
    (nodes − 1) for m of them per leaf; packed, the ring hops at leaf boundaries
    (:func:`packed_ring_crossing`: none while the group sits under one leaf), and of many
    peers all but those under the same leaf (:func:`packed_peer_crossing`). A leaf sends
    F = busy host ports · flows_per_nic · crossing flows up. Two (two tiers) or four (three
    tiers) hashing stages lie on a crossing path; where every flow of a leaf goes to one
    other leaf (packed neighbours) the down stage repeats the up stage and only the up
    stages are independent. `full` adds the reporting fields (busiest
    load in flows, aggregate carried share); without it they are NaN.
    """
    link = topo.scale_out
    assert link is not None
    n_nodes = np.asarray(nodes, dtype=np.float64)
    n_peers = np.maximum(np.asarray(peers, dtype=np.float64), 1.0)
    q = np.maximum(np.asarray(flows_per_nic, dtype=np.float64), 1.0)
    ports, paths, speed = leaf_geometry(topo)
    per_node = np.maximum(
        np.asarray(
            topo.node_nics if topo.node_nics is not None else topo.nics_per_node,
            dtype=np.float64,
        ),
        1.0,
    )
    job_nics = np.asarray(
        topo.fabric_nics
        if topo.fabric_nics is not None
        else n_nodes * np.asarray(topo.nics_per_node, dtype=np.float64),
        dtype=np.float64,
    )
    job_nodes = np.maximum(np.maximum(job_nics / per_node, n_nodes), 1.0)
    hosts = hosts_per_leaf(topo, ports)
    leaves = np.ceil(job_nodes / hosts)
    packed = Placement(topo.placement) is Placement.PACKED
    if packed:
        spacing = np.ceil(np.maximum(np.asarray(topo.member_spacing_nodes, dtype=np.float64), 1.0))
        phi = np.where(
            n_peers > 1,
            packed_peer_crossing(n_nodes, spacing, hosts),
            packed_ring_crossing(n_nodes, spacing, hosts),
        )
        correlated = n_peers <= 1
    else:
        mates = job_nodes / leaves
        phi = 1.0 - (mates - 1.0) / np.maximum(job_nodes - 1.0, 1.0)
        correlated = np.zeros_like(n_peers, dtype=bool)
    planes = per_node if topo.rail_optimized else 1.0
    ports_per_node = 1.0 if topo.rail_optimized else per_node
    busy = np.minimum(job_nodes / leaves * ports_per_node, ports)
    phi = np.clip(phi, 0.0, 1.0) * (n_nodes > 1)
    balls = np.rint(busy * q * phi)
    tiers = (
        _tiers(job_nodes * per_node, ports, paths)
        if topo.fabric_tiers is None
        else float(topo.fabric_tiers)
    )
    stages = (tiers - 1.0) * np.where(correlated, 1.0, 2.0)
    q, ports, paths, speed, phi, balls, groups = np.broadcast_arrays(
        q, ports, paths, speed, phi, balls, stages * leaves * planes
    )
    # failed uplinks under hashing (faults prices them elsewhere), at random over the job's
    # leaf-spine links: a crossing flow needs its spine's links to both leaves, so a share
    # (1 − p)² of the paths, p = K / links, is left to it; the hardest hit leaf keeps
    # paths − (fullest-bin count) of its own; the job runs at the slower of the two
    switches = leaves * planes
    failed = np.asarray(topo.failed_uplinks, dtype=np.float64)
    alive = np.clip(1.0 - failed / (switches * paths), 0.0, 1.0)
    keep = np.maximum(paths * alive**2, 1.0)
    lost = np.minimum(_worst_leaf_losses(failed, switches), paths - 1.0)
    worst_keep = np.maximum((paths - np.maximum(lost, 0.0)) * alive, 1.0)
    keep, lost, worst_keep = np.broadcast_arrays(keep, lost, worst_keep)
    crosses = balls > q  # a NIC's own flows sharing a path cost nothing
    pace, worst_pace = np.array(q, copy=True), np.array(q, copy=True)
    if bool(np.any(crosses)):
        c = crosses
        pace[c], worst_pace[c] = max_load_stats(balls[c], keep[c], groups[c], q[c], speed[c])
        hurt = c & (lost > 0)
        if bool(np.any(hurt)):
            # max of the two expectations: a lower bound on the expected max of both
            h = hurt
            one, one_worst = max_load_stats(balls[h], worst_keep[h], 1.0, q[h], speed[h])
            pace[h] = np.maximum(pace[h], one)
            worst_pace[h] = np.maximum(worst_pace[h], one_worst)
    # the hash's excess over the surviving paths evenly filled, scaled by its dispersion
    even = np.maximum(q, balls / (np.minimum(keep, worst_keep) * speed))
    kappa = hash_dispersion(topo)
    pace = even + kappa * np.maximum(pace - even, 0.0)
    worst_pace = even + kappa * np.maximum(worst_pace - even, 0.0)
    mean = balls / paths
    ideal = np.maximum(q, mean / speed)
    nan = np.full(q.shape, np.nan)
    busiest, worst, carried = nan, nan, nan
    if full:
        busiest, worst = max_load_stats(balls, paths, groups)
        carried = np.where(balls > 0, carried_share(balls, paths, speed * q), 1.0)
    return Collisions(
        flows_per_nic=q,
        host_ports=ports,
        paths=paths,
        path_speed=speed,
        crossing=phi,
        balls=balls,
        groups=groups,
        mean_load=mean,
        expected_max=busiest,
        worst_max=worst,
        factor=np.where(crosses, ideal / pace, 1.0),
        worst_factor=np.where(crosses, ideal / worst_pace, 1.0),
        carried=carried,
    )


def _worst_leaf_losses(failed: Any, leaves: Any) -> FloatArray:
    """Uplinks lost by the leaf hit hardest when `failed` links fail at random over the
    job's `leaves` (leaf switches, every rail plane's counted): the median fullest-bin
    load of balls into bins (faults.max_bin_load), 1 for a single failure."""
    k = np.rint(np.asarray(failed, dtype=np.float64))
    n = np.maximum(np.asarray(leaves, dtype=np.float64), 1.0)
    k, n = np.broadcast_arrays(k, n)
    out = np.zeros(k.shape)
    if not bool(np.any(k > 0)):
        return out
    pairs, back = np.unique(np.stack([k.ravel(), n.ravel()], axis=1), axis=0, return_inverse=True)
    vals = np.array([max_bin_load(int(a), int(b)) for a, b in pairs], dtype=np.float64)
    return vals[back.reshape(-1)].reshape(k.shape)


def hash_dispersion(topo: Topology) -> FloatArray:
    """How far the busiest link sits above an even spread, as a share of what independent
    uniform hashing gives (1: uniform random hashing, the balls-into-bins law the lab and the
    flow-level oracle check; 0: every path equally loaded): `topo.hash_dispersion`, else
    :data:`SWITCH_HASH_DISPERSION` for a switch fabric's ECMP."""
    if topo.hash_dispersion is not None:
        return np.clip(np.asarray(topo.hash_dispersion, dtype=np.float64), 0.0, 1.0)
    return np.asarray(SWITCH_HASH_DISPERSION)


def hosts_per_leaf(topo: Topology, host_ports: Any) -> FloatArray:
    """Nodes under one leaf: every host port is a different node on a rail-optimised leaf
    (NIC i of each node on rail leaf i), a node's NICs share a top-of-rack leaf."""
    d = np.asarray(host_ports, dtype=np.float64)
    if topo.rail_optimized:
        return d
    per_node = np.asarray(
        topo.node_nics if topo.node_nics is not None else topo.nics_per_node, dtype=np.float64
    )
    return np.maximum(np.floor(d / np.maximum(per_node, 1.0)), 1.0)


def ring_collisions(
    topo: Topology, nodes: Any, channels_per_nic: Any, *, full: bool = False
) -> Collisions:
    """Ring and tree collectives: each NIC carries its NCCL channels' flows to one
    neighbour (rail-aligned through PXN), each channel over the connection's QPs."""
    q = np.asarray(channels_per_nic, dtype=np.float64) * topo.qps()
    return collisions(topo, nodes=nodes, flows_per_nic=q, full=full)


def p2p_collisions(topo: Topology, nodes: Any, peers: Any, *, full: bool = False) -> Collisions:
    """Point-to-point (pipeline send/recv, all-to-all): NCCL_NCHANNELS_PER_NET_PEER channels
    to each of `peers` remote nodes, each over the connection's QPs."""
    n_peers = np.maximum(np.asarray(peers, dtype=np.float64), 1.0)
    q = NCCL_P2P_CHANNELS_PER_PEER * topo.qps() * n_peers
    return collisions(topo, nodes=nodes, flows_per_nic=q, peers=n_peers, full=full)


def applies(topo: Topology) -> bool:
    """Collisions are priced on switched RDMA fabrics whose leaf switch is known. TCP links
    have their own model; a fabric without a switch spec (a `bandwall calibrate` profile,
    whose fitted efficiency already holds what its hashing cost, or a generic link) is
    priced as given."""
    return applies_to(topo.scale_out)


def prices_failures(link: Link | None, routing: str) -> bool:
    """Whether failed scale-out links are this model's to price (as spine paths lost under
    hashing) rather than faults' (a fabric-wide health factor): one rule for both sides."""
    return routing != "adaptive" and applies_to(link)


def applies_to(link: Link | None) -> bool:
    """:func:`applies`, for a scale-out link before its topology is built."""
    return (
        link is not None
        and not link.tcp
        and link.transport not in ("", "nvlink", "pcie")
        and link.switch_Bps is not None
    )


def ring_balance(topo: Topology, nodes: Any, channels_per_nic: Any) -> FloatArray:
    """Share of balanced scale-out bandwidth a ring/tree collective gets under the fabric's
    load balancing (1 inside a node, on TCP and on generic links). The callers price a NIC
    at rate / oversubscription and multiply by this."""
    n = np.asarray(nodes, dtype=np.float64)
    if not applies(topo) or not bool(np.any(n > 1)):
        return np.ones_like(n)
    link = topo.scale_out
    assert link is not None
    if _hashing(link, topo) is LoadBalancing.ADAPTIVE:
        return np.where(n > 1, _balanced(link, topo), 1.0)
    return ring_collisions(topo, n, channels_per_nic).factor + 0 * n


def p2p_balance(topo: Topology, nodes: Any, peers: Any) -> FloatArray:
    """As :func:`ring_balance`, for point-to-point traffic to `peers` remote nodes."""
    n = np.asarray(nodes, dtype=np.float64)
    if not applies(topo) or not bool(np.any(n > 1)):
        return np.ones_like(n)
    link = topo.scale_out
    assert link is not None
    if _hashing(link, topo) is LoadBalancing.ADAPTIVE:
        return np.where(n > 1, _balanced(link, topo), 1.0)
    return p2p_collisions(topo, n, peers).factor + 0 * n


# --- incast -----------------------------------------------------------------------------------


def hol_throughput(fan_in: Any) -> FloatArray:
    """Saturation throughput of head-of-line blocked FIFO queues with `fan_in` inputs
    contending for uniformly random outputs: Karol et al. 1987 up to 8, then
    2 − √2 + (T(8) − (2 − √2))·8/N, which follows their simulated values (16: 0.601,
    32: 0.594) within 0.2%.

    >>> [round(float(x), 4) for x in hol_throughput([1, 2, 8, 1e9])]
    [1.0, 0.75, 0.6184, 0.5858]
    """
    n = np.maximum(np.asarray(fan_in, dtype=np.float64), 1.0)
    table = np.array([HOL_THROUGHPUT[i] for i in range(1, 9)])
    small = table[np.clip(np.rint(n).astype(np.intp), 1, 8) - 1]
    large = HOL_LIMIT + (HOL_THROUGHPUT[8] - HOL_LIMIT) * 8.0 / n
    return np.where(n <= 8, small, large)


def fabric_cc(topo: Topology) -> FabricCC:
    """The scale-out fabric's congestion control: the topology's override, else the
    catalog's."""
    if topo.rdma_cc is not None:
        return FabricCC(topo.rdma_cc)
    link = topo.scale_out
    if link is None:
        return FabricCC.NONE
    return FabricCC(link.congestion_control)


def incast_factor(topo: Topology, fan_in: Any) -> FloatArray:
    """Share of the receivers' bandwidth a many-to-one phase of `fan_in` senders gets: PFC
    without end-to-end congestion control blocks heads of line (:func:`hol_throughput`);
    per-flow congestion control prevents it (1)."""
    k = np.asarray(fan_in, dtype=np.float64)
    if fabric_cc(topo) is not FabricCC.PFC:
        return np.ones_like(k)
    return np.where(k > 1, hol_throughput(k), 1.0)
