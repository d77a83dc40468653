"""Doctor on excerpts that hold part of the evidence (blind set 15's misses, 2026-12-07): the
cause must be named from what is there, and nothing raised where a healthy run reads the same."""

from __future__ import annotations

from pathlib import Path

from bandwall.measure.doctor import diagnose
from tests.nccl_tests_text import TABLE_HEADER
from tests.nccl_tests_text import log as nccl_tests_log


def _ranked(tmp_path: Path, text: str) -> list[tuple[str, str]]:
    log = tmp_path / "excerpt.log"
    log.write_text(text)
    return [(f.code, f.severity) for f in diagnose([str(log)]).findings if f.severity != "info"]


def test_an_efa_call_failing_with_enomem_is_the_memlock_limit(tmp_path: Path) -> None:
    # aws/aws-ofi-nccl#107: libfabric's EFA provider alone, no NCCL marker
    line = (
        "[0]:Unable to write to EQ: Missing or unavailable event queue. err: Unknown error -12 "
        "(-12) prov_errno: Unknown error -12 (-12) prov/efa/src/rxr/rxr.h:993\n"
    )
    assert _ranked(tmp_path, line)[:1] == [("memlock", "critical")]
    # another errno from the same provider is not a memory limit
    assert [c for c, _ in _ranked(tmp_path, line.replace("-12", "-113"))] != ["memlock"]


def test_no_ib_device_where_the_job_asks_for_ib_is_a_socket_fallback(tmp_path: Path) -> None:
    # pytorch/pytorch#111424: the excerpt stops before NCCL's 'Using network Socket'
    missing = "node013:37715:38896 [0] NCCL INFO NET/IB : No device found.\n"
    asked = "node013:37715:38896 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0.\n"
    assert [c for c, _ in _ranked(tmp_path, missing + asked)][:1] == ["socket_fallback"]
    # without the request, 'No device found' is what a host without RDMA prints
    assert "socket_fallback" not in [c for c, _ in _ranked(tmp_path, missing)]


_TESTS_5090 = (
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 33554432 step: 2(factor) warmup iters: 5 "
    "iters: 20 agg iters: 1 validation: 1 graph: 0\n"
    "# Using devices\n"
    "#  Rank  0 Group  0 Pid  12225 on node device  0 [0000:16:00] NVIDIA GeForce RTX 5090\n"
    "node:12225:12225 [0] NCCL INFO NCCL version {version}+cuda12.4\n"
)


def test_nccl_older_than_the_gpu_is_named_without_the_failure(tmp_path: Path) -> None:
    # NVIDIA/nccl-tests#291: 2.25.1 on an RTX 5090 (sm_120 from 2.26.2), cut before the error
    old = _ranked(tmp_path, _TESTS_5090.format(version="2.25.1"))
    assert old[:1] == [("gpu_arch_missing", "medium")]
    assert _ranked(tmp_path, _TESTS_5090.format(version="2.26.2")) == []


_PCIE_RUN = (
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 "
    "iters: 20 agg iters: 1 validation: 1 graph: 0\n"
    "#\n"
    "# Using devices\n"
    "#  Rank  0 Group  0 Pid  28329 on   ws1 device  0 [0x01] NVIDIA RTX A6000\n"
    "#  Rank  1 Group  0 Pid  28330 on   ws1 device  1 [0x41] NVIDIA RTX A6000\n"
    "ws1:28329:28329 [0] NCCL INFO NCCL version 2.14.3+cuda11.7\n"
    "ws1:28329:28341 [0] NCCL INFO Channel 00 : 0[1000] -> 1[41000] via P2P/IPC\n"
)
_HEADER = TABLE_HEADER
_ROW = (
    "           8             2     float     sum      -1    10.21    0.00    0.00      0"
    "    10.05    0.00    0.00      0\n"
)


def test_pcie_gpus_that_stop_after_the_table_header_are_a_p2p_hang(tmp_path: Path) -> None:
    # workstation GPUs, not only GeForce: ACS/IOMMU (NVIDIA/nccl-tests#115, NVIDIA/nccl#257)
    assert [c for c, _ in _ranked(tmp_path, _PCIE_RUN + _HEADER)][:1] == ["p2p_broken"]
    # a result row: it ran
    assert _ranked(tmp_path, _PCIE_RUN + _HEADER + _ROW) == []
    # cut before the table header: a healthy run reads the same (NVIDIA/nccl#259)
    assert _ranked(tmp_path, _PCIE_RUN) == []
    # NVLink-class GPUs are not this rule's
    sxm = _PCIE_RUN.replace("NVIDIA RTX A6000", "NVIDIA H100 80GB HBM3")
    assert "p2p_broken" not in [c for c, _ in _ranked(tmp_path, sxm + _HEADER)]


def test_result_rows_count_when_the_excerpt_dropped_the_table_header(tmp_path: Path) -> None:
    # healthy-tinygrad45: rows follow the run header without the table header
    run = _PCIE_RUN.replace("NVIDIA RTX A6000", "NVIDIA GeForce RTX 4090")
    assert _ranked(tmp_path, run + _ROW + _ROW) == []


def test_a_connection_to_an_ipv4_link_local_address_is_the_socket_interface(
    tmp_path: Path,
) -> None:
    # aws-samples/aws-do-eks#54: EKS Pod Identity's pod-id-link0 (169.254.170.x) listed
    listed = (
        "n1:7:9 [0] NCCL INFO NET/Socket : Using [0]enp73s0:10.1.216.156<0> "
        "[1]pod-id-link0:169.254.170.23<0>\n"
    )
    refused = (
        "n1:7:9 [0] misc/socket.cc:484 NCCL WARN socketPollConnect: connect to "
        "{addr}<43001> returned Connection refused, retrying (13/34)\n"
    )
    text = listed + refused.format(addr="169.254.170.23")
    assert [c for c, _ in _ranked(tmp_path, text)][:1] == ["socket_ifname"]
    # the same refusal from a routable peer is not the interface's fault by itself
    routable = listed + refused.format(addr="10.1.216.157")
    assert [c for c, _ in _ranked(tmp_path, routable)][:1] != ["socket_ifname"]


def test_the_watchdogs_stack_frames_alone_are_a_collective_timeout(tmp_path: Path) -> None:
    # jpata/particleflow#390: only the c10::Error frames of the watchdog's exception
    frames = (
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x1 in "
        "libc10.so)\n"
        "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::"
        "duration<long, std::ratio<1l, 1000l> > >) + 0x1d2 (0x2 in libtorch_cuda.so)\n"
        "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x3 in "
        "libtorch_cuda.so)\n"
    )
    assert [c for c, _ in _ranked(tmp_path, frames)][:1] == ["collective_timeout"]


def test_a_result_row_with_wrong_elements_is_corrupted_data(tmp_path: Path) -> None:
    # fuzz round 15: the per-row #wrong column was ignored without the footer
    table = nccl_tests_log(
        "     1048576        262144     float     sum      -1    20.00   52.43   52.43"
        "      {wrong}    20.00   52.43   52.43      0\n",
        footer=False,
    )
    assert [c for c, _ in _ranked(tmp_path, table.format(wrong=5))][:1] == ["p2p_broken"]
    assert "p2p_broken" not in [c for c, _ in _ranked(tmp_path, table.format(wrong=0))]


def test_one_rank_rows_that_start_over_are_separate_jobs(tmp_path: Path) -> None:
    # NVIDIA/nccl-tests#294: built without MPI=1 and started under mpirun; no header kept
    row = (
        "  {size:>10}      {count:>8}     float     sum      -1    631.9  212.41    0.00      0"
        "     0.51  263017.30    0.00      0\n"
    )
    sizes = [134217728, 268435456, 134217728, 268435456, 536870912, 268435456]
    tail = (
        "h1:19570:19570 [0] NCCL INFO comm 0x55ba38f2abd0 rank 0 nranks 1 cudaDev 0 busId "
        "200010 - Destroy COMPLETE\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0\n"
    )
    text = "".join(row.format(size=s, count=s // 4) for s in sizes) + tail
    assert [c for c, _ in _ranked(tmp_path, text)][:1] == ["tests_without_mpi"]
    # one process on one GPU prints the same zeros once, in order: a one-GPU run
    ordered = "".join(row.format(size=s, count=s // 4) for s in sorted(set(sizes))) + tail
    assert "tests_without_mpi" not in [c for c, _ in _ranked(tmp_path, ordered)]


def test_socket_types_of_ib_and_socket_crossed_are_different_transports(tmp_path: Path) -> None:
    # NVIDIA/nccl-tests#360: NCCL_* exported in the shell but not passed with mpirun -x
    line = "node-0:5109:5177 [0] misc/socket.cc:502 NCCL WARN socketFinalizeAccept: wrong type {}\n"
    assert [c for c, _ in _ranked(tmp_path, line.format("4 != 3"))][:1] == ["net_plugin_mismatch"]
    # bootstrap against proxy is a malformed message: another NCCL version
    assert [c for c, _ in _ranked(tmp_path, line.format("2 != 1"))][:1] == ["mixed_versions"]


def test_enomem_registering_through_dmabuf_is_not_the_memlock_limit(tmp_path: Path) -> None:
    # vllm-project/vllm#19613 (blind set 18): NCCL_BUFFSIZE set too large. Linux charges
    # DMA-BUF registrations nothing against RLIMIT_MEMLOCK (ib_umem_dmabuf_get)
    dmabuf = (
        "kilo:318:3584 [5] misc/ibvwrap.cc:183 NCCL WARN Call to ibv_reg_dmabuf_mr failed "
        "with error Cannot allocate memory\n"
    )
    assert [c for c, _ in _ranked(tmp_path, dmabuf)] == ["dmabuf_failed"]
    # host memory through ibv_reg_mr: the limit it is
    host = dmabuf.replace("ibv_reg_dmabuf_mr", "ibv_reg_mr")
    assert [c for c, _ in _ranked(tmp_path, host)][:1] == ["memlock"]


def test_pytorchs_exit_warning_is_read_and_called_harmless(tmp_path: Path) -> None:
    # Lightning-AI/pytorch-lightning#19931 (blind set 18's healthy file): refused as unreadable
    log = tmp_path / "exit.log"
    log.write_text(
        "[rank0]:[W602 08:42:46.129824551 ProcessGroupNCCL.cpp:1126] Warning: WARNING: process "
        "group has NOT been destroyed before we destruct ProcessGroupNCCL.\n"
    )
    diag = diagnose([str(log)])
    assert [f for f in diag.findings if f.severity != "info"] == []
    assert any("exit.log:1:" in n and "harmless" in n for n in diag.job.notes), diag.job.notes
