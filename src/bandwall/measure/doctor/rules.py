"""Doctor's rule base: one row per cause, as data.

Each `Rule` says what doctor concludes (`title`), how bad it is by default (`severity`), when it
is raised (`when`: the evidence, in words), what it costs and where that figure comes from
(`impact`, `impact_source`), how to confirm it (`checks`), what to do (`fixes`) and, when the
evidence given is partial, which command would settle it (`confirm`). The detectors in
`detectors.py` decide *whether* a rule fires and quote the lines; this table decides *what is
said*. docs/doctor.md's rule table is generated from it (`bandwall.measure.doctor.docs`).

The rules were written from NCCL's own messages (NVIDIA/nccl `src/`, v2.3.5-v2.30.7:
`transport/net_ib*`, `misc/ibvwrap.cc`, `misc/socket.cc`, `bootstrap.cc`, `transport/p2p.cc`,
`transport/shm.cc`, `misc/shmutils.cc`, `transport/nvls.cc`, `graph/paths.cc`, `init.cc`,
`net.cc`), aws-ofi-nccl's (`src/nccl_ofi_*.cpp`, v1.0-v1.21) and PyTorch's ProcessGroupNCCL
watchdog (with and without `SeqNum=`), grouped by mechanism; the wording is doctor's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Severity(StrEnum):
    """How bad a finding is; `rank` orders them (critical = 4 ... info = 0)."""

    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    INFO = "info"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {
    Severity.CRITICAL: 4,
    Severity.HIGH: 3,
    Severity.MEDIUM: 2,
    Severity.LOW: 1,
    Severity.INFO: 0,
}


class Mechanism(StrEnum):
    """The part of the communication stack a cause lives in (docs/doctor.md's sections)."""

    TRANSPORT = "transport selection"
    IB_VERBS = "IB/RoCE verbs and QP transitions"
    GID_ECN = "RoCE addressing (GID) and congestion"
    GDR = "GPUDirect RDMA (peermem, DMA-BUF, ACS)"
    P2P = "GPU peer-to-peer (P2P, ACS, IOMMU)"
    TOPOLOGY = "PCIe topology and channels"
    NVLS = "NVSwitch, NVLS and Fabric Manager"
    PLUGINS = "network plugins"
    BOOTSTRAP = "bootstrap and sockets"
    RESOURCES = "host and GPU resources"
    USAGE = "launch and usage"
    TIMEOUTS = "timeouts and dead peers"
    VERSIONS = "version skew"
    PERFORMANCE = "measured performance"


@dataclass(frozen=True)
class Rule:
    """One cause doctor can name."""

    code: str
    mechanism: Mechanism
    title: str
    severity: Severity
    when: str
    """The evidence that raises it, in words (docs)."""
    impact: str
    impact_source: str
    checks: tuple[str, ...]
    fixes: tuple[str, ...]
    confirm: str
    """The command or log that settles it when the evidence given is partial."""
    consequence: bool = False
    """What other faults end in (a watchdog timeout, a dead peer, unexplained warnings): it
    ranks below any critical cause found beside it, which is what the user must fix."""


RULES: tuple[Rule, ...] = (
    # --- transport selection ------------------------------------------------------------------
    Rule(
        code="socket_fallback",
        mechanism=Mechanism.TRANSPORT,
        title="Inter-node traffic runs over TCP sockets although the nodes have RDMA NICs",
        severity=Severity.HIGH,
        when="NCCL uses NET/Socket while the log shows RDMA hardware or its absence being "
        "forced: libibverbs not loadable, an HCA it cannot open, `NCCL_IB_DISABLE=1`, "
        "`NCCL_NET=Socket`, an RDMA plugin or NCCL_IB_HCA that finds no device, sockets on "
        "IPoIB interfaces, a missing userspace verbs provider",
        impact="every inter-node byte is copied by the CPU through TCP: typically 3-10x less "
        "bandwidth than RDMA and 10x the latency",
        impact_source="NVIDIA/nccl#451, NVIDIA/nccl-tests#188 (sjeaugey: 'much slower'); "
        "PrimeIntellect-ai/prime-rl#1599 (0.2% MFU until libibverbs was installed)",
        checks=(
            "`ibv_devinfo` where the job runs (inside the container): HCAs and port state",
            "NCCL_IB_DISABLE, NCCL_NET, NCCL_IB_HCA in the job's environment",
            "the image has libibverbs1 and ibverbs-providers (rdma-core)",
        ),
        fixes=(
            "containers: --device=/dev/infiniband --cap-add=IPC_LOCK --ulimit memlock=-1 "
            "(Kubernetes: the RDMA device plugin); install rdma-core in the image",
            "unset NCCL_IB_DISABLE / NCCL_NET=Socket; the log should then say "
            "'NET/IB : Using [0]mlx5_...' and 'via NET/IB/0/GDRDMA'",
        ),
        confirm="NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET: the 'NET/IB' and 'Using network' "
        "lines of every rank",
    ),
    Rule(
        code="socket_transport",
        mechanism=Mechanism.TRANSPORT,
        title="Inter-node traffic runs over TCP sockets (no RDMA NIC in sight)",
        severity=Severity.INFO,
        when="NET/Socket between nodes and nothing in the log says RDMA NICs exist",
        impact="right for an Ethernet-only cluster; sockets reach a fraction of the NIC's line "
        "rate unless NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD are raised",
        impact_source="NCCL environment documentation (NCCL_SOCKET_NTHREADS)",
        checks=("`ibv_devinfo` on a node: if it lists HCAs, this is socket_fallback",),
        fixes=("on TCP: NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4",),
        confirm="`ibv_devinfo` and `ip -br link` on a node",
    ),
    # --- IB / RoCE verbs ----------------------------------------------------------------------
    Rule(
        code="ib_link_error",
        mechanism=Mechanism.IB_VERBS,
        title="RDMA transfers time out: the link or the peer's NIC stopped answering",
        severity=Severity.CRITICAL,
        when="IB completion status 12 (retry exceeded, vendor err 129/0x81), the kernel's mlx5 "
        "driver reporting a port link down or a cable/module error, port error or "
        "catastrophic async events, the peer's socket reset while the IB network is in use, "
        "or an EFA peer that stopped answering ('Unresponsive remote/receiver (... previously "
        "...)', efa_errno.h 13, 4124)",
        impact="the collective aborts (ncclRemoteError / ncclSystemError) and the job dies",
        impact_source="NVIDIA/nccl#902 and #905 (sjeaugey: error 12 is a timeout; port errors "
        "are a flapping link); NCCL's own hint in src/transport/net_ib/common.h",
        checks=(
            "which host prints the errors: `ibstat`, `ibqueryerrors` / UFM port counters",
            "`dmesg` on both hosts for link down/up (mlx5_core) events",
            "NCCL_IB_TIMEOUT (default 20 since 2.23) on large or congested fabrics",
        ),
        fixes=(
            "reseat or replace the cable/transceiver of the flapping port, drain the host",
            "on congested RoCE: enable ECN/PFC as the vendor documents; raise NCCL_IB_TIMEOUT",
        ),
        confirm="`ibstat` and the port error counters on the host that printed the first error",
    ),
    Rule(
        code="ib_qp_unreachable",
        mechanism=Mechanism.IB_VERBS,
        title="RDMA queue pairs cannot connect: the NICs cannot reach each other",
        severity=Severity.CRITICAL,
        when="ibv_modify_qp fails with ETIMEDOUT (110) or ENETUNREACH going to RTR, error "
        "12 at the first transfer between nodes whose Ethernet works, or libfabric EFA's "
        "'Unreachable remote' / 'Unresponsive receiver (reachable by EFA device but handshake "
        "failed)' (efa_errno.h 15, 4126)",
        impact="NCCL cannot create its connections; the job fails at start-up",
        impact_source="NCCL 2.30 hint for ETIMEDOUT (src/misc/ibvwrap.cc: 'NICs are not "
        "cross-rail connected'); NVIDIA/nccl#2013",
        checks=(
            "rail-only fabrics: NCCL_CROSS_NIC=0 keeps each GPU on its own rail",
            "`ib_write_bw` between the two NICs named in the error",
            "cloud: the nodes were allocated in one placement group / availability set",
        ),
        fixes=(
            "NCCL_CROSS_NIC=0 on rail-optimised networks",
            "re-provision nodes in one IB partition / placement group",
        ),
        confirm="`ib_write_bw -d <hca>` between the two hosts, and `ibv_devinfo -v` GIDs",
    ),
    Rule(
        code="memlock",
        mechanism=Mechanism.IB_VERBS,
        title="RDMA memory registration fails: the locked-memory limit is too low",
        severity=Severity.CRITICAL,
        when="ibv_reg_mr / ibv_create_cq / ibv_create_qp fail with 'Cannot allocate memory', or "
        "libfabric's EFA provider cannot post its receive buffers (ENOMEM, efa_errno 4112); "
        "an old NCCL's bare 'Call to ibv_reg_mr failed' (possible)",
        impact="NCCL cannot register buffers with the NIC; the communicator fails",
        impact_source="NVIDIA/nccl-tests#206 (ulimit -l was 8192 kB)",
        checks=("`ulimit -l` inside the job (under mpirun/srun, in the container)",),
        fixes=(
            "memlock unlimited: /etc/security/limits.conf, `--ulimit memlock=-1` and "
            "`--cap-add=IPC_LOCK` for containers, `LimitMEMLOCK=infinity` for slurmd",
        ),
        confirm="`ulimit -l` printed by the same launcher that runs the job",
    ),
    Rule(
        code="ib_hca_select",
        mechanism=Mechanism.IB_VERBS,
        title="NCCL uses the wrong set of HCAs",
        severity=Severity.HIGH,
        when="NCCL_IB_HCA matches no usable HCA, NET/IB lists NICs of mixed link layers "
        "(IB and RoCE, e.g. a management bond) or NCCL refuses to connect/merge them, or "
        "ibv_modify_qp fails with ENODEV (19): no interface is up behind the chosen port's GID",
        impact="a slow or unusable NIC joins the rings (low bandwidth), or no NIC is used",
        impact_source="stas00/ml-engineering network/debug (mlx5_bond_0 next to 8 IB HCAs); "
        "NCCL warnings in src/transport/net_ib/connect.cc",
        checks=("`ibv_devinfo` names, link layers and port states against NCCL_IB_HCA",),
        fixes=(
            "list the data-plane HCAs explicitly, e.g. NCCL_IB_HCA==mlx5_0,mlx5_1 or exclude "
            "with NCCL_IB_HCA=^mlx5_bond_0",
        ),
        confirm="the 'NET/IB : Using [0]...' line of every node",
    ),
    # --- RoCE addressing ----------------------------------------------------------------------
    Rule(
        code="roce_gid",
        mechanism=Mechanism.GID_ECN,
        title="RoCE addressing: the GID NCCL uses does not route between the nodes",
        severity=Severity.CRITICAL,
        when="ibv_modify_qp fails with EINVAL (22), NET/IB cannot read a GID's RoCE type "
        "from sysfs (ncclIbRoceGetVersionNum), the GID table changes under the job, a "
        "failing RoCE job's QPs use a link-local GID (fe80::, printed '80FE' in NET/IB's QP "
        "lines or in the modify_qp warning), or RoCE completions time out at the first "
        "transfer with an unrouted (link-local or wrong version) GID",
        impact="QPs never reach each other; the job fails or hangs at the first collective",
        impact_source="NCCL 2.30 hint for EINVAL (src/misc/ibvwrap.cc: 'incorrect GID index'); "
        "NVIDIA/nccl#426 and #769 (GID index 3 fixed it)",
        checks=(
            "`show_gids`: the RoCE v2 GID that carries the node's routable IPv4 address",
            "NCCL_IB_GID_INDEX, NCCL_IB_TC and the switch's PFC/ECN class for that traffic",
        ),
        fixes=(
            "unset NCCL_IB_GID_INDEX (NCCL >= 2.21 picks the routable RoCE v2 GID) or set it "
            "to that index on every node",
        ),
        confirm="`show_gids` on both hosts and the 'GID' in NCCL's NET/IB INFO lines",
    ),
    Rule(
        code="ib_mtu",
        mechanism=Mechanism.IB_VERBS,
        title="IB/RoCE QP access or length error: the two ends' MTUs (or a registration) disagree",
        severity=Severity.CRITICAL,
        when="the NIC raises IBV_EVENT_QP_ACCESS_ERR ('local access violation work queue "
        "error') or work completions fail with status 1 (IBV_WC_LOC_LEN_ERR, a message longer "
        "than the receive side's path MTU allows); or NET/IB's QP lines ('qpn N mtu M') show "
        "different MTUs in one job under NCCL 2.20+ (likely beside a failure, else medium)",
        impact="the QP goes to the error state: its pending work is flushed (status 5) and the "
        "job fails or hangs at the first large transfer",
        impact_source="NVIDIA/nccl#1524 (servers with different port MTUs; NCCL 2.20 stopped "
        "clamping the QP MTU to the smaller end's); upstream fix 9f3c41dd 'Fix IB MTU mismatch "
        "causing NCCL hang and IBV_WC_LOC_LEN_ERR' (src/transport/net_ib/connect.cc)",
        checks=(
            "`ibv_devinfo -v | grep -E 'hca_id|active_mtu'` on every node: the same active MTU "
            "on all ports NCCL uses",
            "the switch ports' MTU (RoCE: the interface MTU, e.g. 9000 everywhere or 1500 "
            "everywhere)",
        ),
        fixes=(
            "give every node and switch port the same MTU (RoCE: set the interfaces' MTU alike)",
            "or run an NCCL with the MTU clamp (before 2.20, or one with upstream fix 9f3c41dd)",
        ),
        confirm="`ibv_devinfo -v` active_mtu of the ports on both hosts of the failing pair",
    ),
    # --- GPUDirect RDMA -----------------------------------------------------------------------
    Rule(
        code="gdr_off",
        mechanism=Mechanism.GDR,
        title="GPUDirect RDMA is off: network data is staged through host memory",
        severity=Severity.HIGH,
        when="IB/RoCE/EFA connections without /GDRDMA, 'GPU Direct RDMA Disabled for HCA' "
        "without a distance reason (no peer-memory module, no DMA-BUF), or GDR on some "
        "nodes only",
        impact="every inter-node byte crosses PCIe twice and host memory once: busbw 33 -> 93 "
        "GB/s once GDR was enabled",
        impact_source="NVIDIA/nccl#1412 (AddyLaddy); NVIDIA/nccl#897 (one node without peermem)",
        checks=(
            "`lsmod | grep nvidia_peermem` on every node, or a DMA-BUF capable kernel+driver "
            "('DMA-BUF is available' in the log)",
            "/sys/kernel/mm/memory_peers/nv_mem/version exists",
        ),
        fixes=(
            "`modprobe nvidia-peermem` on every node (GPU operator: driver.rdma.enabled=true); "
            "the log should then say 'via NET/IB/N/GDRDMA'",
        ),
        confirm="NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET: 'GPU Direct RDMA Enabled/Disabled' "
        "and the 'via NET/...' connection lines",
    ),
    Rule(
        code="dmabuf_failed",
        mechanism=Mechanism.GDR,
        title="GPU memory cannot be registered with the NIC through DMA-BUF",
        severity=Severity.CRITICAL,
        when="'Call to ibv_reg_dmabuf_mr failed' (e.g. 'Operation not supported'): NCCL's probe "
        "found DMA-BUF in the verbs library, but registering GPU memory through it fails",
        impact="NCCL cannot register its GPU buffers for RDMA: the communicator fails at the "
        "first inter-node connection",
        impact_source="NCCL src/misc/ibvwrap.cc wrap_ibv_reg_dmabuf_mr and src/transport/net_ib "
        "(DMA-BUF is tried before nvidia-peermem when NCCL_DMABUF_ENABLE=1, the default); "
        "NVIDIA/nccl#778",
        checks=(
            "kernel >= 5.12 and the GPU driver's DMA-BUF export: the open GPU kernel modules "
            "(`modinfo nvidia | grep license` says Dual MIT/GPL) on a recent driver",
            "the NIC driver: MLNX_OFED / rdma-core recent enough for DMA-BUF (NVIDIA/nccl#778: "
            "an older IB driver)",
            "`lsmod | grep nvidia_peermem`: the fallback NCCL uses without DMA-BUF",
        ),
        fixes=(
            "NCCL_DMABUF_ENABLE=0 to register through nvidia-peermem (load it: modprobe "
            "nvidia-peermem)",
            "or move to the open GPU kernel modules / a driver, kernel and rdma-core that "
            "support DMA-BUF for GPU memory; later NCCL versions fall back to peermem by "
            "themselves",
        ),
        confirm="NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET: 'DMA-BUF is available' and the "
        "'via NET/IB/0/GDRDMA' lines after the change",
    ),
    Rule(
        code="gdr_acs",
        mechanism=Mechanism.GDR,
        title="GPUDirect RDMA transfers are blocked on the PCIe path (ACS or IOMMU)",
        severity=Severity.CRITICAL,
        when="IB completion status 4 (local protection error, vendor err 81) or a QP local "
        "access violation: the NIC cannot write GPU memory",
        impact="GDR transfers fail and the job aborts",
        impact_source="NCCL's hint for IBV_WC_LOC_PROT_ERR (src/transport/net_ib/common.h); "
        "NVIDIA/nccl#928 and #304 (disabling ACS fixed it)",
        checks=(
            "`lspci -vvv | grep ACSCtl`: SrcValid+ on PCIe switches means ACS is on",
            "IOMMU mode (`iommu=pt`), ATS on the NIC inside VMs",
        ),
        fixes=(
            "disable ACS on the PCIe switches (BIOS, or setpci at boot) on bare metal",
            "confirm with NCCL_NET_GDR_LEVEL=0 (works, slower)",
        ),
        confirm="`lspci -vvv | grep ACSCtl` on the host of the failing rank",
    ),
    # --- GPU peer-to-peer ---------------------------------------------------------------------
    Rule(
        code="p2p_broken",
        mechanism=Mechanism.P2P,
        title="GPU peer-to-peer does not work between the node's GPUs",
        severity=Severity.CRITICAL,
        when="CUDA refuses peer access (error 217 'peer access is not supported', 'failed to "
        "open CUDA IPC handle'), NCCL warns P2P is disabled between NVLink-connected GPUs, "
        "nccl-tests reports wrong data, a node of PCIe-only GPUs hangs at its first collective, or "
        "the kernel log shows the IOMMU refusing a device's DMA (AMD-Vi IO_PAGE_FAULT, DMAR "
        "fault)",
        impact="the job fails or hangs at start-up, or silently computes on corrupted data",
        impact_source="NVIDIA/nccl-tests#117 and #287 (GeForce cards do not support P2P); "
        "NVIDIA/nccl#1838 (cuMem host sharing needs P2P)",
        checks=(
            "`nvidia-smi topo -p2p r` and the CUDA p2pBandwidthLatencyTest sample",
            "PCI ACS and the IOMMU (`iommu=pt` or off) on bare metal; VM passthrough",
        ),
        fixes=(
            "consumer GPUs / VMs without P2P: NCCL_P2P_DISABLE=1 (set it where the workers "
            "start, e.g. Ray's runtime_env); error 217 in shm.cc: NCCL_CUMEM_HOST_ENABLE=0",
            "bare metal: disable ACS, set the IOMMU to passthrough",
        ),
        confirm="the CUDA p2pBandwidthLatencyTest sample on the node",
    ),
    Rule(
        code="p2p_disabled",
        mechanism=Mechanism.P2P,
        title="GPU peer-to-peer is off inside the node",
        severity=Severity.MEDIUM,
        when="NCCL_P2P_DISABLE=1, NCCL_P2P_LEVEL=LOC, NCCL's 'P2P is disabled between "
        "connected GPUs', or intra-node connections via SHM where NCCL's graph puts the GPUs "
        "on NVLink or one PCIe switch (SHM alone, which NCCL picks where no P2P path exists, "
        "is info)",
        impact="intra-node data is copied through host memory: lower bandwidth, higher latency",
        impact_source="NVIDIA/nccl#631 (ACS/IOMMU as the usual reason P2P is off)",
        checks=("NCCL_P2P_DISABLE, NCCL_P2P_LEVEL; `nvidia-smi topo -m`",),
        fixes=("unset NCCL_P2P_DISABLE once P2P works; the log should say 'via P2P/IPC'",),
        confirm="the 'Channel NN : a -> b via ...' lines of one node",
    ),
    # --- topology -----------------------------------------------------------------------------
    Rule(
        code="nic_far",
        mechanism=Mechanism.TOPOLOGY,
        title="GPUs reach their NIC through the CPU: GPUDirect RDMA off by distance",
        severity=Severity.MEDIUM,
        when="NCCL's topology search puts the NIC behind the CPU (path PHB/NODE/SYS, graph "
        "type X/PHB) or disables GPU Direct RDMA for distance (`distance D > L`)",
        impact="GPU-NIC traffic shares the CPU root complex and loses GDR: the reporter of "
        "nccl-tests#293 got 1.1 GB/s until NCCL_NET_GDR_LEVEL=SYS",
        impact_source="NVIDIA/nccl#1151 (sjeaugey); NVIDIA/nccl-tests#182/#293",
        checks=(
            "`nvidia-smi topo -m`: each GPU should have a NIC at PIX/PXB",
            "NUMA binding (--bind-to numa) and the BIOS NUMA-per-socket setting",
        ),
        fixes=(
            "one NIC per GPU on its PCIe switch; NCCL_NET_GDR_LEVEL=SYS where ACS is off "
            "(measure: it can be slower)",
        ),
        confirm="NCCL_DEBUG_SUBSYS=GRAPH (the 'Pattern ... type' lines) or `nvidia-smi topo -m`",
    ),
    Rule(
        code="few_channels",
        mechanism=Mechanism.TOPOLOGY,
        title="Fewer channels than the hardware needs",
        severity=Severity.MEDIUM,
        when="NCCL_MAX_NCHANNELS / NCCL_MAX_CTAS below 8, or fewer channels than IB NICs",
        impact="NICs without a channel carry nothing; bandwidth left unused",
        impact_source="NCCL environment documentation (NCCL_MIN_NCHANNELS)",
        checks=("NCCL_MIN/MAX_NCHANNELS, NCCL_NCHANNELS_PER_NET_PEER",),
        fixes=("unset the caps; NCCL uses about 2 channels per NIC",),
        confirm="'N coll channels' in NCCL_DEBUG=INFO",
    ),
    # --- NVSwitch / NVLS ----------------------------------------------------------------------
    Rule(
        code="topology_file",
        mechanism=Mechanism.TOPOLOGY,
        title="NCCL cannot use the topology or graph XML it was given",
        severity=Severity.HIGH,
        when="with NCCL_TOPO_FILE or NCCL_GRAPH_FILE set (often by a cloud image), NCCL "
        "warns that the XML names a device it does not find ('XML Import Channel : dev N not "
        "found'), lacks an attribute ('Attribute arch of node cpu not found') or cannot be "
        "opened",
        impact="init fails, or NCCL builds rings and trees for another machine's topology",
        impact_source="NVIDIA/nccl#1240 (Azure NCv4 image's NCCL_GRAPH_FILE: 'should never "
        "be set in production', sjeaugey); aws/aws-ofi-nccl#785 (a static p5 topology file)",
        checks=("`env | grep -E 'NCCL_(TOPO|GRAPH)_FILE'` where the job runs",),
        fixes=(
            "unset NCCL_GRAPH_FILE; point NCCL_TOPO_FILE at a file for this instance type (or "
            "unset it and let NCCL detect the topology)",
        ),
        confirm="NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,ENV: the 'set by environment' "
        "and XML lines",
    ),
    Rule(
        code="pci_sysfs",
        mechanism=Mechanism.TOPOLOGY,
        title="NCCL cannot read the PCI topology from /sys (WSL2, a VM or container without it)",
        severity=Severity.CRITICAL,
        when="'Could not find real path of /sys/class/pci_bus/...' (or /sys/bus/pci, "
        "/sys/devices): topology detection cannot place a GPU or NIC on the PCI tree",
        impact="the communicator fails at init (the -> 2 chain after graph/xml.cc, topo.cc)",
        impact_source="NVIDIA/nccl#573 (WSL2 without the GPU's PCI path in /sys; sjeaugey: NCCL "
        "must be able to access that path); NCCL src/os/linux.cc and graph/xml.cc",
        checks=(
            "`ls -l /sys/class/pci_bus/` and `lspci` where the job runs (empty under WSL2 and "
            "some sandboxes)",
            "containers: /sys mounted read-only from the host (Docker's default), not masked",
        ),
        fixes=(
            "run where /sys shows the PCI tree (native Linux or a VM with PCI passthrough)",
            "or give NCCL the topology with NCCL_TOPO_FILE (an XML of this machine)",
        ),
        confirm="NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH: the path NCCL could not resolve",
    ),
    Rule(
        code="nvswitch_fabric",
        mechanism=Mechanism.NVLS,
        title="The NVSwitch fabric is not ready (Fabric Manager)",
        severity=Severity.CRITICAL,
        when="CUDA 'system not yet initialized' (802, CUDA_ERROR_SYSTEM_NOT_READY), the "
        "nvidia-fabricmanager unit failed or inactive, or Fabric Manager refusing a driver "
        "of another version, NVLS multicast failing in transport/nvls.cc ('invalid "
        "argument', 'Failed to bind NVLink SHARP'), or, possibly, CUDA 800 'operation not "
        "permitted' in the P2P transport (multi-node NVLink: the IMEX channel)",
        impact="no CUDA context or no NVLS buffers: every job on the node fails at init",
        impact_source="NVIDIA/nccl#976 and #1488 (FM restarted without a GPU reset); "
        "NVIDIA/nccl-tests#264 (FM not running)",
        checks=(
            "`systemctl status nvidia-fabricmanager` (and nvlsm on Blackwell)",
            "`nvidia-smi -q | grep -A2 Fabric`: State Completed",
        ),
        fixes=(
            "enable and start nvidia-fabricmanager (same version as the driver); after an FM "
            "restart reset the GPUs or reboot; NCCL_NVLS_ENABLE=0 as a stopgap",
        ),
        confirm="`nvidia-smi -q | grep -A2 Fabric` on the failing node",
    ),
    # --- plugins ------------------------------------------------------------------------------
    Rule(
        code="efa_unavailable",
        mechanism=Mechanism.PLUGINS,
        title="The cloud network plugin finds no usable fabric (EFA / libfabric)",
        severity=Severity.CRITICAL,
        when="aws-ofi-nccl finds no provider: 'Couldn't find any optimal provider', "
        "'fi_getinfo() call failed: No data available', 'No eligible providers', 'Unable to "
        "find a protocol that worked', 'Only EFA provider is supported'; or it "
        "cannot register GPU memory with the provider ('NET/OFI Unable to register memory', "
        "a libfabric too old for the NCCL)",
        impact="NCCL cannot use EFA: the job fails, or falls back to TCP sockets",
        impact_source="aws/aws-ofi-nccl#1020 (/dev/infiniband not in the container); "
        "NVIDIA/nccl#229 (sjeaugey)",
        checks=(
            "`fi_info -p efa -t FI_EP_RDM` inside the container",
            "the instance has EFA interfaces attached; `ls /dev/infiniband/uverbs*`",
        ),
        fixes=(
            "pass the EFA devices into the container (--device /dev/infiniband/uverbsN, "
            "vpc.amazonaws.com/efa on Kubernetes); use the EFA installer's libfabric",
        ),
        confirm="`fi_info -p efa` where the job runs",
    ),
    Rule(
        code="net_plugin_mismatch",
        mechanism=Mechanism.PLUGINS,
        title="Nodes load different network plugins",
        severity=Severity.HIGH,
        when="a NET plugin (HPC-X/IBext, aws-ofi-nccl, ...) is loaded on some hosts and not "
        "on others, or hosts use different networks",
        impact="ranks speak different wire protocols: hangs or failures between the groups",
        impact_source="NVIDIA/nccl#1634 (libnccl-net.so on part of the cluster)",
        checks=("`ls $NCCL_NET_PLUGIN` / libnccl-net.so and LD_LIBRARY_PATH on every node",),
        fixes=("install the same plugin (or none) on every node; same container image",),
        confirm="the 'NET/Plugin' and 'Using network' lines of one rank per node",
    ),
    Rule(
        code="net_plugin_load",
        mechanism=Mechanism.PLUGINS,
        title="A network plugin the job needs is missing or fails to load",
        severity=Severity.HIGH,
        when="NET/Plugin's dlerror names a missing symbol or symbol version (e.g. "
        "libfabric's FABRIC_1.7 not found for aws-ofi-nccl): the plugin is there, the "
        "libraries it needs are too old or absent; NCCL_NET_PLUGIN names a plugin no "
        "directory on the library path holds ('cannot open shared object file'); or NCCL_NET "
        "names a network no loaded plugin provides ('Error: network X not found')",
        impact="NCCL falls back to its internal IB or socket transport (on EFA: sockets, a "
        "fraction of the bandwidth) or fails to find a network",
        impact_source="awslabs/awsome-distributed-ai#292 (aws-ofi-nccl 1.9 needs libfabric >= "
        "1.18.2)",
        checks=(
            "`ldd $(find / -name 'libnccl-net*.so' 2>/dev/null)` on a node: unresolved "
            "libraries and versions",
        ),
        fixes=(
            "install the libfabric / rdma-core the plugin was built against (the EFA "
            "installer's on AWS), or a plugin built for the host's libraries",
        ),
        confirm="NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET: the 'NET/Plugin' and "
        "'Using network' lines",
    ),
    # --- bootstrap and sockets ----------------------------------------------------------------
    Rule(
        code="socket_ifname",
        mechanism=Mechanism.BOOTSTRAP,
        title="NCCL picks a socket interface that does not reach the other hosts",
        severity=Severity.CRITICAL,
        when="'no socket interface found', NCCL_SOCKET_IFNAME matching nothing, a garbage "
        "address family, 'No route to host' where the interface was chosen or several exist, "
        "bootstrap on loopback/bridges/IPoIB across hosts or with failing connections, an "
        "IPv6 link-local (fe80::) address advertised, connections to a loopback address "
        "(a hostname on 127.0.1.1), binding to an address the host does not have (EADDRNOTAVAIL, "
        "errno 99), Gloo finding no interface for its address, or Gloo "
        "binding to loopback ('Unable to resolve hostname to a (local) address'); as a "
        "possible cause, `unhandled system error` with nothing else",
        impact="the communicator never forms: the job hangs or fails at init",
        impact_source="NVIDIA/nccl#1837; hkproj/pytorch-transformer-distributed#1 "
        "(NCCL_SOCKET_IFNAME fixed 'No route to host'); NVIDIA/nccl#1000; NCCL's "
        "networking troubleshooting (interfaces that are up but do not reach the other "
        "nodes fail the init functions)",
        checks=(
            "`ip -br addr` on every node against NCCL_SOCKET_IFNAME (prefix list; '^' "
            "excludes, '=' exact)",
        ),
        fixes=(
            "set NCCL_SOCKET_IFNAME to the interface carrying each node's routable address "
            "(the same prefix on every node, e.g. eth or =bond0)",
        ),
        confirm="the 'Bootstrap : Using' line of every rank and `ip -br addr` on each host",
    ),
    Rule(
        code="port_in_use",
        mechanism=Mechanism.BOOTSTRAP,
        title="The rendezvous port is taken: another process already listens on it",
        severity=Severity.CRITICAL,
        when="'Address already in use' / errno 98 / EADDRINUSE from the c10d TCPStore, Gloo or "
        "NCCL's bootstrap when it binds its port",
        impact="the job never starts (or waits for a rendezvous that belongs to another job)",
        impact_source="pytorch/pytorch torch/csrc/distributed/c10d/socket.cpp (the bind "
        "error); a stale process of an earlier run or two jobs with one MASTER_PORT",
        checks=(
            "`ss -ltnp | grep PORT` on the MASTER_ADDR node: which process holds the port",
            "earlier runs still alive (`ps aux | grep -e torchrun -e python`)",
        ),
        fixes=(
            "kill the stale processes of the earlier run, or give each job its own "
            "MASTER_PORT (torchrun --master-port / --rdzv-endpoint HOST:PORT)",
        ),
        confirm="`ss -ltnp` on the rendezvous host",
    ),
    Rule(
        code="bootstrap_unreachable",
        mechanism=Mechanism.BOOTSTRAP,
        title="Ranks cannot connect to each other or to the rendezvous (firewall, network)",
        severity=Severity.CRITICAL,
        when="socket connects refused, aborted or timed out; 'No route to host' on the node's "
        "only ordinary interface (a firewall REJECT); the c10d store unreachable; "
        "`unhandled system error` with nothing else",
        impact="the job never starts, or dies at the first collective",
        impact_source="NVIDIA/nccl-tests#162 (sjeaugey: firewall); pytorch/pytorch#23363 "
        "(docker network isolation); pytorch/pytorch#105782",
        checks=(
            "`nc -l PORT` on one node and `nc HOST PORT` on another; firewalld/ufw rules",
            "MASTER_ADDR resolves to the same address everywhere (/etc/hosts)",
        ),
        fixes=(
            "open the ports between the nodes (or the NCCL/ torch port range); containers: "
            "--network=host",
        ),
        confirm="NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP on two ranks",
    ),
    # --- host and GPU resources ---------------------------------------------------------------
    Rule(
        code="shm_space",
        mechanism=Mechanism.RESOURCES,
        title="/dev/shm is too small for NCCL's shared-memory buffers",
        severity=Severity.CRITICAL,
        when="creating, extending or mapping /dev/shm/nccl-* fails ('No space left on device', "
        "posix_fallocate), UCX's shared-memory transport cannot allocate its FIFO, or PyTorch's "
        "DataLoader workers run out of shared memory (bus error); as a possible cause, "
        "`unhandled system error` with nothing else",
        impact="the communicator fails at init",
        impact_source="NVIDIA/nccl#342 (docker's 64 MB default); pytorch/ci-infra#490",
        checks=("`df -h /dev/shm` inside the container",),
        fixes=(
            "docker --shm-size=16g or --ipc=host; a memory-backed /dev/shm volume on Kubernetes",
        ),
        confirm="`df -h /dev/shm` inside the job",
    ),
    Rule(
        code="shm_not_shared",
        mechanism=Mechanism.RESOURCES,
        title="Ranks on one host do not share /dev/shm (separate containers or pods)",
        severity=Severity.CRITICAL,
        when="attaching to a peer's /dev/shm/nccl-* segment fails with 'No such file or "
        "directory': NCCL took the two ranks for one host (same host hash) but the segment "
        "its peer created is not in this rank's /dev/shm",
        impact="the shared-memory connection between the two ranks cannot be set up: the "
        "communicator fails at init",
        impact_source="NCCL src/misc/shmutils.cc (ncclShmOpen attaches to the segment the peer "
        "created, by name) and src/transport/shm.cc; NCCL troubleshooting guide (Docker: "
        "--ipc=host to share the IPC namespace)",
        checks=(
            "whether the ranks of one host run in different containers or pods, each with its "
            "own /dev/shm (`ls /dev/shm` in both)",
            "NCCL_HOSTID, when set, differs between containers that must not share memory",
        ),
        fixes=(
            "run the ranks of a host in one container, or share the IPC namespace and /dev/shm "
            "(docker --ipc=host; one memory-backed volume mounted at /dev/shm in the pod)",
            "or keep them apart on purpose: NCCL_SHM_DISABLE=1 (and NCCL_P2P_DISABLE=1 if CUDA "
            "IPC fails the same way), or a distinct NCCL_HOSTID per container",
        ),
        confirm="`ls -l /dev/shm/nccl-*` in each rank's container while the job starts",
    ),
    Rule(
        code="gpu_memory",
        mechanism=Mechanism.RESOURCES,
        title="NCCL cannot allocate GPU memory",
        severity=Severity.CRITICAL,
        when="'Cuda failure ... out of memory', 'Failed to CUDA calloc/malloc', PyTorch's "
        "'CUDA out of memory. Tried to allocate' (the rank stops; the others time out), or an "
        "'unhandled cuda error' with nothing more specific",
        impact="communicator init or a collective fails",
        impact_source="NVIDIA/nccl#1235; scitix/sichek#71 (other processes held the memory)",
        checks=("`nvidia-smi` on the node: memory held by other processes",),
        fixes=(
            "free the GPUs (stray processes), lower the model's memory (batch, sharding), or "
            "reserve headroom for NCCL's buffers",
        ),
        confirm="NCCL_DEBUG=WARN: the 'Cuda failure' line names the CUDA error",
    ),
    Rule(
        code="cuda_error",
        mechanism=Mechanism.RESOURCES,
        title="A CUDA error inside NCCL (not a network fault)",
        severity=Severity.CRITICAL,
        when="'Cuda failure' with an error other than out-of-memory, peer access, NVLS or "
        "driver version: illegal address, launch failure, ECC, initialization error",
        impact="the GPU context is broken; every later CUDA call on it fails",
        impact_source="NCCL CUDACHECK (src/include/checks.h) reports the CUDA runtime's error",
        checks=(
            "`nvidia-smi -q -d ECC` and `dmesg | grep -i xid` on the host",
            "the application's own CUDA errors just before (CUDA_LAUNCH_BLOCKING=1)",
        ),
        fixes=("fix the faulting kernel or drain the GPU with Xid/ECC errors",),
        confirm="`dmesg | grep -i xid` on the failing host",
    ),
    Rule(
        code="gpu_arch_missing",
        mechanism=Mechanism.VERSIONS,
        title="The NCCL or PyTorch build predates this GPU: no kernels or support for it",
        severity=Severity.CRITICAL,
        when="'Cuda failure ... named symbol not found' or 'no kernel image is available for "
        "execution on the device' inside NCCL, PyTorch's 'with CUDA capability sm_XX is not "
        "compatible with the current PyTorch installation', or NCCL's '... exceeds device/fn "
        "maxSharedMem' (a build older than the GPU, e.g. NCCL 2.25 on sm_120); or a failing "
        "job whose NCCL release predates its GPU's architecture (first release: sm_60 1.3.4, "
        "sm_80 2.7.3, sm_90 2.15.1, sm_100 2.25.1, sm_120 2.26.2), NCCL before 2.15.1 "
        "failing to find the reverse of a GPU-GPU link (it reads 12 of Hopper's 18 NVLinks), "
        "or an unhandled CUDA error from nccl-tests built with NCCL 1.x on Pascal (possible)",
        impact="no collective can launch: NCCL's device code was compiled for other GPU "
        "architectures (NVCC_GENCODE) than the one it runs on, or NCCL misreads the GPU's "
        "links and fails at init",
        impact_source="NVIDIA/nccl#1372 (NCCL built for sm_80 only, run on H100); "
        "pytorch/pytorch#152077 (a cu118 wheel on an sm_120 RTX 5090); NVIDIA/nccl release "
        "commits (2.15.1-1 'Add support for H100 (sm90)', 2.25.1-1 'Add Blackwell/SM100 "
        "support'; src/graph/xml.cc maxNvLinks); mila-iqia/milabench#183 (NCCL 2.14.3 on "
        "H100: 'Failed to find reverse path', 2.18.5 passed)",
        checks=(
            "`nvidia-smi --query-gpu=compute_cap --format=csv` against the build's "
            "architectures (`python -c 'import torch; print(torch.cuda.get_arch_list())'`, "
            "NCCL's NVCC_GENCODE)",
        ),
        fixes=(
            "use a PyTorch wheel / NCCL build whose CUDA version supports this GPU (e.g. cu128 "
            "for Blackwell), or rebuild NCCL with NVCC_GENCODE for its compute capability",
            "upgrade NCCL (the container's, or the wheel's nvidia-nccl-cu12) to a release at "
            "least as new as the GPU's architecture",
        ),
        confirm="the GPU's compute capability, the build's architecture list and the 'NCCL "
        "version' line",
    ),
    Rule(
        code="collective_mismatch",
        mechanism=Mechanism.USAGE,
        title="Ranks call collectives with different sizes or settings",
        severity=Severity.CRITICAL,
        when="NET/Socket 'message truncated' or NET/IB 'collective mismatch' / 'posted "
        "incorrect receive info': a peer sent more than this rank expects; or PyTorch's "
        "'Detected mismatch between collectives on ranks' or 'Error when verifying shape "
        "tensors for collective' (TORCH_DISTRIBUTED_DEBUG=DETAIL)",
        impact="ncclInvalidUsage: the job aborts (or hangs when the counts differ silently)",
        impact_source="NCCL's own explanation in src/transport/net_socket.cc (2.27+): 'a "
        "mismatch in collective sizes or environment settings (e.g. NCCL_PROTO, NCCL_ALGO)'",
        checks=(
            "the same NCCL_PROTO/NCCL_ALGO/NCCL_* settings on every rank",
            "every rank calls the same collectives with the same counts (TORCH_NCCL_DESYNC_DEBUG)",
        ),
        fixes=("make the ranks' collectives and NCCL settings identical",),
        confirm="TORCH_DISTRIBUTED_DEBUG=DETAIL (collective shapes per rank)",
    ),
    Rule(
        code="duplicate_gpu",
        mechanism=Mechanism.USAGE,
        title="Two ranks use the same GPU",
        severity=Severity.CRITICAL,
        when="'Duplicate GPU detected : rank A and rank B both on CUDA device X'",
        impact="NCCL refuses to create the communicator (ncclInvalidUsage)",
        impact_source="NCCL init.cc check; Peterande/D-FINE#289, horovod/horovod#3929",
        checks=(
            "each rank calls torch.cuda.set_device(local_rank) before init_process_group",
            "CUDA_VISIBLE_DEVICES / the launcher's GPU assignment (Ray, Slurm --gpus-per-task)",
        ),
        fixes=("one GPU per rank: set the device from LOCAL_RANK; do not hard-code a device",),
        confirm="print LOCAL_RANK and torch.cuda.current_device() in every rank",
    ),
    Rule(
        code="tests_without_mpi",
        mechanism=Mechanism.USAGE,
        title="nccl-tests ran as separate one-rank jobs: the binary was built without MPI",
        severity=Severity.HIGH,
        when="several nccl-tests processes each report itself as rank 0 (different pids, no "
        "rank above 0 anywhere), or the run header ('# nThread N nGpus G ...') is printed "
        "several times before any result: mpirun/srun started N copies that never joined one "
        "communicator",
        impact="nothing crosses a GPU or a node: bus bandwidth is 0 or single-GPU figures, and "
        "the run says nothing about the fabric",
        impact_source="nccl-tests README ('MPI=1 ... make'); src/common.cu prints the run "
        "header and one '# Rank N Group G Pid P on HOST device D' line per rank from MPI rank "
        "0 only (PRINT is `if (is_main_thread) printf`, src/common.h); NVIDIA/nccl-tests#213",
        checks=(
            "`ldd build/all_reduce_perf | grep -i mpi`: an MPI build links libmpi",
            "the mpirun that launches it is the MPI it was built with (MPI_HOME)",
        ),
        fixes=(
            "rebuild: make MPI=1 MPI_HOME=/path/to/mpi CUDA_HOME=... NCCL_HOME=...",
            "or run one process with all local GPUs: all_reduce_perf -g 8",
        ),
        confirm="the header of a correct run lists '# Rank 0 ... Rank N-1' before the table",
    ),
    # --- timeouts and dead peers --------------------------------------------------------------
    Rule(
        code="collective_timeout",
        mechanism=Mechanism.TIMEOUTS,
        title="Watchdog timeout: ranks waited for a collective a peer never joined",
        severity=Severity.CRITICAL,
        when="PyTorch's watchdog caught a collective timeout (any version, with or without "
        "SeqNum), 'Timeout at NCCL work', a desync report, a Gloo recv/send timeout, the "
        "heartbeat monitor, a rank told to dump because another timed out; ranked after any "
        "critical cause found beside it",
        impact="the job is taken down after the timeout (default 10 min; 30 min before 2.2)",
        impact_source="PyTorch ProcessGroupNCCL watchdog; stas00/ml-engineering debug/pytorch.md",
        checks=(
            "TORCH_NCCL_DESYNC_DEBUG=1 and the flight recorder (TORCH_FR_BUFFER_SIZE) name "
            "the rank that did not join",
            "the missing rank's own log: an exception, OOM, a slow checkpoint or data branch",
        ),
        fixes=(
            "find why the missing rank did not enter the collective; raise the timeout only "
            "for known long phases (checkpointing, evaluation on one rank)",
        ),
        confirm="the log of every rank around the timeout (the missing one matters most)",
        consequence=True,
    ),
    Rule(
        code="peer_exited",
        mechanism=Mechanism.TIMEOUTS,
        title="A peer process died; the others lost their connections to it",
        severity=Severity.CRITICAL,
        when="ncclRemoteError, 'Connection closed by remote peer', 'Broken pipe', 'Connection "
        "reset by peer' on NCCL sockets, with no network error of NCCL's own; or a launcher "
        "reporting a rank killed by SIGKILL (torchrun 'exitcode: -9', DeepSpeed 'return code = "
        "-9'): the kernel's OOM killer or a scheduler limit; or a rank that died on "
        "SIGSEGV, SIGABRT, SIGBUS, SIGILL or SIGFPE (torchrun 'Signal 11 (SIGSEGV) received'); "
        "or EFA's 'Invalid receiver queue pair number (QPN)', whose own help text "
        "(libfabric prov/efa efa_strerror.c) calls it typically a crashed peer",
        impact="every rank fails; the first error is on the rank that died",
        impact_source="NVIDIA/nccl#795 (a seg fault on a remote rank)",
        checks=("the dead rank's log and `dmesg` (OOM killer, segfault, Xid)",),
        fixes=("fix the crash on the dead rank; this error on the others is a consequence",),
        confirm="the log of the rank at the address in the error",
        consequence=True,
    ),
    # --- version skew -------------------------------------------------------------------------
    Rule(
        code="mixed_versions",
        mechanism=Mechanism.VERSIONS,
        title="Different NCCL versions in one job (across ranks, or under the framework)",
        severity=Severity.CRITICAL,
        when="more than one `NCCL version`, NCCL's 'Mismatched NCCL version detected', an "
        "'undefined symbol: nccl...' (a libnccl older than the framework's), or a garbage "
        "address family at bootstrap between nodes whose interfaces are fine",
        impact="mismatched bootstrap messages: hangs or obscure failures at connection setup",
        impact_source="NVIDIA/nccl#1267 (pip nvidia-nccl-cu12 2.20.5 vs 2.19.3)",
        checks=(
            "`python -c 'import torch; print(torch.cuda.nccl.version())'` on every node",
            "`pip list | grep nccl` and any libnccl on LD_LIBRARY_PATH",
        ),
        fixes=("one NCCL everywhere: the same image or the same pip wheel on every node",),
        confirm="the 'NCCL version' line of one rank per node",
    ),
    Rule(
        code="driver_too_old",
        mechanism=Mechanism.VERSIONS,
        title="The GPU driver is older than the CUDA runtime the job was built for",
        severity=Severity.CRITICAL,
        when="'CUDA driver version is insufficient for CUDA runtime version', or NCCL's "
        "'CUDA Driver version found is X. Minimum requirement is Y'",
        impact="no CUDA at all: the job cannot start",
        impact_source="NVIDIA/cuml#5961 (CUDA 11.8 runtime on a CUDA 11.2 driver)",
        checks=("`nvidia-smi` (driver's CUDA version) against the runtime of torch/the image",),
        fixes=("upgrade the driver, or use a build for the driver's CUDA version",),
        confirm="`nvidia-smi` and `python -c 'import torch; print(torch.version.cuda)'`",
    ),
    Rule(
        code="gpu_xid",
        mechanism=Mechanism.RESOURCES,
        title="A GPU reported a fault to its driver (Xid)",
        severity=Severity.CRITICAL,
        when="an 'NVRM: Xid (PCI:...): N' kernel line, 'GPU has fallen off the bus', or "
        "nvidia-smi unable to reach a GPU ('Unable to determine the device handle')",
        impact="the GPU's process fails or hangs and every collective with it; hardware Xids "
        "(ECC, NVLink, fallen off the bus) come back until the GPU is reset or serviced",
        impact_source="NVIDIA Xid catalog (docs.nvidia.com/deploy/xid-errors), its resolution "
        "buckets; NVIDIA dynamic page retirement docs (Xid 48, 63, 64)",
        checks=(
            "`dmesg -T | grep -i xid` (or journalctl -k) on the failing node: which Xid, which "
            "GPU (PCI address), how often",
            "`nvidia-smi -q -d ECC,ROW_REMAPPER` on that GPU",
        ),
        fixes=(
            "application Xids (13, 31, 43): fix or restart the job; hardware Xids (48, 74, 79, "
            "92, 95, 119, 120): drain the node, reset the GPU (nvidia-smi -r) or reboot, and "
            "send a GPU that repeats them for service",
        ),
        confirm="the node's kernel log around the failure (`dmesg -T | grep -i xid`)",
    ),
    Rule(
        code="driver_unusable",
        mechanism=Mechanism.VERSIONS,
        title="No usable GPU driver where the job runs (missing, or libraries not matching it)",
        severity=Severity.CRITICAL,
        when="NVML's 'Driver/library version mismatch' (nvidia-smi, NCCL's nvmlInit), NCCL's "
        "'Failed to find CUDA library', NVML's 'Driver Not Loaded' / nvidia-smi's 'couldn't "
        "communicate with the NVIDIA driver', PyTorch's 'Found no NVIDIA driver on your system' "
        "or 'no GPUs found', "
        "CUDA's driver combination errors (803 'unsupported display driver / cuda driver "
        "combination', 804 'forward compatibility was attempted on non supported HW')",
        impact="no GPU at all: the job cannot start",
        impact_source="NVIDIA/nccl src/misc/nvmlwrap.cc and src/misc/cudawrap.cc (the WARNs); "
        "NVIDIA/nvidia-docker#1163 (user-space driver libraries newer than the loaded module)",
        checks=(
            "`nvidia-smi` on the host and inside the container",
            "`cat /proc/driver/nvidia/version` (loaded module) against `ls /usr/lib/x86_64-"
            "linux-gnu/libnvidia-ml.so.*` (user-space libraries)",
        ),
        fixes=(
            "after a driver upgrade: reboot (or unload and reload the nvidia modules)",
            "containers: run with the NVIDIA runtime (--gpus all / the device plugin) so the "
            "host's libraries are mounted; never bake driver libraries into the image",
        ),
        confirm="`nvidia-smi` where the job runs",
    ),
    # --- whole-job performance ----------------------------------------------------------------
    Rule(
        code="uneven_nodes",
        mechanism=Mechanism.TRANSPORT,
        title="Nodes are set up differently",
        severity=Severity.MEDIUM,
        when="hosts of one job list different NICs, socket interfaces or transports",
        impact="the slowest node sets the pace of every collective",
        impact_source="NVIDIA/nccl#897 (GDR on one node only)",
        checks=("the 'NET/IB : Using' / 'NET/Socket : Using' line of one rank per node",),
        fixes=("make the nodes identical (drivers, modules, plugins, env)",),
        confirm="NCCL_DEBUG=INFO from one rank on every node",
    ),
    Rule(
        code="busbw_low",
        mechanism=Mechanism.PERFORMANCE,
        title="nccl-tests busbw is far below what the hardware should give",
        severity=Severity.HIGH,
        when="the largest sizes' busbw is below 70% of the model for the hardware read from "
        "the logs (or given with --fabric/--gpu); never compared when the hardware is unknown",
        impact="collectives take (1/ratio) times longer than they should",
        impact_source="bandwall.model.collectives on the catalog fabric",
        checks=("the transport findings of the same job's NCCL log",),
        fixes=("fix the path faults found, then rerun nccl-tests",),
        confirm="the NCCL_DEBUG=INFO log of the same nccl-tests run",
    ),
    Rule(
        code="model_assumption",
        mechanism=Mechanism.PERFORMANCE,
        title="nccl-tests busbw beats the assumed fabric",
        severity=Severity.INFO,
        when="measured busbw is above 130% of the model for the hardware assumed",
        impact="the comparison's assumption is wrong, not the cluster",
        impact_source="bandwall.model.collectives",
        checks=("--fabric, --gpus-per-node",),
        fixes=("give the real fabric to compare against",),
        confirm="the NIC lines of the NCCL log (speed, count)",
    ),
    Rule(
        code="straggler",
        mechanism=Mechanism.PERFORMANCE,
        title="One rank is slower and the others wait for it",
        severity=Severity.HIGH,
        when="in profiler traces one rank spends the most time outside communication in at "
        "least 80% of the steps, by more than 10% of the step",
        impact="its excess time per step is paid by every rank",
        impact_source="HolisticTraceAnalysis temporal breakdown definitions",
        checks=("that host's GPU clocks (`nvidia-smi -q -d PERFORMANCE`), data loader, CPU load",),
        fixes=("drain or replace the host",),
        confirm="traces of every rank for the same steps",
    ),
    Rule(
        code="exposed_comm",
        mechanism=Mechanism.PERFORMANCE,
        title="Communication not hidden behind compute",
        severity=Severity.MEDIUM,
        when="profiler traces: collective time not overlapped with compute",
        impact="exposed communication adds directly to the step time",
        impact_source="HolisticTraceAnalysis comm/comp overlap definition",
        checks=("DDP bucket size, FSDP prefetch, the collectives per step",),
        fixes=("overlap more, communicate less, or a faster fabric",),
        confirm="a trace of the same job",
    ),
    Rule(
        code="model_gap",
        mechanism=Mechanism.PERFORMANCE,
        title="The run's step differs from the model's",
        severity=Severity.MEDIUM,
        when="a training log (Megatron-LM, NeMo, torchtitan, DeepSpeed, HF Trainer, Lightning) "
        "and the job's config (--from, or the log's own Megatron arguments): the measured step "
        "against the plan of that job; the gap goes to the term that would need the smallest "
        "relative change to hold it",
        impact="the seconds per step the model does not explain",
        impact_source="the log's steady steps (median) and bandwall's plan of the same job",
        checks=(
            "the config describes the logged job (GPU count, batch, layout, --gpu)",
            "bandwall calibrate --from-log LOG --from CONFIG fits the compute efficiency",
        ),
        fixes=("the change the model prices best (in the comparison below)",),
        confirm="a profiler trace of the same job (doctor splits its step into terms)",
    ),
    Rule(
        code="idle",
        mechanism=Mechanism.PERFORMANCE,
        title="Ranks idle in the step",
        severity=Severity.MEDIUM,
        when="profiler traces: more than 10% of the step with neither compute nor "
        "communication and no straggler",
        impact="idle time adds directly to the step",
        impact_source="HolisticTraceAnalysis idle time definition",
        checks=("the data loader (num_workers, pinned memory), CPU-bound Python",),
        fixes=("prefetch input; CUDA graphs / torch.compile for launch-bound steps",),
        confirm="a trace with CPU activity",
    ),
    Rule(
        code="nccl_errors",
        mechanism=Mechanism.TIMEOUTS,
        title="NCCL reported errors the rules above do not explain",
        severity=Severity.LOW,
        when="WARN/ERROR lines no other rule explains",
        impact="unknown: read the first one",
        impact_source="-",
        checks=("the first quoted line, on the first rank that printed it",),
        fixes=("fix the first error; the others usually follow from it",),
        confirm="NCCL_DEBUG=INFO of that rank",
        consequence=True,
    ),
)

BY_CODE: dict[str, Rule] = {r.code: r for r in RULES}


def rule(code: str) -> Rule:
    """The rule with that code (KeyError names it)."""
    return BY_CODE[code]
