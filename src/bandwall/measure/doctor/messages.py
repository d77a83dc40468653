"""NCCL's and aws-ofi-nccl's own warnings that name their cause, as data.

Doctor's detectors read the messages it has seen in public logs, with their context. This table
is for the rest: a WARN line no detector quoted is looked up here before it falls to the
catch-all (`nccl_errors`). Each row is a message NCCL or the AWS OFI plugin prints, the cause
its source code implies, and how sure one line can make us (`likely`: the message says it;
otherwise it is one of the causes the call's failure allows).

Built from an audit of every WARN template of NVIDIA/nccl v2.7.8, v2.12.12, v2.18.3, v2.21.5,
v2.26.2 and v2.30.7 and aws/aws-ofi-nccl v1.7.4-aws and v1.21.1 (1,531 templates, 472 that the
field can print; 2026-12-07): each synthetic line went through doctor alone, and the 220 that
ended in the catch-all while the code around the WARN named a cause are the rows below (the
wording and the patterns are doctor's own; the file named is where the message lives).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Message:
    """One warning family: what it means and where it comes from."""

    code: str
    pattern: re.Pattern[str]
    why: str
    source: str
    likely: bool = False
    """The message names the cause (LIKELY); otherwise the cause is one of several (POSSIBLE)."""


def _m(code: str, pattern: str, why: str, source: str, likely: bool = False) -> Message:
    return Message(code, re.compile(pattern), why, source, likely)


MESSAGES: tuple[Message, ...] = (
    # --- IB verbs ---------------------------------------------------------------------------
    _m(
        "ib_link_error",
        # an invalid-request work-queue error is a malformed request, not the link
        r"async fatal event on (?:CQ|QP)\b(?!.*invalid request)",
        "the NIC raised a fatal asynchronous event on a queue NCCL uses: the port, the link or "
        "the peer's NIC failed under the job",
        "nccl src/transport/net_ib/common.cc (2.30 form), net_ib.cc",
    ),
    _m(
        "ib_link_error",
        r"Got CQE with error",
        "an RDMA work request completed with an error status",
        "nccl src/transport/net_ib/p2p.cc",
        likely=True,
    ),
    _m(
        "ib_link_error",
        r"Got non-fatal async event",
        "the NIC reported a port or GID event while the job ran (a link that went down and up "
        "is one)",
        "nccl src/transport/net_ib/common.cc",
    ),
    _m(
        "socket_fallback",
        r"Call to ibv_open_device failed|NET/IB ?: Unable to (?:open|query) (?:device|port)",
        "NCCL sees the RDMA device but cannot open or query it (a container without "
        "/dev/infiniband, or permissions): it skips the NIC, and without one it runs over sockets",
        "nccl src/misc/ibvwrap.cc, src/transport/net_ib/init.cc",
    ),
    _m(
        "memlock",
        r"Call to ibv_create_qp failed",
        "creating a queue pair failed: it pins memory for the queue, which the locked-memory "
        "limit caps first",
        "nccl src/misc/ibvwrap.cc",
    ),
    _m(
        "gdr_off",
        r"ibv_reg_mr failed with error Bad address",
        "registering a buffer with the NIC returned EFAULT: the NIC cannot address GPU memory "
        "without nvidia-peermem or DMA-BUF",
        "nccl src/misc/ibvwrap.cc",
        likely=True,
    ),
    _m(
        "ib_hca_select",
        r"TOPO/NET : (?:Only matched \d+ devices|Could not force merge NICs)|"
        r"non-existent virtual device|Can't make virtual NIC with 0 devices|"
        r"Cannot allocate any more virtual devices|Cannot use physical device \d+, max|"
        r"merge multiple devices together when NCCL_IB_MERGE_NICS=0",
        "the NIC list or merge NCCL was given (NCCL_IB_HCA, NCCL_NET_FORCE_MERGE, "
        "NCCL_IB_MERGE_NICS) does not match the devices present",
        "nccl src/graph/topo.cc, src/transport/net_ib/init.cc and connect.cc",
        likely=True,
    ),
    _m(
        "uneven_nodes",
        r"requires NIC \d+ but that NIC is not available for rank|"
        r"mergedDev.*has a different number of devices",
        "the ranks see different NICs (a NIC missing or merged differently on one node)",
        "nccl src/graph/search.cc, src/transport/net_ib.cc",
        likely=True,
    ),
    # --- sockets and bootstrap --------------------------------------------------------------
    _m(
        "socket_ifname",
        r"NET/IB ?: No IP interface found",
        "no IP interface matches NCCL_SOCKET_IFNAME (NET/IB needs one for its out-of-band "
        "connection)",
        "nccl src/transport/net_ib/init.cc",
        likely=True,
    ),
    _m(
        "socket_ifname",
        r"Net : (?:Unsupported address family type|unsupported IP family)",
        "the address NCCL was given or chose is of a family its sockets do not handle",
        "nccl src/misc/socket.cc",
    ),
    _m(
        "bootstrap_unreachable",
        r"error encountered when getting address info|socketPollConnect poll\(\) returned",
        "resolving or connecting to a peer's address failed while the ranks met",
        "nccl src/misc/socket.cc",
    ),
    _m(
        "peer_exited",
        r"NET/Socket : socket progress error|Socket recv failed while polling for opId|"
        r"Could not receive type from localRank",
        "a peer's socket closed mid-transfer: the process on the other end is gone",
        "nccl src/transport/net_socket.cc, src/proxy.cc",
    ),
    _m(
        "collective_mismatch",
        r"Message truncated : received [\d,]+ bytes instead of",
        "a rank received a different number of bytes than it posted for: the ranks do not "
        "agree on what they exchange",
        "nccl src/bootstrap.cc, src/transport/net_socket.cc",
    ),
    _m(
        "mixed_versions",
        r"NCCL version mismatch with remote peer",
        "NCCL's RAS service met a peer running another NCCL release",
        "nccl src/ras/ras.cc (2.24+)",
        likely=True,
    ),
    # --- shared memory ----------------------------------------------------------------------
    _m(
        "shm_space",
        r"failed to create shared memory file .*No space left on device",
        "/dev/shm is full or too small for NCCL's buffers",
        "nccl src/os/linux.cc (2.30 form)",
        likely=True,
    ),
    _m(
        "shm_not_shared",
        r"UDS: (?:Sending|Receiving) data over socket.*failed|UDS: Cannot connect to provided "
        r"name|Error while \w+(?: to)? shared memory segment",
        "local ranks exchange memory handles through a Unix socket and shared memory; they "
        "fail when the ranks do not share the host's IPC and /dev/shm (separate containers)",
        "nccl src/os/linux_ipcsocket.cc, src/misc/ipcsocket.cc, src/include/shm.h",
    ),
    # --- GPU, driver, CUDA ------------------------------------------------------------------
    _m(
        "driver_unusable",
        r"Failed to open libnvidia-ml\.so|cuDriverGetVersion failed|"
        r"Failed to find CUDA Runtime library|CUDA initialization failed|"
        r"Failed to query CUDA (?:runtime|driver) version|"
        r"No CUDA driver entry point functions available",
        "the GPU driver's libraries cannot be loaded or answer where the job runs",
        "nccl src/misc/nvmlwrap.cc, cudawrap.cc; aws-ofi-nccl src/nccl_ofi_cuda.cpp",
        likely=True,
    ),
    _m(
        "driver_unusable",
        r"NET/OFI (?:Failed to load (?:CUDA runtime )?symbol|cudaRuntimeGetVersion failed|"
        r"Error getting (?:CUDA device count|current CUDA device)|"
        r"Failed to resolve CUDA function)",
        "the network plugin cannot load or query CUDA where the job runs",
        "aws-ofi-nccl src/nccl_ofi_cuda.cpp, nccl_ofi_net.cpp",
    ),
    _m(
        "driver_too_old",
        r"Unable to create thread context due to old driver|"
        r"installed CUDA driver < R\d+|Retrieve \S+ (?:version \d+ )?failed with",
        "the driver lacks an entry point or feature of the CUDA version NCCL was built for",
        "nccl src/proxy.cc, src/misc/strongstream.cc, src/misc/cudawrap.cc",
    ),
    _m(
        "gpu_xid",
        r"nvml\w*\([^)]*\) failed: .*(?:GPU is lost|reset|Unknown Error)|"
        r"NVML failure '.*(?:GPU is lost|reset)",
        "NVML lost the GPU: it fell off the bus or needs a reset (the kernel log has the Xid)",
        "nccl src/misc/nvmlwrap.cc",
        likely=True,
    ),
    _m(
        "cuda_error",
        r"Failed to (?:set|create) CUDA (?:device|context)",
        "NCCL's proxy thread could not select the GPU its rank uses",
        "nccl src/proxy.cc",
    ),
    _m(
        "gpu_memory",
        r"cuMemAlloc failed",
        "a GPU allocation for the network plugin's buffers failed",
        "aws-ofi-nccl src/nccl_ofi_cuda.cpp",
    ),
    # --- topology files, PCI, NVSwitch --------------------------------------------------------
    _m(
        "topology_file",
        r"XML Mismatch :|system node not found in XML|XML parser is limited to|"
        r"too many XML (?:sub)?nodes|NET/TOPO : Couldn't find net with name|"
        r"XML Export Channel : rank|forming the complete topology XML file path",
        "the topology or graph XML NCCL was given (NCCL_TOPO_FILE, NCCL_GRAPH_FILE) does not "
        "match the system or cannot be read",
        "nccl src/graph/xml.cc, topo.cc, search.cc; aws-ofi-nccl src/platform-aws.cpp",
        likely=True,
    ),
    _m(
        "pci_sysfs",
        r"device property (?:path|file)",
        "the plugin cannot read a device's PCI properties from /sys",
        "aws-ofi-nccl src/nccl_ofi_topo.cpp",
    ),
    _m(
        "nvswitch_fabric",
        r"MNNVL \(cliqueSize \d+\) is available but not (?:working|supported)",
        "the multi-node NVLink domain is not usable: IMEX channels or the IMEX service are not "
        "set up on the node",
        "nccl src/mnnvl.cc",
        likely=True,
    ),
    # --- plugins ----------------------------------------------------------------------------
    _m(
        "net_plugin_load",
        r"Failed to initialize any NET plugin",
        "no network plugin (and not NCCL's own IB or socket transports) could start",
        "nccl src/plugin/net.cc",
        likely=True,
    ),
    _m(
        "gdr_off",
        r"GDR disabled on GDR-supported instance type",
        "the OFI plugin turned GPUDirect RDMA off on an instance that supports it",
        "aws-ofi-nccl src/platform-aws.cpp",
        likely=True,
    ),
    _m(
        "ib_link_error",
        r"NET/OFI (?:Fatal: )?(?:\w+ buffer recv|Request) completed with error",
        "a libfabric transfer completed with an error: the link or the peer's device failed "
        "under the job",
        "aws-ofi-nccl src/nccl_ofi_rdma.cpp",
    ),
    _m(
        "efa_unavailable",
        r"couldn't be configured on an endpoint|FI_OPT_CUDA_API_PERMITTED|"
        r"Unable to find plugin protocol|NET/OFI .*initialization failed|"
        r"does not support (?:FI_CONTEXT|RMA operations|\d+ bytes of immediate data)",
        "the libfabric provider found lacks what the plugin's protocol needs (another provider "
        "than EFA, or a libfabric too old for GPUDirect with this plugin)",
        "aws-ofi-nccl src/nccl_ofi_ofiutils.cpp, nccl_ofi_rdma.cpp, nccl_ofi_net.cpp",
    ),
    _m(
        "efa_unavailable",
        r"Couldn't (?:open a fabric access domain|create (?:fabric|domain|completion queue)|"
        r"allocate endpoint|open AV|bind EP-(?:CQ|AV)|enable endpoint|register memory region)|"
        r"Creating new endpoint for domain|Initializing (?:a new domain|(?:control )?rail)|"
        r"Could not (?:create Libfabric endpoint|register memory on (?:data|ctrl) rail)|"
        r"Failed call to reg_mr|Insufficient Libfabric devices|Initializing plugin failed|"
        r"Failed to initialize \w+ protocol|Querying provider capabilities failed|"
        r"fi_open_ops for EFA features failed|Unable to (?:bind|enable) MR",
        "libfabric could not set up the fabric, domain, endpoint or memory registration the "
        "plugin needs: no usable EFA device or provider where the job runs",
        "aws-ofi-nccl src/nccl_ofi_ofiutils.cpp, nccl_ofi_net.cpp, nccl_ofi_rdma.cpp, "
        "nccl_ofi_sendrecv.cpp",
    ),
)


def lookup(text: str) -> Message | None:
    """The first message row whose pattern is in `text`, or None."""
    for m in MESSAGES:
        if m.pattern.search(text):
            return m
    return None
