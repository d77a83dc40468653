"""ECMP in the lab: two leaves joined by P equal-cost spine paths, so that the flow-collision
model (model/congestion.py) can be checked against Linux's own per-flow hashing.

Layout for a lab NAME with N hosts and P spines (all inside `bw-NAME-*` namespaces, recorded
by netns.py's state file before each is made, so `lab down NAME` and `--all` remove it):

- leaf namespaces `bw-NAME-l0` and `bw-NAME-l1` (routers: ip_forward, rp_filter off);
- spine path j: a veth pair `s{j}` from l0 to l1, addressed SUBNET.(128+2j) and
  SUBNET.(129+2j), shaped with tbf at the spine rate in both directions. A spine switch with
  one port per leaf is a wire, so each spine is its link; its tx counters are the path's
  load;
- host i (`bw-NAME-h{i}`, address SUBNET.(i+1), as in every lab, so `lab run` works
  unchanged) hangs off leaf `leaf_of(i)`: `alternate` (i mod 2: every hop of a rank-order
  ring crosses the spine) or `packed` (first half on l0: only two hops cross). Its link is a
  veth (`eth0` ↔ `p{i}` on the leaf, gateway SUBNET.254) shaped at the host rate;
- each leaf routes every remote host over a multipath route with one nexthop per spine and
  `fib_multipath_hash_policy=1` (L4 5-tuple hash), the setting shared/LAB-NOTES.md measured.

The hash is the kernel's, so which path a flow takes is random across source ports and
fixed for a connection: flow collisions happen as on a hashed fabric and are counted on
the spine links. `python -m bandwall.measure.lab.ecmp` prints the measured-vs-model table of
docs/lab-ecmp.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bandwall.errors import LabError
from bandwall.measure.lab import delayline, netns, workload
from bandwall.units import parse_rate_Gbps

LAYOUTS = ("alternate", "packed")
MIN_SPINES, MAX_SPINES = 2, 8
LEAVES = 2
GATEWAY = 254
"""Last octet of the leaves' address on every host port (the hosts' gateway)."""
SPINE_BASE = 128
"""Spine path j is SUBNET.(128+2j) on l0 and SUBNET.(129+2j) on l1 (hosts use .1-.64)."""
FLOW_PORT = 29700
#: tbf on a veth counts Ethernet frames: a full TCP segment (MSS 1448 with timestamps) is a
#: 1514-byte frame, so a link of rate R carries R × 1448/1514 of payload.
PAYLOAD_PER_FRAME = 1448 / 1514
FRAME_BYTES = 1514
#: netns.TBF_BURST ("256kb"; tc sizes count K = 1024): what a link passes at once, unshaped.
TBF_BURST_BYTES = 256 * 1024
#: Source ports for explicit flows, far from the ephemeral range the ranks use.
SPORT_RANGE = (20000, 29000)


# --- pure helpers ---------------------------------------------------------------------------


def leaf_of(host: int, hosts: int, layout: str) -> int:
    """Which leaf host `host` hangs off.

    >>> [leaf_of(i, 4, "alternate") for i in range(4)], [leaf_of(i, 4, "packed") for i in range(4)]
    ([0, 1, 0, 1], [0, 0, 1, 1])
    """
    if layout == "alternate":
        return host % LEAVES
    return 0 if host < (hosts + 1) // LEAVES else 1


def leaf_ns(name: str, leaf: int) -> str:
    return f"bw-{name}-l{leaf}"


def spine_address(subnet: str, leaf: int, path: int) -> str:
    """Leaf `leaf`'s end of spine path `path`."""
    return f"{subnet}.{SPINE_BASE + 2 * path + leaf}"


def multipath_route(dst: str, gateways: Sequence[str], devices: Sequence[str]) -> list[str]:
    """`ip route` arguments for one destination over equal-weight nexthops.

    >>> " ".join(multipath_route("10.213.0.2", ["10.213.0.129"], ["s0"]))
    'route add 10.213.0.2/32 nexthop via 10.213.0.129 dev s0 weight 1'
    """
    args = ["route", "add", f"{dst}/32"]
    for gw, dev in zip(gateways, devices, strict=True):
        args += ["nexthop", "via", gw, "dev", dev, "weight", "1"]
    return args


def leaf_routes(lab: netns.Lab, leaf: int) -> list[list[str]]:
    """Every route leaf `leaf` needs: its own hosts on their ports (the peer address of
    `addr add .254 peer HOST`), each remote host over all spine paths."""
    other = 1 - leaf
    gateways = [spine_address(lab.subnet, other, j) for j in range(lab.spines)]
    devices = [f"s{j}" for j in range(lab.spines)]
    return [
        multipath_route(lab.address(i), gateways, devices)
        for i in range(lab.hosts)
        if leaf_of(i, lab.hosts, lab.layout) == other
    ]


def ring_crossings(hosts: int, layout: str) -> tuple[int, int]:
    """Flows of a rank-order ring (rank i sends to i+1) leaving leaf 0 and leaf 1.

    >>> ring_crossings(4, "alternate"), ring_crossings(4, "packed")
    ((2, 2), (1, 1))
    """
    out = [0, 0]
    for i in range(hosts):
        a, b = leaf_of(i, hosts, layout), leaf_of((i + 1) % hosts, hosts, layout)
        if a != b:
            out[a] += 1
    return out[0], out[1]


def flow_loads(path_bytes: Sequence[int], flows: int) -> list[float]:
    """Per-path load in flows of `flows` equal flows: each path's share of the bytes. The
    total normalises away what a counter adds per flow (a veth counts a TSO super-packet's
    headers once, tbf per segment; SYNs, ACKs, retransmissions).

    >>> flow_loads([3_000_300, 1_000_100], 4)
    [3.0, 1.0]
    """
    total = sum(path_bytes)
    return [flows * b / total if total else 0.0 for b in path_bytes]


def check_spines(spines: int) -> int:
    if not MIN_SPINES <= spines <= MAX_SPINES:
        raise LabError(
            f"must be between {MIN_SPINES} and {MAX_SPINES} equal-cost paths, got {spines}",
            field="spines",
        )
    return spines


def check_layout(layout: str) -> str:
    if layout not in LAYOUTS:
        raise LabError(f"must be one of {', '.join(LAYOUTS)}, got {layout!r}", field="layout")
    return layout


# --- building ---------------------------------------------------------------------------------


def ecmp_up(
    name: str,
    hosts: int,
    spines: int,
    rate: str = "200mbit",
    spine_rate: str | None = None,
    layout: str = "alternate",
    cc: str | None = None,
) -> netns.Lab:
    """Create the two-leaf lab; on any failure or signal remove what was made (netns.create)."""
    netns.check_name(name)
    check_spines(spines)
    check_layout(layout)
    if not 2 <= hosts <= netns.MAX_HOSTS:
        raise LabError(f"must be between 2 and {netns.MAX_HOSTS}, got {hosts}", field="hosts")
    host_Gbps = parse_rate_Gbps(rate, "rate")
    spine_Gbps = parse_rate_Gbps(spine_rate, "spine_rate") if spine_rate else host_Gbps
    if cc is not None and not netns.CC_RE.fullmatch(cc):
        raise LabError(f"{cc!r} is not a congestion control name, e.g. reno", field="cc")
    netns._require_root()
    if netns._state_path(name).exists():
        raise LabError(
            f"lab {name!r} already exists; `bandwall lab down {name}` first", field="name"
        )
    lab = netns.Lab(
        name,
        hosts,
        (host_Gbps,) * hosts,
        netns._subnet_for(name),
        (),
        complete=False,
        cc=cc,
        spines=spines,
        spine_rate_Gbps=spine_Gbps,
        layout=layout,
    )
    return netns.create(lab, [leaf_ns(name, k) for k in range(LEAVES)], _build)


def _build(state: dict[str, netns.Lab]) -> None:
    lab = state["lab"]
    leaves = [leaf_ns(lab.name, k) for k in range(LEAVES)]
    for ns in leaves:
        netns.add_namespace(state, ns)
        for key, value in (
            ("net.ipv4.ip_forward", "1"),
            ("net.ipv4.fib_multipath_hash_policy", "1"),  # L4: the 5-tuple, per flow
            ("net.ipv4.conf.all.rp_filter", "0"),  # replies may come back on another path
            ("net.ipv4.conf.default.rp_filter", "0"),
        ):
            delayline.set_sysctl(ns, key, value)
        for key in ("net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"):
            with contextlib.suppress(OSError):  # no IPv6 chatter on the counted spine links
                delayline.set_sysctl(ns, key, "1")
    for j in range(lab.spines):
        dev = f"s{j}"
        netns._ip("-n", leaves[0], "link", "add", dev, "type", "veth", "peer", "name", dev,
                  "netns", leaves[1])  # fmt: skip
        for k in range(LEAVES):
            here, there = spine_address(lab.subnet, k, j), spine_address(lab.subnet, 1 - k, j)
            netns._ip("-n", leaves[k], "addr", "add", here, "peer", there, "dev", dev)
            netns._ip("-n", leaves[k], "link", "set", dev, "up")
            netns._tc(leaves[k], dev, lab.spine_rate_Gbps)
    gateway = f"{lab.subnet}.{GATEWAY}"
    for i in range(lab.hosts):
        ns, leaf, port = lab.host_ns(i), leaves[leaf_of(i, lab.hosts, lab.layout)], f"p{i}"
        netns.add_namespace(state, ns)
        netns._ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", port,
                  "netns", leaf)  # fmt: skip
        netns._ip("-n", ns, "addr", "add", lab.address(i), "peer", gateway, "dev", "eth0")
        netns._ip("-n", ns, "link", "set", "eth0", "up")
        netns._ip("-n", ns, "route", "add", f"{lab.subnet}.0/24", "via", gateway, "dev", "eth0")
        netns._ip("-n", leaf, "addr", "add", gateway, "peer", lab.address(i), "dev", port)
        netns._ip("-n", leaf, "link", "set", port, "up")
        netns._tc(ns, "eth0", lab.rates_Gbps[i])
        netns._tc(leaf, port, lab.rates_Gbps[i])
    for k in range(LEAVES):
        for args in leaf_routes(lab, k):
            netns._ip("-n", leaves[k], *args)


def load_ecmp(name: str) -> netns.Lab:
    lab = netns.load_lab(name)
    if not lab.spines:
        raise LabError(f"lab {name!r} has no spine paths (not made with --spines)", field="name")
    return lab


# --- measuring --------------------------------------------------------------------------------


def path_tx_bytes(lab: netns.Lab, leaf: int) -> list[int]:
    """Bytes (frames) leaf `leaf` has sent on each spine path: that direction's load."""
    res = subprocess.run(
        ["ip", "-n", leaf_ns(lab.name, leaf), "-s", "-j", "link", "show"],
        capture_output=True,
        text=True,
        check=False,
    )
    if res.returncode:
        raise LabError(f"cannot read the spine counters: {res.stderr.strip()}", field="lab")
    by_dev = {d["ifname"]: int(d["stats64"]["tx"]["bytes"]) for d in json.loads(res.stdout)}
    return [by_dev[f"s{j}"] for j in range(lab.spines)]


@dataclass(frozen=True)
class Flow:
    src: int
    dst: int
    sport: int
    dport: int = FLOW_PORT


def random_flows(lab: netns.Lab, count: int, rng: random.Random) -> list[Flow]:
    """`count` flows from leaf-0 hosts to leaf-1 hosts, round-robin, distinct source ports."""
    left = [i for i in range(lab.hosts) if leaf_of(i, lab.hosts, lab.layout) == 0]
    right = [i for i in range(lab.hosts) if leaf_of(i, lab.hosts, lab.layout) == 1]
    ports = rng.sample(range(*SPORT_RANGE), count)
    return [
        Flow(left[k % len(left)], right[(k // len(left)) % len(right)], ports[k])
        for k in range(count)
    ]


@dataclass(frozen=True)
class FlowRun:
    """One synchronous set of flows: what the spine counters saw, and when each flow's last
    byte arrived."""

    flows: tuple[Flow, ...]
    size_bytes: int
    path_bytes: tuple[int, ...]
    completion_s: tuple[float, ...]

    @property
    def measured_loads(self) -> list[float]:
        return flow_loads(self.path_bytes, len(self.flows))

    @property
    def slowest_s(self) -> float:
        return max(self.completion_s)


@contextlib.contextmanager
def _sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    try:
        yield opened
    finally:
        for s in opened:
            s.close()


def run_flows(
    lab: netns.Lab, flows: Sequence[Flow], size_bytes: int, timeout_s: float = 60.0
) -> FlowRun:
    """Send `size_bytes` on every flow at once (one process: sockets are opened inside the
    hosts' namespaces and keep them) and time each flow's last byte at its receiver."""
    with _sockets() as opened:
        listeners: dict[int, socket.socket] = {}
        for dst in sorted({f.dst for f in flows}):
            with delayline.in_netns(lab.host_ns(dst)):
                lis = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            opened.append(lis)
            lis.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            lis.bind((lab.address(dst), FLOW_PORT))
            lis.listen(len(flows))
            listeners[dst] = lis
        senders = []
        for f in flows:
            with delayline.in_netns(lab.host_ns(f.src)):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            opened.append(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((lab.address(f.src), f.sport))
            s.settimeout(10)
            s.connect((lab.address(f.dst), f.dport))
            senders.append(s)
        receivers: dict[tuple[str, int], socket.socket] = {}
        for f in flows:
            conn, peer = listeners[f.dst].accept()
            opened.append(conn)
            receivers[(peer[0], peer[1])] = conn
        pairs = [
            (senders[k], receivers[(lab.address(f.src), f.sport)]) for k, f in enumerate(flows)
        ]
        before = path_tx_bytes(lab, 0)
        done = _pump(pairs, size_bytes, timeout_s)
        after = path_tx_bytes(lab, 0)
    return FlowRun(
        tuple(flows),
        size_bytes,
        tuple(a - b for a, b in zip(after, before, strict=True)),
        tuple(done),
    )


def _pump(
    pairs: list[tuple[socket.socket, socket.socket]], size_bytes: int, timeout_s: float
) -> list[float]:
    """Event loop: write every sender full, read every receiver; completion times in s."""
    sel = selectors.DefaultSelector()
    chunk = memoryview(bytes(256 << 10))
    sent = [0] * len(pairs)
    got = [0] * len(pairs)
    done = [math.nan] * len(pairs)
    buf = bytearray(1 << 20)
    for k, (s, r) in enumerate(pairs):
        s.setblocking(False)
        r.setblocking(False)
        sel.register(s, selectors.EVENT_WRITE, ("s", k))
        sel.register(r, selectors.EVENT_READ, ("r", k))
    t0 = time.perf_counter()
    left = len(pairs)
    try:
        while left:
            if time.perf_counter() - t0 > timeout_s:
                raise LabError(f"flows did not finish in {timeout_s:g} s", field="lab")
            for key, _ in sel.select(timeout=1.0):
                role, k = key.data
                s, r = pairs[k]
                if role == "s":
                    with contextlib.suppress(BlockingIOError):
                        sent[k] += s.send(chunk[: size_bytes - sent[k]])
                    if sent[k] >= size_bytes:
                        sel.unregister(s)
                        s.shutdown(socket.SHUT_WR)
                    continue
                with contextlib.suppress(BlockingIOError):
                    n = r.recv_into(buf)
                    got[k] += n
                    if n == 0 or got[k] >= size_bytes:
                        done[k] = time.perf_counter() - t0
                        sel.unregister(r)
                        left -= 1
    finally:
        sel.close()
    return done


# --- the model --------------------------------------------------------------------------------


def expected_max_load(balls: int, bins: int, groups: int = 1) -> float:
    """E[busiest path's load] in flows (congestion.max_load_stats: exact balls into bins)."""
    from bandwall.model.congestion import max_load_stats

    mean, _ = max_load_stats(balls, bins, groups)
    return float(mean)


def max_load_pmf(balls: int, bins: int, groups: int = 1) -> dict[int, float]:
    """P(busiest = k) from congestion.max_load_cdf (groups independent hashed groups)."""
    from bandwall.model.congestion import max_load_cdf

    k0, cdf = max_load_cdf(balls, bins)
    busiest = [float(c) ** groups for c in cdf]
    return {k0 + i: p - (busiest[i - 1] if i else 0.0) for i, p in enumerate(busiest)}


def slowest_flow_s(
    lab: netns.Lab, loads: Sequence[float], flows: Sequence[Flow], size: int
) -> float:
    """When the last flow of a synchronous set ends: the busiest spine path carries its M
    flows' frames at the spine rate (less the tbf burst it lets through unshaped), unless a
    host link with more flows is slower. Inputs are the lab's settings, nothing fitted."""
    frames = size / PAYLOAD_PER_FRAME
    spine_Bps = lab.spine_rate_Gbps * 1e9 / 8
    host_Bps = lab.rates_Gbps[0] * 1e9 / 8
    per_host = max(
        max(sum(f.src == h for f in flows), sum(f.dst == h for f in flows))
        for h in range(lab.hosts)
    )
    spine_s = (max(loads) * frames - TBF_BURST_BYTES) / spine_Bps
    host_s = (per_host * frames - TBF_BURST_BYTES) / host_Bps
    return max(spine_s, host_s)


@dataclass(frozen=True)
class FlowRow:
    """Measured against modelled for `sets` synchronous sets of `flows` flows on `paths`."""

    flows: int
    paths: int
    sets: int
    size_bytes: int
    max_load_measured: float
    """Busiest path's load in flows (spine counters), mean over the sets."""
    max_load_model: float
    """E[max] of `flows` balls in `paths` bins (congestion.max_load_stats)."""
    max_load_sd_model: float
    slowest_measured_s: float
    """Mean over the sets of the slowest flow's completion time."""
    slowest_model_s: float
    """The lab's time formula (slowest_flow_s) at the model's E[max]."""
    time_ratio: float
    """Median over sets of slowest flow / slowest_flow_s at that set's measured busiest load."""
    factor_measured: float
    """Balanced time / mean slowest time: the share of balanced bandwidth the sets got."""
    factor_model: float
    """The same from the model's E[max] through the lab's time formula."""
    factor_congestion: float
    """congestion.py's own collision factor, mean load / E[max]."""


def flows_vs_model(
    lab: netns.Lab, flows: int, sets: int, size_bytes: int, seed: int = 0
) -> tuple[FlowRow, list[FlowRun]]:
    """`sets` synchronous sets of `flows` flows (fresh connections each: the kernel draws a
    new random hash per connection), against `flows` balls in the lab's `spines` bins (one
    hashing stage: leaf 0's uplinks)."""
    rng = random.Random(seed)
    runs = [run_flows(lab, random_flows(lab, flows, rng), size_bytes) for _ in range(sets)]
    pmf = max_load_pmf(flows, lab.spines)
    mean = expected_max_load(flows, lab.spines)
    sd = math.sqrt(sum(p * (k - mean) ** 2 for k, p in pmf.items()))
    measured = [round(max(r.measured_loads)) for r in runs]
    ratios = [
        r.slowest_s / slowest_flow_s(lab, [round(x) for x in r.measured_loads], r.flows, size_bytes)
        for r in runs
    ]
    balanced_s = slowest_flow_s(lab, [flows / lab.spines], runs[0].flows, size_bytes)
    slowest = statistics.fmean(r.slowest_s for r in runs)
    model_s = slowest_flow_s(lab, [mean], runs[0].flows, size_bytes)
    row = FlowRow(
        flows=flows,
        paths=lab.spines,
        sets=sets,
        size_bytes=size_bytes,
        max_load_measured=statistics.fmean(measured),
        max_load_model=mean,
        max_load_sd_model=sd,
        slowest_measured_s=slowest,
        slowest_model_s=model_s,
        time_ratio=statistics.median(ratios),
        factor_measured=balanced_s / slowest,
        factor_model=balanced_s / model_s,
        factor_congestion=flows / lab.spines / mean,
    )
    return row, runs


@dataclass(frozen=True)
class RingRun:
    """One gloo all_reduce run: per-path loads (in ring flows) on both leaves, busbw."""

    layout: str
    size_bytes: int
    loads: tuple[tuple[float, ...], tuple[float, ...]]
    busiest: int
    busbw_Gbps: float
    """From the fastest iteration: CPU contention only ever slows a run down."""
    predicted_Gbps: float
    """Line rate × payload share / busiest load (the hash outcome the counters saw)."""


def ring_busbw_Gbps(lab: netns.Lab, busiest: float) -> float:
    """A ring runs at its slowest hop: a flow sharing a spine path of rate s·r with M − 1
    others gets s·r/M, a flow alone gets its host's r (tbf counts frames: × 1448/1514)."""
    return min(lab.rates_Gbps[0], lab.spine_rate_Gbps / max(busiest, 1.0)) * PAYLOAD_PER_FRAME


def run_ring(lab: netns.Lab, size_bytes: int, iters: int = 3, timeout_s: float = 120) -> RingRun:
    """All_reduce over every host (workload.py ring under `lab run`), spine counters read
    around it; a path's load in ring flows is its share of the leaf's crossing bytes."""
    with tempfile.TemporaryDirectory(prefix="bwecmp-") as tmp:
        out = Path(tmp) / "ring.json"
        cmd = [
            sys.executable, "-I", workload.__file__, "ring", "--sizes", str(size_bytes),
            "--iters", str(iters), "--warmup", "1", "--pings", "1", "--out", str(out),
        ]  # fmt: skip
        before = [path_tx_bytes(lab, k) for k in range(LEAVES)]
        code = netns.lab_run(lab.name, cmd, timeout_s=timeout_s)
        after = [path_tx_bytes(lab, k) for k in range(LEAVES)]
        if code or not out.exists():
            raise LabError(f"the ring workload failed (exit {code})", field="lab")
        raw: dict[str, Any] = json.loads(out.read_text())
    crossing = ring_crossings(lab.hosts, lab.layout)
    loads = tuple(
        tuple(
            round(x, 2)
            for x in flow_loads([a - b for a, b in zip(af, bf, strict=True)], crossing[k])
        )
        for k, (af, bf) in enumerate(zip(after, before, strict=True))
    )
    busiest = max(1, round(max(max(ld) for ld in loads)))
    n = lab.hosts
    best_s = min(raw["all_reduce"][0]["times_s"])
    return RingRun(
        lab.layout,
        size_bytes,
        (loads[0], loads[1]),
        busiest,
        2 * (n - 1) / n * size_bytes * 8 / best_s / 1e9,
        ring_busbw_Gbps(lab, busiest),
    )


def ring_model(lab: netns.Lab) -> tuple[float, dict[int, float]]:
    """Expected busiest load of a rank-order ring and its distribution: each leaf hashes its
    own crossing flows (two independent groups when both carry the same count)."""
    up = ring_crossings(lab.hosts, lab.layout)
    balls = max(up)
    groups = sum(1 for u in up if u == balls)
    return expected_max_load(balls, lab.spines, groups), max_load_pmf(balls, lab.spines, groups)


# --- the table of docs/lab-ecmp.md -------------------------------------------------------------


@contextlib.contextmanager
def throwaway(name: str, **kwargs: Any) -> Iterator[netns.Lab]:
    lab = ecmp_up(name, **kwargs)
    try:
        yield lab
    finally:
        netns.lab_down(name)


def flow_table(rows: list[FlowRow]) -> str:
    lines = [
        "| P | F | sets | busiest, measured | busiest, model | slowest flow, measured "
        "| model | time / model at measured load | factor, measured | model | mean/E[max] |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.paths} | {r.flows} | {r.sets} | {r.max_load_measured:.2f} flows "
            f"| {r.max_load_model:.2f} ± {r.max_load_sd_model / math.sqrt(r.sets):.2f} flows "
            f"| {r.slowest_measured_s * 1e3:,.0f} ms | {r.slowest_model_s * 1e3:,.0f} ms "
            f"| {r.time_ratio:.3f} | {r.factor_measured:.3f} | {r.factor_model:.3f} "
            f"| {r.factor_congestion:.3f} |"
        )
    return "\n".join(lines)


def ring_table(runs: list[RingRun], lab_models: dict[str, tuple[float, dict[int, float]]]) -> str:
    lines = [
        "| layout | runs | busiest load: seen (model P) | busbw, measured | model | error |",
        "|---|---|---|---|---|---|",
    ]
    for layout, (_, pmf) in lab_models.items():
        mine = [r for r in runs if r.layout == layout]
        for m in sorted({r.busiest for r in mine}):
            got = [r for r in mine if r.busiest == m]
            busbw = statistics.median(r.busbw_Gbps for r in got)
            pred = got[0].predicted_Gbps
            lines.append(
                f"| {layout} | {len(got)}/{len(mine)} | {m} ({pmf.get(m, 0.0):.2f}) "
                f"| {busbw * 1e3:,.1f} Mb/s | {pred * 1e3:,.1f} Mb/s | {busbw / pred - 1:+.1%} |"
            )
        mean = statistics.fmean(r.busbw_Gbps for r in mine)
        expected = sum(p * ring_busbw_Gbps_of(mine[0], m) for m, p in pmf.items())
        lines.append(
            f"| {layout}, all | {len(mine)} | mean {statistics.fmean(r.busiest for r in mine):.2f}"
            f" ({lab_models[layout][0]:.2f}) | {mean * 1e3:,.1f} Mb/s "
            f"| {expected * 1e3:,.1f} Mb/s | {mean / expected - 1:+.1%} |"
        )
    return "\n".join(lines)


def ring_busbw_Gbps_of(run: RingRun, busiest: int) -> float:
    """The prediction of `run` rescaled to another busiest load (same lab)."""
    return run.predicted_Gbps * max(run.busiest, 1) / max(busiest, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bandwall.measure.lab.ecmp")
    parser.add_argument("--name", default="bwecmp")
    parser.add_argument("--spine-rate", default="200mbit")
    parser.add_argument("--flows", default="4,8,16")
    parser.add_argument("--paths", default="2,3,4")
    parser.add_argument("--sets", type=int, default=20)
    parser.add_argument("--size", type=int, default=1 << 20, help="bytes per flow")
    parser.add_argument("--rings", type=int, default=12, help="all_reduce runs, alternate")
    parser.add_argument("--ring-size", type=int, default=4 << 20)
    parser.add_argument("--json", dest="as_json", action="store_true")
    args = parser.parse_args(argv)
    rows: list[FlowRow] = []
    for p in (int(x) for x in args.paths.split(",")):
        kw = {"hosts": 4, "spines": p, "rate": "1gbit", "spine_rate": args.spine_rate}
        with throwaway(args.name, **kw) as lab:
            for f in (int(x) for x in args.flows.split(",")):
                rows.append(flows_vs_model(lab, f, args.sets, args.size, seed=f * 100 + p)[0])
                print(rows[-1], file=sys.stderr, flush=True)
    runs: list[RingRun] = []
    models = {}
    for layout in LAYOUTS:
        kw = {"hosts": 4, "spines": 2, "rate": args.spine_rate, "layout": layout}
        with throwaway(args.name, **kw) as lab:
            models[layout] = ring_model(lab)
            for _ in range(args.rings if layout == "alternate" else max(args.rings // 4, 1)):
                runs.append(run_ring(lab, args.ring_size))
                print(runs[-1], file=sys.stderr, flush=True)
    if args.as_json:
        print(json.dumps({"flows": [asdict(r) for r in rows], "rings": [asdict(r) for r in runs]}))
        return 0
    print(flow_table(rows))
    print()
    print(ring_table(runs, models))
    return 0


if __name__ == "__main__":
    sys.exit(main())
