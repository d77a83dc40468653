"""Read NCCL's own debug output (`NCCL_DEBUG=INFO`, optionally `NCCL_DEBUG_SUBSYS=INIT,GRAPH,NET`)
and the PyTorch watchdog lines around it, as real logs look.

Real logs are messy: mpirun (`[1,0]<stdout>:`), srun (`0: `), torchrun (`[trainer3]:`) and cloud
log (`| 2024-...Z |`) prefixes; several ranks writing into one file, so one rank's line can be
cut and continued by another's (`... send 0.000host:12:12 [1] NCCL INFO ...`); reporters who
strip the `host:pid:tid [dev]` prefix or paste only the `... via NET/IB/0` part; and the lines of
the program around NCCL's. Every NCCL record is therefore found by its `NCCL INFO|WARN` marker
wherever it sits in a line, a line holding several markers is split at each, and a few
patterns (connections, versions, the watchdog) are also matched without a marker.

What is not understood is counted and kept (a few examples), never silently dropped: the
diagnosis says how much of the file it used. Patterns follow the messages of NCCL 2.4-2.29
(`src/init.cc`, `src/graph/*.cc`, `src/transport/*.cc`) and PyTorch's ProcessGroupNCCL.cpp.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

#: One NCCL record marker, with the optional `host:pid[:tid] [dev]` and `file.cc:N` before it.
_MARK = re.compile(
    r"(?:(?P<host>[A-Za-z0-9_.\-]+):(?P<pid>\d+)(?::(?P<tid>\d+))? )?"
    r"(?:\[(?P<dev>\d+)\] )?"
    r"(?:(?P<src>[\w/.\-]+\.(?:cc|cu|h|cpp|c):\d+) )?"
    r"NCCL (?P<level>INFO|WARN|TRACE|ERROR|ABORT)\b ?"
)
_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)(?:[-+](?:cuda)?([\d.]+))?")
_IFACE = re.compile(r"(?:\[\d+\])?([A-Za-z0-9_.\-<>]+?):([^<\s]*)<\d+>")
_IB_DEV = re.compile(r"\[(\d+)\]([\w.\-]+):(\d+)/(IB|RoCE)(/SHARP)?")
_ENV = re.compile(r"^(NCCL_[A-Z0-9_]+) set (?:by environment )?to (.*?)\.?\s*$")
_GDR = re.compile(
    r"GPU Direct RDMA (Disabled|Enabled) for (?:GPU (\S+) / )?HCA (\d+)"
    r"(?: '([^']+)')?(?: \(([^)]*)\))?"
)
_CONN = re.compile(
    r"(?:(?:Channel|Ring) (?P<ch>\d+)(?:/\d+)? : )?(?P<src>\d+)(?:\[(?P<sbus>[0-9a-fx]+)\])? -> "
    r"(?P<dst>\d+)(?:\[(?P<dbus>[0-9a-fx]+)\])?(?: \[(?P<dir>send|receive)\])? via (?P<via>.+?)\s*$"
)
_RING = re.compile(r"^Channel (\d+)/(\d+) :\s+((?:\d+\s*)+)$")
_CHANNELS = re.compile(
    r"(\d+) coll channels, (?:(\d+) collnet channels, )?(?:(\d+) nvls channels, )?"
    r"(\d+) p2p channels, (\d+) p2p channels per peer"
)
_COMM = re.compile(
    r"comm (0x[0-9a-f]+) rank (\d+) nranks (\d+)(?: cudaDev (\d+))?(?: nvmlDev (\d+))?"
    r"(?: busId ([0-9a-f]+))?",
    re.IGNORECASE,
)
_NODES = re.compile(r"comm 0x[0-9a-f]+ rank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+)")
_PATTERN = re.compile(
    r"Pattern (\d+), crossNic (\d+), nChannels (\d+), (?:bw|speed) ([\d.]+)/([\d.]+), "
    r"type (\w+)/(\w+)"
)
_GPU_PATHS = re.compile(r"^GPU/([0-9A-Fa-f\-]+) :(.*)$")
_PATH_NET = re.compile(r"NET/(\d+) \((\d+)/([\d.]+)/(\w+)\)")
_NIC_SPEED = re.compile(r"NET\[([\d.]+)\] - NET/(\d+)")
_OLD_DIST = re.compile(r"CUDA Dev (\d+)\[(\d+)\], \w+ NIC distance :\s+(\w+)")
_RINGS_GDR = re.compile(r"Connected all rings(?:, use ring PXN (\d) GDR (\d))?")
_WATCHDOG = re.compile(
    r"Rank (?P<rank>\d+)\] Watchdog caught collective operation timeout: WorkNCCL\("
    r"SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)(?:, NumelIn=(?P<nin>\d+), "
    r"NumelOut=(?P<nout>\d+))?, Timeout\(ms\)=(?P<timeout>\d+)\) ran for (?P<ran>\d+) milliseconds"
)
_WATCHDOG_WORK = re.compile(
    r"Rank (\d+)\] Exception \(either an error or timeout\) detected by watchdog at work: "
    r"(\d+), last enqueued NCCL work: (-?\d+), last completed NCCL work: (-?\d+)"
)
_LAST_WARNING = re.compile(r"Last NCCL warning\(error\):\s*'([^']*)'")
_FAILURE = re.compile(
    r"nccl\w*(?:Error|Failure)|NCCL (?:error|failure)|NCCL communicator|ncclCommInit\w* failed",
    re.IGNORECASE,
)
#: A line that speaks of NCCL (a command line with 'nccl-tests' in a path does not).
_NCCL_WORD = re.compile(r"\bNCCL\b|\bnccl[A-Z]\w+")
_GRAPH_CHANNEL = re.compile(r"^\d+ : (?:NET|GPU|NVS|CPU)/")
_SOCKET_FAMILY = re.compile(r"ncclSocketInit: connecting to address\s*(\S*)\s*with family (\d+)")
#: INFO messages known and deliberately unused (they carry nothing doctor reasons about).
_UNUSED = (
    "Cuda Host Alloc",
    "Cuda Alloc",
    "cudaDriverVersion",
    "threadThresholds",
    "Setting affinity",
    "P2P Chunksize",
    "ncclTopoGetCpuAffinity",
    "NVLS multicast support",
    "PROFILER/Plugin",
    "TUNER/Plugin",
    "ENV/Plugin",
    "GIN/Plugin",
    "RAS client",
    "Bootstrap timings",
    "Init timings",
    "Comm config",
    "CC Off",
    "CC On",
    "[Proxy Service",
    "Check P2P Type",
    "Connected all trees",
    "Using non-device net plugin",
    "Assigned NET plugin",
    "Assigned GIN plugin",
    "Failed to initialize any GIN",
    "Topology detection",
    "KV Convert",
    "Launch mode",
    "Allocated",
    "MNNVL",
    "NVLS comm",
    "Channel ",
    "misc/",
    "transport/",
    "include/",
    "init.cc",
    "group.cc",
    "bootstrap.cc",
    "enqueue.cc",
    "proxy.cc",
    "=====",
    "CPU/",
    "NET/",
    "NIC/",
    "PCI",
    "+ ",
    "Pattern ",
    "comm 0x",
    "Dev ",
    "Trees",
    "DMA-BUF",
    "Destroy",
    "NCCL_",
    "Loaded",
    "Plugin",
    "P2P plugin",
    "Failed to",
    "Could not",
    "Initialized",
    "AllReduce:",
    "Broadcast:",
    "AllGather:",
    "ReduceScatter:",
    "Reduce:",
    "Send:",
    "Recv:",
)


@dataclass
class IbDevice:
    index: int
    name: str
    port: int
    link: str
    """'IB' or 'RoCE', as NCCL prints it."""
    sharp: bool = False


@dataclass
class Connection:
    """One `Channel NN : a[bus] -> b[bus] [send] via TRANSPORT/...` line."""

    src: int
    dst: int
    transport: str
    """P2P, SHM, NET, COLLNET, NVLS or what the line says."""
    detail: str
    channel: int | None = None
    direction: str | None = None
    net: str | None = None
    """NET plugin name (IB, IBext_v8, Socket, AWS Libfabric, ...) for NET connections."""
    nic: int | None = None
    gdr: bool = False
    host: str | None = None
    line: int = 0


@dataclass
class Graph:
    """A `Pattern P, crossNic C, nChannels N, bw A/B, type X/Y` line of the topology search:
    X is the path type between GPUs, Y the one between a GPU and its NIC (NCCL's PATH_* names:
    LOC, NVL, NVB, PIX, PXB, PXN, PHB, SYS, NET)."""

    pattern: int
    cross_nic: int
    channels: int
    bw_intra_GBps: float
    bw_inter_GBps: float
    type_intra: str
    type_inter: str
    host: str | None
    line: int


@dataclass
class Timeout:
    """A PyTorch watchdog timeout of one rank."""

    rank: int
    seq: int
    op: str
    numel_in: int | None
    numel_out: int | None
    timeout_ms: int
    ran_ms: int
    line: int


@dataclass
class Record:
    """One NCCL line (or line part) as read: where it came from and its message."""

    line: int
    host: str | None
    pid: str | None
    dev: str | None
    level: str
    message: str


@dataclass
class NcclLog:
    """Everything read from one log, plus what could not be understood."""

    source: str
    lines: int = 0
    records: int = 0
    used: int = 0
    not_understood: int = 0
    examples: list[tuple[int, str]] = field(default_factory=list)
    foreign: int = 0
    versions: dict[str, set[str]] = field(default_factory=dict)
    """NCCL version -> hosts (or '?') that printed it."""
    hosts: set[str] = field(default_factory=set)
    ranks: dict[int, dict[str, object]] = field(default_factory=dict)
    nranks: set[int] = field(default_factory=set)
    nnodes: int | None = None
    networks: Counter[str] = field(default_factory=Counter)
    plugins: list[str] = field(default_factory=list)
    ib_devices: dict[str, IbDevice] = field(default_factory=dict)
    socket_ifaces: dict[str, str] = field(default_factory=dict)
    bootstrap_ifaces: dict[str, str] = field(default_factory=dict)
    ib_missing: int = 0
    ib_open_failed: set[str] = field(default_factory=set)
    verbs_missing: int = 0
    env: dict[str, set[str]] = field(default_factory=dict)
    gdr_disabled: list[tuple[int, str]] = field(default_factory=list)
    gdr_enabled: int = 0
    ring_gdr: list[int] = field(default_factory=list)
    connections: list[Connection] = field(default_factory=list)
    ring_channels: int | None = None
    coll_channels: set[int] = field(default_factory=set)
    rings: dict[int, list[int]] = field(default_factory=dict)
    trees: int = 0
    graphs: list[Graph] = field(default_factory=list)
    gpu_net_paths: list[tuple[str, int, str, int]] = field(default_factory=list)
    """(GPU bus id, NET index, path type, line) from the GRAPH topology dump."""
    nic_speed_GBps: dict[int, float] = field(default_factory=dict)
    nic_distances: list[tuple[int, str, int]] = field(default_factory=list)
    warnings: list[tuple[int, str]] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)
    timeouts: list[Timeout] = field(default_factory=list)
    watchdog_work: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    """(rank, failing work, last enqueued, last completed, line)."""

    # --- what the evidence says --------------------------------------------------------------

    @property
    def net_connections(self) -> list[Connection]:
        return [c for c in self.connections if c.transport == "NET"]

    @property
    def single_node(self) -> bool:
        """The log shows one node only (NCCL's nNodes, or every host prefix the same with no
        NET connection)."""
        if self.nnodes is not None:
            return self.nnodes == 1
        return len(self.hosts) == 1 and bool(self.connections) and not self.net_connections

    @property
    def net_transport(self) -> str | None:
        """The inter-node transport: 'IB', 'RoCE', 'Socket', 'EFA' or a plugin's name; None on
        one node (a NET plugin is initialised there but carries nothing) or when unseen."""
        nets = Counter(c.net for c in self.net_connections if c.net)
        name = nets.most_common(1)[0][0] if nets else None
        if name is None and self.single_node:
            return None
        if name is None and self.networks:
            name = self.networks.most_common(1)[0][0]
        if name is None:
            if self.socket_ifaces and not self.ib_devices:
                return "Socket"
            if self.ib_devices:
                name = "IB"
            else:
                return None
        low = name.lower()
        if "socket" in low:
            return "Socket"
        if "libfabric" in low or "ofi" in low or "efa" in low:
            return "EFA"
        if low.startswith("ib"):
            links = {d.link for d in self.ib_devices.values()}
            return "RoCE" if links == {"RoCE"} else "IB"
        return name

    @property
    def gdr(self) -> bool | None:
        """Whether inter-node traffic reads/writes GPU memory directly (GPUDirect RDMA): True
        all of it, False none or part of it, None when the log cannot tell."""
        net = [c for c in self.net_connections if c.net and "socket" not in c.net.lower()]
        if net:
            return all(c.gdr for c in net)
        if self.gdr_disabled:
            return False
        if self.ring_gdr:
            return all(g == 1 for g in self.ring_gdr)
        if self.gdr_enabled:
            return True
        return None

    @property
    def intra_transports(self) -> set[str]:
        return {c.transport for c in self.connections if c.transport != "NET"}

    @property
    def world_size(self) -> int | None:
        return max(self.nranks) if self.nranks else None

    def describe_transport(self) -> str:
        """One phrase: what carries the traffic, in and between nodes."""
        parts = []
        net = self.net_transport
        if net is not None:
            text = {"Socket": "TCP sockets (NET/Socket)"}.get(net, net)
            if net in ("IB", "RoCE", "EFA"):
                g = self.gdr
                if g is not None:
                    text += " with GPUDirect RDMA" if g else " without GPUDirect RDMA"
            if net == "Socket" and self.socket_ifaces:
                text += " over " + ", ".join(sorted(self.socket_ifaces))
            parts.append(("between nodes: " if self.intra_transports else "") + text)
        intra = sorted(self.intra_transports)
        if intra:
            parts.append("within a node: " + ", ".join(intra))
        return "; ".join(parts) if parts else "not visible in this log"


def _split(line: str) -> list[tuple[re.Match[str] | None, str]]:
    """The NCCL records in one physical line: (marker match, message) for each marker; a line
    without one comes back whole with no match."""
    marks = list(_MARK.finditer(line))
    if not marks:
        return [(None, line)]
    out: list[tuple[re.Match[str] | None, str]] = []
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(line)
        out.append((m, line[m.end() : end].rstrip()))
    return out


def _connection(text: str, host: str | None, number: int) -> Connection | None:
    m = _CONN.search(text)
    if m is None:
        return None
    via = m["via"]
    parts = via.split("/")
    transport = parts[0].strip().upper()
    net = nic = None
    if transport == "NET" and len(parts) > 1:
        net = parts[1]
        if len(parts) > 2 and parts[2].strip().isdigit():
            nic = int(parts[2])
    return Connection(
        src=int(m["src"]),
        dst=int(m["dst"]),
        transport=transport,
        detail="/".join(parts[1:]),
        channel=int(m["ch"]) if m["ch"] else None,
        direction=m["dir"],
        net=net,
        nic=nic,
        gdr="GDRDMA" in via,
        host=host,
        line=number,
    )


def _ifaces(text: str) -> dict[str, str]:
    return {name: addr for name, addr in _IFACE.findall(text)}


class _Parser:
    def __init__(self, source: str) -> None:
        self.log = NcclLog(source=source)

    def feed(self, number: int, raw: str) -> None:
        log = self.log
        log.lines += 1
        line = raw.rstrip("\r\n")
        if not line.strip():
            return
        for mark, message in _split(line):
            if mark is None:
                if not self._bare(number, message):
                    if _NCCL_WORD.search(message) and not message.lstrip().startswith("#"):
                        self._unknown(number, message)
                    else:
                        log.foreign += 1
                continue
            log.records += 1
            rec = Record(number, mark["host"], mark["pid"], mark["dev"], mark["level"], message)
            if rec.host:
                log.hosts.add(rec.host)
            if self._message(rec) or message.startswith(_UNUSED) or not message:
                log.used += 1
            else:
                self._unknown(number, message)

    def _unknown(self, number: int, text: str) -> None:
        self.log.not_understood += 1
        if len(self.log.examples) < 5:
            self.log.examples.append((number, text.strip()[:160]))

    def _version(self, text: str, host: str | None) -> bool:
        m = _VERSION.search(text)
        if m is None:
            return False
        self.log.versions.setdefault(m.group(1), set()).add(host or "?")
        return True

    def _bare(self, number: int, text: str) -> bool:
        """Patterns that appear without an NCCL marker."""
        log = self.log
        used = False
        if (m := _WATCHDOG.search(text)) is not None:
            log.timeouts.append(
                Timeout(
                    rank=int(m["rank"]),
                    seq=int(m["seq"]),
                    op=m["op"],
                    numel_in=int(m["nin"]) if m["nin"] else None,
                    numel_out=int(m["nout"]) if m["nout"] else None,
                    timeout_ms=int(m["timeout"]),
                    ran_ms=int(m["ran"]),
                    line=number,
                )
            )
            used = True
        if (m := _WATCHDOG_WORK.search(text)) is not None:
            log.watchdog_work.append((int(m[1]), int(m[2]), int(m[3]), int(m[4]), number))
            used = True
        if (m := _LAST_WARNING.search(text)) is not None:
            log.warnings.append((number, m.group(1)))
            used = True
        if (m := _SOCKET_FAMILY.search(text)) is not None:
            log.errors.append((number, m.group(0)))
            used = True
        if self._version(text, None):
            used = True
        if (c := _connection(text, None, number)) is not None:
            log.connections.append(c)
            used = True
        if not used and _FAILURE.search(text):
            log.errors.append((number, text.strip()[:200]))
            used = True
        return used

    def _message(self, rec: Record) -> bool:
        log, text, host = self.log, rec.message.strip(), rec.host
        if rec.level in ("WARN", "ERROR", "ABORT"):
            log.warnings.append((rec.line, text))
            if (m := re.search(r"Unable to open device (\S+)", text)) is not None:
                log.ib_open_failed.add(m.group(1))
            if _SOCKET_FAMILY.search(text) or "no socket interface found" in text:
                log.errors.append((rec.line, text))
            if "libibverbs" in text:
                log.verbs_missing += 1
            return True
        if self._version(text, host):
            return True
        if (m := _ENV.match(text)) is not None:
            log.env.setdefault(m.group(1), set()).add(m.group(2).strip())
            return True
        if (m := re.match(r"Bootstrap ?: (?:Using )?(.*)$", text)) is not None:
            log.bootstrap_ifaces.update(_ifaces(m.group(1)))
            if "no socket interface" in text:
                log.errors.append((rec.line, text))
            return True
        if (m := re.match(r"NET/Socket ?: Using (.*)$", text)) is not None:
            log.socket_ifaces.update(_ifaces(m.group(1)))
            return True
        if re.match(r"NET/IB ?: No device found", text):
            log.ib_missing += 1
            return True
        if (m := re.match(r"NET/IB ?: Using (.*)$", text)) is not None:
            for idx, name, port, link, sharp in _IB_DEV.findall(m.group(1)):
                log.ib_devices[name] = IbDevice(int(idx), name, int(port), link, bool(sharp))
            return True
        if "libibverbs" in text or "libmlx5" in text:
            log.verbs_missing += 1
            return True
        if (m := re.match(r"Using network (.+?)\s*$", text)) is not None:
            log.networks[m.group(1)] += 1
            return True
        if m := re.match(r"(?:P2P plugin|Plugin Path :|NET/Plugin: Loaded net plugin) (.+)$", text):
            if m.group(1) not in log.plugins:
                log.plugins.append(m.group(1))
            return True
        if (m := re.match(r"NET/OFI (.+)$", text)) is not None:
            if "aws-ofi-nccl" not in log.plugins:
                log.plugins.append("aws-ofi-nccl")
            return True
        if (m := _GDR.search(text)) is not None:
            if m.group(1) == "Disabled":
                log.gdr_disabled.append((rec.line, text))
            else:
                log.gdr_enabled += 1
            return True
        if (m := _RINGS_GDR.search(text)) is not None:
            if m.group(2) is not None:
                log.ring_gdr.append(int(m.group(2)))
            return True
        if (c := _connection(text, host, rec.line)) is not None:
            log.connections.append(c)
            return True
        if (m := _RING.match(text)) is not None:
            log.ring_channels = max(log.ring_channels or 0, int(m.group(2)))
            log.rings[int(m.group(1))] = [int(x) for x in m.group(3).split()]
            return True
        if (m := _CHANNELS.search(text)) is not None:
            log.coll_channels.add(int(m.group(1)))
            return True
        if text.startswith("Trees"):
            log.trees += 1
            return True
        if (m := _NODES.search(text)) is not None:
            log.nranks.add(int(m.group(2)))
            log.nnodes = int(m.group(3))
            return True
        if (m := _COMM.search(text)) is not None:
            rank, nranks = int(m.group(2)), int(m.group(3))
            log.nranks.add(nranks)
            info = log.ranks.setdefault(rank, {})
            info.update({"host": host, "pid": rec.pid})
            if m.group(4) is not None:
                info["cuda_dev"] = int(m.group(4))
            if m.group(6) is not None:
                info["bus_id"] = m.group(6)
            return True
        if (m := _PATTERN.search(text)) is not None:
            log.graphs.append(
                Graph(
                    pattern=int(m.group(1)),
                    cross_nic=int(m.group(2)),
                    channels=int(m.group(3)),
                    bw_intra_GBps=float(m.group(4)),
                    bw_inter_GBps=float(m.group(5)),
                    type_intra=m.group(6),
                    type_inter=m.group(7),
                    host=host,
                    line=rec.line,
                )
            )
            return True
        if (m := _GPU_PATHS.match(text)) is not None:
            for net, _hops, _bw, kind in _PATH_NET.findall(m.group(2)):
                log.gpu_net_paths.append((m.group(1), int(net), kind, rec.line))
            return True
        if _GRAPH_CHANNEL.match(text):
            return True
        if (m := _NIC_SPEED.search(text)) is not None:
            log.nic_speed_GBps[int(m.group(2))] = float(m.group(1))
            return True
        if (m := _OLD_DIST.search(text)) is not None:
            log.nic_distances.append((int(m.group(1)), m.group(3), rec.line))
            return True
        return False


def parse_nccl_log(lines: Iterable[str], source: str = "<log>") -> NcclLog:
    """Read a log line by line (the file is never held whole in memory)."""
    parser = _Parser(source)
    for number, raw in enumerate(lines, 1):
        parser.feed(number, raw)
    return parser.log


def looks_like_nccl(sample: str) -> bool:
    """Whether a file's first part has anything this parser reads."""
    return bool(
        _MARK.search(sample)
        or _WATCHDOG.search(sample)
        or _LAST_WARNING.search(sample)
        or _SOCKET_FAMILY.search(sample)
        or re.search(r"-> \d+(?:\[[0-9a-fx]+\])?(?: \[(?:send|receive)\])? via ", sample)
    )
