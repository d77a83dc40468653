"""NCCL's and aws-ofi-nccl's own messages that name their cause (messages.py): one line each,
as the source prints it, gets that cause instead of the catch-all."""

from __future__ import annotations

from pathlib import Path

import pytest

from bandwall.measure.doctor import diagnose
from bandwall.measure.doctor.messages import MESSAGES, lookup
from bandwall.measure.doctor.rules import BY_CODE

#: One line per row of MESSAGES, from the template in the file the row names (values filled).
LINES = [
    (
        "transport/net_ib/common.cc:127 NCCL WARN NET/IB : mlx5_0:1 async fatal event o"
        "n CQ (0x55d5c0a1b2c0) handle=3 cqe=16384: CQ error",
        "ib_link_error",
    ),
    (
        "transport/net_ib/p2p.cc:854 NCCL WARN NET/IB: Got CQE with error (devIndex=0, "
        "req=0x55d5c0a1b2c0, comm=0x55d5c0a1b2c0 (mlx5_0), wr_id=1, qp_num=1)",
        "ib_link_error",
    ),
    (
        "transport/net_ib/common.cc:179 NCCL WARN NET/IB : mlx5_0:1 Got non-fatal async"
        " event: port error(10)",
        "ib_link_error",
    ),
    (
        "misc/ibvwrap.cc:42 NCCL WARN Call to ibv_open_device failed with error No such device",
        "socket_fallback",
    ),
    ("misc/ibvwrap.cc:88 NCCL WARN Call to ibv_create_qp failed", "memlock"),
    ("misc/ibvwrap.cc:42 NCCL WARN Call to ibv_reg_mr failed with error Bad address", "gdr_off"),
    (
        "graph/topo.cc:1341 NCCL WARN TOPO/NET : Only matched 1 devices, 2 requested fr"
        "om mlx5_0+mlx5_1",
        "ib_hca_select",
    ),
    (
        "graph/search.cc:1070 NCCL WARN Rank 3 requires NIC 3 but that NIC is not avail"
        "able for rank 3",
        "uneven_nodes",
    ),
    ("transport/net_ib/init.cc:307 NCCL WARN NET/IB : No IP interface found.", "socket_ifname"),
    ("misc/socket.cc:199 NCCL WARN Net : Unsupported address family type", "socket_ifname"),
    (
        "misc/socket.cc:257 NCCL WARN Net : error encountered when getting address info"
        " : Name or service not known",
        "bootstrap_unreachable",
    ),
    ("transport/net_socket.cc:325 NCCL WARN NET/Socket : socket progress error", "peer_exited"),
    (
        "bootstrap.cc:136 NCCL WARN Message truncated : received 1 bytes instead of 4194304",
        "collective_mismatch",
    ),
    (
        "ras/ras.cc:415 NCCL WARN NCCL version mismatch with remote peer 10.0.0.2<45678"
        "> (local: 22602, remote 22105)",
        "mixed_versions",
    ),
    (
        "os/linux.cc:780 NCCL WARN Error: failed to create shared memory file /dev/shm/"
        "nccl-a1B2c3, error No space left on device (28)",
        "shm_space",
    ),
    (
        "include/shm.h:48 NCCL WARN Error while attaching to shared memory segment /dev"
        "/shm/nccl-a1B2c3 (size 9637888)",
        "shm_not_shared",
    ),
    ("misc/nvmlwrap.cc:66 NCCL WARN Failed to open libnvidia-ml.so.1", "driver_unusable"),
    ("unknown:29 NCCL WARN NET/OFI Failed to load symbol cudaGetDevice", "driver_unusable"),
    (
        "misc/cudawrap.cc:114 NCCL WARN Retrieve cuMemCreate version 10020 failed with 35",
        "driver_too_old",
    ),
    ("include/nvmlwrap.h:28 NCCL WARN NVML failure 'GPU is lost'", "gpu_xid"),
    ("proxy.cc:1721 NCCL WARN [Proxy Service] Failed to set CUDA device 0", "cuda_error"),
    (
        "nccl_net_ofi_gpu_mem_alloc:287 NCCL WARN NET/OFI cuMemAlloc failed: out of memory",
        "gpu_memory",
    ),
    ("graph/search.cc:989 NCCL WARN XML Export Channel : rank 1 not found.", "topology_file"),
    (
        "get_device_property:1323 NCCL WARN NET/OFI Failed to determine device property"
        " path length of property /sys/bus/pci/devices/0000:10:1c.0/max_link_speed. ERR"
        "OR: No such file or directory",
        "pci_sysfs",
    ),
    (
        "mnnvl.cc:74 NCCL WARN MNNVL (cliqueSize 4) is available but not working on thi"
        "s system. Check the IMEX channel configuration (/dev/nvidia-caps-imex-channels"
        "). Set NCCL_MNNVL_ENABLE=0 to ignore this issue.",
        "nvswitch_fabric",
    ),
    ("plugin/net.cc:349 NCCL WARN Failed to initialize any NET plugin", "net_plugin_load"),
    (
        "config_endpoint:819 NCCL WARN NET/OFI GDR disabled on GDR-supported instance t"
        "ype p4d.24xlarge",
        "gdr_off",
    ),
    (
        "ofi_process_cq:1752 NCCL WARN NET/OFI Fatal: Bounce buffer recv completed with error",
        "ib_link_error",
    ),
    (
        "nccl_ofi_ofiutils_ep_create:359 NCCL WARN NET/OFI GDR support reported to NCCL"
        " but then couldn't be configured on an endpoint.  Cannot continue.",
        "efa_unavailable",
    ),
    (
        "nccl_ofi_ofiutils_ep_create:273 NCCL WARN NET/OFI Couldn't allocate endpoint. "
        "RC: -61, ERROR: No data available",
        "efa_unavailable",
    ),
]


def test_every_row_has_a_line_and_a_rule() -> None:
    assert len(LINES) == len(MESSAGES)
    for (line, code), row in zip(LINES, MESSAGES, strict=True):
        assert row.code == code and code in BY_CODE
        found = lookup(line)
        assert found is not None and found.code == code


@pytest.mark.parametrize(("text", "code"), LINES, ids=[c for _, c in LINES])
def test_a_message_alone_names_its_cause(text: str, code: str, tmp_path: Path) -> None:
    log = tmp_path / "one.log"
    log.write_text(f"node1:12345:12399 [3] {text}\n")
    findings = diagnose([str(log)]).findings
    assert findings and findings[0].code == code, [(f.code, f.severity) for f in findings]
    assert findings[0].evidence[0].text.endswith(text.split(" NCCL WARN ")[-1])


def test_an_unknown_warning_still_falls_to_the_catch_all(tmp_path: Path) -> None:
    log = tmp_path / "one.log"
    log.write_text("node1:1:1 [0] misc/foo.cc:12 NCCL WARN Something nobody wrote down\n")
    assert [f.code for f in diagnose([str(log)]).findings] == ["nccl_errors"]


def test_a_local_unix_socket_refused_is_not_the_network(tmp_path: Path) -> None:
    # cuMem handle exchange over an abstract Unix socket: separate containers (network
    # namespaces) refuse each other there, whatever the firewall says
    log = tmp_path / "uds.log"
    log.write_text(
        "n1:1:1 [1] misc/ipcsocket.cc:233 NCCL WARN UDS: Sending data over socket "
        "nccl-socket-1-a1b2c3 failed : Connection refused (111)\n"
    )
    assert [f.code for f in diagnose([str(log)]).findings][:1] == ["shm_not_shared"]


def test_a_full_work_queue_is_not_the_memlock_limit(tmp_path: Path) -> None:
    log = tmp_path / "post.log"
    log.write_text(
        "n1:1:1 [0] transport/net_ib.cc:1092 NCCL WARN ibv_post_send() failed with error "
        "Cannot allocate memory\n"
    )
    assert "memlock" not in [f.code for f in diagnose([str(log)]).findings]
