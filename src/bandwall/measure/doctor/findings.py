"""The classic NCCL faults, each read off the evidence of a parsed log with its reason, the
setting to check and what to try.

The rules and the settings they name follow NCCL's troubleshooting guide
(docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html, as of NCCL 2.29) and
maintainers' answers in NVIDIA/nccl issues (#451, #631, #897, #1412, #1537: cited in the test
data's .source files). A finding is only raised on evidence a line of the log shows; each
carries those lines (`file:line: text`) so a reader can check it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from bandwall.measure.doctor.nccl_log import NcclLog

SEVERITIES = ("critical", "high", "medium", "low", "info")
#: Interfaces that never reach another host: loopback, container and VM bridges, CNI tunnels.
VIRTUAL_IFACE = re.compile(
    r"^(lo|docker\d*|virbr\d*|br-[0-9a-f]+|veth\w*|cali\w*|tunl\d*|flannel\S*"
    r"|cni\d*|cilium\w*|lxc\w*|vnet\d*|ip6tnl\d*)$"
)
#: NCCL's path types from the GPU to its NIC that cross the CPU (src/graph/topo.h).
FAR_PATHS = ("PHB", "SYS", "NODE")
IB_IFACE = re.compile(r"^(ib\w*|ibs\w*|ibp\w*|mlx\w*)$")


@dataclass
class Finding:
    """One thing wrong (or worth knowing), why, and what to do about it."""

    code: str
    title: str
    reason: str
    severity: str
    check: list[str] = field(default_factory=list)
    """Settings and commands that confirm it."""
    fix: list[str] = field(default_factory=list)
    """What to try."""
    evidence: list[str] = field(default_factory=list)
    cost_s: float | None = None
    """Estimated seconds per training step it costs (None: the evidence cannot tell)."""
    step_s: float | None = None
    source: str = ""
    cost_basis: str = ""

    @property
    def cost_share(self) -> float | None:
        if self.cost_s is None or not self.step_s:
            return None
        return self.cost_s / self.step_s

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "cost_share": self.cost_share}


def _lines(log: NcclLog, items: list[tuple[int, str]], limit: int = 3) -> list[str]:
    return [f"{log.source}:{n}: {text.strip()[:200]}" for n, text in items[:limit]]


def _env(log: NcclLog, name: str) -> set[str]:
    return log.env.get(name, set())


def _socket_findings(log: NcclLog) -> list[Finding]:
    if log.net_transport != "Socket":
        return []
    why: list[str] = []
    evidence: list[tuple[int, str]] = []
    if log.ib_open_failed:
        why.append(
            "NCCL found RDMA device(s) " + ", ".join(sorted(log.ib_open_failed)) + " but could "
            "not open them (a container without /dev/infiniband, or no permission)"
        )
        evidence += [w for w in log.warnings if "open" in w[1].lower()][:2]
    if "1" in _env(log, "NCCL_IB_DISABLE"):
        why.append("NCCL_IB_DISABLE=1 turns InfiniBand/RoCE off")
    if any(v.lower() == "socket" for v in _env(log, "NCCL_NET")):
        why.append("NCCL_NET=Socket forces TCP")
    rdma_plugin = [p for p in log.plugins if re.search(r"ib|rdma|sharp|ofi", p, re.IGNORECASE)]
    if log.ib_missing and rdma_plugin:
        why.append(
            f"the RDMA network plugin ({rdma_plugin[0]}) loaded but found no device: the NICs "
            "are not visible where the job runs"
        )
    ipoib = sorted(n for n in {*log.socket_ifaces, *log.bootstrap_ifaces} if IB_IFACE.match(n))
    if ipoib:
        why.append(
            "the sockets run over " + ", ".join(ipoib) + ", IP-over-InfiniBand interfaces: the "
            "InfiniBand hardware is there"
        )
    if log.ib_devices:
        why.append("NET/IB listed " + ", ".join(sorted(log.ib_devices)) + " yet traffic is TCP")
    ifaces = ", ".join(sorted(log.socket_ifaces)) or "the socket interfaces"
    check = [
        "NCCL_IB_DISABLE (unset or 0), NCCL_NET (unset), NCCL_IB_HCA",
        "`ibv_devinfo` where the job runs (inside the container): the HCAs and their state",
        "containers: --device=/dev/infiniband --cap-add=IPC_LOCK --ulimit memlock=-1, "
        "or the RDMA device plugin on Kubernetes",
    ]
    fix = [
        "expose the RDMA devices to the job and drop NCCL_IB_DISABLE/NCCL_NET=Socket; the "
        "log should then say 'NET/IB : Using [0]mlx5_...' and 'via NET/IB/.../GDRDMA'",
    ]
    if why:
        return [
            Finding(
                code="socket_fallback",
                title="Inter-node traffic falls back to TCP sockets while RDMA NICs exist",
                reason="; ".join(why) + f". NCCL moves every inter-node byte through {ifaces} "
                "with the CPU copying it: several times slower than RDMA (NVIDIA/nccl#451).",
                severity="high",
                check=check,
                fix=fix,
                evidence=[*_lines(log, evidence), f"{log.source}: NET/Socket : Using {ifaces}"],
                source=log.source,
            )
        ]
    return [
        Finding(
            code="socket_transport",
            title="Inter-node traffic runs over TCP sockets",
            reason="NCCL found no RDMA device (NET/IB : No device found) and uses NET/Socket "
            f"over {ifaces}. Right for an Ethernet-only cluster; if it has InfiniBand or RoCE "
            "NICs, NCCL cannot see them.",
            severity="info",
            check=check,
            fix=[
                "on TCP, more sockets per connection help: NCCL_SOCKET_NTHREADS, "
                "NCCL_NSOCKS_PERTHREAD"
            ],
            source=log.source,
        )
    ]


def _gdr_findings(log: NcclLog) -> list[Finding]:
    if log.net_transport not in ("IB", "RoCE", "EFA") or log.gdr is not False:
        return []
    net = [c for c in log.net_connections if c.net and "socket" not in c.net.lower()]
    without = [c for c in net if not c.gdr]
    reasons = []
    if net and len(without) < len(net):
        reasons.append(
            f"{len(without)} of {len(net)} NET connections use GPUDirect RDMA and the others do "
            "not: the kernel module is missing on some nodes (NVIDIA/nccl#897)"
        )
    elif net:
        reasons.append(f"none of the {len(net)} NET connections shows /GDRDMA")
    distance = [t for _, t in log.gdr_disabled if "distance" in t]
    module = [t for _, t in log.gdr_disabled if "no module" in t or "(" not in t]
    if distance:
        reasons.append(
            "NCCL turned it off because the NIC is too far from the GPU ("
            + distance[0].split("(")[-1].rstrip(")")
            + "): the path crosses the CPU"
        )
    if module:
        reasons.append(
            "NCCL reports GPU Direct RDMA disabled for the HCA: no nvidia-peermem module "
            "(or DMA-BUF) is registered"
        )
    evidence = _lines(log, log.gdr_disabled, 2) + [
        f"{log.source}:{c.line}: {c.src} -> {c.dst} via NET/{c.detail}" for c in without[:2]
    ]
    return [
        Finding(
            code="gdr_off",
            title="GPUDirect RDMA is off: network data is staged through host memory",
            reason="; ".join(reasons or ["no connection uses GPUDirect RDMA"])
            + ". Every inter-node byte then crosses PCIe twice and host memory once; on the "
            "report that fixed it, busbw went from 33 to 93 GB/s (NVIDIA/nccl#1412).",
            severity="high",
            check=[
                "`lsmod | grep nvidia_peermem` on every node (or a DMA-BUF capable driver + "
                "kernel: 'DMA-BUF is available' in the log)",
                "NCCL_NET_GDR_LEVEL (the GPU-NIC distance up to which NCCL uses GDR)",
                "PCI ACS off on bare metal (`lspci -vvv | grep ACSCtl`), IOMMU in passthrough",
            ],
            fix=[
                "`modprobe nvidia-peermem` on every node; the log should then say "
                "'via NET/IB/N/GDRDMA'",
            ],
            evidence=evidence,
            source=log.source,
        )
    ]


def _far_nic_findings(log: NcclLog) -> list[Finding]:
    if log.single_node:
        return []
    evidence: list[str] = []
    kinds: set[str] = set()
    for g in log.graphs:
        if g.type_inter in FAR_PATHS:
            kinds.add(g.type_inter)
            evidence.append(
                f"{log.source}:{g.line}: graph pattern {g.pattern}, {g.channels} channel(s), "
                f"type {g.type_intra}/{g.type_inter}"
            )
    best: dict[str, tuple[int, int, str, int]] = {}
    order = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "P2C", "PHB", "NODE", "SYS")
    for gpu, net, kind, line in log.gpu_net_paths:
        rank = order.index(kind) if kind in order else len(order)
        if gpu not in best or rank < best[gpu][0]:
            best[gpu] = (rank, net, kind, line)
    for gpu, (_, net, kind, line) in best.items():
        if kind in FAR_PATHS:
            kinds.add(kind)
            evidence.append(
                f"{log.source}:{line}: GPU/{gpu} reaches its nearest NIC NET/{net} via {kind}"
            )
    for _, text in log.gdr_disabled:
        if "distance" in text:
            kinds.add("distance")
            evidence.append(f"{log.source}: {text.strip()}")
    for dev, kind, line in log.nic_distances:
        if kind in FAR_PATHS:
            kinds.add(kind)
            evidence.append(f"{log.source}:{line}: CUDA Dev {dev} NIC distance {kind}")
    if not kinds:
        return []
    where = (
        "on the other NUMA node (SYS: across the CPU interconnect)"
        if "SYS" in kinds
        else "behind the CPU's host bridge, not on the GPU's PCIe switch (PHB)"
    )
    return [
        Finding(
            code="nic_far",
            title="GPUs reach their NIC through the CPU",
            reason=f"NCCL's topology search puts the NIC {where}. Traffic between GPU and NIC "
            "then shares the CPU's PCIe root and, past NCCL_NET_GDR_LEVEL, loses GPUDirect "
            "RDMA (NVIDIA/nccl#489: 'if we have to go through the CPU for NIC-GPU transfers ... "
            "we show PHB').",
            severity="medium",
            check=[
                "`nvidia-smi topo -m`: each GPU should have a NIC at PIX/PXB",
                "NCCL_NET_GDR_LEVEL (PHB or SYS lets NCCL use GDR across the CPU), NCCL_CROSS_NIC",
                "process binding (--bind-to numa) and the BIOS NUMA-per-socket setting",
            ],
            fix=[
                "place each GPU's traffic on the NIC of its own PCIe switch (NCCL_IB_HCA order, "
                "one NIC per GPU); try NCCL_NET_GDR_LEVEL=SYS where ACS is off",
            ],
            evidence=evidence[:4],
            source=log.source,
        )
    ]


def _p2p_findings(log: NcclLog) -> list[Finding]:
    disabled = "1" in _env(log, "NCCL_P2P_DISABLE")
    level = _env(log, "NCCL_P2P_LEVEL") & {"LOC", "0"}
    shm = [c for c in log.connections if c.transport == "SHM"]
    net_local = [c for c in log.net_connections if c.host and log.single_node]
    if not (disabled or level or shm or net_local):
        return []
    reasons = []
    if disabled:
        reasons.append("NCCL_P2P_DISABLE=1 is set")
    if level:
        reasons.append(f"NCCL_P2P_LEVEL={next(iter(level))} allows no peer-to-peer path")
    if shm:
        reasons.append(
            f"{len(shm)} intra-node connection(s) go via SHM (host shared memory) instead of P2P"
        )
    return [
        Finding(
            code="p2p_disabled",
            title="GPU peer-to-peer is off inside the node",
            reason="; ".join(reasons) + ". Data between GPUs of one node is copied through "
            "host memory: lower bandwidth and higher latency than P2P (on the logged system "
            "P2P gave 8-14% more throughput).",
            severity="medium" if not disabled else "high",
            check=[
                "NCCL_P2P_DISABLE, NCCL_P2P_LEVEL",
                "`nvidia-smi topo -p2p r`; PCI ACS (`lspci -vvv | grep ACSCtl`) and the IOMMU "
                "(iommu=pt): P2P failures usually come from them (NVIDIA/nccl#631)",
            ],
            fix=[
                "unset NCCL_P2P_DISABLE once ACS/IOMMU allow P2P; the log should say "
                "'via P2P/IPC' or 'via P2P/CUMEM'",
            ],
            evidence=_lines(
                log, [(c.line, f"{c.src} -> {c.dst} via {c.transport}/{c.detail}") for c in shm], 2
            ),
            source=log.source,
        )
    ]


def _channel_findings(log: NcclLog) -> list[Finding]:
    out = []
    set_ = {
        k: v
        for k in (
            "NCCL_MAX_NCHANNELS",
            "NCCL_MIN_NCHANNELS",
            "NCCL_MAX_CTAS",
            "NCCL_NCHANNELS_PER_NET_PEER",
        )
        if (v := _env(log, k))
    }
    channels = max([*log.coll_channels, log.ring_channels or 0]) or None
    nics = len(log.ib_devices)
    low_env = {
        k: v
        for k, v in set_.items()
        if k in ("NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS")
        and any(x.isdigit() and int(x) < 8 for x in v)
    }
    if low_env or (
        channels is not None
        and nics >= 2
        and log.net_transport in ("IB", "RoCE")
        and channels < nics
    ):
        reason = (
            "NCCL runs "
            + (f"{channels} channel(s)" if channels else "few channels")
            + (
                f" for {nics} NICs: some NICs carry nothing"
                if nics >= 2 and channels and channels < nics
                else ""
            )
            + (
                "; capped by " + ", ".join(f"{k}={'/'.join(sorted(v))}" for k, v in low_env.items())
                if low_env
                else ""
            )
            + ". Each channel is one ring of SMs and connections; too few leave bandwidth unused."
        )
        out.append(
            Finding(
                code="few_channels",
                title="Fewer channels than the hardware needs",
                reason=reason,
                severity="medium",
                check=[
                    "NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS, NCCL_NCHANNELS_PER_NET_PEER",
                    "'N coll channels' in NCCL_DEBUG=INFO",
                ],
                fix=["unset the channel caps; NCCL picks about 2 channels per NIC"],
                source=log.source,
            )
        )
    return out


def _version_findings(log: NcclLog) -> list[Finding]:
    if len(log.versions) < 2:
        return []
    desc = "; ".join(f"{v} on {', '.join(sorted(h))}" for v, h in sorted(log.versions.items()))
    return [
        Finding(
            code="mixed_versions",
            title="Ranks run different NCCL versions",
            reason=f"The log shows NCCL {desc}. Ranks must run the same version: mismatches "
            "hang or fail at connection setup with obscure errors (NVIDIA/nccl#1267, "
            "'your hunch that the issue was due to mismatched versions was correct').",
            severity="critical",
            check=[
                "`python -c 'import torch; print(torch.cuda.nccl.version())'` on every node",
                "pip's nvidia-nccl-cu* packages and any system libnccl on LD_LIBRARY_PATH",
            ],
            fix=["install one NCCL everywhere (the same container image on every node)"],
            source=log.source,
        )
    ]


def _iface_findings(log: NcclLog) -> list[Finding]:
    out = []
    ifname = sorted(_env(log, "NCCL_SOCKET_IFNAME"))
    broken = [
        (n, t)
        for n, t in [*log.errors, *log.warnings]
        if "no socket interface" in t or "with family" in t or "No usable listening" in t
    ]
    if broken:
        setting = f"NCCL_SOCKET_IFNAME={ifname[0]}" if ifname else "NCCL_SOCKET_IFNAME"
        out.append(
            Finding(
                code="socket_ifname",
                title="NCCL cannot bootstrap: no usable socket interface",
                reason=f"{setting} matches no interface that reaches the other hosts, so NCCL "
                "finds none ('no socket interface found') or connects with a garbage address "
                "('connecting to address with family N'): NVIDIA/nccl#1837.",
                severity="critical",
                check=[
                    "`ip -br addr` on every node against NCCL_SOCKET_IFNAME (a prefix list "
                    "such as eth,en; '^' excludes, '=' matches exactly)"
                ],
                fix=[
                    "set NCCL_SOCKET_IFNAME to the interface that carries the node's routable "
                    "address on every node (or a prefix that matches it everywhere)"
                ],
                evidence=_lines(log, broken, 2),
                source=log.source,
            )
        )
    bridges = sorted(
        n for n in {*log.socket_ifaces, *log.bootstrap_ifaces} if VIRTUAL_IFACE.match(n)
    )
    if bridges and not log.single_node and log.net_transport in ("Socket", None):
        out.append(
            Finding(
                code="socket_ifname",
                title="NCCL may use interfaces that do not reach other hosts",
                reason="The socket interface list includes "
                + ", ".join(bridges)
                + " (loopback, container or VM bridges): NCCL stripes connections over every "
                "listed interface, and the ones that do not route between hosts hang or slow "
                "the job (NVIDIA/nccl#913).",
                severity="medium",
                check=["NCCL_SOCKET_IFNAME (default '^lo,docker' leaves other bridges in)"],
                fix=[
                    "set NCCL_SOCKET_IFNAME to the routable interface(s), e.g. =eth0 or "
                    "^virbr,docker,lo"
                ],
                source=log.source,
            )
        )
    hca = sorted(_env(log, "NCCL_IB_HCA"))
    if hca and (log.ib_missing or log.ib_open_failed) and not log.ib_devices:
        out.append(
            Finding(
                code="ib_hca",
                title="NCCL_IB_HCA matches no usable HCA",
                reason=f"NCCL_IB_HCA={hca[0]} is set and NET/IB found no device: the name does "
                "not match an active port (a prefix like mlx5 matches mlx5_*; '=' exact; '^' "
                "excludes).",
                severity="high",
                check=["`ibv_devinfo` names and port states against NCCL_IB_HCA"],
                fix=["unset NCCL_IB_HCA or list the active HCAs, e.g. =mlx5_0:1,mlx5_1:1"],
                source=log.source,
            )
        )
    return out


def _timeout_findings(log: NcclLog) -> list[Finding]:
    if not log.timeouts:
        return []
    by_work: dict[tuple[str, int], list[int]] = {}
    for t in log.timeouts:
        by_work.setdefault((t.op, t.seq), []).append(t.rank)
    out = []
    for (op, seq), ranks in by_work.items():
        t = next(x for x in log.timeouts if x.op == op and x.seq == seq)
        also = sorted({r for r, w, *_ in log.watchdog_work if w == seq} - set(ranks))
        reporting = sorted({*ranks, *also})
        completed = [c for r, w, _, c, _ in log.watchdog_work if w == seq]
        world = log.world_size
        missing = sorted(set(range(world)) - set(reporting)) if world else []
        size = f" of {t.numel_in:,} elements" if t.numel_in else ""
        reason = (
            f"Rank(s) {', '.join(map(str, reporting))} waited {t.ran_ms / 1e3:,.0f} s in "
            f"{op} (SeqNum {seq}{size}) past the {t.timeout_ms / 1e3:,.0f} s timeout"
            + (f"; the last work they completed is {max(completed)}" if completed else "")
            + ". Ranks that time out in the same collective were waiting for one that never "
            "joined it: "
            + (
                f"rank(s) {', '.join(map(str, missing))} did not report"
                if missing
                else "look for the rank that is not in these lines"
            )
            + " (a hang, a crash, an uneven data path, or a dead link)."
        )
        out.append(
            Finding(
                code="nccl_timeout",
                title=f"Watchdog abort: {op} SeqNum {seq} timed out",
                reason=reason,
                severity="critical",
                check=[
                    "TORCH_NCCL_DUMP_ON_TIMEOUT=1 / TORCH_NCCL_TRACE_BUFFER_SIZE (flight "
                    "recorder) to see which rank is behind; `py-spy dump` on a stuck rank",
                    "NCCL_DEBUG=INFO for NET/IB warnings before the timeout",
                ],
                fix=[
                    "find why the missing rank did not enter the collective (data-dependent "
                    "branches, an exception, a slow or dead node) before raising the timeout"
                ],
                evidence=_lines(
                    log,
                    [
                        (x.line, f"[Rank {x.rank}] {x.op} SeqNum {x.seq} ran {x.ran_ms} ms")
                        for x in log.timeouts
                        if x.seq == seq
                    ],
                    3,
                ),
                source=log.source,
            )
        )
    return out


def _warning_findings(log: NcclLog, used: set[str]) -> list[Finding]:
    rest = [
        (n, t)
        for n, t in log.warnings
        if not any(k in t for k in used) and "libibverbs" not in t and "open" not in t.lower()
    ]
    errors = [(n, t) for n, t in log.errors if "with family" not in t]
    items = [*errors, *rest]
    if not items:
        return []
    ib_err = [t for _, t in items if "completion" in t and "error" in t]
    reason = "NCCL reported warnings or errors the rules above do not explain."
    if ib_err:
        reason = (
            "NET/IB completions failed: the RDMA link or the peer went away (error 12: "
            "retries exceeded, a flaky link or a dead peer; error 4: often PCI ACS "
            "breaking GPUDirect RDMA, NVIDIA/nccl#928)."
        )
    return [
        Finding(
            code="nccl_errors",
            title="NCCL warnings and errors",
            reason=reason,
            severity="high" if errors or ib_err else "low",
            check=["the lines below, on the first rank that printed them"],
            fix=["fix the first error; the others usually follow from it"],
            evidence=_lines(log, items, 3),
            source=log.source,
        )
    ]


def log_findings(log: NcclLog) -> list[Finding]:
    """Every finding the log supports."""
    out = [
        *_timeout_findings(log),
        *_version_findings(log),
        *_iface_findings(log),
        *_socket_findings(log),
        *_gdr_findings(log),
        *_far_nic_findings(log),
        *_p2p_findings(log),
        *_channel_findings(log),
    ]
    used = {"no socket interface", "with family", "No usable listening", "Unable to open"}
    out += _warning_findings(log, used)
    return out
