"""How a published run's scale-out text becomes a catalog fabric (runs.fabric_for): the
conversions batch 15 needed (a node total, plain Ethernet), and that the rows before it keep
theirs."""

from __future__ import annotations

import pytest

from bandwall.measure.calibrate.runs import fabric_for


@pytest.mark.parametrize(
    ("text", "gpu", "expected"),
    [
        # fms-fsdp's A100 cluster: AWS p4de, 4 x 100 Gb/s EFA per instance
        (
            "400 Gb/s per 8-GPU node inter-node with GPUDirect RDMA; consistent with AWS "
            "p4de.24xlarge (8x A100 80GB, 4 x 100 Gb/s EFA)",
            "A100-SXM-80GB",
            ("efa-p4d", 4.0),
        ),
        # a node total and no NIC count: NDR ports filling it
        ("800 Gb/s per node inter-node, fabric not stated", "H100-SXM", ("ib-ndr", 2.0)),
        # the same total on A100 (HDR generation): 200 Gb/s ports
        ("400 Gb/s per node", "A100-SXM-80GB", ("ib-hdr", 2.0)),
        # one 25 GbE NIC, NCCL over TCP; 'no RDMA NIC' names what the link is not
        (
            "2 nodes x 8 RTX 4090, one 25 Gb/s Ethernet NIC per node (no RDMA NIC, NCCL over "
            "TCP sockets)",
            "RTX-4090",
            ("eth-25g-tcp", 1.0),
        ),
        ("2 x 10 GbE, TCP", "L40S", ("eth-10g-tcp", 2.0)),
        (
            "AWS g5 instances, 25 Gb/s ENA networking (TCP, no EFA)",
            "A100-SXM-80GB",
            ("vpc-25g", 1.0),
        ),
        # rows before batch 15: an RDMA NIC on Ethernet is not a TCP tier, NIC counts stay
        (
            "8x BF3 ConnectX-7 400Gb/s per node on an Ethernet fabric",
            "H100-SXM",
            ("ib-ndr", None),
        ),
        ("compute 8x ConnectX-7 IB NDR 400Gb/s per node", "H100-SXM", ("ib-ndr", None)),
        # Google's GPUDirect over TCP: A3 Mega's TCPXO on 8 data NICs, A3 High's TCPX on 4
        (
            "GCP A3 Mega (a3-megagpu-8g): GPUDirect-TCPXO, 8x200G NICs per node (TCP, not RDMA)",
            "H100-SXM",
            ("gcp-tcpxo", 8.0),
        ),
        ("GCP A3 VMs (h100-80gb-8); DCN bandwidth not stated", "H100-SXM", ("gcp-tcpx", 4.0)),
        (
            "GCP A3 Ultra (a3-ultragpu-8g): 8x400G ConnectX-7 RoCE per node",
            "H200",
            ("roce-400", None),
        ),
        ("RoCE 1600 Gbps per node", "A100-SXM-80GB", ("roce-200", 8.0)),
        # texts a review found misread (2026-12-07): GPU counts and memory are not NICs,
        # 'not RDMA' negates, thousands separators, EFA totals, a storage network beside IB
        ("400 Gb/s per node (8x A100)", "A100-SXM-80GB", ("ib-hdr", 2.0)),
        ("25 GbE, TCP, not RDMA", "L40S", ("eth-25g-tcp", 1.0)),
        ("8x 24GB RTX 4090, 25 GbE", "RTX-4090", ("eth-25g-tcp", 1.0)),
        ("8x 400 Gb/s IB per node, 25 GbE storage", "H100-SXM", ("ib-ndr", None)),
        ("1,600 Gb/s per node", "H100-SXM", ("ib-ndr", 4.0)),
        ("100 Gb/s Ethernet TCP", "H100-SXM", ("vpc-100g", 1.0)),
        ("3,200 Gb/s per node EFA", "H100-SXM", ("efa-p5", 8.0)),
        ("32 x 100 Gb/s EFA (p5)", "H100-SXM", ("efa-p5", 8.0)),
        ("llama3 on GCP A3 Ultra, RoCE", "H200", ("roce-400", None)),
    ],
)
def test_scale_out_text_maps_to_fabric(
    text: str, gpu: str, expected: tuple[str, float | None]
) -> None:
    assert fabric_for(text, gpu) == expected


def test_every_published_row_maps_to_a_catalog_fabric_and_a_plausible_nic_count() -> None:
    """Each row's text gives a fabric the catalog has, and a NIC count (when it gives one)
    of 1-8 per node."""
    import csv
    from importlib import resources

    from bandwall.catalog import load_catalog

    cat = load_catalog()
    text = (
        resources.files("bandwall.measure.calibrate")
        .joinpath("data", "published_runs.csv")
        .read_text()
    )
    for row in csv.DictReader(text.splitlines()):
        fabric, nics = fabric_for(row["scale_out"], row["gpu"])
        assert cat.fabric(fabric).tier.value == "scale_out", row["id"]
        assert nics is None or 1 <= nics <= 8, (row["id"], nics)
