"""The whole-job view: files given together are one job. A path fault and the same job's
nccl-tests busbw are stated together; nodes are compared with each other; the hardware is read
from the evidence and never assumed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bandwall.measure.doctor import diagnose

DATA = Path(__file__).resolve().parents[1] / "data"
CORPUS = Path(__file__).resolve().parent / "corpus"


def _table(hosts: int, gpus: int, device: str, busbw: list[tuple[int, float]]) -> str:
    ranks = hosts * gpus
    lines = [
        f"# nThread 1 nGpus 1 minBytes 8 maxBytes {busbw[-1][0]} step: 2(factor) warmup iters: 5 "
        "iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for r in range(ranks):
        lines.append(
            f"#  Rank {r:2d} Group  0 Pid {100 + r:6d} on node{r // gpus + 1:02d} device "
            f"{r % gpus:2d} [0x{r:02x}] {device}"
        )
    lines += [
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
        "     (us)  (GB/s)  (GB/s)",
    ]
    factor = 2 * (ranks - 1) / ranks
    for size, bw in busbw:
        alg = bw / factor
        us = size / (alg * 1e3)
        lines.append(
            f"{size:13d} {size // 4:13d}     float     sum      -1 {us:8.1f} {alg:7.2f} {bw:7.2f}"
            f"      0 {us:8.1f} {alg:7.2f} {bw:7.2f}      0"
        )
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.0", "#"]
    return "\n".join(lines) + "\n"


SIZES = [(64 << 20, 1.1), (128 << 20, 1.2), (256 << 20, 1.25), (512 << 20, 1.3), (1 << 30, 1.3)]


def _socket_log() -> str:
    rows: list[str] = []
    for host in ("node01", "node02"):
        rows += [
            f"{host}:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
            f"{host}:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.",
            f"{host}:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.{len(rows)}<0>",
            f"{host}:1:1 [0] NCCL INFO Using network Socket",
        ]
    rows.append("node01:1:2 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/Socket/0")
    return "\n".join(rows) + "\n"


def test_socket_fallback_and_its_nccl_tests_table_are_one_diagnosis(tmp_path: Path) -> None:
    (tmp_path / "nccl.log").write_text(_socket_log())
    (tmp_path / "allreduce.txt").write_text(_table(2, 8, "NVIDIA H100 80GB HBM3", SIZES))
    diag = diagnose([str(tmp_path)], fabric="ib-ndr")
    top = diag.findings[0]
    assert top.code == "socket_fallback" and top.severity == "critical"
    assert "nccl-tests" in top.reason and "of the model" in top.reason
    low = next(f for f in diag.findings if f.code == "busbw_low")
    assert "tcp sockets" in low.reason.lower()
    t = diag.job.tests[0].comparison
    assert t is not None and t["ratio"] < 0.1
    # without the fabric, the network speed is unknown: no comparison, but still connected
    diag = diagnose([str(tmp_path)])
    top = diag.findings[0]
    assert top.code == "socket_fallback" and "1.3 GB/s busbw" in top.reason
    assert not any(f.code == "busbw_low" for f in diag.findings)
    assert any("network is unknown" in n for n in diag.notes)


def test_a_healthy_table_without_nic_information_is_not_compared_with_a_guess(
    tmp_path: Path,
) -> None:
    """The issue's false alarm: an nccl-tests table without NIC information compared with an
    assumed ib-ndr said 'busbw low'. Now nothing is assumed and nothing is raised."""
    for name in (
        "awsome-p5-2node-all-reduce",
        "gke-a4-b200-16-ranks-all-gather",
        "eks-efa-t4-all-reduce",
        "azure-nd-v100-a100-old-format",
    ):
        diag = diagnose([str(CORPUS / f"{name}.log")])
        assert [f.code for f in diag.findings if f.severity != "info"] == [], name


def test_the_sentence_quotes_the_sizes_the_ratio_is_computed_on() -> None:
    log = DATA / "nccl-tests" / "gke-a4-b200-16-ranks-all-gather.log"
    diag = diagnose([str(log)], fabric="roce-400", gpu="B200", gpus_per_node=8, op="all_gather")
    c = diag.job.tests[0].comparison
    assert c is not None
    assert c["ratio"] == pytest.approx(c["measured_busbw_GBps"] / c["model_busbw_GBps"])
    sizes = c["compared_sizes"]
    assert sizes[0] == 64 << 20 and sizes[-1] == 8 << 30
    from bandwall.measure.doctor.detectors import _busbw_text

    text = _busbw_text(diag.job.tests[0])
    assert f"{len(sizes)} size(s) from 64 MiB to 8 GiB" in text
    assert f"{c['measured_busbw_GBps']:,.1f} GB/s, {c['ratio']:.0%}" in text


def test_nodes_are_compared(tmp_path: Path) -> None:
    lines = [
        "a1:1:1 [0] NCCL INFO NCCL version 2.19.3+cuda12.3",
        "a1:1:1 [0] NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so",
        "a1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>",
        "b2:2:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
        "b2:2:2 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.",  # noqa: E501
        "b2:2:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.2<0>",
        "a1:1:3 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
        "b2:2:3 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/IB/0",
    ]
    (tmp_path / "job.log").write_text("\n".join(lines) + "\n")
    diag = diagnose([str(tmp_path / "job.log")])
    codes = {f.code: f for f in diag.findings}
    assert "2.19.3 on a1" in codes["mixed_versions"].reason
    assert "on a1 but not on b2" in codes["net_plugin_mismatch"].reason
    assert "a1: 2 NIC(s); b2: 1 NIC(s)" in codes["uneven_nodes"].reason
    assert "1 of 2 NET connections" in codes["gdr_off"].reason and "b2" in codes["gdr_off"].reason
    hw = diag.job.hardware()
    assert hw.nic_link == "IB" and hw.nics == 2 and hw.nic_speed_GBps is None
    assert "speed unknown" in hw.describe() and "GPU unknown" in hw.describe()
