"""Doctor on real NCCL debug logs pasted in public reports (tests/data/nccl-logs/*.log, each
with a .source file naming the report and the fault its own thread identified): the transport
and the fault it names must be the thread's."""

from __future__ import annotations

from pathlib import Path

import pytest

from bandwall.measure.doctor import diagnose, log_findings, parse_nccl_log

LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl-logs"

#: log -> (transport doctor must name, finding codes it must raise; the thread's diagnosis is
#: quoted in the .source file)
EXPECTED: dict[str, tuple[str | None, set[str]]] = {
    "nccl-1537-roce-gdr-disabled.log": ("RoCE", {"gdr_off"}),
    "nccl-1412-ib-no-gdrdma.log": ("IB", {"gdr_off"}),
    "nv-peer-memory-56-gdr-distance.log": ("IB", {"gdr_off", "nic_far"}),
    "nccl-897-gdr-one-node.log": ("IB", {"gdr_off"}),
    "nccl-451-docker-ib-unopenable.log": ("Socket", {"socket_fallback"}),
    "nccl-941-container-no-ib-device.log": ("Socket", {"socket_fallback", "socket_ifname"}),
    "nccl-tests-188-ib-disabled-ipoib.log": ("Socket", {"socket_fallback"}),
    "nccl-tests-182-gpu-nic-phb.log": ("IB", {"nic_far"}),
    "p2p-bench-vllm-p2p-disabled-shm.log": (None, {"p2p_disabled"}),
    "nccl-1837-socket-ifname-missing.log": (None, {"socket_ifname"}),
    "marin-7018-no-socket-interface.log": (None, {"socket_ifname"}),
    "llamafactory-7396-allreduce-timeout.log": (None, {"nccl_timeout"}),
    "llamafactory-6269-reduce-scatter-timeout.log": (None, {"nccl_timeout"}),
}


def parse(name: str):  # type: ignore[no-untyped-def]
    with (LOGS / name).open() as fh:
        return parse_nccl_log(fh, name)


def test_every_log_is_expected_and_names_its_public_source() -> None:
    logs = sorted(p.name for p in LOGS.glob("*.log"))
    assert logs == sorted(EXPECTED)
    reports = set()
    for name in logs:
        source = (LOGS / name).with_suffix(".source").read_text()
        assert source.startswith("Source: https://github.com/")
        assert "Thread's diagnosis:" in source or "analysis" in source
        reports.add(source.split()[1])
    assert len(reports) >= 8, "acceptance: at least 8 different public reports"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_doctor_names_the_transport_and_the_threads_fault(name: str) -> None:
    transport, codes = EXPECTED[name]
    log = parse(name)
    assert log.net_transport == transport
    found = {f.code for f in log_findings(log)}
    assert codes <= found, f"{name}: found {sorted(found)}"
    # and no transport fault the thread rules out
    if transport in ("IB", "RoCE"):
        assert "socket_fallback" not in found
    if transport == "Socket":
        assert "gdr_off" not in found


def test_gdr_findings_say_why() -> None:
    f = next(
        f for f in log_findings(parse("nv-peer-memory-56-gdr-distance.log")) if f.code == "gdr_off"
    )
    assert "distance 3 >= 2" in f.reason and "nvidia-peermem" in " ".join(f.fix)
    one = next(f for f in log_findings(parse("nccl-897-gdr-one-node.log")) if f.code == "gdr_off")
    assert "1 of 2 NET connections" in one.reason  # GDR on one node only
    assert any("NCCL_NET_GDR_LEVEL" in c for c in one.check)


def test_socket_fallback_reasons_come_from_the_log() -> None:
    docker = next(
        f
        for f in log_findings(parse("nccl-451-docker-ib-unopenable.log"))
        if f.code == "socket_fallback"
    )
    assert "mlx5_bond_0" in docker.reason and "could not open" in docker.reason
    assert any("/dev/infiniband" in c for c in docker.check)
    ipoib = next(
        f
        for f in log_findings(parse("nccl-tests-188-ib-disabled-ipoib.log"))
        if f.code == "socket_fallback"
    )
    assert "NCCL_IB_DISABLE=1" in ipoib.reason and "ibs85f0" in ipoib.reason
    plugin = next(
        f
        for f in log_findings(parse("nccl-941-container-no-ib-device.log"))
        if f.code == "socket_fallback"
    )
    assert "plugin" in plugin.reason
    bridge = next(
        f
        for f in log_findings(parse("nccl-941-container-no-ib-device.log"))
        if f.code == "socket_ifname"
    )
    assert "virbr0" in bridge.reason


def test_timeouts_name_the_rank_and_the_collective() -> None:
    (f,) = log_findings(parse("llamafactory-7396-allreduce-timeout.log"))
    assert f.code == "nccl_timeout" and f.severity == "critical"
    assert "ALLREDUCE" in f.title and "1580" in f.title
    assert "0, 3, 4" in f.reason and "466,119,168 elements" in f.reason and "1579" in f.reason
    (g,) = log_findings(parse("llamafactory-6269-reduce-scatter-timeout.log"))
    assert "_REDUCE_SCATTER_BASE" in g.title and "7753" in g.title and "0, 3, 4" in g.reason


def test_ifname_finding_names_the_setting() -> None:
    f = next(
        f
        for f in log_findings(parse("nccl-1837-socket-ifname-missing.log"))
        if f.code == "socket_ifname"
    )
    assert "NCCL_SOCKET_IFNAME=eth2" in f.reason and f.severity == "critical"


def test_interleaved_ranks_and_foreign_lines() -> None:
    """Two ranks wrote into one vLLM log: one line holds the end of rank 0's record and the
    start of rank 1's; the vLLM lines around them are skipped, not misread."""
    log = parse("p2p-bench-vllm-p2p-disabled-shm.log")
    assert log.versions == {"2.28.9": {"proxmox"}}
    assert {c.src for c in log.connections} == {0, 1}
    assert all(c.transport == "SHM" for c in log.connections)
    assert log.ranks.keys() == {0, 1} and log.ranks[1]["bus_id"] == "a000"
    assert log.foreign >= 6 and log.not_understood == 0
    # every marker is one record, including the one that starts mid-line after the cut
    text = (LOGS / "p2p-bench-vllm-p2p-disabled-shm.log").read_text()
    assert log.records == text.count(" NCCL INFO ") and log.records > log.lines - log.foreign
    assert log.single_node and log.net_transport is None


def test_gpu_nic_distance_from_the_graph() -> None:
    log = parse("nccl-tests-182-gpu-nic-phb.log")
    assert [(g.type_intra, g.type_inter) for g in log.graphs] == [("LOC", "PHB")] * 2
    assert log.gpu_net_paths[0][2] == "PHB" and log.ib_devices["mlx5_0"].link == "IB"
    assert log.env["NCCL_IB_HCA"] == {"mlx5_0"}


def test_truncated_and_foreign_files_say_what_was_not_understood(tmp_path: Path) -> None:
    cut = tmp_path / "cut.log"
    text = (LOGS / "nccl-1537-roce-gdr-disabled.log").read_text()
    cut.write_text(text[: text.index("GPU Direct RDMA Disabled for HCA 1") + 20])
    foreign = tmp_path / "notes.txt"
    foreign.write_text("just some words\nabout a run\n")
    odd = tmp_path / "odd.log"
    odd.write_text(
        "host:1:1 [0] NCCL INFO Something NCCL 9.9 prints that nobody knows\n"
        "NCCL said something odd without a marker\n"
    )
    diag = diagnose([str(cut), str(foreign), str(odd)])
    by = {i.path: i for i in diag.inputs}
    assert "gdr_off" in {f.code for f in diag.findings}  # what was read is still reported
    assert by[str(foreign)].kinds == [] and "not understood" in by[str(foreign)].notes[0]
    assert "first line: 'just some words'" in by[str(foreign)].notes[0]
    assert "not understood" in by[str(odd)].notes[0] and "line 1" in by[str(odd)].notes[0]


def test_rules_without_a_public_log_on_synthetic_lines() -> None:
    """Synthetic lines in NCCL's own formats, for the rules no stored public log exercises:
    mixed versions (NVIDIA/nccl#1267 found one, but its thread pasted only the matching
    nodes' logs), channel caps and an NCCL_IB_HCA that matches nothing."""
    lines = [
        "a:1:1 [0] NCCL INFO NCCL version 2.19.3+cuda12.3",
        "b:2:2 [0] NCCL INFO NCCL version 2.20.5+cuda12.4",
        "a:1:1 [0] NCCL INFO NCCL_MAX_NCHANNELS set by environment to 2.",
        "a:1:1 [0] NCCL INFO NCCL_IB_HCA set to mlx9",
        "a:1:1 [0] NCCL INFO NET/IB : No device found.",
        "a:1:1 [0] NCCL INFO 2 coll channels, 0 nvls channels, 2 p2p channels, "
        "2 p2p channels per peer",
    ]
    log = parse_nccl_log(lines, "synthetic")
    found = {f.code: f for f in log_findings(log)}
    assert (
        "2.19.3 on a" in found["mixed_versions"].reason
        and "2.20.5 on b" in found["mixed_versions"].reason
    )
    assert found["mixed_versions"].severity == "critical"
    assert "NCCL_MAX_NCHANNELS=2" in found["few_channels"].reason
    assert "NCCL_IB_HCA=mlx9" in found["ib_hca"].reason
    healthy = parse_nccl_log(lines[:1], "one-version")
    assert log_findings(healthy) == []
