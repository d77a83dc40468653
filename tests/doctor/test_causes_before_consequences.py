"""Whole excerpts as a failing job prints them: the cause NCCL or the driver states, then what it
ends in (PyTorch's watchdog timeout, a dead peer, NCCL's error return chain). The first finding
must be the cause, not its consequence. Each excerpt is written from the messages' source, cited
beside it (NVIDIA/nccl tags, pytorch/pytorch files); none is copied from a thread."""

from __future__ import annotations

from pathlib import Path

import pytest

from bandwall.measure.doctor import diagnose

#: PyTorch's watchdog timeout (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, 2.2+ wording)
WATCHDOG = (
    "[rank3]:[E ProcessGroupNCCL.cpp:563] [Rank 3] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=2041, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, "
    "Timeout(ms)=600000) ran for 600412 milliseconds before timing out.\n"
)

#: (what the excerpt shows and where its lines come from, the excerpt, the rule ranked first)
EXCERPTS: list[tuple[str, str, str]] = [
    (
        # NCCL v2.21.5 src/transport/net_ib.cc ncclIbTest: 'NET/IB : Got completion from peer
        # %s with error %d, opcode %d, len %d, vendor err %d'; then the watchdog
        "an IB retry-exceeded completion, then the watchdog timeout it causes",
        "g7:2334:2512 [3] NCCL WARN NET/IB : Got completion from peer 10.10.0.8<40345> with "
        "error 12, opcode 0, len 0, vendor err 129 (Send)\n"
        "g7:2334:2512 [3] NCCL INFO transport/net.cc:1138 -> 6\n" + WATCHDOG,
        "ib_link_error",
    ),
    (
        # the NVIDIA driver's Xid report (kernel log), then the watchdog on a surviving rank
        "a GPU that fell off the bus, then the watchdog timeout",
        "NVRM: Xid (PCI:0000:b3:00): 79, pid=0, GPU has fallen off the bus.\n" + WATCHDOG,
        "gpu_xid",
    ),
    (
        # NCCL v2.21.5 src/misc/shmutils.cc:128 'Error while %s shared memory segment %s (size
        # %ld), error: %s (%d)'; PyTorch's DistBackendError repeating it after 'Last error:'
        "/dev/shm full in a container, then PyTorch's unhandled system error",
        "w0:391:512 [1] NCCL WARN Error while creating shared memory segment "
        "/dev/shm/nccl-8HkBf2 (size 9637888), error: No space left on device (28)\n"
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1691, unhandled system error (run with NCCL_DEBUG=INFO for "
        "details), NCCL version 2.21.5\n" + WATCHDOG,
        "shm_space",
    ),
    (
        # torch/csrc/DataLoader.cpp (SIGBUS handler) and torch/utils/data/dataloader.py
        "DataLoader workers out of /dev/shm (a container's 64 MB default)",
        "ERROR: Unexpected bus error encountered in worker. This might be caused by "
        "insufficient shared memory (shm).\n"
        "RuntimeError: DataLoader worker (pid 2345) is killed by signal: Bus error. It is "
        "possible that dataloader's workers are out of shared memory. Please try to raise "
        "your shared memory limit.\n",
        "shm_space",
    ),
    (
        # NCCL v2.21.5 src/misc/socket.cc:351-354: docker* and lo are excluded unless chosen
        # (NCCL_SOCKET_IFNAME) or nothing else is up; socket.cc:484 the connect failure
        "bootstrap and NET/Socket on docker0, connections refused",
        "a:100:100 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>\n"
        "a:100:100 [0] NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0>\n"
        "a:100:130 [0] NCCL WARN Net : Connect to 172.17.0.1<45231> failed : Connection "
        "refused\n",
        "socket_ifname",
    ),
    (
        "bootstrap on loopback, the connection aborted",
        "g1:551:551 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>\n"
        "g1:551:570 [0] NCCL WARN socketStartConnect: Connect to 127.0.0.1<51243> failed : "
        "Software caused connection abort\n",
        "socket_ifname",
    ),
    (
        # the same socket.cc connect WARN; an IPv6 link-local address advertised
        "bootstrap on an IPv6 link-local address, the network unreachable",
        "n1:5:5 [0] NCCL INFO Bootstrap : Using eth0:fe80::5054:ff:fe12:3456%eth0<0>\n"
        "n1:5:30 [0] NCCL WARN socketStartConnect: Connect to fe80::5054:ff:fe12:3457%eth0"
        "<44321> failed : Network is unreachable\n",
        "socket_ifname",
    ),
    (
        # one ordinary interface chosen by NCCL itself; EHOSTUNREACH is what connect() returns
        # for an iptables/firewalld REJECT (icmp-host-prohibited)
        "the node's only interface, 'No route to host': a firewall",
        "h:2001:2001 [0] NCCL INFO Bootstrap : Using eth0:10.1.0.4<0>\n"
        "h:2001:2001 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.0.4<0>\n"
        "h:2001:2040 [0] NCCL WARN socketStartConnect: Connect to 10.1.0.5<38211> failed : "
        "No route to host\n",
        "bootstrap_unreachable",
    ),
    (
        # NCCL v2.18 src/transport/nvls.cc CUCHECK without a file in the WARN; the error
        # return chain (src/include/checks.h:111 '%s:%d -> %d') names nvls.cc
        "a CUDA failure whose return chain starts in NVLS setup",
        "n1:200:260 [0] NCCL WARN Cuda failure 1 'invalid argument'\n"
        "n1:200:260 [0] NCCL INFO transport/nvls.cc:158 -> 1\n"
        "n1:200:260 [0] NCCL INFO transport/nvls.cc:386 -> 1\n",
        "nvswitch_fabric",
    ),
]


EXCERPTS += [
    (
        # NCCL v2.21.5 src/transport/net_ib.cc:1057 'NET/IB: %s %d IbDev %d Port %d qpn %d mtu %d
        # LID %d ...' on two hosts (mtu 5 = 4096 B, 3 = 1024 B), then the job hangs
        "two hosts' QPs at different MTUs, then the watchdog",
        "a:1:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        "a:1:2 [0] NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 1234 mtu 5 LID 12 "
        "fifoRkey=0x1 fifoLkey=0x2\n"
        "b:1:2 [0] NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 4321 mtu 3 LID 14 "
        "fifoRkey=0x1 fifoLkey=0x2\n" + WATCHDOG,
        "ib_mtu",
    ),
    (
        # NCCL v2.21.5 net_ib.cc: 'GPU Direct RDMA Disabled for HCA %d '%s' (no module)' INFO and
        # the completion WARN: the slowdown is certain, the failure is the retry error
        "GPUDirect RDMA off and an IB retry error: the failure first",
        "g1:10:10 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB "
        "ib0:10.0.0.1<0>\n"
        "g1:10:40 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no "
        "module)\n"
        "g1:10:40 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0\n"
        "g1:10:90 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<40345> with error "
        "12, opcode 0, len 0, vendor err 129 (Send)\n",
        "ib_link_error",
    ),
    (
        # c10/cuda/CUDACachingAllocator.cpp 'CUDA out of memory. Tried to allocate ...' on one
        # rank; the watchdog on another
        "one rank out of GPU memory, the others time out waiting for it",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; "
        "79.15 GiB total capacity; 75.20 GiB already allocated)\n" + WATCHDOG,
        "gpu_memory",
    ),
    (
        # Linux drivers/net/ethernet/mellanox/mlx5/core (port state change, module events)
        "the kernel log's NIC link down, then the timeout",
        "[12345.678] mlx5_core 0000:0c:00.0 ibp12s0: Link down\n" + WATCHDOG,
        "ib_link_error",
    ),
    (
        # NCCL v2.4-v2.8 src/misc/ibvwrap.cc IBV_PTR_CHECK: 'Call to ibv_reg_mr failed' with no
        # errno
        "an old NCCL's registration failure without an errno",
        "n1:5:30 [0] NCCL WARN Call to ibv_reg_mr failed\n"
        "n1:5:30 [0] NCCL INFO transport/net_ib.cc:612 -> 2\n",
        "memlock",
    ),
    (
        # NCCL src/misc/nvmlwrap.cc 'nvmlInit%s() failed: %s' (nvmlErrorString: NVML_ERROR_
        # DRIVER_NOT_LOADED) and nvidia-smi's own message for it
        "no NVIDIA kernel module loaded",
        "n1:5:30 [0] NCCL WARN nvmlInit_v2() failed: Driver Not Loaded\n"
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make "
        "sure that the latest NVIDIA driver is installed and running.\n",
        "driver_unusable",
    ),
]


@pytest.mark.parametrize(("what", "text", "code"), EXCERPTS, ids=[w for w, *_ in EXCERPTS])
def test_the_cause_is_ranked_before_what_it_ends_in(
    tmp_path: Path, what: str, text: str, code: str
) -> None:
    path = tmp_path / "job.log"
    path.write_text(text)
    ranked = [f.code for f in diagnose([str(path)]).findings if f.severity != "info"]
    assert ranked[:1] == [code], (what, ranked)


def test_a_timeout_alone_is_still_named(tmp_path: Path) -> None:
    """With no cause beside it, the watchdog timeout is the finding."""
    path = tmp_path / "job.log"
    path.write_text(WATCHDOG)
    assert [f.code for f in diagnose([str(path)]).findings][:1] == ["collective_timeout"]


#: PyTorch's DistBackendError without NCCL_DEBUG: NCCL's last WARN, unmarked, after 'Last error:'
#: (ncclGetLastError, NCCL >= 2.13; torch/csrc/distributed/c10d/NCCLUtils.hpp). (NCCL source of
#: the quoted message, the message, the rule ranked first)
LAST_ERRORS: list[tuple[str, str, str]] = [
    (
        "v2.20.5 src/misc/nvmlwrap.cc (nvmlInit failure)",
        "nvmlInit_v2() failed: Driver/library version mismatch",
        "driver_unusable",
    ),
    (
        "v2.20.5 src/transport/net_ib.cc (ncclIbRoceGetVersionNum)",
        "NET/IB: ncclIbRoceGetVersionNum: Failed to open /sys/class/infiniband/mlx5_0/ports/1/"
        "gid_attrs/types/3",
        "roce_gid",
    ),
    (
        "v2.20.5 src/misc/ibvwrap.cc (wrap_ibv_reg_dmabuf_mr)",
        "Call to ibv_reg_dmabuf_mr failed with error Operation not supported",
        "dmabuf_failed",
    ),
    (
        "v2.21.5 src/os/linux.cc / graph/xml.cc (topology detection's realpath)",
        "Could not find real path of /sys/class/pci_bus/0000:3b/../../0000:3b:00.0",
        "pci_sysfs",
    ),
    (
        "v2.20.5 src/misc/shmutils.cc (ncclShmOpen)",
        "Error while creating shared memory segment /dev/shm/nccl-vzIpS6 (size 9637888)",
        "shm_space",
    ),
]


@pytest.mark.parametrize(("source", "last", "code"), LAST_ERRORS, ids=[c for *_, c in LAST_ERRORS])
def test_the_last_error_pytorch_quotes_is_the_cause_alone(
    tmp_path: Path, source: str, last: str, code: str
) -> None:
    """The quoted WARN is the cause, and no generic 'ranks cannot connect' reading of the
    ncclSystemError is raised beside it."""
    path = tmp_path / "job.log"
    path.write_text(
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for "
        "details), NCCL version 2.20.5\n"
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed "
        "or device error.\nLast error:\n" + last + "\n"
    )
    ranked = [f.code for f in diagnose([str(path)]).findings if f.severity != "info"]
    assert ranked == [code], (source, ranked)


def test_a_single_node_run_ending_normally_raises_nothing(tmp_path: Path) -> None:
    """Teardown noise of a healthy one-node run: bootstrap on lo (NCCL's last resort,
    misc/socket.cc), PyTorch 2.4+'s destroy_process_group warning, and a CUDA call made as the
    process exits ('driver shutting down', cudaErrorCudartUnloading). A WARN record that
    follows another rank's record on one line names its source file, not a second host."""
    path = tmp_path / "run.log"
    path.write_text(
        "n1:5:5 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>\n"
        "n1:5:5 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>\n"
        "n1:5:30 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
        "n1:5:60 [1] NCCL INFO [Service thread] Connection closed by localRank 1 "
        "n1:5:60 [0] NCCL INFO misc/socket.cc:47 -> 3\n"
        "[rank0]:[W1206 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT "
        "been destroyed before we destruct ProcessGroupNCCL.\n"
        "n1:5:5 [0] init.cc:2011 NCCL WARN Cuda failure 'driver shutting down'\n"
        "n1:5:70 [0] NCCL INFO comm 0x55 rank 0 nranks 2 cudaDev 0 busId 1000 - Abort "
        "COMPLETE n1:5:70 [0] enqueue.cc:95 NCCL WARN Cuda failure 'driver shutting down'\n"
    )
    diag = diagnose([str(path)])
    assert [f.code for f in diag.findings if f.severity != "info"] == []
    assert diag.job.logs[0].hosts == {"n1"}


#: Kernel, driver and plugin-loader lines (no NCCL header), each read from its source
SYSTEM_LINES: list[tuple[str, str, str]] = [
    (
        "Linux drivers/iommu/amd: the IOMMU refusing a GPU's peer DMA",
        "[  512.331] nvidia 0000:41:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x000e "
        "address=0x1e0000000 flags=0x0020]",
        "p2p_broken",
    ),
    (
        "Linux drivers/iommu/intel (dmar.c fault report)",
        "[ 8812.1] DMAR: [DMA Write NO_PASID] Request device [b1:00.0] fault addr "
        "0x3800a0000000 [fault reason 0x05] PTE Write access is not set",
        "p2p_broken",
    ),
    (
        "NCCL CUCHECK with the driver API's error name (cuGetErrorName)",
        "n1:5:5 [0] NCCL WARN Cuda failure 'CUDA_ERROR_SYSTEM_NOT_READY'",
        "nvswitch_fabric",
    ),
    (
        # NCCL plugin/net.cc (2.19+): NCCL_NET_PLUGIN=<name> is tried as
        # libnccl-net-<name>.so, then as given; both dlopens fail
        "NCCL_NET_PLUGIN naming a plugin that is not installed",
        "n1:80:80 [0] NCCL INFO NCCL_NET_PLUGIN set by environment to aws-ofi\n"
        "n1:80:80 [0] NCCL INFO NET/Plugin: Plugin load (libnccl-net-aws-ofi.so) returned 2 : "
        "libnccl-net-aws-ofi.so: cannot open shared object file: No such file or directory",
        "net_plugin_load",
    ),
]

SYSTEM_LINES += [
    (
        "c10d socket.cpp bind failure, errno 99 (EADDRNOTAVAIL): MASTER_ADDR not on this host",
        "[W socket.cpp:464] [c10d] The server socket has failed to bind to [10.0.0.7]:29500 "
        "(errno: 99 - Cannot assign requested address).",
        "socket_ifname",
    ),
    (
        "NCCL v2.21.5 misc/socket.cc:484 socketStartConnect WARN with EADDRNOTAVAIL",
        "n1:5:30 [0] NCCL WARN socketStartConnect: Connect to 10.0.0.2<43521> failed : Cannot "
        "assign requested address",
        "socket_ifname",
    ),
    (
        "pytorch third_party/gloo/gloo/transport/tcp/unbound_buffer.cc (waitRecv's timeout)",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out "
        "waiting 1800000ms for recv operation to complete",
        "collective_timeout",
    ),
    (
        "gloo/transport/tcp/device.cc (no local interface has the address)",
        "RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/device.cc:"
        "208] ifa != nullptr. Unable to find interface for: [10.0.0.5]",
        "socket_ifname",
    ),
    (
        "gloo/transport/tcp/pair.cc connect, to a peer whose hostname resolved to 127.0.1.1",
        "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:799] connect "
        "[127.0.1.1]:41063: Connection refused",
        "socket_ifname",
    ),
    (
        "gloo/rendezvous/context.cc connectFullMesh",
        "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/"
        "tcp/pair.cc:144] no error",
        "bootstrap_unreachable",
    ),
    (
        "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp constructor without a GPU",
        "RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
        "driver_unusable",
    ),
]


@pytest.mark.parametrize(
    ("source", "text", "code"), SYSTEM_LINES, ids=[c for *_, c in SYSTEM_LINES]
)
def test_system_lines_name_their_cause(tmp_path: Path, source: str, text: str, code: str) -> None:
    path = tmp_path / "sys.log"
    path.write_text(text + "\n")
    ranked = [f.code for f in diagnose([str(path)]).findings if f.severity != "info"]
    assert ranked[:1] == [code], (source, ranked)


@pytest.mark.parametrize(
    "text",
    [
        # NCCL v2.21.5 src/transport/shm.cc:95 'Channel %02d : %d[%d] -> %d[%d] via SHM/%s/%s':
        # a PCIe node where NCCL found no P2P path and chose SHM itself
        "n1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\n"
        "n1:1:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct\n",
        # src/graph/xml.cc:180 (INFO) while reading a topology XML
        "n1:1:2 [0] NCCL INFO XML Parse : Ignoring extra attributes (max 16)\n",
    ],
    ids=["shm-chosen-by-nccl", "xml-extra-attributes"],
)
def test_informational_lines_raise_nothing(tmp_path: Path, text: str) -> None:
    path = tmp_path / "run.log"
    path.write_text(text)
    assert [f.code for f in diagnose([str(path)]).findings if f.severity != "info"] == []


@pytest.mark.parametrize(
    ("text", "first"),
    [
        # NCCL 2.18 src/transport/net_ib.cc via ibvwrap.cc wrap_ibv_modify_qp: 'Call to
        # ibv_modify_qp failed with error %s' names no GID: on RoCE (or an unknown link) the
        # RTR transition's neighbour lookup of the peer's GID is what times out
        (
            "n1:77:90 [0] misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with "
            "error Connection timed out\n",
            "roce_gid",
        ),
        # NCCL 2.23+ prints the GIDs: a routable IPv4-mapped RoCE v2 GID is not the suspect,
        # the two NICs' rails or routes are
        (
            "n1:77:90 [0] misc/ibvwrap.cc:231 NCCL WARN ibv_modify_qp failed with 110 "
            "Connection timed out, on dev mlx5_3:1, curr state INIT, next state RTR, local GID "
            "index 3, local GID ::ffff:10.1.3.7, remote GID ::ffff:10.2.3.9\n",
            "ib_qp_unreachable",
        ),
    ],
)
def test_a_qp_timeout_suspects_the_gid_only_when_none_is_shown(
    tmp_path: Path, text: str, first: str
) -> None:
    log = tmp_path / "qp.log"
    log.write_text(text)
    codes = [f.code for f in diagnose([str(log)]).findings if f.severity != "info"]
    assert codes[0] == first, codes
    assert {"roce_gid", "ib_qp_unreachable"} <= set(codes)
