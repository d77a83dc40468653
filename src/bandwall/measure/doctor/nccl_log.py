"""Read NCCL's debug output, the PyTorch watchdog and error lines around it, and the nccl-tests
lines that ride along, as real pasted logs look.

Real logs are messy: mpirun (`[1,0]<stdout>:`), srun (`0: `), torchrun (`[trainer3]:`), Ray
(`(pid=123)`) and cloud-log prefixes; several ranks writing into one file, so one rank's record
can be cut and continued by another's; reporters who strip the `host:pid:tid [dev]` prefix,
quote lines with `> `, or paste them joined on one line. Every NCCL record is therefore found
by its `NCCL INFO|WARN` marker wherever it sits in a line (a line with several markers is split
at each), and the patterns that matter also match without a marker.

The parser is a table: each `Pattern` has a literal `key` that must occur in the text (a cheap
`in` test, so most lines cost one scan per key) and a regular expression without nested
quantifiers, run only when the key is there; lines arrive cut at 16,384 characters by
`bandwall.safeio`. Every fact keeps the `Line` it came from, so a finding can quote it.

Messages follow NCCL 2.3-2.30 (`src/init.cc`, `src/net.cc`, `src/graph/*.cc`,
`src/transport/*.cc`, `src/misc/{ibvwrap,socket,shmutils}.cc`, `src/bootstrap.cc`),
aws-ofi-nccl 1.x and PyTorch's ProcessGroupNCCL (with and without `SeqNum=`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from typing import Any

from bandwall.measure.doctor.evidence import Line

#: The levels NCCL prints after "NCCL ".
_LEVELS = ("INFO", "WARN", "ERROR", "ABORT", "TRACE")
#: What may precede a marker: `host:pid[:tid] [dev] [file.cc:N] `, read backwards from it.
_PREFIX_TAIL = re.compile(
    r"(?:(?P<host>[A-Za-z0-9_.\-]{1,128}):(?P<pid>\d{1,10})(?::\d{1,10})? )?"
    r"(?:\[(?P<dev>\d{1,4})\] )?"
    r"(?:(?P<src>[\w/.\-]{1,200}\.(?:cc|cu|h|cpp|c):\d{1,6}) )?$"
)
_SOURCE_FILE = re.compile(r"\.(?:cc|cu|h|cpp|c)$")
_VERSION = re.compile(r"NCCL version:? ?(\d{1,2}\.\d{1,3}\.\d{1,3})")
_ENV_ECHO = re.compile(r"\b(NCCL_[A-Z0-9_]{2,64}) set (?:by environment )?to (\S{1,256})")
_IFACE = re.compile(r"(?:\[\d{1,3}\])?([A-Za-z0-9_.\-]{1,64}):([0-9a-fA-F.:%A-Za-z\-]{0,64})<\d+>")
_IB_DEV = re.compile(r"\[(\d{1,3})\]\s?([\w.\-]{1,64}):(\d{1,3})/(IB|RoCE)(/SHARP)?")
_GDR = re.compile(
    r"GPU Direct RDMA (Disabled|Enabled) for (?:GPU (\S{1,24}) / )?HCA ([0-9a-fA-Fx]{1,16})"
    r"(?: '([^']{1,64})')?(?: \(distance (\d{1,3}) [<>=]{1,2} (\d{1,3})\))?"
)
_CONN = re.compile(
    r"(?:(?:Channel|Ring) (?P<ch>\d{1,3})(?:/\d{1,3})? : )?(?P<src>\d{1,6})"
    r"(?:\[(?P<sbus>[0-9a-fA-Fx]{1,16})\])? -> "
    r"(?P<dst>\d{1,6})(?:\[(?P<dbus>[0-9a-fA-Fx]{1,16})\])?"
    r"(?: \[(?P<dir>send|receive)\])? via (?P<via>[^\n]{1,200}?)\s*$"
)
_CHANNELS = re.compile(r"(\d{1,4}) coll channels")
_RING = re.compile(r"Channel (\d{1,3})/(\d{1,3}) :((?: +\d{1,6}){1,1024})\s*$")
_COMM = re.compile(
    r"comm 0x[0-9a-f]{1,16} rank (\d{1,6}) n[Rr]anks (\d{1,6})(?: cudaDev (\d{1,3}))?"
    r"(?: nvmlDev \d{1,3})?(?: busId ([0-9a-f]{1,16}))?"
)
_NODES = re.compile(r"nRanks (\d{1,6}) nNodes (\d{1,6}) localRanks (\d{1,4})")
_PATTERN = re.compile(
    r"Pattern (\d{1,3}), crossNic (\d{1,3}), nChannels (\d{1,3}), "
    r"(?:bw|speed) ([\d.]{1,16})/([\d.]{1,16}), type (\w{1,8})/(\w{1,8})"
)
_GPU_PATHS = re.compile(r"GPU/([0-9A-Fa-f\-]{1,32}) :(.{0,8000})$")
_PATH_NET = re.compile(r"NET/(\d{1,3}) \((\d{1,3})/([\d.]{1,16})/(\w{1,8})\)")
_NIC_SPEED = re.compile(r"NET\[([\d.]{1,16})\] - NET/(\d{1,3})")
_XML_NET_SPEED = re.compile(r'<net name="([^"]{1,64})"[^>]{0,200}? speed="(\d{1,9})"')
_OLD_DIST = re.compile(r"CUDA Dev (\d{1,3})\[\d{1,6}\], \w{1,16} NIC distance :\s+(\w{1,8})")
_RINGS_GDR = re.compile(r"use ring PXN (\d) GDR (\d)")
_COMPLETION = re.compile(
    r"(?:with error |status=)(?:[A-Z_]{1,40}\()?(\d{1,3})\)?"
    r".{0,200}?vendor[ _]err(?:or)?[ =]?(\d{1,4})?"
)
_COMPLETION_SIMPLE = re.compile(r"(?:with error |status=)(?:[A-Z_]{1,40}\()?(\d{1,3})")
#: 'GID 0 (80FE/...)': NCCL prints the subnet prefix as a little-endian 64-bit hex number, so
#: fe80::/10 (link-local) reads as ...80FE (src/transport/net_ib connect INFO)
_QP_GID = re.compile(
    r"(?:qpn|qp_num) \d{1,10} mtu \d{1,2}.{0,300}? GID (\d{1,3}) \(([0-9A-Fa-f]{1,16})/"
)
_MODIFY_QP = re.compile(
    r"ibv_modify_qp failed with (?:error )?(\d{1,4} )?([A-Za-z][A-Za-z ]{2,60})"
)
#: dlerror of a plugin that exists but needs what the host's libraries lack
_PLUGIN_LOAD_FAILED = re.compile(
    r"(?:dlerror|returned \d{1,4} ?:).{0,400}?(?:version [`'][^`']{1,60}' not found"
    r"|undefined symbol)"
)
_CUDA_FAILURE = re.compile(r"Cuda failure (?:(\d{1,4}) )?'([^']{1,200})'?")
_TEST_FAILURE = re.compile(r"Test (NCCL|CUDA) failure [\w./]{1,64}:\d{1,6} '([^']{1,300})")
#: The message, or its first line where a paste or an older PyTorch wraps it before WorkNCCL(
_WATCHDOG = re.compile(
    r"Watchdog caught collective operation timeout(?::(?: WorkNCCL\(|\s*$)|\s*$)"
)
_WD_RANK = re.compile(r"\[(?:PG [^\]]{0,200}?)?Rank (\d{1,6})\]")
_WD_SEQ = re.compile(r"SeqNum=(\d{1,12})")
_WD_OP = re.compile(r"OpType=(\w{1,40})")
_WD_NUMEL = re.compile(r"NumelIn=(\d{1,15}), NumelOut=(\d{1,15})")
_WD_TIMEOUT = re.compile(r"Timeout\(ms\)=(\d{1,12})\) ran for (\d{1,15}) milliseconds")
_WD_WORK = re.compile(
    r"(?:detected by watchdog at work|Timeout at NCCL work): (-?\d{1,12}), "
    r"last enqueued NCCL work: (-?\d{1,12}), last completed NCCL work: (-?\d{1,12})"
)
_DUPLICATE = re.compile(
    r"Duplicate GPU detected : rank (\d{1,6}) and rank (\d{1,6}) both on CUDA device (\w{1,16})"
)
_DEVICE_RANK = re.compile(
    r"Rank\s{1,8}(\d{1,6})\s{1,8}(?:Group\s{1,8}\d{1,4}\s{1,8})?Pid\s{1,8}(\d{1,10})\s{1,8}on\s{1,8}(\S{1,128})\s{1,8}device\s{1,8}\d{1,3}\s{1,8}"
    r"\[[^\]]{1,32}\]\s{0,8}(.{1,80})$"
)
#: nccl-tests before 2.x's Group/Pid columns ('#   Rank %2d on %10s device %2d [0x%02x] %s',
#: src/common.cu v1.0.0)
_OLD_DEVICE_RANK = re.compile(
    r"#\s{1,8}Rank\s{1,8}\d{1,6}\s{1,8}on\s{1,8}\S{1,128}\s{1,8}device\s{1,8}\d{1,3}\s{1,8}"
    r"\[[^\]]{1,32}\]\s{0,8}(.{1,80})$"
)
_TORCH_GPU = re.compile(r"\bGPU \d{1,3}: ((?:NVIDIA|Tesla|Quadro|GeForce) [^(\n]{2,60})")
_SMI_GPU = re.compile(r"^\|\s{1,6}\d{1,3}\s{1,6}((?:NVIDIA|Tesla) [A-Za-z0-9\- ]{2,40}?)\s{2,}")
_OOB = re.compile(r"Out of bounds values\s*:\s*(\d{1,12})\s+(FAILED|OK)")
#: nccl-tests' run header, printed once per run by its main process (src/common.cu)
_TEST_RUN = re.compile(r"nThread\s{1,8}\d{1,4}\s{1,8}nGpus\s{1,8}\d{1,4}\s{1,8}minBytes\b")
_TABLE_HEADER = re.compile(r"#\s{1,20}size\s{1,20}count\s")
#: nccl-tests 1.x (2017-2018, NCCL 1.x/2.0 era): 'Rank  0 uses device  0 [0x05] Tesla M40
#: 24GB' under 'Using devices', and a table headed 'bytes N type op time algbw busbw res'
#: (NVIDIA/nccl#104)
_V1_DEVICE = re.compile(
    r"Rank\s{1,8}\d{1,6}\s{1,8}uses\s{1,8}device\s{1,8}\d{1,3}\s{1,8}\[[^\]]{1,32}\]\s{0,8}(.{1,80})$"
)
_V1_TABLE_HEADER = re.compile(r"\bbytes\s{1,20}N\s{1,20}type\s{1,20}op\s{1,20}time\s")
_TABLE_ROW = re.compile(r"^\s{0,24}\d{1,14}\s{1,20}\d{1,14}\s{1,20}[a-z0-9_]{2,12}\s")
_TOOL_PREFIX = re.compile(
    r"^(?:\[\d{1,5},\d{1,5}\]<std(?:out|err)>:|\[default\d{1,5}\]:|\d{1,5}: |\[[\w.\-|]{1,64}\]: ?|"
    r"\(\w{1,40} pid=\d{1,10}(?:, ip=[\d.]{1,40})?\) |(?:> ?){1,4})"
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
    line: Line
    channel: int | None = None
    net: str | None = None
    """NET plugin name (IB, IBext_v8, Socket, AWS Libfabric, ...) for NET connections."""
    gdr: bool = False


@dataclass
class Graph:
    """A `Pattern P, crossNic C, nChannels N, bw A/B, type X/Y` line of the topology search:
    X is the path type between GPUs, Y the one between a GPU and its NIC (NCCL's PATH_* names)."""

    pattern: int
    channels: int
    type_intra: str
    type_inter: str
    line: Line


@dataclass
class Timeout:
    """A PyTorch watchdog timeout of one rank."""

    rank: int | None
    seq: int | None
    op: str | None
    numel_in: int | None
    timeout_ms: int | None
    ran_ms: int | None
    line: Line


@dataclass
class NcclLog:
    """Everything read from one file, each fact with the line it came from."""

    source: str
    lines: int = 0
    records: int = 0
    """NCCL records (marker lines and marker segments)."""
    matched: int = 0
    """Lines any pattern used."""
    examples: list[Line] = field(default_factory=list)
    """A few NCCL lines no pattern used."""
    not_understood: int = 0
    hosts: set[str] = field(default_factory=set)
    versions: dict[str, list[Line]] = field(default_factory=dict)
    env: dict[str, list[tuple[str, Line]]] = field(default_factory=dict)
    env_cmd: dict[str, list[tuple[str, Line]]] = field(default_factory=dict)
    """NCCL_* settings seen on command lines or exports (not echoed by NCCL)."""
    networks: list[tuple[str, Line]] = field(default_factory=list)
    plugins: list[tuple[str, Line]] = field(default_factory=list)
    plugin_absent: list[Line] = field(default_factory=list)
    plugin_load_failed: list[Line] = field(default_factory=list)
    """A NET plugin found but not loaded: a missing symbol or symbol version (dlerror)."""
    arch_missing: list[Line] = field(default_factory=list)
    """No kernel for this GPU in the build: 'named symbol not found', 'no kernel image',
    PyTorch's 'CUDA capability sm_XX is not compatible'."""
    tests_nccl: list[tuple[tuple[int, int], Line]] = field(default_factory=list)
    """nccl-tests' 'NCCL Tests compiled with NCCL M.N' (its NCCL_MAJOR/NCCL_MINOR at build time;
    src/nccl1_compat.h defines 1.0 for every NCCL 1.x, which had no version macros)."""
    reverse_path: list[tuple[int, int, Line]] = field(default_factory=list)
    """Topology links one way only (graph/paths.cc 'Failed to find reverse path from remNode
    T/ID ... to node T/ID'): the two nodes' types (topo.h: 0 GPU, 1 PCI, 2 NVS, 3 CPU, 4 NIC,
    5 NET)."""
    topo_file_errors: list[Line] = field(default_factory=list)
    """NCCL could not use an injected topology or graph XML (NCCL_TOPO_FILE/GRAPH_FILE)."""
    ofi_errors: list[Line] = field(default_factory=list)
    net_not_found: list[tuple[str, Line]] = field(default_factory=list)
    """(network, line): NCCL_NET names a network no loaded plugin provides (init.cc/net.cc)."""
    efa_errors: list[tuple[str, Line]] = field(default_factory=list)
    """('unreachable'|'unresponsive'|'peer_gone', line): libfabric EFA provider errors
    (prov/efa/src/efa_errno.h), as its own help text groups them (efa_strerror.c)."""
    gid_query_failed: list[Line] = field(default_factory=list)
    """NET/IB could not read a RoCE GID's type from sysfs (ncclIbRoceGetVersionNum)."""
    proxy_connect_failed: list[Line] = field(default_factory=list)
    """The proxy thread's Connect of a network connection failed (proxy.cc: 'Failed to
    execute operation Connect', 'Error encountered progressing operation=Connect')."""
    roce_gid_rows: list[Line] = field(default_factory=list)
    """Rows of a pasted `show_gids` table that list RoCE v1/v2 GIDs: the host is RoCE."""
    nccl_symbol_missing: list[Line] = field(default_factory=list)
    """'undefined symbol: nccl...': the loaded libnccl is older than what linked against it."""
    ib_devices: dict[str, tuple[IbDevice, Line]] = field(default_factory=dict)
    ib_using: list[Line] = field(default_factory=list)
    ib_by_line: list[tuple[dict[str, str], Line]] = field(default_factory=list)
    """Each 'NET/IB : Using' line's NICs (name -> link layer): per host, for comparing."""
    ib_missing: list[Line] = field(default_factory=list)
    ib_open_failed: list[Line] = field(default_factory=list)
    verbs_missing: list[Line] = field(default_factory=list)
    verbs_provider_missing: list[Line] = field(default_factory=list)
    socket_ifaces: dict[str, tuple[str, Line]] = field(default_factory=dict)
    bootstrap_ifaces: dict[str, tuple[str, Line]] = field(default_factory=dict)
    gdr_disabled: list[tuple[int | None, int | None, Line]] = field(default_factory=list)
    """(distance, level, line): distance None when no reason was printed."""
    gdr_enabled: list[Line] = field(default_factory=list)
    dmabuf: list[Line] = field(default_factory=list)
    pg_not_destroyed: list[Line] = field(default_factory=list)
    """PyTorch's exit warning that the process group was not destroyed (harmless)."""
    dmabuf_failed: list[Line] = field(default_factory=list)
    ring_gdr: list[tuple[int, Line]] = field(default_factory=list)
    connections: list[Connection] = field(default_factory=list)
    coll_channels: list[tuple[int, Line]] = field(default_factory=list)
    ring_channels: int | None = None
    graphs: list[Graph] = field(default_factory=list)
    gpu_net_paths: list[tuple[str, int, str, Line]] = field(default_factory=list)
    nic_speed_GBps: dict[str, float] = field(default_factory=dict)
    nic_distances: list[tuple[int, str, Line]] = field(default_factory=list)
    nranks: set[int] = field(default_factory=set)
    nnodes: int | None = None
    ranks: dict[int, dict[str, object]] = field(default_factory=dict)
    warnings: list[Line] = field(default_factory=list)
    """Every WARN/ERROR record."""
    completions: list[tuple[int, int | None, Line]] = field(default_factory=list)
    """(IB work-completion status, vendor error, line)."""
    async_events: list[tuple[str, Line]] = field(default_factory=list)
    modify_qp: list[tuple[str, Line]] = field(default_factory=list)
    """(errno name, line) of failed QP state transitions."""
    qp_gids: list[tuple[int, bool, Line]] = field(default_factory=list)
    """(GID index, link-local, line) of the QPs NET/IB set up ('... qpn N mtu M ... GID 3
    (80FE/...)' INFO lines, NCCL >= 2.19, RoCE only from 2.29: the GID's first 64 bits in hex,
    byte-swapped)."""
    qp_mtus: list[tuple[int, Line]] = field(default_factory=list)
    """(IB MTU enum, line) of the QPs NET/IB set up ('... qpn N mtu M ...', NCCL >= 2.19):
    1-5 for 256-4096 bytes (ibv_mtu)."""
    verbs_nomem: list[Line] = field(default_factory=list)
    reg_mr_failed: list[Line] = field(default_factory=list)
    """'Call to ibv_reg_mr failed' without the errno (ibvwrap.cc before it printed one)."""
    iommu_faults: list[Line] = field(default_factory=list)
    """The kernel's IOMMU refusing a device's DMA (AMD-Vi IO_PAGE_FAULT, Intel DMAR fault)."""
    nic_down: list[Line] = field(default_factory=list)
    """The kernel's mlx5 driver reporting a port's link down or a cable/module error."""
    hca_mix: list[Line] = field(default_factory=list)
    access_violation: list[Line] = field(default_factory=list)
    cuda_failures: list[tuple[int | None, str, str, Line]] = field(default_factory=list)
    """(CUDA error number, message, NCCL source file or '', line)."""
    cuda_unhandled: list[Line] = field(default_factory=list)
    p2p_errors: list[Line] = field(default_factory=list)
    p2p_nvlink_disabled: list[Line] = field(default_factory=list)
    p2p_info_disabled: list[Line] = field(default_factory=list)
    shm_space: list[Line] = field(default_factory=list)
    shm_other: list[Line] = field(default_factory=list)
    iface_errors: list[tuple[str, Line]] = field(default_factory=list)
    """('none'|'family'|'create'|'subnet', line)."""
    socket_errors: list[tuple[str, Line]] = field(default_factory=list)
    """('refused'|'timeout'|'noroute'|'abort'|'closed'|'wrongtype', line)."""
    store_errors: list[Line] = field(default_factory=list)
    system_errors: list[Line] = field(default_factory=list)
    remote_errors: list[Line] = field(default_factory=list)
    killed: list[Line] = field(default_factory=list)
    """A launcher reporting a rank killed by SIGKILL (torchrun 'exitcode: -9', DeepSpeed
    'exits with return code = -9', 'Signal 9 (SIGKILL) received')."""
    nccl_frames: int = 0
    """Backtrace or library lines naming NCCL (`ncclGroupEnd()`, `libnccl.so.2`)."""
    bus_errors: list[Line] = field(default_factory=list)
    """SIGBUS ('Bus error'): in NCCL, a /dev/shm segment the container cannot back."""
    crashed: list[tuple[str, Line]] = field(default_factory=list)
    """(signal name, line): a launcher reporting a rank that died on a signal other than
    SIGKILL (torchrun 'Signal 11 (SIGSEGV) received', 'exitcode : -11')."""
    internal_errors: list[Line] = field(default_factory=list)
    duplicate_gpu: list[Line] = field(default_factory=list)
    size_mismatch: list[Line] = field(default_factory=list)
    driver_old: list[Line] = field(default_factory=list)
    xids: list[tuple[int, Line]] = field(default_factory=list)
    """(Xid number, line) from the kernel log; 79 also for 'GPU has fallen off the bus' and an
    nvidia-smi that cannot reach a GPU."""
    driver_unusable: list[Line] = field(default_factory=list)
    """No usable driver: NVML's 'Driver/library version mismatch', no libcuda, no driver."""
    port_in_use: list[Line] = field(default_factory=list)
    """The rendezvous could not listen: its port is taken ('Address already in use')."""
    net_count_mismatch: list[tuple[int, int, Line]] = field(default_factory=list)
    """(min, max, line): NCCL's 'Detected mixed local Net device counts across ranks'."""
    fabric_not_ready: list[Line] = field(default_factory=list)
    fm_service: list[Line] = field(default_factory=list)
    """`systemctl status nvidia-fabricmanager` headers, for the 'Active:' line after them."""
    fm_down: list[Line] = field(default_factory=list)
    """Fabric Manager not running: its unit failed/inactive, or its driver-version mismatch."""
    pci_sysfs: list[Line] = field(default_factory=list)
    """NCCL could not resolve a GPU/NIC's PCI path under /sys (topology detection)."""
    nvls_errors: list[Line] = field(default_factory=list)
    timeouts: list[Timeout] = field(default_factory=list)
    watchdog_work: list[tuple[int | None, int, int, int, Line]] = field(default_factory=list)
    """(rank, failing work, last enqueued, last completed, line)."""
    watchdog_other: list[Line] = field(default_factory=list)
    desync: list[Line] = field(default_factory=list)
    test_failures: list[tuple[str, Line]] = field(default_factory=list)
    wrong_results: list[Line] = field(default_factory=list)
    device_names: list[tuple[str, Line]] = field(default_factory=list)
    test_ranks: list[tuple[int, int]] = field(default_factory=list)
    """(rank, pid) of nccl-tests' '# Rank N Group G Pid P on HOST device D' header lines."""
    test_runs: list[tuple[Line, int]] = field(default_factory=list)
    """nccl-tests' run header ('# nThread N nGpus G minBytes ...') and how many results
    (table rows, test failures) the log had printed before it."""
    table_header: list[Line] = field(default_factory=list)
    table_rows: int = 0
    one_rank_rows: list[tuple[int, Line]] = field(default_factory=list)
    """(size, line) of result rows, with or without a header, whose out-of-place busbw is
    0.00 while algbw is not: a reduction over one rank (nccl-tests' busbw factor
    2(n-1)/n or (n-1)/n is 0 at n = 1)."""
    other_rows: int = 0
    """Result rows with a nonzero busbw."""

    # --- what the evidence says --------------------------------------------------------------

    @property
    def net_connections(self) -> list[Connection]:
        return [c for c in self.connections if c.transport == "NET"]

    @property
    def single_node(self) -> bool:
        if self.nnodes is not None:
            return self.nnodes == 1
        if self.nranks and max(self.nranks) == 1:
            return True  # a one-rank communicator moves nothing between nodes
        ranks = sorted(r for r, _ in self.test_ranks)
        if (
            ranks
            and len({pid for _, pid in self.test_ranks}) == 1
            and ranks == [*range(len(ranks))]
        ):
            return True  # nccl-tests lists every rank in one process: one node
        return len(self.hosts) == 1 and bool(self.connections) and not self.net_connections

    @property
    def concurrent_test_runs(self) -> list[Line]:
        """The largest group of nccl-tests run headers printed with no result between them:
        processes that each started a run as its main process. With MPI only MPI rank 0
        prints the header (src/common.cu, `PRINT` is `if (is_main_thread) printf`); without
        it every process is rank 0 of its own run and prints one. Runs one after the other
        print results between their headers."""
        groups = [[ln for ln, _ in g] for _, g in groupby(self.test_runs, key=itemgetter(1))]
        best = max(groups, key=len, default=[])
        return best if len(best) > 1 else []

    @property
    def multi_node(self) -> bool:
        """The log shows more than one node (nNodes, NET connections, or several hosts)."""
        if self.nnodes is not None:
            return self.nnodes > 1
        return bool(self.net_connections) or len(self.hosts) > 1

    @property
    def net_transport(self) -> str | None:
        """'IB', 'RoCE', 'Socket', 'EFA' or a plugin's name; None when unseen or on one node."""
        names = Counter(c.net for c in self.net_connections if c.net)
        name = names.most_common(1)[0][0] if names else None
        if name is None and self.single_node:
            return None
        if name is None and self.networks:
            name = Counter(n for n, _ in self.networks).most_common(1)[0][0]
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
            links = {d.link for d, _ in self.ib_devices.values()}
            return "RoCE" if links == {"RoCE"} else "IB"
        return name

    @property
    def gdr(self) -> bool | None:
        net = [c for c in self.net_connections if c.net and "socket" not in c.net.lower()]
        if net:
            return all(c.gdr for c in net)
        if self.gdr_disabled:
            return False
        if self.ring_gdr:
            return all(g == 1 for g, _ in self.ring_gdr)
        if self.gdr_enabled:
            return True
        return None

    @property
    def intra_transports(self) -> set[str]:
        return {c.transport for c in self.connections if c.transport != "NET"}

    @property
    def world_size(self) -> int | None:
        return max(self.nranks) if self.nranks else None

    def env_values(self, name: str) -> set[str]:
        """Values NCCL echoed for `name`, else those set on a command line or export."""
        echoed = {v for v, _ in self.env.get(name, [])}
        return echoed or {v for v, _ in self.env_cmd.get(name, [])}

    def env_lines(self, name: str) -> list[Line]:
        return [ln for _, ln in self.env.get(name, [])] or [
            ln for _, ln in self.env_cmd.get(name, [])
        ]

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


@dataclass
class _Seg:
    """One NCCL record (or a line without a marker): its text and where it came from."""

    text: str
    line: Line
    level: str | None
    src: str | None


Handler = Callable[["_Parser", "re.Match[str] | None", _Seg], None]


@dataclass(frozen=True)
class Pattern:
    """One parser rule: run `handler` when `key` is in the text (and `regex` matches)."""

    key: str
    handler: Handler
    regex: re.Pattern[str] | None = None
    marked_only: bool = False
    """Only in NCCL records (after an `NCCL INFO/WARN` marker)."""


#: PyTorch's DistBackendError ends with NCCL's last WARN message, without NCCL's marker, on the
#: line after 'Last error:' (ncclGetLastError, NCCL >= 2.13; torch/csrc/distributed/c10d/
#: NCCLUtils.hpp getNcclErrorDetailStr): that line is read as the WARN record it is
_LAST_ERROR = "Last error:"

#: How much of the line before an unmatched one is read with it as one wrapped message.
WRAP_TAIL_CHARS = 160


def _matches(pat: Pattern, text: str) -> bool:
    return pat.key in text and (pat.regex is None or pat.regex.search(text) is not None)


class _Parser:
    def __init__(self, source: str) -> None:
        self.log = NcclLog(source=source)
        self._last_error = False
        """The previous line was PyTorch's 'Last error:'."""
        self.previous = ""
        """The previous non-blank line (a pasted message wrapped onto the next line)."""

    # --- driving ------------------------------------------------------------------------------

    def feed(self, number: int, raw: str) -> None:
        log = self.log
        log.lines += 1
        text = raw.rstrip("\r\n")
        if not text.strip():
            return
        segments = self._split(number, text)
        quoted = self._quoted_warn(segments, text)
        used = False
        for seg in segments:
            if seg is quoted:
                log.warnings.append(seg.line)
                used = True
            elif seg.level is not None:
                log.records += 1
                if seg.line.host:
                    log.hosts.add(seg.line.host)
                if seg.level in ("WARN", "ERROR", "ABORT"):
                    log.warnings.append(seg.line)
                    used = True
            hit = self._match(seg)
            if hit:
                used = True
            elif (
                seg.level is not None
                and seg.level != "TRACE"
                and seg.text.strip()
                and not _ignorable(seg.text)
            ):
                log.not_understood += 1
                if len(log.examples) < 5:
                    log.examples.append(seg.line)
        if not used and len(segments) == 1 and segments[0].level is None and self.previous:
            used = self._match_wrapped(segments[0])
        if used:
            log.matched += 1
        self.previous = text
        self._count_tests(number, text)

    def _match(self, seg: _Seg, parts: tuple[str, ...] = ()) -> bool:
        """Run every pattern whose key is in the segment, except those that match one of
        `parts` alone; whether any matched."""
        hit = False
        for pat in PATTERNS:
            if pat.key not in seg.text or (pat.marked_only and seg.level is None):
                continue
            m = None
            if pat.regex is not None:
                m = pat.regex.search(seg.text)
                if m is None:
                    continue
            if any(_matches(pat, part) for part in parts):
                continue
            pat.handler(self, m, seg)
            hit = True
        return hit

    def _match_wrapped(self, seg: _Seg) -> bool:
        """A line without a marker that nothing matched, read after the tail of the line
        before it: a message a terminal or a reporter wrapped ('... segment ... No space' /
        'left on device'; XLA's 'Last NCCL warning(error) log entry' as pasted in
        AI-Hypercomputer/xpk#492). The current line is the one quoted."""
        tail = _TOOL_PREFIX.sub("", self.previous.strip(), count=1).strip()[-WRAP_TAIL_CHARS:]
        head = _TOOL_PREFIX.sub("", seg.text.strip(), count=1).strip()
        if not tail or not head:
            return False
        # only what spans the break: a message whole on either line is that line's
        return self._match(_Seg(f"{tail} {head}", seg.line, None, seg.src), (tail, head))

    def _count_tests(self, number: int, text: str) -> None:
        """Where nccl-tests' runs start and what they printed: bookkeeping, not evidence by
        itself (a file of headers alone is not understood)."""
        log = self.log
        body = _TOOL_PREFIX.sub("", text, count=1)
        is_row = _TABLE_ROW.match(body) is not None
        if is_row:
            tokens = body.split()
            # size count type redop root time algbw busbw #wrong ... (13 tokens), or without
            # root (12: time algbw busbw at 4-6)
            at = {13: 6, 12: 5}.get(len(tokens))
            try:
                algbw, busbw = (float(tokens[at]), float(tokens[at + 1])) if at else (0, 0)
                size = int(tokens[0])
            except ValueError:
                algbw = busbw = 0.0
                size = 0
            if busbw == 0 and algbw > 0:
                log.one_rank_rows.append((size, Line(log.source, number, text)))
            elif busbw > 0:
                log.other_rows += 1
        # a result row after the table header, or after the run header when an excerpt
        # dropped the table header
        if is_row and (log.table_header or log.test_runs):
            log.table_rows += 1
        elif "nThread" in text and _TEST_RUN.search(text):
            done = log.table_rows + len(log.test_failures) + len(log.cuda_unhandled)
            log.test_runs.append((Line(log.source, number, text), done))

    def _quoted_warn(self, segments: list[_Seg], text: str) -> _Seg | None:
        """The segment that is NCCL's last WARN quoted by PyTorch after 'Last error:' (on the
        next line, or after it on the same one), marked as a WARN; None otherwise."""
        after = self._last_error
        self._last_error = False
        if len(segments) != 1 or segments[0].level is not None:
            return None
        seg = segments[0]
        i = seg.text.find(_LAST_ERROR)
        if i >= 0:
            rest = seg.text[i + len(_LAST_ERROR) :].strip()
            if not rest:
                self._last_error = True
                return None
            seg.text = rest
        elif not after:
            return None
        else:
            seg.text = _TOOL_PREFIX.sub("", seg.text.strip(), count=1).strip()
        seg.level = "WARN"
        return seg

    def _split(self, number: int, text: str) -> list[_Seg]:
        """The NCCL records in one physical line (found by their markers, scanning forward
        with str.find so a long line costs one pass), or the whole line when it has none."""
        log = self.log
        marks: list[tuple[int, int, str]] = []  # (marker start, message start, level)
        start = 0
        while True:
            i = text.find("NCCL ", start)
            if i < 0:
                break
            for level in _LEVELS:
                if text.startswith(level, i + 5):
                    end = i + 5 + len(level)
                    if end == len(text) or not text[end].isalnum():
                        marks.append((i, end, level))
                    break
            start = i + 5
        if not marks:
            return [_Seg(text, Line(log.source, number, text), None, None)]
        segs: list[_Seg] = []
        head0 = text[: marks[0][0]]
        m0 = _PREFIX_TAIL.search(head0[-400:])
        before = head0[: len(head0) - (len(m0.group(0)) if m0 else 0)]
        if before.strip():
            # what precedes the first marker is a record of its own: a quoted message with
            # "... from NCCL INFO" after it, or one rank's line cut by another rank's record
            segs.append(_Seg(before.strip(), Line(log.source, number, text), None, None))
        for k, (i, end, level) in enumerate(marks):
            stop = marks[k + 1][0] if k + 1 < len(marks) else len(text)
            head = text[max(0, i - 400) : i]
            m = _PREFIX_TAIL.search(head)
            host = m.group("host") if m else None
            src = m.group("src") if m else None
            if host and _SOURCE_FILE.search(host):
                # 'proxy.cc:1491 NCCL WARN' after another rank's record: a source location
                # (NCCL >= 2.12 prints one before WARN), not 'host:pid'
                host = None
            message = text[end:stop].strip()
            segs.append(_Seg(message, Line(log.source, number, text, host), level, src))
        return segs


def _ignorable(text: str) -> bool:
    """INFO messages known and deliberately unused."""
    t = text.strip()
    return t.startswith(_UNUSED) or bool(re.match(r"^[\w/.]+\.(?:cc|h|cu):\d+ -> \d+", t))


_UNUSED = (
    "Cuda Host Alloc",
    "Cuda Alloc",
    "Mem Alloc",
    "Ib Alloc",
    "malloc Size",
    "cudaDriverVersion",
    "threadThresholds",
    "Setting affinity",
    "P2P Chunksize",
    "NVLS multicast support",
    "PROFILER/Plugin",
    "TUNER/Plugin",
    "ENV/Plugin",
    "RAS ",
    "Bootstrap timings",
    "Init timings",
    "Comm config",
    "CC Off",
    "CC On",
    "[Proxy Service",
    "Check P2P Type",
    "Connected all",
    "Using non-device net plugin",
    "Assigned NET plugin",
    "Assigned GIN plugin",
    "Initialized NET plugin",
    "Topology detection",
    "KV Convert",
    "Launch mode",
    "Allocated",
    "MNNVL",
    "NVLS comm",
    "Trees",
    "comm 0x",
    "ncclCommInitRank",
    "ncclCommInitRankConfig",
    "init.cc",
    "group.cc",
    "proxy.cc",
    "transport",
    "misc/",
    "include/",
    "bootstrap.cc",
    "enqueue.cc",
    "=====",
    "CPU/",
    "NET/",
    "NIC/",
    "PCI",
    "+ ",
    "Dev ",
    "Destroy",
    "AllReduce",
    "Broadcast",
    "AllGather",
    "ReduceScatter",
    "Reduce:",
    "Send:",
    "Recv:",
    "New proxy",
    "Connection to proxy",
    "resp.opId",
    "proxyProgress",
    "Received and initiated",
    "ncclPollProxyResponse",
    "Using ",
    "UDS",
    "Channel ",
    "rank ",
    "Rank ",
    "Could not find real path",
    "Pattern ",
    " : NET/",
    "Plugin ",
    "P2P plugin",
    "Tuning",
    "Tuner",
    "Abort",
    "DMA-BUF",
    "Created ",
    "Attribute",
    "cudaDev",
    "nvmlDev",
    "[Service thread]",
    "Socket progress",
    "NCCL_",
)


# --- handlers -----------------------------------------------------------------------------------


def _h_version(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    if _PROSE_AFTER.match(s.text, m.end()):
        return  # 'using NCCL version 2.18.5 as opposed to ...': a reporter's words, not a run
    p.log.versions.setdefault(m.group(1), []).append(s.line)


#: What follows a version in a sentence: NCCL (init.cc) and PyTorch end the line after it (or,
#: joined, go on with the error's name: '..., NCCL version 2.7.8 ncclSystemError: ...')
_PROSE_AFTER = re.compile(r"(?:\+\S{0,40})?\s{1,4}(?!nccl)[a-z]{2,}")


def _h_version_wrapped(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    """'NCCL version X' wrapped after 'NCCL' (PyTorch's '..., NCCL version 2.14.3' pasted
    into a narrow window): the version starts the next line."""
    assert m is not None
    if p.previous.rstrip().endswith("NCCL"):
        p.log.versions.setdefault(m.group(1), []).append(s.line)


def _h_tests_nccl(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    p.log.tests_nccl.append(((int(m.group(1)), int(m.group(2))), s.line))


def _h_reverse_path(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    p.log.reverse_path.append((int(m.group(1)), int(m.group(2)), s.line))


def _h_env(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    for name, value in _ENV_ECHO.findall(s.text):
        p.log.env.setdefault(name, []).append((value.rstrip(".,"), s.line))


def _h_env_cmd(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    """NCCL_X=V where a shell would put it in the environment: after `export`, `-x`, `-e`,
    `--env`, `env`, or in the run of assignments that starts a command (a trailing
    `cmd ... NCCL_X=1` is an argument, not the environment: NVIDIA/nccl-tests#117)."""
    if s.level is not None or " set " in s.text:
        return
    tokens = s.text.replace('"', " ").replace("'", " ").split()
    leading = True
    for i, tok in enumerate(tokens):
        prev = tokens[i - 1] if i else ""
        assign = (
            "=" in tok and tok.split("=", 1)[0].replace("_", "").isalnum() and tok[:1].isalpha()
        )
        if (
            tok.startswith("NCCL_")
            and assign
            and (leading or prev in ("export", "-x", "-e", "--env", "env"))
        ):
            name, value = tok.split("=", 1)
            if value:
                p.log.env_cmd.setdefault(name, []).append((value.rstrip(".,;"), s.line))
            continue
        if tok.endswith(("$", "#")) or tok in ("export", "env"):
            leading = True  # a shell prompt or `export`: what follows may be assignments
        elif not assign:
            leading = False


def _h_network(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    p.log.networks.append((m.group(1).strip(), s.line))


def _h_ib_using(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    found = _IB_DEV.findall(s.text)
    if not found:
        return
    p.log.ib_using.append(s.line)
    p.log.ib_by_line.append(({name: link for _, name, _, link, _ in found}, s.line))
    for idx, name, port, link, sharp in found:
        p.log.ib_devices[name] = (IbDevice(int(idx), name, int(port), link, bool(sharp)), s.line)


def _h_ib_missing(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.ib_missing.append(s.line)


def _h_socket_using(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    for name, addr in _IFACE.findall(m.group(1)):
        p.log.socket_ifaces[name] = (addr, s.line)


def _h_bootstrap(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    for name, addr in _IFACE.findall(m.group(1)):
        p.log.bootstrap_ifaces[name] = (addr, s.line)


def _h_plugin(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    p.log.plugins.append((m.group(1).strip(), s.line))


def _h_plugin_absent(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    if _PLUGIN_LOAD_FAILED.search(s.text):
        _once(p.log.plugin_load_failed, s.line)  # found, but it would not load
    else:
        _once(p.log.plugin_absent, s.line)


def _once(lines: list[Line], line: Line) -> None:
    """Keep a line once, however many patterns match it."""
    if line not in lines:
        lines.append(line)


def _once_tagged(items: list[Any], item: tuple[Any, ...]) -> None:
    """`_once` for evidence kept with what was read from it: (..., line), one per line."""
    if not any(x[-1] is item[-1] for x in items):
        items.append(item)


def _h_arch_missing(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.arch_missing, s.line)


def _h_topo_file(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.topo_file_errors, s.line)


def _h_watchdog_ran(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    """'ran for N milliseconds before timing out' on a line of its own (a wrapped message)."""
    assert m is not None
    if p.log.timeouts and p.log.timeouts[-1].ran_ms is None:
        p.log.timeouts[-1].ran_ms = int(m.group(1))


def _h_watchdog_cont(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    """The WorkNCCL(...) line of a watchdog message wrapped after 'timeout:'."""
    if not p.log.timeouts or p.log.timeouts[-1].op is not None:
        return
    t = p.log.timeouts[-1]
    seq, op = _WD_SEQ.search(s.text), _WD_OP.search(s.text)
    numel, tout = _WD_NUMEL.search(s.text), _WD_TIMEOUT.search(s.text)
    t.seq = int(seq.group(1)) if seq else t.seq
    t.op = op.group(1) if op else t.op
    t.numel_in = int(numel.group(1)) if numel else t.numel_in
    if tout:
        t.timeout_ms, t.ran_ms = int(tout.group(1)), int(tout.group(2))
    else:
        limit = re.search(r"Timeout\(ms\)=(\d{1,12})", s.text)
        t.timeout_ms = int(limit.group(1)) if limit else t.timeout_ms


def _h_ofi_error(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.ofi_errors.append(s.line)


def _h_net_not_found(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    p.log.net_not_found.append((m.group(1).strip(), s.line))


def _h_efa(kind: str) -> Handler:
    def handler(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
        _once_tagged(p.log.efa_errors, (kind, s.line))

    return handler


def _h_gid_query(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.gid_query_failed, s.line)


def _h_proxy_connect(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.proxy_connect_failed, s.line)


def _h_gid_row(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.roce_gid_rows, s.line)


def _h_nccl_symbol(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.nccl_symbol_missing, s.line)


def _h_verbs_missing(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.verbs_missing.append(s.line)


def _h_verbs_provider(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.verbs_provider_missing.append(s.line)


def _h_ib_open(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.ib_open_failed.append(s.line)


def _h_gdr(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    if m.group(1) == "Disabled":
        dist = int(m.group(5)) if m.group(5) else None
        level = int(m.group(6)) if m.group(6) else None
        p.log.gdr_disabled.append((dist, level, s.line))
    else:
        p.log.gdr_enabled.append(s.line)


def _h_gdr_peermem(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    if "enable" in s.text:
        p.log.gdr_enabled.append(s.line)


def _h_pg_not_destroyed(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.pg_not_destroyed, s.line)


def _h_dmabuf(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.dmabuf.append(s.line)


def _h_dmabuf_failed(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.dmabuf_failed, s.line)


def _h_ring_gdr(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    p.log.ring_gdr.append((int(m.group(2)), s.line))


def _h_connection(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    via = m["via"]
    parts = via.split("/")
    transport = parts[0].strip().upper()
    if transport == "DIRECT":
        transport = "SHM" if "shared memory" in via else "P2P"
    net = None
    if transport == "NET" and len(parts) > 1:
        net = parts[1]
        # a record cut by another process's output ('NET/IBext/6/GDSetting up ...'): what
        # follows the device is not a flag NCCL prints, so the line says nothing of GDR
        if any(_cut_flag(f) for f in parts[3:]):
            return
    p.log.connections.append(
        Connection(
            src=int(m["src"]),
            dst=int(m["dst"]),
            transport=transport,
            detail="/".join(parts[1:]),
            line=s.line,
            channel=int(m["ch"]) if m["ch"] else None,
            net=net,
            gdr="GDRDMA" in via,
        )
    )


def _cut_flag(flag: str) -> bool:
    """A NET connection's flag that begins like one NCCL prints (GDRDMA, Shared) and then
    runs into other text."""
    f = flag.strip()
    for known in ("GDRDMA", "Shared"):
        if f == known or f.startswith(known + " "):
            return False
        if len(f) >= 2 and (known.startswith(f[:2])) and not f.startswith(known):
            return True
    return False


def _h_channels(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    p.log.coll_channels.append((int(m.group(1)), s.line))


def _h_ring(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    p.log.ring_channels = max(p.log.ring_channels or 0, int(m.group(2)))


def _h_comm(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    rank, nranks = int(m.group(1)), int(m.group(2))
    if 0 < nranks <= 1_000_000 and 0 <= rank < nranks:
        p.log.nranks.add(nranks)
        info = p.log.ranks.setdefault(rank, {})
        info["host"] = s.line.host
        if m.group(4):
            info["bus_id"] = m.group(4)


def _h_nodes(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    nranks, nnodes = int(m.group(1)), int(m.group(2))
    if 0 < nnodes <= nranks <= 1_000_000:
        p.log.nranks.add(nranks)
        p.log.nnodes = max(p.log.nnodes or 0, nnodes)


def _h_pattern(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    p.log.graphs.append(Graph(int(m.group(1)), int(m.group(3)), m.group(6), m.group(7), s.line))


def _h_gpu_paths(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    for net, _hops, _bw, kind in _PATH_NET.findall(m.group(2)):
        p.log.gpu_net_paths.append((m.group(1), int(net), kind, s.line))


def _h_nic_speed(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    speed = float(m.group(1))
    if 0 < speed < 10_000:
        p.log.nic_speed_GBps[f"NET/{m.group(2)}"] = speed


def _h_xml_speed(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    mbps = int(m.group(2))
    if 0 < mbps < 100_000_000:
        p.log.nic_speed_GBps[m.group(1)] = mbps / 8000.0


def _h_old_dist(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    p.log.nic_distances.append((int(m.group(1)), m.group(2), s.line))


def _h_completion(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    m2 = _COMPLETION.search(s.text) or _COMPLETION_SIMPLE.search(s.text)
    if m2 is None:
        return
    vendor = int(m2.group(2)) if m2.lastindex and m2.lastindex >= 2 and m2.group(2) else None
    p.log.completions.append((int(m2.group(1)), vendor, s.line))


def _h_ofi_completion(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.completions.append((-1, None, s.line))


def _h_async(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    text = s.text
    for key in ("async event", "async fatal event", "async error event"):
        i = text.find(key)
        if i >= 0:
            tail = text[i + len(key) :].lstrip(" :")
            p.log.async_events.append((tail[:120], s.line))
            return


def _h_gid_change(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    if not any(ln is s.line for _, ln in p.log.async_events):
        p.log.async_events.append(("GID table change", s.line))


def _h_modify_qp(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    words = m.group(2).strip().lower()
    num = (m.group(1) or "").strip()
    if num == "110" or "timed out" in words:
        kind = "ETIMEDOUT"
    elif num == "22" or "invalid argument" in words:
        kind = "EINVAL"
    elif num == "101" or "unreachable" in words:
        kind = "ENETUNREACH"
    elif num == "19" or "no such device" in words:
        kind = "ENODEV"
    else:
        kind = words[:40]
    p.log.modify_qp.append((kind, s.line))


def _h_qp_gid(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    prefix = int(m.group(2), 16).to_bytes(8, "little")
    link_local = prefix[0] == 0xFE and prefix[1] & 0xC0 == 0x80
    p.log.qp_gids.append((int(m.group(1)), link_local, s.line))


def _h_verbs_nomem(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    if "ibv_post_" in s.text:
        # posting a work request with ENOMEM means its queue is full, not a memory limit
        return
    if "dmabuf" in s.text:
        # GPU memory registered through DMA-BUF is not charged to RLIMIT_MEMLOCK (Linux
        # ib_umem_dmabuf_get pins nothing in the process; ib_umem_get's pinned_vm check is
        # what returns ENOMEM for host memory): its ENOMEM is the dmabuf_failed line
        return
    if any(k in s.text for k in ("ibv_", "reg_mr", "create_cq", "Libfabric error", "fi_mr_reg")):
        p.log.verbs_nomem.append(s.line)


def _h_create_cq(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.verbs_nomem, s.line)


def _h_hca_mix(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.hca_mix.append(s.line)


def _h_access_violation(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.access_violation.append(s.line)


def _h_cuda_failure(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    code = int(m.group(1)) if m.group(1) else None
    src = (s.src or "").split(":")[0]
    if not src:
        # a line number, or the placeholder NCCL's docs print (transport/p2p.cc:XXX)
        fm = re.search(r"([\w/]{1,80}\.(?:cc|cu|h)):(?:\d{1,6}|X{1,6})\b", s.line.text)
        src = fm.group(1) if fm else ""
    p.log.cuda_failures.append((code, m.group(2), src, s.line))


def _h_trace(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    """NCCL's error return chain ('transport/nvls.cc:158 -> 1', INFO, src/include/checks.h):
    its first frame after a WARN printed without a file (NCCL before ~2.12, or a paste without
    the prefix) is where that WARN's failure happened."""
    assert m is not None
    failures = p.log.cuda_failures
    if failures and not failures[-1][2] and failures[-1][3].number >= s.line.number - 3:
        code, msg, _, line = failures[-1]
        failures[-1] = (code, msg, m.group(1), line)


def _h_test_failure(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    p.log.test_failures.append((m.group(2), s.line))
    if m.group(1) == "CUDA":
        p.log.cuda_failures.append((None, m.group(2), "nccl-tests", s.line))


def _h_cuda_unhandled(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.cuda_unhandled.append(s.line)


def _h_p2p_error(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.p2p_errors.append(s.line)


def _h_p2p_nvlink(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.p2p_nvlink_disabled.append(s.line)


def _h_p2p_info(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    if "NVLINK" not in s.text:
        p.log.p2p_info_disabled.append(s.line)


def _h_shm_space(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.shm_space, s.line)


def _h_shm_create(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    text = s.text
    if "attaching" in text:
        p.log.shm_other.append(s.line)
    elif s.line not in p.log.shm_space:
        p.log.shm_space.append(s.line)


def _h_iface(kind: str) -> Handler:
    def handler(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
        p.log.iface_errors.append((kind, s.line))

    return handler


def _h_socket(kind: str) -> Handler:
    def handler(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
        if "UDS:" in s.text:
            # NCCL's Unix-domain sockets between local ranks (cuMem handle exchange): an
            # abstract name lives in one network namespace, so separate containers refuse
            # each other there; not the network (messages.py names it)
            return
        if not any(ln is s.line and k == kind for k, ln in p.log.socket_errors):
            p.log.socket_errors.append((kind, s.line))

    return handler


def _h_store(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.store_errors.append(s.line)


def _h_system_error(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.system_errors.append(s.line)


def _h_remote(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.remote_errors, s.line)


def _h_killed(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.killed, s.line)


_SIGNALS = {"4": "SIGILL", "6": "SIGABRT", "7": "SIGBUS", "8": "SIGFPE", "11": "SIGSEGV"}


def _h_crashed(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    sig = m.group(1)
    name = sig if sig.startswith("SIG") else _SIGNALS.get(sig, "")
    if name:
        _once_tagged(p.log.crashed, (name, s.line))


def _h_nccl_frame(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.nccl_frames += 1


def _h_bus_error(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.bus_errors, s.line)


def _h_internal(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.internal_errors.append(s.line)


#: PyTorch's own collective checks under TORCH_DISTRIBUTED_DEBUG=DETAIL (ProcessGroupWrapper.cpp):
#: the op sequence across ranks, and the shapes before each collective.
TORCH_COLLECTIVE_CHECKS = (
    "Detected mismatch between collectives on ranks",
    "Error when verifying shape tensors for collective",
)


def _h_size_mismatch(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.size_mismatch.append(s.line)


def _h_duplicate(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.duplicate_gpu.append(s.line)


def _h_driver(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.driver_old, s.line)


def _h_xid(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    xid = int(m.group(1)) if m is not None and m.lastindex else 79
    _once_tagged(p.log.xids, (xid, s.line))


def _h_driver_unusable(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.driver_unusable, s.line)


def _h_port_in_use(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.port_in_use, s.line)


def _h_net_count(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    p.log.net_count_mismatch.append((int(m.group(1)), int(m.group(2)), s.line))


def _nccl_version(code: int) -> str:
    """NCCL_VERSION_CODE as text: major*10000+minor*100+patch from 2.9, major*1000+... before
    (src/nccl.h.in)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def _h_version_mismatch(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    """'Mismatched NCCL version detected : rank A version X rank B version Y' (init.cc, 2.2x):
    NCCL's own comparison of the ranks' versions."""
    assert m is not None
    for code in (m.group(1), m.group(2)):
        p.log.versions.setdefault(_nccl_version(int(code)), []).append(s.line)


def _h_torch_cuda(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    """PyTorch's 'CUDA error: <message>' (c10/cuda), the CUDA failure without NCCL's WARN."""
    assert m is not None
    _once_tagged(p.log.cuda_failures, (None, m.group(1).strip(), "torch", s.line))


def _h_torch_oom(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    """PyTorch's caching allocator out of GPU memory (torch.cuda.OutOfMemoryError)."""
    _once_tagged(p.log.cuda_failures, (2, "out of memory", "torch", s.line))


def _h_qp_mtu(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    p.log.qp_mtus.append((int(m.group(1)), s.line))


def _h_iommu(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.iommu_faults, s.line)


def _h_nic_down(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.nic_down, s.line)


def _h_reg_mr(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.reg_mr_failed, s.line)


def _h_fabric(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.fabric_not_ready, s.line)


def _h_fm_unit(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.fm_service, s.line)


def _h_fm_active(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    if p.log.fm_service:
        _once(p.log.fm_down, s.line)


def _h_fm_down(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.fm_down, s.line)


def _h_pci_sysfs(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.pci_sysfs, s.line)


def _h_nvls(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.nvls_errors.append(s.line)


def _h_watchdog(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    text = s.text
    i = text.find("Watchdog caught")
    before, after = text[: i + 1], text[i:]
    ranks = _WD_RANK.findall(before)
    seq = _WD_SEQ.search(after)
    op = _WD_OP.search(after)
    numel = _WD_NUMEL.search(after)
    tout = _WD_TIMEOUT.search(after)
    p.log.timeouts.append(
        Timeout(
            rank=int(ranks[-1]) if ranks else None,
            seq=int(seq.group(1)) if seq else None,
            op=op.group(1) if op else None,
            numel_in=int(numel.group(1)) if numel else None,
            timeout_ms=int(tout.group(1)) if tout else None,
            ran_ms=int(tout.group(2)) if tout else None,
            line=s.line,
        )
    )


def _h_watchdog_work(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    ranks = _WD_RANK.findall(s.text[: m.start() + 1])
    p.log.watchdog_work.append(
        (
            int(ranks[-1]) if ranks else None,
            int(m.group(1)),
            int(m.group(2)),
            int(m.group(3)),
            s.line,
        )
    )


def _h_watchdog_other(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    _once(p.log.watchdog_other, s.line)


def _h_desync(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.desync.append(s.line)


def _h_oob(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    if m.group(2) == "FAILED" or int(m.group(1)) > 0:
        p.log.wrong_results.append(s.line)


def _h_device_rank(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    p.log.hosts.add(m.group(3))
    p.log.device_names.append((m.group(4).strip(), s.line))
    p.log.test_ranks.append((int(m.group(1)), int(m.group(2))))


def _h_gpu_name(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    assert m is not None
    p.log.device_names.append((m.group(1).strip(), s.line))


def _h_table_header(p: _Parser, m: re.Match[str] | None, s: _Seg) -> None:
    p.log.table_header.append(s.line)


def _c(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


#: The parser's rule table, in the order handlers run (all matching handlers run).
PATTERNS: tuple[Pattern, ...] = (
    Pattern("NCCL version", _h_version, _VERSION),
    Pattern("compiled with NCCL", _h_tests_nccl, _c(r"compiled with NCCL (\d{1,2})\.(\d{1,3})")),
    Pattern("version", _h_version_wrapped, _c(r"^\s*version (\d{1,2}\.\d{1,3}\.\d{1,3})\b")),
    Pattern(
        "reverse path",
        _h_reverse_path,
        _c(r"Failed to find reverse path from remNode (\d) ?/ ?\w{1,20} .{0,40}to node (\d) ?/"),
    ),
    Pattern(
        " to ", _h_env, _c(r"NCCL_[A-Z0-9_]{2,64} set (?:by environment )?to "), marked_only=True
    ),
    Pattern("NCCL_", _h_env_cmd),
    Pattern("Using network", _h_network, _c(r"Using (?:internal )?[Nn]etwork ([\w .\-]{1,40})")),
    Pattern("/IB", _h_ib_using, _c(r"NET/IB ?: ?Using")),
    Pattern("No device found", _h_ib_missing, _c(r"NET/IB ?: ?No device found")),
    Pattern("returned 0 devices", _h_ib_missing),
    Pattern("NET/Socket", _h_socket_using, _c(r"NET/Socket ?: ?Using (.{1,4000})$")),
    Pattern("NET/FastSocket", _h_socket_using, _c(r"NET/FastSocket ?: ?Using (.{1,4000})$")),
    Pattern("Using interface", _h_socket_using, _c(r"NET : Using interface (.{1,200})$")),
    Pattern("Bootstrap", _h_bootstrap, _c(r"Bootstrap ?: ?(?:Using )?(.{1,4000})$")),
    Pattern("Loaded net plugin", _h_plugin, _c(r"Loaded net plugin (.{1,120})$")),
    Pattern("Plugin Path", _h_plugin, _c(r"Plugin Path : (\S{1,400})")),
    Pattern("P2P plugin", _h_plugin, _c(r"P2P plugin (\S{1,64})")),
    Pattern(
        "NET/OFI",
        _h_plugin,
        _c(
            r"NET/OFI (Initializing aws-ofi-nccl \S{1,40}|Using aws-ofi-nccl \S{1,40}"
            r"|Selected [Pp]rovider is \S{1,40})"
        ),
    ),
    # NET/Plugin's dlopen result for any plugin name (net.cc 2.12-2.18 'Plugin load returned
    # %d : %s when loading %s', plugin/net.cc 2.19+ 'Plugin load (%s) returned %d : %s'):
    # the tuner and profiler plugins print the same words and are left out
    Pattern(
        "Plugin load",
        _h_plugin_absent,
        _c(r"NET/Plugin ?: ?Plugin load (?:\([^)]{1,200}\) )?returned \d{1,4} ?:"),
    ),
    Pattern(
        "libnccl-net.so",
        _h_plugin_absent,
        _c(
            r"(?:No plugin found|Could not find:? libnccl-net|cannot open shared object"
            r"|Unable to load libnccl-net)"
        ),
    ),
    Pattern("optimal provider", _h_ofi_error),
    Pattern("fi_getinfo", _h_ofi_error, _c(r"fi_getinfo\(?\)?(?: call)? failed|output empty list")),
    Pattern("eligible providers", _h_ofi_error),
    Pattern("open a fabric provider", _h_ofi_error),
    Pattern("requires at least libfabric", _h_ofi_error),
    # aws-ofi-nccl cannot register GPU buffers with the provider (register_mr_buffers)
    Pattern("NET/OFI Unable to register memory", _h_ofi_error),
    # aws-ofi-nccl giving up on every protocol / provider it tried (src/nccl_ofi_net.cpp,
    # v1.7-v1.21: 'Unable to find a protocol that worked', 'Only EFA provider is supported',
    # 'No viable endpoint found for TCP provider')
    Pattern("protocol that worked", _h_ofi_error),
    Pattern("Only EFA provider is supported", _h_ofi_error),
    Pattern("No viable endpoint found", _h_ofi_error),
    Pattern(
        "not found",
        _h_net_not_found,
        _c(r"Error: network (.{1,60}?) not found"),
    ),
    # RoCE: the GID type is read from /sys/class/infiniband/<dev>/ports/<p>/gid_attrs
    # (net_ib/connect.cc), unreadable in some containers
    Pattern("ncclIbRoceGetVersionNum", _h_gid_query),
    # the proxy thread setting up a network connection (src/proxy.cc) and failing: for NET/IB
    # that is QP creation, GID selection and the RTR/RTS transitions (net_ib/connect.cc)
    Pattern(
        "operation",
        _h_proxy_connect,
        _c(r"Failed to execute operation Connect\b|progressing operation=Connect\b"),
        marked_only=True,
    ),
    # a row of Mellanox's `show_gids` table (DEV PORT INDEX GID IPv4 VER DEV): a RoCE GID
    Pattern(
        "0000:",
        _h_gid_row,
        _c(r"^\s*[a-z][a-z0-9]*_?\d+\s+\d+\s+\d+\s+[0-9a-f]{4}(?::[0-9a-f]{4}){7}\s.*\bv[12]\b"),
    ),
    # libfabric's EFA provider (prov/efa/src/efa_errno.h): peers it never reached or that
    # never completed the handshake (its help text: security groups, subnets, a peer gone) ...
    Pattern("Unreachable remote", _h_efa("unreachable")),
    Pattern("handshake failed", _h_efa("unreachable"), _c(r"Unresponsive receiver \(reachable")),
    # aws-ofi-nccl cannot add the peer's endpoint to its address vector (fi_av_insert fails
    # in connect/accept, src/nccl_ofi_rdma.cpp and nccl_ofi_sendrecv.cpp): the EFA provider
    # cannot create an address handle for that peer, as when the security group does not
    # let EFA traffic to and from itself (aws/aws-ofi-nccl#663)
    Pattern("insert remote address into address vector", _h_efa("unreachable")),
    # ... and peers that answered before and stopped (a failing peer or its process gone)
    Pattern("previously", _h_efa("unresponsive"), _c(r"Unresponsive (?:remote|receiver) \(")),
    # ... and a receiver whose queue pair no longer exists (FI_EFA_REMOTE_ERROR_BAD_DEST_QPN):
    # the provider's own help text for it is "typically caused by a crashed peer"
    # (ofiwg/libfabric prov/efa/src/efa_strerror.c)
    Pattern("Invalid receiver queue pair number", _h_efa("peer_gone")),
    Pattern("Failure to post internal receive buffers", _h_create_cq),  # EFA's ENOMEM
    # any other libfabric EFA (prov/efa) call failing with ENOMEM (-12): the provider pins its
    # bounce buffers and queues, so an unraised memlock limit (Docker's default 64 KiB)
    # fails there first (EFA user guide: `--ulimit memlock=-1`; aws/aws-ofi-nccl#106)
    Pattern("prov/efa", _h_create_cq, _c(r"(?:-12\b|ENOMEM|Cannot allocate memory)")),
    # UCX's shared-memory transport (uct/sm/mm) cannot get its FIFO: /dev/shm is full or small
    Pattern("failed to allocate receive FIFO", _h_shm_space),
    Pattern("undefined symbol: nccl", _h_nccl_symbol),
    Pattern("libibverbs", _h_verbs_missing, _c(r"Failed to open libibverbs")),
    Pattern("userspace device-specific driver", _h_verbs_provider),
    Pattern("Unable to open device", _h_ib_open),
    Pattern("ibv_open_device failed", _h_ib_open),
    Pattern("GPU Direct RDMA", _h_gdr, _GDR),
    Pattern("GPU Direct RDMA (nvidia-peermem)", _h_gdr_peermem),
    Pattern("DMA-BUF is available", _h_dmabuf),
    # ProcessGroupNCCL's destructor (PyTorch 2.4+) when destroy_process_group() was not called
    Pattern("process group has NOT been destroyed", _h_pg_not_destroyed),
    Pattern("ibv_reg_dmabuf_mr failed", _h_dmabuf_failed),
    Pattern("use ring PXN", _h_ring_gdr, _RINGS_GDR),
    Pattern(" via ", _h_connection, _CONN),
    Pattern("coll channels", _h_channels, _CHANNELS),
    Pattern("Channel ", _h_ring, _RING),
    Pattern("comm 0x", _h_comm, _COMM),
    Pattern("nNodes", _h_nodes, _NODES),
    Pattern("Pattern ", _h_pattern, _PATTERN),
    Pattern("GPU/", _h_gpu_paths, _GPU_PATHS),
    Pattern("NET[", _h_nic_speed, _NIC_SPEED),
    Pattern("<net ", _h_xml_speed, _XML_NET_SPEED),
    Pattern("NIC distance", _h_old_dist, _OLD_DIST),
    Pattern("Got completion", _h_completion),
    Pattern(
        "completed with error", _h_ofi_completion, _c(r"Request \S{1,32} completed with error")
    ),
    Pattern("async", _h_async, _c(r"[Gg]ot async (?:error )?event|async fatal event")),
    Pattern("GID table change", _h_gid_change),
    Pattern("ibv_modify_qp failed", _h_modify_qp, _MODIFY_QP),
    Pattern("IbDev", _h_qp_gid, _QP_GID),
    # every QP's MTU, IB (LID) and RoCE (GID) alike: net_ib.cc 2.19-2.21, net_ib/connect.cc 2.22+
    Pattern(
        " mtu ", _h_qp_mtu, _c(r"IbDev \d{1,3} Port \d{1,3} (?:qpn|qp_num) \d{1,10} mtu (\d)\b")
    ),
    Pattern("Cannot allocate memory", _h_verbs_nomem),
    Pattern("ibv_create_cq failed", _h_create_cq),
    Pattern(
        "link_layer", _h_hca_mix, _c(r"different link_layer|Can't (?:merge|connect) net devices")
    ),
    Pattern(
        "incompatible",
        _h_hca_mix,
        _c(r"(?:connect|merge) incompatible devices|device is incompatible"),
    ),
    Pattern("local access violation", _h_access_violation),
    Pattern("Cuda failure", _h_cuda_failure, _CUDA_FAILURE),
    # PyTorch's allocator (c10/cuda/CUDACachingAllocator.cpp: 'CUDA out of memory. Tried to
    # allocate ...'): the model's memory on that rank, which the others then wait for
    Pattern("CUDA out of memory", _h_torch_oom, _c(r"CUDA out of memory\. Tried to allocate")),
    # ibvwrap.cc's IBV_PTR_CHECK before the errno was printed: registration refused
    Pattern("ibv_reg_mr failed", _h_reg_mr, _c(r"Call to ibv_reg_mr failed\s*$")),
    # the kernel's mlx5 driver (drivers/net/ethernet/mellanox/mlx5/core: en_main.c link
    # state, events.c 'Port module event[error]'): a NIC port that went down under the job
    Pattern(
        "mlx5",
        _h_nic_down,
        _c(r"mlx5_core \S{1,40}(?: \S{1,40})?:? Link down\b|Port module event\[error\]"),
    ),
    Pattern(" -> ", _h_trace, _c(r"^([\w/.]{1,120}\.(?:cc|cu|h)):\d{1,6} -> \d{1,4}\s*$")),
    Pattern(" failure ", _h_test_failure, _TEST_FAILURE),
    Pattern("unhandled cuda error", _h_cuda_unhandled),
    Pattern("ncclUnhandledCudaError", _h_cuda_unhandled),
    Pattern("peer access is not supported", _h_p2p_error),
    Pattern("failed to open CUDA IPC handle", _h_p2p_error),
    Pattern("failed to peer with device", _h_p2p_error),
    Pattern("failed to get CUDA IPC handle", _h_p2p_error),
    Pattern("cudaIpcGetMemHandle failed", _h_p2p_error),
    Pattern("P2P is disabled between NVLINK", _h_p2p_nvlink),
    Pattern("P2P is disabled between connected GPUs", _h_p2p_info),
    Pattern(
        "shared memory segment",
        _h_shm_create,
        _c(r"(?:Error while (?:creating|attaching to) shared memory segment)"),
    ),
    Pattern("failed to extend /dev/shm", _h_shm_space),
    Pattern("posix_fallocate failed", _h_shm_space),
    Pattern("shm_open failed", _h_shm_space),
    Pattern("Could not map /dev/shm", _h_shm_space),
    Pattern("Unable to allocate shared memory", _h_shm_space),
    # PyTorch's DataLoader when its workers' /dev/shm tensors cannot be backed
    # (torch/utils/data/_utils/signal_handling.py, torch/csrc/DataLoader.cpp)
    Pattern("insufficient shared memory", _h_shm_space),
    Pattern("out of shared memory", _h_shm_space, _c(r"workers? (?:are|is) out of shared memory")),
    Pattern("no socket interface found", _h_iface("none")),
    # bootstrap's own interface choice (NCCL >= 2.23, bootstrap.cc)
    Pattern("verify NCCL_OOB_NET_IFNAME", _h_iface("none")),
    Pattern("No usable listening interface", _h_iface("none")),
    Pattern("no interface found", _h_iface("none"), _c(r"NET/Socket ?: ?no interface found")),
    Pattern("no NCCL_SOCKET_IFNAME interface found", _h_iface("none")),
    Pattern("neither AF_INET", _h_iface("family")),
    Pattern("Socket creation failed", _h_iface("create")),
    Pattern("in the same subnet", _h_iface("subnet")),
    # PyTorch's ProcessGroupGloo when the hostname resolves to no local address
    Pattern("Unable to resolve hostname to a (local) address", _h_iface("loopback")),
    # Gloo's device for an address no local interface has (gloo/transport/tcp/device.cc)
    Pattern("Unable to find interface for", _h_iface("none")),
    # EADDRNOTAVAIL: binding or connecting from an address this host does not have (NCCL's
    # socket.cc connect/bind WARNs; c10d's 'failed to bind to [addr]:port (errno: 99 ...)'):
    # MASTER_ADDR / NCCL_COMM_ID naming another host, or an interface chosen on the wrong one
    Pattern("Cannot assign requested address", _h_iface("notlocal")),
    # Gloo could not connect every pair of ranks (gloo/rendezvous/context.cc connectFullMesh)
    Pattern("connectFullMesh failed", _h_socket("timeout")),
    # a Gloo collective that waited past its timeout (gloo/transport/tcp/unbound_buffer.cc)
    Pattern(
        "Timed out waiting",
        _h_watchdog_other,
        _c(r"Timed out waiting \d{1,12}ms for (?:recv|send) operation to complete"),
    ),
    # no GPU visible to the process (ProcessGroupNCCL's constructor, torch.cuda's lazy init)
    Pattern("only supported with GPUs, no GPUs found", _h_driver_unusable),
    Pattern("No CUDA GPUs are available", _h_driver_unusable),
    Pattern("Connection refused", _h_socket("refused")),
    Pattern(
        "timed out",
        _h_socket("timeout"),
        _c(
            r"(?:connect|recv|Connect to|poll)\b.{0,120}(?:Connection )?timed out"
            r"|Call to connect timeout"
        ),
    ),
    Pattern("No route to host", _h_socket("noroute")),
    Pattern("Network is unreachable", _h_socket("noroute"), _c(r"[Ss]ocket|[Cc]onnect to")),
    Pattern("Software caused connection abort", _h_socket("abort")),
    Pattern("Connection closed by remote peer", _h_socket("closed")),
    # Gloo's tcp pair (third_party/gloo/gloo/transport/tcp/pair.cc)
    Pattern("Connection closed by peer", _h_socket("closed")),
    # NCCL's connect retries exhausted (misc/socket.cc, 2.19+): refused and timed-out connects
    Pattern(
        "exceeded retries", _h_socket("refused"), _c(r"socket\w{0,20}Connect: exceeded retries")
    ),
    Pattern(
        "exceeded timeouts", _h_socket("timeout"), _c(r"socket\w{0,20}Connect: exceeded timeouts")
    ),
    Pattern("Connection reset by peer", _h_socket("closed")),
    Pattern("Broken pipe", _h_socket("closed")),
    Pattern("wrong type", _h_socket("wrongtype"), _c(r"socketFinalizeAccept.{0,40}wrong type")),
    Pattern("client socket has timed out", _h_store),
    # the TCPStore client's own timeout (torch/csrc/distributed/c10d/TCPStore*.cpp, 1.x-2.x:
    # 'RuntimeError: Socket Timeout' from rendezvous)
    Pattern("Socket Timeout", _h_store, _c(r"(?:Error|Exception): Socket Timeout\b")),
    # the c10d TCPStore client (torch/csrc/distributed/c10d/socket.cpp): the rendezvous store
    # is what it cannot reach, whatever the errno
    Pattern("client socket has failed to connect", _h_store, _c(r"\[c10d\] The client socket")),
    Pattern("DistStoreError", _h_store),
    Pattern("RendezvousTimeoutError", _h_store),  # torchrun: not every node joined in time
    # ProcessGroupNCCL fetching the unique id from the store (pytorch >= 2.3)
    Pattern("store->get(", _h_store, _c(r"via c10d key-value store by key .{1,80} got error")),
    Pattern("store based barrier", _h_store, _c(r"Timed out initializing process group in store")),
    Pattern("waiting for clients", _h_store),
    Pattern("unhandled system error", _h_system_error),
    Pattern("ncclSystemError", _h_system_error),
    Pattern("remote process exited", _h_remote),
    Pattern("ncclRemoteError", _h_remote),
    Pattern("-9", _h_killed, _c(r"(?:exitcode|return code)\s{0,3}[:=]\s{0,3}-9\b")),
    Pattern("SIGKILL", _h_killed, _c(r"Signal 9 \(SIGKILL\) received")),
    # a launcher reporting a rank that died on a fatal signal (torchrun's ChildFailedError)
    Pattern(
        "Signal",
        _h_crashed,
        _c(r"Signal \d{1,2} \((SIG(?:SEGV|ABRT|BUS|ILL|FPE))\) received"),
    ),
    Pattern("nccl", _h_nccl_frame, _c(r"\bnccl[A-Z]\w{2,40}\(|libnccl\.so")),
    Pattern("Bus error", _h_bus_error, _c(r"[Ss]ignal 7 \(Bus error|\bBus error\b")),
    Pattern("exitcode", _h_crashed, _c(r"exitcode\s{0,3}:\s{0,3}-(4|6|7|8|11)\b")),
    Pattern("internal error", _h_internal),
    Pattern("Duplicate GPU detected", _h_duplicate, _DUPLICATE),
    Pattern(
        "message truncated",
        _h_size_mismatch,
        _c(r"NET/Socket ?: ?(?:peer \S{1,80} )?message truncated"),
    ),
    Pattern("collective mismatch error", _h_size_mismatch),
    # NCCL's own check of the collective sequence (init.cc, 2.12-2.17)
    Pattern("Mismatched collective detected", _h_size_mismatch),
    Pattern("may be caused by a collective mismatch", _h_size_mismatch),
    *(Pattern(check, _h_size_mismatch) for check in TORCH_COLLECTIVE_CHECKS),
    Pattern("posted incorrect receive info", _h_size_mismatch),
    Pattern("Multiple ranks detected using the same GPU", _h_duplicate),
    # the same check in NCCL 2.2x (init.cc) and NVLS's (transport/nvls.cc)
    Pattern("Multiple Ranks are using the same GPU", _h_duplicate),
    Pattern("multiple ranks using the same NVML device", _h_duplicate),
    Pattern(
        "Mismatched NCCL version",
        _h_version_mismatch,
        _c(
            r"Mismatched NCCL version detected ?: ?rank \d{1,6} version (\d{3,6}) rank \d{1,6} "
            r"version (\d{3,6})"
        ),
    ),
    Pattern(
        "device counts across ranks",
        _h_net_count,
        _c(
            r"Detected mixed local (?:Coll)?Net device counts across ranks \(min (\d{1,4}), "
            r"max (\d{1,4})\)"
        ),
    ),
    Pattern("driver version is insufficient", _h_driver),
    Pattern("CUDA Driver version found is", _h_driver),
    # NCCL's CUDA loader when the driver predates an entry point it needs (misc/cudawrap.cc)
    Pattern("Failed to load CUDA missing symbol", _h_driver),
    Pattern("some PFN functions not found", _h_driver),
    Pattern("NVIDIA driver on your system is too old", _h_driver),
    # the driver's fault reports in the kernel log ('NVRM: Xid (PCI:0000:3b:00): 79, ...')
    Pattern("Xid", _h_xid, _c(r"NVRM: Xid \((?:PCI:)?[0-9A-Fa-f:.]{1,20}\):? ?(\d{1,3})\b")),
    Pattern("fallen off the bus", _h_xid),
    Pattern("Unable to determine the device handle", _h_xid),
    # no usable driver at all: NVML or libcuda missing, or a user-space library that does not
    # match the loaded kernel module (a driver upgrade without reboot; a container's libraries)
    Pattern("Driver/library version mismatch", _h_driver_unusable),
    # NVML without a loaded kernel module (nvmlwrap.cc 'nvmlInit_v2() failed: Driver Not
    # Loaded'), and nvidia-smi's own words for it
    Pattern("Driver Not Loaded", _h_driver_unusable, _c(r"nvmlInit\w{0,4}\(\) failed: Driver Not")),
    Pattern("couldn't communicate with the NVIDIA driver", _h_driver_unusable),
    Pattern("Found no NVIDIA driver on your system", _h_driver_unusable),
    Pattern("Failed to find CUDA library", _h_driver_unusable),
    # CUDA's driver/runtime combination refused (cudaErrorSystemDriverMismatch 803,
    # cudaErrorCompatNotSupportedOnDevice 804: a cuda-compat libcuda on a GPU without it)
    Pattern("unsupported display driver / cuda driver combination", _h_driver_unusable),
    Pattern("forward compatibility was attempted on non supported HW", _h_driver_unusable),
    # the rendezvous (c10d TCPStore, Gloo, NCCL's bootstrap) cannot bind its port
    Pattern("Address already in use", _h_port_in_use),
    # c10d's listen failure (torch/csrc/distributed/c10d/socket.cpp, 2.2+: '... code: -98,
    # name: EADDRINUSE, message: address already in use')
    Pattern("EADDRINUSE", _h_port_in_use),
    Pattern("errno: 98", _h_port_in_use),
    Pattern(
        "CUDA error: ", _h_torch_cuda, _c(r"CUDA error: ([^\n]{1,200}?)(?:\s*$|\.? ?CUDA kernel)")
    ),
    Pattern("system not yet initialized", _h_fabric),
    Pattern("CUDA_ERROR_SYSTEM_NOT_READY", _h_fabric),
    # the IOMMU translating and refusing peer DMA (Linux drivers/iommu: amd 'Event logged
    # [IO_PAGE_FAULT ...]', intel 'DMAR: [DMA Write] Request device [...] fault addr')
    Pattern("IO_PAGE_FAULT", _h_iommu, _c(r"AMD-Vi: Event logged \[IO_PAGE_FAULT")),
    Pattern("DMAR", _h_iommu, _c(r"DMAR: \[DMA (?:Read|Write)[\w ]{0,20}\] Request device")),
    Pattern("cudaErrorSystemNotReady", _h_fabric),
    # `systemctl status nvidia-fabricmanager` and Fabric Manager's own refusal to start
    Pattern("nvidia-fabricmanager.service", _h_fm_unit),
    Pattern("Active:", _h_fm_active, _c(r"Active: (?:failed|inactive)")),
    Pattern("don't match with driver version", _h_fm_down),
    # topology detection could not resolve a PCI path in sysfs (src/os/linux.cc, graph/xml.cc;
    # the IB device variant in net_ib/init.cc names /sys/class/infiniband and is left out)
    Pattern(
        "Could not find real path of",
        _h_pci_sysfs,
        _c(r"Could not find real path of /sys/(?:class/pci_bus|bus/pci|devices)"),
    ),
    Pattern("Failed to bind NVLink SHARP", _h_nvls),
    Pattern("Watchdog caught collective operation timeout", _h_watchdog, _WATCHDOG),
    Pattern("WorkNCCL(", _h_watchdog_cont, _c(r"^\s*WorkNCCL\(")),
    Pattern(
        "before timing out", _h_watchdog_ran, _c(r"^\s*ran for (\d{1,15}) milliseconds before")
    ),
    Pattern("named symbol not found", _h_arch_missing),
    # the NCCL build predates the GPU: its kernels want more shared memory than the GPU has
    # (src/enqueue.cc; 'ncclMaxSharedMem N exceeds device/fn maxSharedMem M' in 2.2x INFO)
    Pattern("exceeds device/fn maxSharedMem", _h_arch_missing),
    Pattern("no kernel image is available", _h_arch_missing),
    Pattern("is not compatible with the current PyTorch", _h_arch_missing),
    Pattern(
        "XML Import Channel", _h_topo_file, _c(r"XML Import Channel ?: ?dev \d{1,4} not found")
    ),
    Pattern(" of node ", _h_topo_file, _c(r"Attribute \w{1,40} of node \w{1,40} not found")),
    Pattern("Could not open XML topology file", _h_topo_file),
    # a topology or graph XML NCCL was given (NCCL_TOPO_FILE, NCCL_GRAPH_FILE, a cloud's
    # virtualTopology.xml) that it cannot open or parse (graph/xml.cc)
    Pattern(
        "XML",
        _h_topo_file,
        # ('XML Parse : Ignoring extra attributes' is an INFO, not a failure)
        _c(
            r"Could not open XML graph file|XML (?:Graph|Topology) has wrong version"
            r"|XML Parse(?! : Ignoring)"
        ),
    ),
    Pattern("NCCL work: ", _h_watchdog_work, _WD_WORK),
    Pattern("Some NCCL operations have failed or timed out", _h_watchdog_other),
    Pattern("NCCL communicator was aborted", _h_watchdog_other),
    Pattern("Heartbeat monitor timed out", _h_watchdog_other),
    # another rank's watchdog timed out and asked this one to dump (ProcessGroupNCCL.cpp 2.3+)
    Pattern("dump signal due to a collective timeout", _h_watchdog_other),
    Pattern("watchdog got stuck", _h_watchdog_other),
    # the watchdog's own stack frames without its message: WorkNCCL::checkTimeout is where
    # ProcessGroupNCCL.cpp builds 'Watchdog caught collective operation timeout' (an excerpt
    # that kept only the c10::Error frames still shows where it was raised)
    Pattern("WorkNCCL::checkTimeout", _h_watchdog_other),
    # the watchdog also ends on an NCCL error that is not a timeout ('... terminated with
    # exception: NCCL error: remote process exited or there was a network error'): only a
    # timeout in its message makes it one
    Pattern(
        "watchdog thread terminated with exception",
        _h_watchdog_other,
        _c(r"watchdog thread terminated with exception.{0,400}?(?:[Tt]imeout|timed out)"),
    ),
    Pattern("join collective", _h_desync, _c(r"didn'?t join collective")),
    # PyTorch's monitored barrier naming the ranks that never arrived (ProcessGroupGloo)
    Pattern(
        "monitoredBarrier",
        _h_desync,
        _c(r"failed to pass monitoredBarrier|waiting for send/recv from rank"),
    ),
    Pattern("Out of bounds values", _h_oob, _OOB),
    Pattern("Pid", _h_device_rank, _DEVICE_RANK),
    Pattern(" on ", _h_gpu_name, _OLD_DEVICE_RANK),
    Pattern("uses device", _h_gpu_name, _V1_DEVICE),
    Pattern("GPU ", _h_gpu_name, _TORCH_GPU),
    Pattern("|", _h_gpu_name, _SMI_GPU),
    Pattern("size", _h_table_header, _TABLE_HEADER),
    Pattern("bytes", _h_table_header, _V1_TABLE_HEADER),
)


def parse_nccl_log(lines: Iterable[str], source: str = "<log>") -> NcclLog:
    """Read a log line by line (never held whole in memory)."""
    parser = _Parser(source)
    for number, raw in enumerate(lines, 1):
        parser.feed(number, raw)
    return parser.log


def understood(log: NcclLog) -> bool:
    """Whether the parser found anything doctor reasons about in the file."""
    return bool(log.records or log.matched)
