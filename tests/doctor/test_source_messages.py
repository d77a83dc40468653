"""Doctor on the messages NCCL and PyTorch print, read from their source (NVIDIA/nccl at
v2.4.8-v2.30.7, pytorch/pytorch c10d and Gloo): each line alone, as a user pastes it, must be
named as the cause its code path means. A walk over every `WARN("...")` of ten NCCL releases
(890 format strings) left 575 on the catch-all; these are the ones that name a cause."""

from __future__ import annotations

from pathlib import Path

import pytest

from bandwall.measure.doctor import diagnose

HEADER = "node1:1234:1234 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"

#: (source of the message, the line as printed, the rule it must rank first)
NCCL_WARNS: list[tuple[str, str, str]] = [
    (
        "init.cc (2.2x, ncclCommInitRank's version check)",
        "init.cc:1311 NCCL WARN Mismatched NCCL version detected : rank 0 version 22105 "
        "rank 8 version 21803",
        "mixed_versions",
    ),
    (
        "init.cc (2.2x)",
        "init.cc:1203 NCCL WARN Multiple Ranks are using the same GPU/Partition. Set "
        "NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this feature.",
        "duplicate_gpu",
    ),
    (
        "transport/nvls.cc",
        'nvls.cc:90 NCCL WARN NCCL_NVLS_ENABLE has been set to "1" and communicator has '
        "multiple ranks using the same NVML device.",
        "duplicate_gpu",
    ),
    (
        "init.cc (2.2x)",
        "init.cc:1092 NCCL WARN Detected mixed local Net device counts across ranks (min 4, "
        "max 8). Set NCCL_IGNORE_NET_MISMATCH=1 to ignore.",
        "uneven_nodes",
    ),
    (
        "bootstrap.cc (2.23+)",
        "bootstrap.cc:61 NCCL WARN no device found matching eth9, verify NCCL_OOB_NET_IFNAME",
        "socket_ifname",
    ),
    (
        "graph/xml.cc",
        "xml.cc:452 NCCL WARN Could not open XML graph file /opt/graph.xml : No such file or "
        "directory",
        "topology_file",
    ),
    (
        "graph/xml.cc",
        "xml.cc:650 NCCL WARN XML Topology has wrong version 0, 1 needed",
        "topology_file",
    ),
    (
        "misc/cudawrap.cc (2.7-2.18)",
        "cudawrap.cc:110 NCCL WARN Failed to load CUDA missing symbol cuGetProcAddress",
        "driver_too_old",
    ),
    (
        "misc/nvmlwrap.cc",
        "nvmlwrap.cc:72 NCCL WARN nvmlInit_v2() failed: Driver/library version mismatch",
        "driver_unusable",
    ),
    (
        "misc/cudawrap.cc (2.18)",
        "cudawrap.cc:188 NCCL WARN Failed to find CUDA library libcuda.so (NCCL_CUDA_PATH='') "
        ": libcuda.so: cannot open shared object file: No such file or directory",
        "driver_unusable",
    ),
    (
        "misc/shmutils.cc",
        "shmutils.cc:80 NCCL WARN Could not map /dev/shm/nccl-Ib3Xpq size 9637892, error: "
        "Cannot allocate memory",
        "shm_space",
    ),
    (
        "transport/p2p.cc (2.19+)",
        "p2p.cc:212 NCCL WARN rank 1 failed to get CUDA IPC handle to device 0(=0) : 201 "
        "invalid device context",
        "p2p_broken",
    ),
    (
        "misc/socket.cc (2.19+)",
        "socket.cc:484 NCCL WARN socketStartConnect: exceeded retries (35000)",
        "bootstrap_unreachable",
    ),
    (
        "misc/socket.cc (2.19+)",
        "socket.cc:540 NCCL WARN socketPollConnect: exceeded timeouts (35000)",
        "bootstrap_unreachable",
    ),
    (
        "init.cc (2.12-2.17)",
        "init.cc:1400 NCCL WARN Your program may be hanging, this may be caused by a collective "
        "mismatch around rank 3. Please check your collective calls at and around this rank.",
        "collective_mismatch",
    ),
]

NCCL_WARNS += [
    (
        "misc/shmutils.cc (2.19+ 'Error while %s shared memory segment %s (size %ld), error: "
        "%s (%d)', attaching): the peer's segment is not in this /dev/shm",
        "shmutils.cc:128 NCCL WARN Error while attaching to shared memory segment "
        "/dev/shm/nccl-Ab12Cd (size 9637888), error: No such file or directory (2)",
        "shm_not_shared",
    ),
    (
        "transport/net_ib.cc (2.19-2.21 'Got completion from peer %s with error %d, opcode %d, "
        "len %d, vendor err %d'): IBV_WC_REM_ACCESS_ERR",
        "net_ib.cc:1198 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<43521> with error "
        "10, opcode 1, len 0, vendor err 136",
        "gdr_acs",
    ),
    (
        "net.cc (2.12-2.18 'NET/Plugin : Plugin load returned %d : %s when loading %s'), a "
        "plugin built against a newer libfabric",
        "NCCL INFO NET/Plugin : Plugin load returned 2 : /opt/amazon/ofi-nccl/lib/"
        "libnccl-net-ofi.so: version `FABRIC_1.7' not found (required by "
        "/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so) when loading libnccl-net-ofi.so",
        "net_plugin_load",
    ),
    (
        "plugin/net.cc (2.19+ 'NET/Plugin: Plugin load (%s) returned %d : %s')",
        "NCCL INFO NET/Plugin: Plugin load (libnccl-net.so) returned 11 : libnccl-net.so: "
        "undefined symbol: fi_getinfo",
        "net_plugin_load",
    ),
]

#: libfabric's EFA provider (prov/efa/src/efa_errno.h, grouped as efa_strerror.c's help does)
EFA_LINES: list[tuple[str, str, str]] = [
    (
        "efa_errno.h 15 LOCAL_ERROR_UNREACH_REMOTE",
        "NET/OFI Request 0x7f completed with error. RC: 15. Error: 15 (Unreachable remote - "
        "never received a response)",
        "ib_qp_unreachable",
    ),
    (
        "efa_errno.h 4124 ESTABLISHED_RECV_UNRESP",
        "NET/OFI Request 0x7f completed with error. RC: 4124. Error: Unresponsive receiver "
        "(connection previously established)",
        "ib_link_error",
    ),
    (
        "efa_errno.h 4112 INTERNAL_RX_BUF_POST with ENOMEM",
        "Libfabric error: (-12) Cannot allocate memory",
        "memlock",
    ),
    (
        "aws-ofi-nccl v1.9-v1.21 src/nccl_ofi_net.cpp (no protocol could initialise)",
        "NET/OFI Unable to find a protocol that worked.  Failing initialization.",
        "efa_unavailable",
    ),
    (
        "aws-ofi-nccl v1.7 src/nccl_ofi_net.c (a provider other than EFA on an AWS platform)",
        "NET/OFI Only EFA provider is supported",
        "efa_unavailable",
    ),
    (
        "aws-ofi-nccl v1.14+ src/nccl_ofi_net.cpp (TCP provider filtered to nothing)",
        "NET/OFI No viable endpoint found for TCP provider. Try and relax the filters using "
        "OFI_NCCL_USE_IPV6_TCP or OFI_NCCL_EXCLUDE_TCP_IF environment variables",
        "efa_unavailable",
    ),
]

#: PyTorch / Gloo / nvidia-smi lines (no NCCL header)
TORCH_LINES: list[tuple[str, str, str]] = [
    (
        "c10d ProcessGroupNCCL (>= 2.3), fetching the unique id from the store",
        "torch.distributed.DistBackendError: [3] is setting up NCCL communicator and "
        "retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but "
        "store->get('0') got error: Socket Timeout",
        "bootstrap_unreachable",
    ),
    (
        "torch/distributed/distributed_c10d.py _store_based_barrier",
        "RuntimeError: Timed out initializing process group in store based barrier on rank: "
        "3, for key: store_based_barrier_key:1 (world_size=8, worker_count=4, "
        "timeout=0:30:00)",
        "bootstrap_unreachable",
    ),
    (
        "c10d socket.cpp (TCPStore server)",
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any "
        "local network address. The server socket has failed to bind to [::]:29500 (errno: "
        "98 - Address already in use).",
        "port_in_use",
    ),
    (
        "c10/cuda CUDAException",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "cuda_error",
    ),
    (
        "torch/cuda/__init__.py _check_driver",
        "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).",
        "driver_too_old",
    ),
    (
        "nvidia-smi",
        "Failed to initialize NVML: Driver/library version mismatch",
        "driver_unusable",
    ),
    (
        "c10/cuda CUDAException, with cudaErrorInvalidDevice's meaning",
        "RuntimeError: CUDA error: invalid device ordinal",
        "cuda_error",
    ),
    (
        "torch/distributed/elastic/rendezvous/api.py",
        "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
        "bootstrap_unreachable",
    ),
    (
        "torch/distributed/elastic/multiprocessing/errors (ChildFailedError's table)",
        "  exitcode  : -11 (pid: 12345)\n  error_file: <N/A>\n  traceback : Signal 11 "
        "(SIGSEGV) received by PID 12345",
        "peer_exited",
    ),
    (
        "third_party/gloo/gloo/transport/tcp/pair.cc",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed "
        "by peer [10.0.0.2]:41822",
        "peer_exited",
    ),
    (
        "c10d socket.cpp (2.2+), the store's listen failure",
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any "
        "local network address. port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, "
        "message: address already in use",
        "port_in_use",
    ),
    (
        "c10d TCPStore client (1.x-2.x) giving up on the rendezvous",
        "RuntimeError: Socket Timeout",
        "bootstrap_unreachable",
    ),
    (
        "ProcessGroupNCCL.cpp getNCCLWatchdogTimeoutErrorMsg (2.3+), on a rank told to dump",
        "[rank4]:[E1206 ProcessGroupNCCL.cpp:1595] [PG 0 Rank 4] Received a dump signal due to "
        "a collective timeout from  rank 3 and we will try our best to dump the debug info. "
        "Last enqueued NCCL work: 812, last completed NCCL work: 811.",
        "collective_timeout",
    ),
    (
        "CUDA runtime cudaErrorCompatNotSupportedOnDevice (804), as torch reports it",
        "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
        "functions before calling NumCudaDevices() that might have already set an error? "
        "Error 804: forward compatibility was attempted on non supported HW",
        "driver_unusable",
    ),
    (
        "CUDA runtime cudaErrorSystemDriverMismatch (803)",
        "RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 803: system has "
        "unsupported display driver / cuda driver combination",
        "driver_unusable",
    ),
]


def _first(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "excerpt.log"
    path.write_text(text)
    return [f.code for f in diagnose([str(path)]).findings if f.severity != "info"]


@pytest.mark.parametrize(("source", "line", "code"), NCCL_WARNS, ids=[c for *_, c in NCCL_WARNS])
def test_nccl_warn_alone_names_its_cause(tmp_path: Path, source: str, line: str, code: str) -> None:
    ranked = _first(tmp_path, HEADER + "node1:1234:1240 [0] " + line + "\n")
    assert ranked[:1] == [code], (source, ranked)


@pytest.mark.parametrize(("source", "line", "code"), TORCH_LINES, ids=[c for *_, c in TORCH_LINES])
def test_pytorch_line_alone_names_its_cause(
    tmp_path: Path, source: str, line: str, code: str
) -> None:
    ranked = _first(tmp_path, line + "\n")
    assert ranked[:1] == [code], (source, ranked)


@pytest.mark.parametrize(("source", "line", "code"), EFA_LINES, ids=[c for *_, c in EFA_LINES])
def test_efa_error_alone_names_its_cause(tmp_path: Path, source: str, line: str, code: str) -> None:
    ranked = _first(tmp_path, line + "\n")
    assert ranked[:1] == [code], (source, ranked)


def test_version_codes_are_decoded_both_ways(tmp_path: Path) -> None:
    """NCCL_VERSION_CODE is major*1000+minor*100+patch before 2.9, major*10000+... after."""
    path = tmp_path / "v.log"
    path.write_text(
        HEADER.replace("2.21.5", "2.7.8")
        + "n:1:1 [0] NCCL WARN Mismatched NCCL version detected : rank 0 version 2708 rank 1 "
        "version 21805\n"
    )
    (f,) = [f for f in diagnose([str(path)]).findings if f.code == "mixed_versions"]
    assert "2.7.8" in f.reason and "2.18.5" in f.reason


def test_a_bind_warning_alone_is_low(tmp_path: Path) -> None:
    """torchrun prints the bind failure as a [W] line when another agent already serves the
    store; only the error after it makes the job fail."""
    path = tmp_path / "w.log"
    path.write_text(
        "[W socket.cpp:436] [c10d] The server socket has failed to bind to [::]:29400 "
        "(errno: 98 - Address already in use).\n"
    )
    (f,) = [f for f in diagnose([str(path)]).findings if f.code == "port_in_use"]
    assert f.severity == "low" and "29400" in f.reason


def test_cuda_errors_say_where_and_what(tmp_path: Path) -> None:
    """PyTorch's own CUDA error is not NCCL's; the common ones say what they mean."""
    path = tmp_path / "c.log"
    path.write_text("RuntimeError: CUDA error: invalid device ordinal\n")
    (f,) = [f for f in diagnose([str(path)]).findings if f.code == "cuda_error"]
    assert "not in the network" in f.reason and "--nproc-per-node" in f.reason
    path.write_text("n:1:1 [0] NCCL WARN Cuda failure 'invalid device ordinal'\n")
    (f,) = [f for f in diagnose([str(path)]).findings if f.code == "cuda_error"]
    assert "inside NCCL" in f.reason


def test_a_crash_signal_is_named(tmp_path: Path) -> None:
    path = tmp_path / "s.log"
    path.write_text(
        "  exitcode  : -6 (pid: 9)\n  traceback : Signal 6 (SIGABRT) received by PID 9\n"
    )
    (f,) = [f for f in diagnose([str(path)]).findings if f.code == "peer_exited"]
    assert "SIGABRT" in f.reason and len(f.evidence) == 2


def test_a_watchdog_ending_on_a_network_error_is_not_a_timeout(tmp_path: Path) -> None:
    """ProcessGroupNCCL's watchdog also ends on NCCL errors: 'terminated with exception: NCCL
    error: remote process exited or there was a network error' after an IB retry error is the
    IB fault, not a collective timeout (a review found it ranked first as one)."""
    ranked = _first(
        tmp_path,
        HEADER + "node1:1:2 [3] NCCL WARN NET/IB: Got completion from peer 10.0.0.2<45678> with "
        "status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) len=0 vendor err 129 (Send)\n"
        "[rank3]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 3] Process group watchdog thread "
        "terminated with exception: NCCL error: remote process exited or there was a network "
        "error, NCCL version 2.21.5\n",
    )
    assert ranked[0] == "ib_link_error" and "collective_timeout" not in ranked


def test_alternative_readings_of_the_same_lines_are_not_extra_alarms(tmp_path: Path) -> None:
    """An IB retry error (status 12) is a link fault (likely); unreachable NICs and RoCE
    addressing read the same line (possible): they stay listed, at medium, not critical."""
    path = tmp_path / "r.log"
    path.write_text(
        HEADER + "node1:1:2 [3] NCCL WARN NET/IB: Got completion from peer 10.0.0.2<45678> with "
        "status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) len=0 vendor err 129 (Send)\n"
    )
    found = {f.code: f.severity for f in diagnose([str(path)]).findings}
    assert found["ib_link_error"] == "critical"
    assert found["ib_qp_unreachable"] == "medium"


@pytest.mark.parametrize(
    ("line", "severity", "words"),
    [
        (
            "[Tue Mar  4 10:12:01 2025] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen "
            "off the bus.",
            "critical",
            "Xid 79: the GPU has fallen off the bus",
        ),
        (
            "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for "
            "remapping, reset gpu to activate.",
            "critical",
            "Xid 63: ECC page retirement or row remapping recorded",
        ),
        (
            "kernel: NVRM: Xid (PCI:0000:07:00): 31, pid=8812, name=python, Ch 00000010, "
            "intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f1_2c000000.",
            "medium",
            "Xid 31: GPU memory page fault",
        ),
        (
            "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error",
            "critical",
            "Xid 79",
        ),
    ],
)
def test_xid_lines_name_the_fault_and_whose_it_is(
    tmp_path: Path, line: str, severity: str, words: str
) -> None:
    """The driver's Xid reports (NVIDIA's Xid catalog): hardware ones are critical, the
    application's own faults (13, 31, 43) medium."""
    path = tmp_path / "dmesg.log"
    path.write_text(line + "\n")
    (f,) = [f for f in diagnose([str(path)]).findings if f.code == "gpu_xid"]
    assert f.severity == severity and words in f.reason
