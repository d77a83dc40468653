"""Property checks of the collective model over random points: how many violate physics.

Each point draws an op, a message size, a rank count, a catalog fabric (with a WAN tier for
some), a GPU, GPUs per node, NICs, oversubscription, routing and a NIC rate and latency
scaled from the catalog's. At every point five properties are checked:

- **size**: time never falls when the message grows (by up to 4x, and by one byte);
- **latency**: time never falls when the scale-out (or WAN) one-way latency grows;
- **bandwidth**: time never rises when the NIC rate grows (by up to 4x);
- **continuity**: a relative change of 1e-7 in size or in NIC rate moves time by < 1e-4;
- **links**: bus bandwidth never exceeds what any link on the path can carry, from a
  lower bound on the bytes that must cross it (derived here, independently of the model):
  the GPU's scale-up port, the node's NICs (and their PCIe host paths), the site uplink.

A violation is *explained* when the output says why at one of the two points: NCCL's tuner
picks a slower algorithm there than the model's best (``CollectiveResult.note``, a documented
NCCL behaviour: tuning.cc ``ncclTopoGetAlgoTime``, enqueue.cc ``topoGetAlgoInfo``). The best
time over everything NCCL can run must itself show none. Exceptions are listed in
docs/network.md.

Run: python benchmarks/collective_properties.py [POINTS [SEED]]   (default 100,000; a fresh
SEED draws points no earlier run saw)
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from bandwall.catalog import Tier, load_catalog
from bandwall.errors import ConfigError
from bandwall.model import collectives
from bandwall.model.collectives import Op
from bandwall.model.topology import Topology, build_topology

PROPERTIES = ("size", "latency", "bandwidth", "continuity", "links")
#: Points share their categorical draw (fabric, GPU, backend, ...) in batches of this size;
#: the numeric fields vary per point as arrays.
BATCH = 250
REL = 1e-9


@dataclass
class Batch:
    op: Op
    topo: Topology
    size: np.ndarray
    ranks: np.ndarray
    rate_Bps: np.ndarray
    latency_s: np.ndarray
    label: str


def _fabrics() -> tuple[list[str], list[str]]:
    cat = load_catalog()
    out = [k for k, f in cat.fabrics.items() if f.tier is Tier.SCALE_OUT]
    wan = [k for k, f in cat.fabrics.items() if f.tier is Tier.WAN]
    return out, wan


def draw(rng: np.random.Generator, n: int) -> Batch:
    """One batch: categorical settings shared, numeric ones per point."""
    scale_out, wans = _fabrics()
    fabric = str(rng.choice(scale_out))
    gpu = str(rng.choice(["A100-SXM-80GB", "H100-SXM", "B200", "L40S"]))
    gpn = int(rng.choice([1, 2, 4, 8]))
    gloo = rng.random() < 0.1
    wan = str(rng.choice(wans)) if rng.random() < 0.15 else None
    per_site = int(rng.choice([1, 2, 4, 16])) if wan else None
    op = Op(str(rng.choice([o.value for o in Op])))
    base = build_topology(
        gpus_per_node=gpn,
        scale_out=fabric,
        gpu=gpu,
        wan=wan,
        nodes_per_site=per_site,
        backend="gloo" if gloo else "nccl",
        in_network=[None, True, False][int(rng.integers(3))],
        load_balancing=[None, "ecmp", "adaptive"][int(rng.integers(3))],
        placement=str(rng.choice(["scattered", "packed"])),
    )
    link = base.scale_out
    assert link is not None
    factor = np.exp(rng.uniform(np.log(0.02), np.log(4.0), n))
    rate = np.asarray(link.bandwidth_Bps, dtype=np.float64) * factor
    lat = np.asarray(link.latency_s, dtype=np.float64) * np.exp(rng.uniform(-1.5, 1.5, n))
    nodes = np.floor(np.exp(rng.uniform(0, np.log(2048), n)))
    ranks = np.maximum(nodes * gpn - rng.integers(0, gpn, n) * (rng.random(n) < 0.3), 2.0)
    size = np.floor(np.exp(rng.uniform(0, np.log(2.0**34), n))) + 1
    topo = replace(
        base,
        # per point, as a column that broadcasts along each point's scan
        oversubscription=rng.choice([1.0, 1.0, 2.0, 3.0], (n, 1)),
        nics_per_node=(
            np.asarray(base.nics_per_node) * rng.choice([1.0, 1.0, 0.5], (n, 1))
            if gpn > 1
            else base.nics_per_node
        ),
    )
    label = f"{op.value} {fabric} {gpu} x{gpn}{' gloo' if gloo else ''}{' +' + wan if wan else ''}"
    return Batch(op, topo, size, ranks, rate, lat, label)


def _with(topo: Topology, rate: Any = None, lat: Any = None) -> Topology:
    link = topo.scale_out
    assert link is not None
    return replace(topo, scale_out=link.with_overrides(bandwidth_Bps=rate, latency_s=lat))


def price(
    b: Batch, topo: Topology, size: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(time the model prices, best time over what NCCL can run, where the output says NCCL's
    tuner picks a slower pair, where it says NCCL's speed ladder binds)."""
    res = collectives.evaluate_collective(b.op, size, b.ranks, topo)
    t = np.asarray(res.time_s, dtype=np.float64)
    best = getattr(res, "best_time_s", None)
    best = t if best is None else np.asarray(best, dtype=np.float64)
    # the note says "NCCL's tuner picks ..." exactly where the price is above the cheapest
    tuner = t > best * (1 + 1e-9)
    stepped = getattr(res, "stepped", None)
    return t, best, tuner, np.zeros(t.shape, bool) if stepped is None else np.asarray(stepped)


def link_caps_Bps(b: Batch, topo: Topology, n: np.ndarray) -> np.ndarray:
    """The largest busbw each point may show: a lower bound on the bytes one GPU port, one
    node's NICs or one site's uplink must move, over that link's rate."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _caps(b, topo, n)


def _caps(b: Batch, topo: Topology, n: np.ndarray) -> np.ndarray:
    op = b.op
    G = np.asarray(topo.gpus_per_node, dtype=np.float64)
    nodes = np.ceil(n / G)
    g_min = np.where(nodes > 1, n - G * (nodes - 1), n)  # the least-populated node
    cap = np.full(n.shape, np.inf)
    bus = (2 * (n - 1) / n) if op is Op.ALL_REDUCE else ((n - 1) / n)
    if op in (Op.BROADCAST, Op.REDUCE, Op.SEND_RECV):
        bus = np.ones_like(n)
    up = topo.scale_up
    if up is not None:
        U = float(up.bandwidth_Bps) * up.efficiency
        # every byte a GPU sends or receives crosses its scale-up port inside one node; a PCIe
        # GPU has no other port at all
        applies = (nodes <= 1) | (up.transport == "pcie")
        if op is Op.ALL_REDUCE:
            # each GPU receives a result for all S bytes that depends on remote data: S
            per_port = np.ones_like(n)
        elif op in (Op.BROADCAST, Op.REDUCE, Op.SEND_RECV):
            per_port = np.ones_like(n)
        else:
            per_port = (n - 1) / n
        cap = np.where(applies & (n > 1), np.minimum(cap, bus / per_port * U), cap)
    out = topo.scale_out
    assert out is not None
    per_nic = np.minimum(b.rate_Bps * out.efficiency, np.asarray(out.host_Bps, dtype=np.float64))
    R = np.asarray(topo.nics_per_node, dtype=np.float64) * per_nic
    R = R / np.asarray(topo.oversubscription, dtype=np.float64)
    multi = nodes > 1
    if op is Op.ALL_REDUCE:
        node_bytes = np.ones_like(n)  # the whole reduced buffer arrives from off the node
    elif op in (Op.ALL_GATHER, Op.REDUCE_SCATTER):
        node_bytes = (n - g_min) / n
    elif op is Op.ALL_TO_ALL:
        node_bytes = np.maximum(G * (n - G), g_min * (n - g_min)) / n
    else:
        node_bytes = np.ones_like(n)
    cap = np.where(multi, np.minimum(cap, bus / node_bytes * R), cap)
    wan = topo.wan
    if wan is not None and topo.nodes_per_site is not None:
        W = float(wan.bandwidth_Bps) * wan.efficiency
        per_site = G * float(np.max(topo.nodes_per_site))
        sites = np.ceil(n / per_site)
        s_min = np.where(sites > 1, n - per_site * (sites - 1), n)
        if op in (Op.ALL_GATHER, Op.REDUCE_SCATTER):
            site_bytes = (n - s_min) / n
        elif op is Op.ALL_TO_ALL:
            site_bytes = per_site * (n - per_site) / n
        else:
            site_bytes = np.ones_like(n)
        cap = np.where(sites > 1, np.minimum(cap, bus / site_bytes * W), cap)
    return cap


#: Each scan walks STEPS geometric steps from the point over a factor of SPAN.
STEPS = 128
SPAN = 1.5
#: Time may change at most this much per step and stay continuous: twice the step's relative
#: size (time grows at most ~linearly in size and falls at most ~inversely with bandwidth;
#: NCCL's interpolated tree correction steepens that by < 1.5x) plus rounding.
JUMP = 2 * (SPAN ** (1 / STEPS) - 1) + 1e-6


def _scan(x: np.ndarray) -> np.ndarray:
    """(points, STEPS + 1) values from x up to x·SPAN, geometric."""
    return x[:, None] * SPAN ** (np.arange(STEPS + 1) / STEPS)[None, :]


def check(b: Batch, rng: np.random.Generator) -> dict[str, tuple[int, int]]:
    """(unexplained, explained) points violating each property in one batch."""
    out: dict[str, tuple[int, int]] = {}
    col = np.ones((1, STEPS + 1))
    sub = replace(b, ranks=b.ranks[:, None] * col)

    def rows(topo: Topology, size: np.ndarray) -> tuple[np.ndarray, ...]:
        return price(sub, topo, size)

    def count(
        name: str,
        bad: np.ndarray,
        best_bad: np.ndarray,
        flag: np.ndarray,
        best_flag: np.ndarray | None = None,
    ) -> None:
        """bad, best_bad: per step pair (points, STEPS); flag (explains the price) and
        best_flag (explains the cheapest option too): per step (points, STEPS + 1)."""
        said = flag[:, 1:] | flag[:, :-1]
        best_said = np.zeros_like(said)
        if best_flag is not None:
            best_said = best_flag[:, 1:] | best_flag[:, :-1]
            said = said | best_said
        point_bad = np.any(bad & ~said, axis=1) | np.any(best_bad & ~best_said, axis=1)
        explained = (np.any(bad, axis=1) | np.any(best_bad, axis=1)) & ~point_bad
        a, e = out.get(name, (0, 0))
        out[name] = (a + int(point_bad.sum()), e + int(explained.sum()))

    def grid(x: np.ndarray) -> np.ndarray:
        return np.asarray(x)[:, None] * col

    rate, lat = grid(b.rate_Bps), grid(b.latency_s)
    # size: monotone and without jumps from size to 1.5x size
    sizes = np.floor(_scan(b.size))
    t, best, tuner, stepped = rows(_with(b.topo, rate, lat), sizes)
    up, best_up = t[:, 1:] / t[:, :-1], best[:, 1:] / best[:, :-1]
    count("size", up < 1 - REL, best_up < 1 - REL, tuner)
    # a step of whole bytes is larger than the scan's at a few bytes (2 -> 3 B is +50%), so
    # the bound is JUMP's rule on the step taken: twice its relative size
    with np.errstate(divide="ignore", invalid="ignore"):
        jump = np.maximum(2 * (sizes[:, 1:] / sizes[:, :-1] - 1) + 1e-6, JUMP)
    # Gloo's ring steps with its segment count (gloo/allreduce.h)
    count("continuity", up > 1 + jump, best_up > 1 + jump, tuner, stepped)
    # bandwidth: more NIC rate never slower, and no jumps
    t, best, tuner, ladder = rows(_with(b.topo, _scan(b.rate_Bps), lat), grid(b.size))
    down, best_down = t[:, 1:] / t[:, :-1], best[:, 1:] / best[:, :-1]
    count("bandwidth", down > 1 + REL, best_down > 1 + REL, tuner)
    # NCCL's speed ladder plans channels in steps of the NIC rate (search.cc:1051-1066)
    count("continuity", down < 1 - JUMP, best_down < 1 - JUMP, tuner, ladder)
    # latency: more one-way latency never faster (a 4x span)
    lat_scan = b.latency_s[:, None] * 4.0 ** (np.arange(STEPS + 1) / STEPS)[None, :]
    t, best, tuner, _ = rows(_with(b.topo, rate, lat_scan), grid(b.size))
    count(
        "latency", t[:, 1:] < t[:, :-1] * (1 - REL), best[:, 1:] < best[:, :-1] * (1 - REL), tuner
    )
    # links: busbw under every link's cap along the size scan
    t, best, tuner, _ = rows(_with(b.topo, rate, lat), np.floor(_scan(b.size)))
    with np.errstate(divide="ignore", invalid="ignore"):
        busbw = np.where(t > 0, np.floor(_scan(b.size)) / t, 0.0) * np.asarray(
            collectives.busbw_factor(b.op, sub.ranks)
        )
    caps = link_caps_Bps(replace(b, rate_Bps=rate), _with(b.topo, rate, lat), sub.ranks)
    over = busbw > caps * (1 + 1e-6)
    no = np.zeros_like(tuner)
    count("links", over[:, 1:], over[:, 1:], no)
    return out


def main(points: int = 100_000, seed: int = 20260522) -> int:
    rng = np.random.default_rng(seed)
    totals: dict[str, list[int]] = {p: [0, 0] for p in PROPERTIES}
    where: Counter[str] = Counter()
    done = skipped = 0
    start = time.perf_counter()
    while done < points:
        b = draw(rng, min(BATCH, points - done))
        try:
            got = check(b, rng)
        except ConfigError:
            skipped += len(b.size)
            done += len(b.size)
            continue
        done += len(b.size)
        for name, (unexplained, explained) in got.items():
            totals[name][0] += unexplained
            totals[name][1] += explained
            if unexplained:
                where[f"{name}: {b.label}"] += unexplained
    wall = time.perf_counter() - start
    print(f"collective model properties over {points:,} random points ({wall:.0f} s)")
    print(f"  {'property':<12} {'unexplained':>12} {'explained':>10}")
    for name in PROPERTIES:
        print(f"  {name:<12} {totals[name][0]:>12,} {totals[name][1]:>10,}")
    unexplained = sum(v[0] for v in totals.values())
    print(f"  total unexplained: {unexplained:,}; points refused as invalid input: {skipped:,}")
    for label, count in where.most_common(12):
        print(f"    {count:>7,}  {label}")
    return 0 if unexplained == 0 else 1


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    sys.exit(main(*args))
