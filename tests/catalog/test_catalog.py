import datetime as dt
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bandwall.catalog import Catalog, Precision, Tier, Transport, load_catalog
from bandwall.errors import CatalogError, ConfigError


@pytest.fixture
def catalog_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str, str], Catalog]]:
    """load_catalog() with FILE (TOML entries) in BANDWALL_CATALOG_DIR beside the built-in
    catalog; the cache is cleared before the load and after the test."""

    def load(file: str, toml: str) -> Catalog:
        (tmp_path / file).write_text(toml)
        monkeypatch.setenv("BANDWALL_CATALOG_DIR", str(tmp_path))
        load_catalog.cache_clear()
        return load_catalog()

    yield load
    monkeypatch.delenv("BANDWALL_CATALOG_DIR", raising=False)
    load_catalog.cache_clear()


REQUIRED_GPUS = ["A100-SXM-80GB", "H100-SXM", "H200", "B200", "GB200", "L40S", "RTX-4090", "MI300X"]
REQUIRED_FABRICS = [
    "nvlink3",
    "nvlink4",
    "nvlink5",
    "pcie4",
    "pcie5",
    "ib-hdr",
    "ib-ndr",
    "ib-xdr",
    "spectrum-x-400",
    "spectrum-x-800",
    "spectrum-x6-800",
    "roce-100",
    "roce-200",
    "roce-400",
    "efa-p4d",
    "efa-p5",
    "vpc-25g",
    "vpc-50g",
    "vpc-100g",
    "internet-1g",
    "internet-10g",
    "internet-15g",
]


def test_required_entries_present_with_source_and_date() -> None:
    cat = load_catalog()
    for name in REQUIRED_GPUS:
        gpu = cat.gpu(name)
        assert {Precision.FP32, Precision.TF32, Precision.BF16} <= set(gpu.peak_TFLOPS)
        assert len(gpu.source) > 10 and gpu.as_of <= dt.date(2026, 12, 31)
    for key in REQUIRED_FABRICS:
        fab = cat.fabric(key)
        assert len(fab.source) > 10 and isinstance(fab.as_of, dt.date)
    for prov in cat.providers.values():
        assert prov.prices and all(len(p.source) > 5 for p in prov.prices)
    assert {p.kind.value for p in cat.providers.values()} == {
        "ai_factory",
        "hyperscaler",
        "decentralized_colocated",
        "decentralized_geo",
    }


def test_published_figures_are_what_the_datasheets_say() -> None:
    cat = load_catalog()
    h100 = cat.gpu("H100-SXM")
    assert h100.peak_TFLOPS[Precision.BF16] == pytest.approx(989.4)  # dense, not sparse 1979
    assert cat.fabric("nvlink4").bandwidth_GBps == pytest.approx(450)  # 900 GB/s bidirectional
    assert cat.fabric("ib-ndr").bandwidth_GBps == pytest.approx(50)  # 400 Gb/s
    sp6 = cat.fabric("spectrum-x6-800")
    assert sp6.transport is Transport.ROCE  # Ethernet, not InfiniBand (shared/scenarios/02)
    assert sp6.switch is not None and sp6.switch.capacity_Tbps == pytest.approx(102.4)
    sp4 = cat.fabric("spectrum-x-400").switch
    assert sp4 is not None and sp6.switch.capacity_Tbps == pytest.approx(2 * sp4.capacity_Tbps)
    assert cat.fabric("internet-1g").tier is Tier.WAN and cat.fabric("internet-1g").loss_rate > 0
    assert "fp8" not in {p.value for p in cat.gpu("A100-SXM-80GB").peak_TFLOPS}


def test_unknown_names_list_the_choices() -> None:
    cat = load_catalog()
    with pytest.raises(ConfigError, match=r"gpu: unknown value 'V100'.*H100-SXM"):
        cat.gpu("V100")
    with pytest.raises(ConfigError, match=r"fabric: unknown value 'ib-qdr'.*ib-ndr"):
        cat.fabric("ib-qdr")
    assert cat.gpu("h100-sxm").name == "H100-SXM"


def test_new_fabric_is_a_data_change_only(catalog_with: Callable[[str, str], Catalog]) -> None:
    extra = """
[[fabric]]
key = "ib-test-1600"
name = "Hypothetical 1.6T InfiniBand"
tier = "scale_out"
transport = "infiniband"
bandwidth_Gbps = 1600
latency_us = 2.5
jitter_mean_us = 0.5
jitter_std_us = 0.5
efficiency = 0.94
rdma = true
in_network_reduction = false
source = "unit test"
as_of = 2026-12-01
"""
    cat = catalog_with("fabrics.toml", extra)
    assert cat.fabric("ib-test-1600").bandwidth_GBps == pytest.approx(200)
    assert "ib-ndr" in load_catalog().fabrics


def test_invalid_entry_names_the_field(catalog_with: Callable[[str, str], Catalog]) -> None:
    extra = """
[[gpu]]
name = "Broken"
vendor = "X"
memory_GB = -1
memory_bandwidth_TBps = 1
peak_TFLOPS = { fp32 = 1, bf16 = 2 }
scale_up_fabric = "pcie4"
scale_up_domain = 8
tdp_W = 100
source = "unit test"
as_of = 2026-12-01
"""
    with pytest.raises(CatalogError, match=r"'Broken': memory_GB"):
        catalog_with("gpus.toml", extra)


def test_in_network_reduction_is_explicit_and_off_without_hardware() -> None:
    """NVLS (NVLink SHARP) is on by default where the switch has it (NCCL_NVLS_ENABLE=2);
    InfiniBand SHARP exists on Quantum switches but NCCL's CollNet is off by default
    (collnetEnable = 0, needs the SHARP plugin); Ethernet and PCIe have none."""
    cat = load_catalog()
    for key in ("nvlink4", "nvlink5"):
        fab = cat.fabric(key)
        assert fab.in_network_reduction and fab.in_network_on_by_default
    for key in ("ib-hdr", "ib-ndr", "ib-xdr"):
        fab = cat.fabric(key)
        assert fab.in_network_reduction and not fab.in_network_on_by_default
    for key in ("nvlink3", "pcie5", "roce-400", "spectrum-x-800", "efa-p5", "vpc-100g"):
        assert not cat.fabric(key).in_network_reduction
    assert cat.fabric("nvlink4").in_network_efficiency == pytest.approx(0.85)  # NCCL Hopper
    assert cat.fabric("nvlink5").in_network_efficiency == pytest.approx(0.74)  # Blackwell


def test_nvlink_efficiency_is_nccls_per_link_rate() -> None:
    """NCCL src/graph/topo.h rates one NVLink at 20 (SM80), 20.6 (SM90), 40.1 (SM100) GB/s."""
    cat = load_catalog()
    for key, links, per_link in (
        ("nvlink3", 12, 20.0),
        ("nvlink4", 18, 20.6),
        ("nvlink5", 18, 40.1),
    ):
        fab = cat.fabric(key)
        assert fab.bandwidth_GBps * fab.efficiency == pytest.approx(links * per_link, rel=2e-3)
        assert fab.gpu_arch in {"ampere", "hopper", "blackwell"}
    assert cat.fabric("ib-ndr").host_interface_GBps == 48  # PCIe Gen5 x16 as NCCL rates it
    assert cat.fabric("vpc-100g").socket_streams == 16  # NCCL on AWS ENA: 2 threads x 8


def test_wan_matrix_is_valid_catalog_data() -> None:
    from bandwall.model.topology import wan_pairs, wan_sites

    sites = wan_sites()
    pairs = wan_pairs()
    assert {frozenset((a, b)) for a in sites for b in sites if a < b} == set(pairs)
    for spec in pairs.values():
        assert spec.a in sites and spec.b in sites
        assert len(spec.source) > 20 and spec.as_of.year >= 2017


def test_in_network_default_needs_the_hardware(catalog_with: Callable[[str, str], Catalog]) -> None:
    extra = """
[[fabric]]
key = "eth-sharp"
name = "Ethernet claiming SHARP"
tier = "scale_out"
transport = "roce"
bandwidth_Gbps = 400
latency_us = 2
jitter_mean_us = 0
jitter_std_us = 0
efficiency = 0.9
rdma = true
in_network_reduction = false
in_network_default = true
source = "unit test"
as_of = 2026-12-01
"""
    with pytest.raises(CatalogError, match="in_network_default needs"):
        catalog_with("fabrics.toml", extra)


def test_load_balancing_and_congestion_control_are_catalog_data() -> None:
    """InfiniBand AR, Spectrum-X and EFA SRD balance per packet; plain RoCE hashes flows
    (static ECMP) on a known leaf switch, with DCQCN by default. RoCE's efficiency is one
    uncontended path: ib-ndr's 0.94 x RoCEv2 framing (4096 + 26) / (4096 + 82) per 4 KiB
    packet, since collisions are modelled separately (docs/congestion.md)."""
    cat = load_catalog()
    for key in ("ib-hdr", "ib-ndr", "ib-xdr", "spectrum-x-400", "spectrum-x-800", "efa-p5"):
        assert cat.fabric(key).adaptive_routing
    assert cat.fabric("ib-ndr").fabric_cc == "credit"
    assert cat.fabric("efa-p5").fabric_cc == "srd"
    for key in ("spectrum-x-400", "spectrum-x-800", "spectrum-x6-800"):
        assert cat.fabric(key).fabric_cc == "telemetry"
    for key in ("roce-100", "roce-200", "roce-400"):
        roce = cat.fabric(key)
        assert not roce.adaptive_routing and roce.fabric_cc == "dcqcn"
        assert roce.switch is not None and roce.switch.port_Gbps == roce.bandwidth_Gbps
        assert roce.efficiency == pytest.approx(0.94 * 4122 / 4178, abs=0.005)
        assert roce.adaptive_efficiency < 1
    assert cat.fabric("vpc-100g").fabric_cc == "tcp" and cat.fabric("nvlink4").fabric_cc == "none"


def test_unknown_congestion_control_is_a_catalog_error(
    catalog_with: Callable[[str, str], Catalog],
) -> None:
    extra = """
[[fabric]]
key = "eth-odd"
name = "Ethernet with an unknown congestion control"
tier = "scale_out"
transport = "roce"
bandwidth_Gbps = 400
latency_us = 2
jitter_mean_us = 0
jitter_std_us = 0
efficiency = 0.9
rdma = true
in_network_reduction = false
congestion_control = "swift"
source = "unit test"
as_of = 2026-12-01
"""
    with pytest.raises(CatalogError, match=r"congestion_control 'swift'.*dcqcn"):
        catalog_with("fabrics.toml", extra)
