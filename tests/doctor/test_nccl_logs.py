"""Doctor on real NCCL debug logs pasted in public reports (tests/data/nccl-logs/*.log, each with
a .source file naming the report and the fault its thread identified) and on synthetic lines in
NCCL's own formats for what no stored log shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from bandwall.measure.doctor import diagnose, parse_nccl_log

LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl-logs"

#: log -> (transport doctor must name, the rule its first finding must be; from .source)
EXPECTED: dict[str, tuple[str | None, str]] = {
    "nccl-1537-roce-gdr-disabled.log": ("RoCE", "gdr_off"),
    "nccl-1412-ib-no-gdrdma.log": ("IB", "gdr_off"),
    "nv-peer-memory-56-gdr-distance.log": ("IB", "nic_far"),
    "nccl-897-gdr-one-node.log": ("IB", "gdr_off"),
    "nccl-451-docker-ib-unopenable.log": ("Socket", "socket_fallback"),
    "nccl-941-container-no-ib-device.log": ("Socket", "socket_fallback"),
    "nccl-tests-188-ib-disabled-ipoib.log": ("Socket", "socket_fallback"),
    "nccl-tests-182-gpu-nic-phb.log": ("IB", "nic_far"),
    "p2p-bench-vllm-p2p-disabled-shm.log": (None, "p2p_disabled"),
    "nccl-1837-socket-ifname-missing.log": (None, "socket_ifname"),
    "marin-7018-no-socket-interface.log": (None, "socket_ifname"),
    "llamafactory-7396-allreduce-timeout.log": (None, "collective_timeout"),
    "llamafactory-6269-reduce-scatter-timeout.log": (None, "collective_timeout"),
    # a fresh set collected on 2026-12-04, scored before these rules existed (docs/validation.md)
    "nccl-1372-named-symbol-sm80-build-on-h100.log": (None, "gpu_arch_missing"),
    "pytorch-152077-rtx5090-sm120-old-build.log": ("Socket", "gpu_arch_missing"),
    "nccl-1240-graph-file-azure-ncv4.log": (None, "topology_file"),
    "aws-ofi-nccl-785-static-p5-topo-xml.log": (None, "topology_file"),
    "nccl-379-topo-injection-missing-cpu-attrs.log": (None, "topology_file"),
    "awsome-ai-292-ofi-plugin-libfabric-symbol.log": (None, "net_plugin_load"),
    "autocast-381-postfit-barrier-timeout.log": (None, "collective_timeout"),
    "mace-1348-patience-collective-mismatch.log": (None, "collective_mismatch"),
    # the third fresh set (2026-12-04), scored before these patterns existed
    "aws-do-eks-50-gloo-loopback-fallback.log": (None, "socket_ifname"),
    "nccl-tests-287-rtx5090-nccl-2251-too-old.log": (None, "gpu_arch_missing"),
    "dolly-166-deepspeed-sigkill-host-oom.log": (None, "peer_exited"),
    "nccl-778-dmabuf-unsupported.log": (None, "dmabuf_failed"),
    "pytorch-129749-fabricmanager-driver-mismatch.log": (None, "nvswitch_fabric"),
    "nccl-573-wsl2-pci-sysfs-missing.log": ("Socket", "pci_sysfs"),
    # the fourth fresh set (2026-12-05), scored before these patterns existed
    "aws-ofi-nccl-584-efa-libfabric-too-old-for-nccl219.log": (None, "efa_unavailable"),
    "returnn-1802-two-nccl-wheels-undefined-symbol.log": (None, "mixed_versions"),
    "cscs-alps-nccl-net-plugin-env-conflict.log": (None, "net_plugin_load"),
    "bergson-444-rank0-only-work-watchdog-timeout.log": (None, "collective_timeout"),
    "nccl-1573-k8s-roce-gid-query-einval.log": (None, "roce_gid"),
    # the fifth fresh set (2026-12-05): the two port clashes were named when first scored
    "megatron-lm-343-master-port-in-use.log": (None, "port_in_use"),
    "accelerate-74-main-process-port-in-use.log": (None, "port_in_use"),
    "awsome-647-efa-memlock-ulimit.log": (None, "memlock"),
    "ai-cloud-validation-643-k8s-no-dev-shm-ucx.log": (None, "shm_space"),
    "gardener-1832-efa-sg-missing-self-egress.log": (None, "ib_qp_unreachable"),
    # the sixth fresh set (2026-12-05), scored before these patterns existed
    "jade-hpc-194-node-uncorrectable-ecc.log": (None, "gpu_xid"),
    "pytorch-85300-torchrun-reverse-dns-rdzv.log": (None, "bootstrap_unreachable"),
    "pipedream-76-docker-default-shm-bus-error.log": (None, "shm_space"),
    # the seventh fresh set (2026-12-05), scored before this rule and pattern existed
    "nccl-1524-roce-mtu-mismatch-local-access-violation.log": (None, "ib_mtu"),
    "nccl-tests-219-socket-ifname-differs-per-node.log": (None, "socket_ifname"),
}

#: healthy logs whose warnings the maintainers called harmless (from their .source)
HEALTHY = [
    "nccl-259-healthy-no-plugin-info.log",
    "heat-1003-healthy-c10d-ipv6-warnings.log",
    "nccl-tests-119-healthy-2node-4x200g-allreduce.log",
    "nccl-1292-healthy-net-plugin-symbol-info.log",
]


def parse(name: str):  # type: ignore[no-untyped-def]
    with (LOGS / name).open() as fh:
        return parse_nccl_log(fh, name)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_doctor_names_the_transport_and_the_threads_fault(name: str) -> None:
    transport, code = EXPECTED[name]
    assert parse(name).net_transport == transport
    findings = [f for f in diagnose([str(LOGS / name)]).findings if f.severity != "info"]
    assert findings and findings[0].code == code, [f.code for f in findings]
    codes = {f.code for f in findings}
    if transport in ("IB", "RoCE"):
        assert "socket_fallback" not in codes
    if transport == "Socket":
        assert "gdr_off" not in codes


@pytest.mark.parametrize("name", HEALTHY)
def test_harmless_warnings_raise_nothing(name: str) -> None:
    assert [f.code for f in diagnose([str(LOGS / name)]).findings if f.severity != "info"] == []


def find(path: Path, code: str):  # type: ignore[no-untyped-def]
    return next(f for f in diagnose([str(path)]).findings if f.code == code)


def test_gdr_findings_say_why() -> None:
    far = find(LOGS / "nv-peer-memory-56-gdr-distance.log", "nic_far")
    assert "too far" in far.reason and "distance 3 >= 2" in far.evidence[0].text
    one = find(LOGS / "nccl-897-gdr-one-node.log", "gdr_off")
    assert "1 of 2 NET connections" in one.reason and one.confidence == "certain"


def test_a_connection_line_cut_by_other_output_says_nothing_of_gdr(tmp_path: Path) -> None:
    """Blind set 25 (nebius soperator's MLPerf log): one of 570 NET connection lines ran into a
    Python print ('via NET/IBext/6/GDSetting up ...'); read as a connection without GDR, it made
    a healthy run's GPUDirect look missing on one node."""
    log = tmp_path / "cut.log"
    log.write_text(
        "worker-0:1:2 [0] NCCL INFO Channel 00/0 : 9[1] -> 0[0] [receive] via NET/IBext/4/GDRDMA\n"
        "worker-0:1:2 [2] NCCL INFO Channel 14/0 : 2[2] -> 10[2] [send] via "
        "NET/IBext/6/GDSetting up MemoryEfficientCrossAttention. Query dim is 320\n"
        "worker-1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 9[1] [send] via NET/IBext/4/GDRDMA\n"
    )
    parsed = parse_nccl_log(log.read_text().splitlines(), str(log))
    assert len(parsed.connections) == 2 and all(c.gdr for c in parsed.connections)
    assert not [f for f in diagnose([str(log)]).findings if f.code == "gdr_off"]
    # a host whose connections lack GDR beside hosts whose do: named as such
    log.write_text(
        "worker-0:1:2 [0] NCCL INFO Channel 00/0 : 9[1] -> 0[0] [receive] via NET/IBext/4/GDRDMA\n"
        "worker-1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 9[1] [send] via NET/IBext/4\n"
    )
    f = find(log, "gdr_off")
    assert "1 of 2 NET connections do not use GPUDirect RDMA (on worker-1)" in f.reason


def test_socket_fallback_reasons_come_from_the_log() -> None:
    docker = find(LOGS / "nccl-451-docker-ib-unopenable.log", "socket_fallback")
    assert "could not open" in docker.reason and "bond0" in docker.reason
    assert any("Unable to open device mlx5_bond_0" in ln.text for ln in docker.evidence)
    ipoib = find(LOGS / "nccl-tests-188-ib-disabled-ipoib.log", "socket_fallback")
    assert "NCCL_IB_DISABLE=1" in ipoib.reason and "ibs85f0" in ipoib.reason


def test_libibverbs_missing_is_the_stated_cause_not_an_invented_line(tmp_path: Path) -> None:
    """The issue's case: a NET/Socket log whose real cause is `Failed to open libibverbs.so`
    must say so, quote that line, and not claim a 'No device found' line that isn't there."""
    log = tmp_path / "socket.log"
    log.write_text(
        "node1:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        "node1:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
        "node1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
        "node1:1:1 [0] NCCL INFO Using network Socket\n"
        "node1:1:2 [0] NCCL INFO Channel 00 : 1[1000] -> 0[1000] [receive] via NET/Socket/0\n"
    )
    f = find(log, "socket_fallback")
    assert "libibverbs" in f.reason and "No device found" not in f.reason
    assert any("Failed to open libibverbs" in ln.text for ln in f.evidence)
    assert f.severity == "medium" and "ibv_devinfo" in f.partial


def test_gdr_disabled_alone_and_old_watchdog_lines_are_read(tmp_path: Path) -> None:
    one = tmp_path / "one.log"
    one.write_text("NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n")
    f = diagnose([str(one)]).findings[0]
    assert f.code == "gdr_off" and "peer-memory" in f.reason
    old = tmp_path / "old.log"
    old.write_text(
        "[E ProcessGroupNCCL.cpp:414] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800212 milliseconds before "
        "timing out.\n"
    )
    t = diagnose([str(old)]).findings[0]
    assert t.code == "collective_timeout" and "ALLREDUCE" in t.title and "1,800 s" in t.reason


def test_timeouts_name_the_ranks_and_the_collective() -> None:
    f = find(LOGS / "llamafactory-7396-allreduce-timeout.log", "collective_timeout")
    assert "ALLREDUCE" in f.title and "1580" in f.title and "466,119,168" in f.reason
    assert "1579" in f.reason


def test_interleaved_ranks_and_foreign_lines() -> None:
    log = parse("p2p-bench-vllm-p2p-disabled-shm.log")
    assert set(log.versions) == {"2.28.9"}
    assert {c.src for c in log.connections} == {0, 1}
    assert all(c.transport == "SHM" for c in log.connections)
    text = (LOGS / "p2p-bench-vllm-p2p-disabled-shm.log").read_text()
    assert log.records == text.count(" NCCL INFO ")
    assert log.single_node and log.net_transport is None


def test_rules_without_a_public_log_on_synthetic_lines() -> None:
    lines = [
        "a:1:1 [0] NCCL INFO NCCL version 2.19.3+cuda12.3",
        "b:2:2 [0] NCCL INFO NCCL version 2.20.5+cuda12.4",
        "a:1:1 [0] NCCL INFO NCCL_MAX_NCHANNELS set by environment to 2.",
        "a:1:1 [0] NCCL INFO 2 coll channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer",  # noqa: E501
        "a:1:1 [0] transport/nvls.cc:165 NCCL WARN Cuda failure 'invalid argument'",
        "a:1:1 [0] misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error Invalid argument",  # noqa: E501
        "a:1:1 [0] misc/shmutils.cc:112 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x (size 5967872)",  # noqa: E501
    ]
    log = parse_nccl_log(lines, "synthetic")
    assert set(log.versions) == {"2.19.3", "2.20.5"}
    assert [k for k, _ in log.modify_qp] == ["EINVAL"]
    assert log.cuda_failures[0][2].endswith("nvls.cc") and len(log.shm_space) == 1
    assert log.env["NCCL_MAX_NCHANNELS"][0][0] == "2"


def test_a_watchdog_message_wrapped_before_worknccl_is_read() -> None:
    """A paste (or an older PyTorch) that breaks the line after 'timeout:' still gives the
    collective, its size and the limit."""
    log = parse("autocast-381-postfit-barrier-timeout.log")
    (t,) = log.timeouts
    assert (t.rank, t.op, t.numel_in, t.timeout_ms, t.ran_ms) == (
        0,
        "ALLREDUCE",
        1,
        1800000,
        1800090,
    )


def test_a_plugin_that_will_not_load_is_not_an_absent_plugin() -> None:
    """NET/Plugin's dlerror of a plugin whose libfabric is too old is a load failure; 'cannot
    open shared object' (no plugin installed) stays benign."""
    failed = parse("awsome-ai-292-ofi-plugin-libfabric-symbol.log")
    assert failed.plugin_load_failed and not failed.plugin_absent
    absent = parse("nccl-1240-graph-file-azure-ncv4.log")
    assert absent.plugin_absent and not absent.plugin_load_failed


def test_a_one_rank_communicator_is_one_node() -> None:
    """NCCL_IB_DISABLE=1 and sockets on a one-rank communicator move nothing between nodes:
    no socket-fallback finding (NVIDIA/nccl#1240's real fault is the injected graph file)."""
    assert parse("nccl-1240-graph-file-azure-ncv4.log").single_node
    codes = {f.code for f in diagnose([str(LOGS / "nccl-1240-graph-file-azure-ncv4.log")]).findings}
    assert "socket_fallback" not in codes


def _first_codes(tmp: Path, lines: list[str]) -> list[str]:
    path = tmp / f"synthetic-{len(list(tmp.iterdir()))}.log"
    path.write_text("\n".join(lines) + "\n")
    return [f.code for f in diagnose([str(path)]).findings if f.severity != "info"]


#: NET/IB's device line and its RoCE QP line in NCCL's own formats (src/transport/net_ib:
#: 'NET/IB : Using [%d]%s:%d/%s', and 'NET/IB: NCCL Dev %d IbDev %d Port %d qpn %d mtu %d ...
#: GID %ld (%lX/%lX)', the subnet prefix as a little-endian hex number)
_ROCE_USING = "a:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.1<0>"
_ERR12 = (
    "a:1:9 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer "
    "10.0.0.2<33092> with error 12, opcode 0, len 0, vendor err 129 (Recv)"
)


def test_a_link_local_roce_gid_outranks_a_flaky_link(tmp_path: Path) -> None:
    """Error 12 on RoCE whose QPs were set up on GID fe80:: (printed '80FE'): the GID does not
    route between nodes, so that, not a flapping link, comes first (NVIDIA/nccl#426, #769)."""
    qp = (
        "a:1:9 [0] NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 1047 mtu 5 GID 0 "
        "(80FE/1A8A41FEFF21A75E) fifoRkey=0x15e6c5 fifoLkey=0x15e6c5"
    )
    log = parse_nccl_log([_ROCE_USING, qp, _ERR12], "synthetic")
    assert [(i, ll) for i, ll, _ in log.qp_gids] == [(0, True)]
    assert _first_codes(tmp_path, [_ROCE_USING, qp, _ERR12])[0] == "roce_gid"
    # a routable RoCE v2 GID (::ffff:10.0.0.1 has prefix 0): the link stays the likely cause
    routable = qp.replace("GID 0 (80FE/", "GID 3 (0/")
    assert parse_nccl_log([routable], "s").qp_gids[0][:2] == (3, False)
    assert _first_codes(tmp_path, [_ROCE_USING, routable, _ERR12])[0] == "ib_link_error"
    # on InfiniBand fe80:: is the normal GID (IB routes by LID): no GID finding
    ib = _ROCE_USING.replace("/RoCE", "/IB")
    assert "roce_gid" not in _first_codes(tmp_path, [ib, qp, _ERR12])


def test_a_failed_proxy_connect_on_roce_points_at_the_gid(tmp_path: Path) -> None:
    """The proxy's Connect failing with a system error and no verbs call named, on a host
    whose pasted `show_gids` lists RoCE GIDs: NCCL types each GID from sysfs while it
    connects, which fails in containers without gid_attrs (NVIDIA/nccl#1538, #1573). Without
    any RoCE evidence the same lines name no GID problem."""
    connect = [
        "w-0:5665:5801 [2] proxy.cc:1487 NCCL WARN [Service thread] Error encountered "
        "progressing operation=Connect, res=3, closing connection",
        "w-0:5665:5801 [2] proxy.cc:1521 NCCL WARN [Proxy Service 2] Failed to execute "
        "operation Connect from rank 2, retcode 3",
    ]
    gids = [
        "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV",
        "mlx5_0\t1\t3\t0000:0000:0000:0000:0000:ffff:0a9c:8184\t10.156.129.132  \tv2\tnet1",
    ]
    log = parse_nccl_log(connect + gids, "s")
    assert len(log.proxy_connect_failed) == 2 and len(log.roce_gid_rows) == 1
    assert _first_codes(tmp_path, connect + gids)[0] == "roce_gid"
    assert _first_codes(tmp_path, [_ROCE_USING, *connect])[0] == "roce_gid"
    assert "roce_gid" not in _first_codes(tmp_path, connect)
    ib = _ROCE_USING.replace("/RoCE", "/IB")
    assert "roce_gid" not in _first_codes(tmp_path, [ib, *connect])


def test_modify_qp_no_such_device_is_the_hca_port(tmp_path: Path) -> None:
    """ENODEV moving a QP to RTR: the port/GID NCCL picked has no interface up behind it
    (NCCL's warning 'Call to ibv_modify_qp failed with %d %s, on dev %s:%d, ...')."""
    lines = [
        _ROCE_USING,
        "a:1:9 [0] misc/ibvwrap.cc:376 NCCL WARN Call to ibv_modify_qp failed with 19 No such "
        "device, on dev mlx5_0:1, curr state INIT, next state RTR, local GID index 3, local GID "
        "::ffff:10.0.0.1, remote GID ::ffff:10.0.0.2",
    ]
    assert [k for k, _ in parse_nccl_log(lines, "s").modify_qp] == ["ENODEV"]
    codes = _first_codes(tmp_path, lines)
    assert codes[0] == "ib_hca_select" and "roce_gid" in codes


def _nccl_tests_header(pid: int, host: str, ranks: int = 1) -> list[str]:
    """nccl-tests' own header (src/common.cu: '#  Rank %2d Group %2d Pid %6d on %10s device
    %2d [%s] %s') and table for `ranks` ranks of one process."""
    out = [
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    out += [
        f"#  Rank {r:2d} Group  0 Pid {pid + r:6d} on {host:>10s} device  {r} [0x07] "
        "NVIDIA A100-SXM4-80GB"
        for r in range(ranks)
    ]
    bus = "0.00" if ranks == 1 else "0.01"
    return [
        *out,
        "#",
        "#                                                              out-of-place"
        "                       in-place",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
        "            (us)  (GB/s)  (GB/s)",
        f"           8             2     float     sum      -1     4.10    0.00    {bus}      0"
        f"     0.11    0.07    {bus}      0",
        f"          16             4     float     sum      -1     4.20    0.00    {bus}      0"
        f"     0.12    0.13    {bus}      0",
    ]


def test_nccl_tests_without_mpi_is_named(tmp_path: Path) -> None:
    """`mpirun -np 2 all_reduce_perf` built without MPI=1: two processes, each rank 0 of its
    own one-rank run (a FAQ of NVIDIA/nccl-tests)."""
    lines = [
        "mpirun -np 2 -H node01,node02 ./build/all_reduce_perf -b 8 -e 16",
        *_nccl_tests_header(4100, "node01"),
        *_nccl_tests_header(5200, "node02"),
    ]
    assert _first_codes(tmp_path, lines)[0] == "tests_without_mpi"
    # one MPI job, and two MPI jobs one after the other (rank 0 has two pids): nothing
    one = ["mpirun -np 2 ./build/all_reduce_perf", *_nccl_tests_header(4100, "node01", 2)]
    assert "tests_without_mpi" not in _first_codes(tmp_path, one)
    two = [*one, *_nccl_tests_header(6100, "node01", 2)]
    assert "tests_without_mpi" not in _first_codes(tmp_path, two)


def test_nccl_tests_headers_printed_before_any_result_are_separate_jobs(tmp_path: Path) -> None:
    """With MPI only MPI rank 0 prints nccl-tests' run header (src/common.cu, PRINT is `if
    (is_main_thread) printf`); two headers with no result between them are two processes that
    each ran as rank 0 of its own job, even when only one's '# Rank' lines follow
    (NVIDIA/nccl-tests#213)."""
    header = (
        "# nThread 1 nGpus 4 minBytes 1024 maxBytes 4096 step: 2(factor) warmup iters: 5 "
        "iters: 20 agg iters: 1 validation: 1 graph: 0"
    )
    ranks = [
        f"#  Rank  {r} Group  0 Pid    321 on      nodeA device  {r} [0x1b] NVIDIA H100 80GB HBM3"
        for r in range(4)
    ]
    lines = [header, "#", "# Using devices", header, "#", "# Using devices", *ranks]
    assert _first_codes(tmp_path, lines) == ["tests_without_mpi"]
    assert "tests_without_mpi" not in _first_codes(tmp_path, [header, "#", *ranks])


def test_one_process_listing_every_rank_is_one_node() -> None:
    """nccl-tests -g 2 in one process (both ranks under one pid) cannot cross nodes: its
    NET/Socket line after 'Failed to open libibverbs' is no socket fallback."""
    log = parse("nccl-tests-287-rtx5090-nccl-2251-too-old.log")
    assert log.test_ranks == [(0, 4766), (1, 4766)] and log.single_node
    codes = {
        f.code
        for f in diagnose([str(LOGS / "nccl-tests-287-rtx5090-nccl-2251-too-old.log")]).findings
    }
    assert "socket_fallback" not in codes


def test_a_local_length_error_is_an_mtu_mismatch_and_flushes_are_its_consequence(
    tmp_path: Path,
) -> None:
    """Status 1 (IBV_WC_LOC_LEN_ERR) is what a receive QP with a smaller path MTU reports
    (upstream fix 9f3c41dd); the flushes (status 5) that follow a QP access error are its
    consequence, not a second cause (NVIDIA/nccl#1524)."""
    p = tmp_path / "status1.log"
    p.write_text(
        "h1:7:9 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
        "10.0.0.2<4000> with status=1 opcode=128 len=0 vendor err 105 (Recv) localGid "
        "::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2\n",
        encoding="utf-8",
    )
    top = diagnose([str(p)]).findings[0]
    assert top.code == "ib_mtu" and "status 1 (local length error)" in top.reason
    flushed = diagnose([str(LOGS / "nccl-1524-roce-mtu-mismatch-local-access-violation.log")])
    assert "ib_link_error" not in [f.code for f in flushed.findings]


#: An NCCL failure line (init.cc's WARN) to show the job failed, whatever the cause
_FAILED = "n1:5:5 [0] NCCL WARN Cuda failure 'unknown error'"


@pytest.mark.parametrize(
    ("version", "gpu", "expected"),
    [
        ("2.14.3+cuda11.8", "NVIDIA H100 80GB HBM3", True),  # sm_90 from 2.15.1
        ("2.21.5+cuda12.4", "NVIDIA B200", True),  # sm_100 from 2.25.1
        ("2.18.5+cuda12.2", "NVIDIA H100 80GB HBM3", False),
        ("2.14.3+cuda11.8", "NVIDIA A100-SXM4-80GB", False),
    ],
)
def test_an_nccl_older_than_the_gpu_is_named(
    tmp_path: Path, version: str, gpu: str, expected: bool
) -> None:
    """The first NCCL release per architecture (NVIDIA/nccl release commits 2.15.1-1 'Add
    support for H100 (sm90)', 2.25.1-1 'Add Blackwell/SM100 support') against the version and
    the GPU a failing log names."""
    lines = [
        "GPU 0: " + gpu + " (UUID: GPU-0)",
        f"n1:5:5 [0] NCCL INFO NCCL version {version}",
        _FAILED,
    ]
    assert ("gpu_arch_missing" in _first_codes(tmp_path, lines)) is expected
    # a run that does not fail is left alone
    assert "gpu_arch_missing" not in _first_codes(tmp_path, lines[:2])


def test_a_one_way_gpu_link_in_an_nccl_before_hopper_is_an_nccl_older_than_the_gpu(
    tmp_path: Path,
) -> None:
    """graph/paths.cc's 'Failed to find reverse path' between two GPUs (topo.h type 0) from an
    NCCL before 2.15.1, which reads 12 NVLinks per GPU where Hopper has 18 (xml.cc
    ncclTopoGetXmlFromGpu): a one-way NVLink. PyTorch's message wraps before the version."""

    def log(version: str, rem_type: int) -> list[str]:
        return [
            "DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1275, internal error, NCCL",
            f"version {version}",
            "ncclInternalError: Internal check failed.",
            "Last error:",
            f"Failed to find reverse path from remNode {rem_type}/1b000 nlinks 4 to node 0/3d000",
        ]

    assert _first_codes(tmp_path, log("2.14.3", 0))[0] == "gpu_arch_missing"
    assert "gpu_arch_missing" not in _first_codes(tmp_path, log("2.18.5", 0))
    assert "gpu_arch_missing" not in _first_codes(tmp_path, log("2.14.3", 1))  # a PCI switch


def test_nccl_tests_built_with_nccl_1_on_pascal_names_the_missing_kernels(tmp_path: Path) -> None:
    """nccl-tests reads 1.0 for every NCCL 1.x (src/nccl1_compat.h); NCCL 1 compiled sm_60
    only from 1.3.4 (NVIDIA/nccl 649f04d0), so an unhandled CUDA error there may be that."""
    lines = [
        "# NCCL Tests compiled with NCCL 1.0",
        "#   Rank  0 on     node03 device  0 [0x04] Tesla P100-PCIE-16GB",
        "NCCL failure all_reduce.cu:95 'unhandled cuda error'",
    ]
    assert "gpu_arch_missing" in _first_codes(tmp_path, lines)


def test_a_version_in_a_sentence_is_no_running_nccl() -> None:
    """'the NCCL version 2.18.5+cuda11.8 as opposed to ...' is a reporter's words: NCCL and
    PyTorch end the line after the version."""
    log = parse_nccl_log(
        [
            "it uses the NCCL version 2.18.5+cuda11.8 as opposed to the container's",
            "node1:1:1 [0] NCCL INFO NCCL version 2.14.3+cuda11.8",
            "ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version 2.7.8 ncclSystemError",
        ]
    )
    assert list(log.versions) == ["2.14.3", "2.7.8"]


def test_a_message_wrapped_across_lines_is_read_once(tmp_path: Path) -> None:
    """XLA quotes NCCL's last warning inside its own error, and a reporter's paste wrapped it
    mid-message with '> ' quote markers (AI-Hypercomputer/xpk#492): 'Error' ends one line,
    'while creating shared memory segment' starts the next. A message whole on one line is
    not read again with its neighbour (nccl1562 of the corpus: a CUDA failure line followed
    by prose was quoted a second time, on the prose)."""
    lines = [
        "> failed: INTERNAL: NCCL operation ncclGroupEnd() failed: unhandled system error "
        "(run with ",
        "> NCCL_DEBUG=INFO for details). Last NCCL warning(error) log entry (may be unrelated)"
        "  'Error ",
        "> while creating shared memory segment /dev/shm/nccl-TfciGV (size 31850880), error: "
        "No space",
        "> left on device (28)'.",
    ]
    assert _first_codes(tmp_path, lines)[:1] == ["shm_space"]
    log = parse_nccl_log(
        [
            "gpu46:78367:78492 [0] transport/nvls.cc:244 NCCL WARN Cuda failure 1 "
            "'invalid argument'",
            "2. With `hpl` from [NGC](https://catalog.ngc.nvidia.com/orgs/nvidia/containers/hpc)",
        ]
    )
    assert [ln.number for _, _, _, ln in log.cuda_failures] == [1]


def test_nccl_tests_1x_on_pcie_teslas_that_stop_after_the_header_is_p2p(tmp_path: Path) -> None:
    """nccl-tests 1.x prints 'Rank N uses device N [bus] NAME' and a table headed 'bytes N
    type op time algbw busbw res'. Eight Tesla M40s (PCIe boards) that print the header and
    no row hung at the first all-reduce: ACS redirected their P2P writes (NVIDIA/nccl#104,
    fixed by disabling ACS)."""
    lines = ["# Using devices"]
    lines += [f"   Rank  {i} uses device  {i} [0x{5 + i:02x}] Tesla M40 24GB" for i in range(8)]
    lines += [
        "",
        "                                                 out-of-place                    in-place",
        "     bytes             N    type      op     time  algbw  busbw      res     time  algbw"
        "  busbw      res",
    ]
    assert _first_codes(tmp_path, lines)[:1] == ["p2p_broken"]
    # the same on SXM2 P100s (NVLink) is not a PCIe hang
    sxm = [ln.replace("Tesla M40 24GB", "Tesla P100-SXM2-16GB") for ln in lines]
    assert "p2p_broken" not in _first_codes(tmp_path, sxm)


def test_pytorch_shape_check_and_mnnvl_not_permitted(tmp_path: Path) -> None:
    """PyTorch's shape check before a collective (ProcessGroupWrapper, TORCH_DISTRIBUTED_DEBUG=
    DETAIL) is a collective mismatch; CUDA 800 in NCCL's P2P transport is the multi-node NVLink
    IMEX channel (NCCL's troubleshooting guide), not a generic CUDA error; 800 elsewhere is."""
    shape = tmp_path / "shape.log"
    shape.write_text(
        "RuntimeError: Error when verifying shape tensors for collective ALLREDUCE on rank 0. "
        "This likely indicates that input shapes into the collective are mismatched across "
        "ranks. Got shapes:  10\n"
    )
    f = diagnose([str(shape)]).findings[0]
    assert f.code == "collective_mismatch" and "TORCH_DISTRIBUTED_DEBUG" in f.reason
    imex = tmp_path / "imex.log"
    imex.write_text(
        "gb200-1:11:12 [0] transport/p2p.cc:310 NCCL WARN Cuda failure 800 "
        "'operation not permitted'\n"
    )
    codes = [f.code for f in diagnose([str(imex)]).findings if f.severity != "info"]
    assert codes == ["nvswitch_fabric"]
    other = tmp_path / "other.log"
    other.write_text(
        "node:1:2 [0] enqueue.cc:1100 NCCL WARN Cuda failure 800 'operation not permitted'\n"
    )
    assert diagnose([str(other)]).findings[0].code == "cuda_error"
