"""Pydantic models of the hardware catalog: GPUs, fabrics, providers.

Every figure carries `source` and `as_of` so a number in a plan can be traced to where it came
from. Models are frozen: the catalog is read-only reference data.
"""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bandwall.units import BITS_PER_BYTE

Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
#: At least 0.1%: a smaller share (or a subnormal one) prices links in years or at inf.
Efficiency = Annotated[float, Field(ge=0.001, le=1.0)]


class Precision(StrEnum):
    """Numeric formats with a dense tensor-core peak in the catalog."""

    FP32 = "fp32"
    TF32 = "tf32"
    BF16 = "bf16"
    FP8 = "fp8"
    #: NVFP4 (Blackwell): 4-bit e2m1 values, an e4m3 scale per 16 and an fp32 scale per tensor
    FP4 = "fp4"


#: The formats that train and serve through a low-precision recipe (casts, scales, fp8 KV
#: cache) rather than as plain 16-bit GEMMs: one set the engine, serving, the validation's
#: classes and the published rows read, so a new format joins them all at once.
LOW_PRECISIONS = frozenset({Precision.FP8.value, Precision.FP4.value})


class Tier(StrEnum):
    """Where a fabric sits in the hierarchy."""

    SCALE_UP = "scale_up"
    SCALE_OUT = "scale_out"
    WAN = "wan"


class Transport(StrEnum):
    NVLINK = "nvlink"
    XGMI = "xgmi"
    PCIE = "pcie"
    INFINIBAND = "infiniband"
    ROCE = "roce"
    EFA = "efa"
    TCP = "tcp"


#: Values of FabricSpec.congestion_control (bandwall.model.congestion.FabricCC).
_FABRIC_CC = frozenset({"credit", "dcqcn", "pfc", "telemetry", "srd", "tcp", "none"})
_TRANSPORT_CC = {
    Transport.INFINIBAND: "credit",
    Transport.ROCE: "dcqcn",
    Transport.EFA: "srd",
    Transport.TCP: "tcp",
}


class ProviderKind(StrEnum):
    AI_FACTORY = "ai_factory"
    HYPERSCALER = "hyperscaler"
    DECENTRALIZED_COLOCATED = "decentralized_colocated"
    DECENTRALIZED_GEO = "decentralized_geo"


class _Entry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = Field(min_length=3, description="Where the figures come from.")
    as_of: dt.date = Field(description="Date the source describes.")


class GpuSpec(_Entry):
    """One accelerator model."""

    name: str
    vendor: str
    memory_GB: float = Field(gt=0, description="Device memory, decimal GB.")
    memory_bandwidth_TBps: float = Field(gt=0, description="Peak HBM/GDDR bandwidth, TB/s.")
    peak_TFLOPS: dict[Precision, float] = Field(
        description="Dense (no sparsity) peak TFLOP/s per precision."
    )
    scale_up_fabric: str = Field(description="Key of the fabric joining GPUs inside a node.")
    scale_up_domain: int = Field(ge=1, description="GPUs per scale-up (NVLink) domain.")
    tdp_W: float = Field(gt=0)
    power_limit_W: float | None = Field(
        default=None,
        gt=0,
        description="Board power limit when it ships below the chip's TDP (e.g. Meta's 500 W "
        "H100s); clocks are sustained under it.",
    )
    compute_capability: float | None = Field(
        default=None,
        gt=0,
        description="CUDA compute capability (9.0 = Hopper); selects NCCL's per-architecture "
        "tuning constants. Unset: inferred from the scale-up fabric.",
    )

    @model_validator(mode="after")
    def _has_bf16_and_fp32(self) -> GpuSpec:
        missing = {Precision.FP32, Precision.BF16} - set(self.peak_TFLOPS)
        if missing:
            raise ValueError(f"peak_TFLOPS must list {sorted(missing)}")
        return self

    def peak_flops(self, precision: Precision) -> float:
        """Dense peak in FLOP/s; falls back to bf16 for fp8 or fp4 on parts without the units."""
        tflops = self.peak_TFLOPS.get(precision, self.peak_TFLOPS[Precision.BF16])
        return tflops * 1e12


class SwitchSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    capacity_Tbps: float = Field(gt=0)
    ports: int = Field(ge=1)
    port_Gbps: float = Field(gt=0)


class FabricSpec(_Entry):
    """One link technology, described per endpoint and per direction."""

    key: str
    name: str
    tier: Tier
    transport: Transport
    bandwidth_Gbps: float = Field(
        ge=0.001, description="Per endpoint, per direction, gigabits/s (at least 1 Mb/s)."
    )
    latency_us: float = Field(ge=0, description="One-way alpha per algorithm step, microseconds.")
    jitter_mean_us: float = Field(ge=0, description="Mean extra per-message delay.")
    jitter_std_us: float = Field(ge=0, description="Standard deviation of that delay.")
    loss_rate: Fraction = Field(default=0.0, description="Packet loss probability (TCP links).")
    mtu_bytes: int = Field(default=1500, ge=576)
    per_flow_limit_Gbps: float | None = Field(
        default=None, gt=0, description="Provider cap on one TCP flow (e.g. cloud VPCs)."
    )
    efficiency: Efficiency = Field(description="Share of wire rate large collectives reach.")
    rdma: bool
    in_network_reduction: bool = Field(description="SHARP / NVLS-style switch reduction.")
    in_network_efficiency: Efficiency | None = None
    adaptive_routing: bool = Field(
        default=False,
        description="Per-packet adaptive routing / spraying (IB AR, Spectrum-X, EFA SRD); "
        "without it flows are pinned by static ECMP hashing.",
    )
    switch: SwitchSpec | None = None
    adaptive_efficiency: Efficiency = Field(
        default=1.0,
        description="Share of perfectly balanced bandwidth per-packet adaptive routing or "
        "spraying reaches on this fabric (reordering, probing). 1 where `efficiency` was "
        "measured with adaptive routing on; applied when routing is switched to adaptive on "
        "a fabric that hashes statically by default.",
    )
    congestion_control: str | None = Field(
        default=None,
        description="Flow and congestion control as incast sees it: credit (InfiniBand), "
        "dcqcn (RoCE with PFC and ECN), pfc (PFC only), telemetry (Spectrum-X), srd (EFA), "
        "tcp, none. Unset: from the transport (infiniband credit, roce dcqcn, efa srd, "
        "tcp tcp, else none).",
    )
    notes: str = ""
    in_network_default: bool | None = Field(
        default=None,
        description="Whether the software stack uses the in-network reduction by default "
        "(NCCL enables NVLS automatically but CollNet/SHARP only with NCCL_COLLNET_ENABLE=1 and "
        "the SHARP plugin). Unset: same as in_network_reduction.",
    )
    host_interface_GBps: float | None = Field(
        default=None,
        gt=0,
        description="GPU-to-NIC host path as NCCL rates it (PCIe width x lane code / 80: "
        "Gen4 x16 = 24, Gen5 x16 = 48 GB/s); caps a scale-out channel. Unset: no cap.",
    )
    gpu_arch: str | None = Field(
        default=None,
        description="GPU architecture a scale-up fabric implies (ampere, hopper, blackwell), "
        "for NCCL's per-architecture constants when the GPU does not say.",
    )
    socket_streams: int = Field(
        default=1,
        ge=1,
        le=64,
        description="TCP sockets NCCL's socket transport opens per connection on this NIC by "
        "default: NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD auto-detection (AWS ENA 2x8, "
        "Google gVNIC 4x1, otherwise 1).",
    )
    small_message_bytes: int | None = Field(
        default=None,
        ge=1,
        description="Calibrated profiles: messages below this size use small_latency_us and "
        "small_efficiency instead of latency_us and efficiency.",
    )
    small_latency_us: float | None = Field(default=None, ge=0)
    small_efficiency: float | None = Field(default=None, gt=0)
    nics_per_node: int | None = Field(
        default=None,
        ge=1,
        description="NICs a host of this fabric has when the request does not say (e.g. "
        "GCP A3 High: 4 data NICs for 8 GPUs). Unset: one per GPU on RDMA fabrics, else one.",
    )

    call_overhead_us: float | None = Field(
        default=None,
        ge=0,
        description="Per collective call across nodes, beyond NCCL's step latencies: the "
        "network plugin's or proxy's own turn (measured small-message floor less the "
        "model's). Unset: the transport's fitted value (collectives/overheads.py).",
    )
    op_time_factors: dict[str, float] = Field(
        default_factory=dict,
        description="Calibrated profiles: per-op multiplier on the bandwidth term (measured / "
        "model), e.g. {all_gather = 1.1}.",
    )

    @model_validator(mode="after")
    def _in_network_consistent(self) -> FabricSpec:
        if self.in_network_reduction and self.in_network_efficiency is None:
            raise ValueError("in_network_efficiency is required when in_network_reduction is true")
        if self.in_network_default and not self.in_network_reduction:
            raise ValueError("in_network_default needs in_network_reduction (the hardware)")
        return self

    @model_validator(mode="after")
    def _congestion_control_known(self) -> FabricSpec:
        if self.congestion_control is not None and self.congestion_control not in _FABRIC_CC:
            raise ValueError(
                f"congestion_control {self.congestion_control!r}; choose one of: "
                + ", ".join(sorted(_FABRIC_CC))
            )
        return self

    @property
    def fabric_cc(self) -> str:
        """The congestion control incast sees (the field, else the transport's default)."""
        if self.congestion_control is not None:
            return self.congestion_control
        return _TRANSPORT_CC.get(self.transport, "none")

    @property
    def gpudirect_tcp(self) -> bool:
        """TCP into GPU memory (Google's TCPX/TCPXO): a GPUDirect device to NCCL, with TCP's
        congestion control."""
        return self.rdma and self.fabric_cc == "tcp"

    def default_nics(self, gpus_per_node: float) -> float:
        """NICs per node when the request names none: the fabric's own count, else one per
        GPU on RDMA fabrics (rail-optimised hosts), else one."""
        if self.nics_per_node is not None:
            return float(self.nics_per_node)
        return float(gpus_per_node) if self.rdma else 1.0

    @property
    def in_network_on_by_default(self) -> bool:
        """In-network reduction is used unless the request says otherwise."""
        if self.in_network_default is None:
            return self.in_network_reduction
        return self.in_network_default

    @property
    def bandwidth_GBps(self) -> float:
        """Per endpoint, per direction, decimal gigabytes per second."""
        return self.bandwidth_Gbps / BITS_PER_BYTE


class PriceRange(_Entry):
    gpu: str
    low: float = Field(gt=0, description="USD per GPU-hour, low end.")
    high: float = Field(gt=0, description="USD per GPU-hour, high end.")

    @model_validator(mode="after")
    def _ordered(self) -> PriceRange:
        if self.high < self.low:
            raise ValueError(f"price high {self.high} below low {self.low}")
        return self

    @property
    def typical(self) -> float:
        """Midpoint of the range: the price a plan uses unless told otherwise."""
        return (self.low + self.high) / 2


class ProviderSpec(_Entry):
    """A kind of place to rent GPUs."""

    key: str
    name: str
    kind: ProviderKind
    scale_out_fabric: str
    wan_fabric: str | None = None
    nics_per_node: int = Field(ge=1)
    virtualization_overhead: Annotated[float, Field(ge=0.0, lt=1.0)]
    virtualization_overhead_range: tuple[float, float] | None = None
    egress_usd_per_GB: float = Field(ge=0)
    checkpoint_write_GBps_per_node: float = Field(gt=0, description="Checkpoint write rate.")
    checkpoint_write_cap_GBps: float = Field(gt=0, description="Shared storage ceiling.")
    restart_s: float = Field(ge=0, description="Detect, re-queue, restart and reload.")
    failure_profile: str
    storage_source: str
    prices: tuple[PriceRange, ...]

    def price(self, gpu: str) -> PriceRange | None:
        return next((p for p in self.prices if p.gpu == gpu), None)


class FailureSpec(_Entry):
    """Failure rates of a fleet, per component-hour; job MTBF follows from the counts."""

    key: str
    name: str
    gpu_per_hour: float = Field(ge=0)
    node_per_hour: float = Field(ge=0)
    nic_per_hour: float = Field(ge=0)
    link_per_hour: float = Field(ge=0, description="Per GPU-side scale-out link or cable.")


class WanSiteSpec(_Entry):
    """A region wide-area links are priced between (catalog/data/wan.toml)."""

    key: str
    name: str


class WanPairSpec(_Entry):
    """Measured round-trip time and assumed loss between two sites.

    `rtt_ms` is the typical (median) round trip, `rtt_p95_ms` a bad day; loss is per packet,
    on a provider backbone (inter-region) and over public internet transit.
    """

    a: str
    b: str
    rtt_ms: float = Field(gt=0)
    rtt_p95_ms: float = Field(gt=0)
    loss_backbone: Fraction
    loss_internet: Fraction
    single_flow_Gbps: float | None = Field(
        default=None, gt=0, description="A published single-TCP-flow rate on this path."
    )

    @model_validator(mode="after")
    def _ordered(self) -> WanPairSpec:
        if self.rtt_p95_ms < self.rtt_ms:
            raise ValueError(f"rtt_p95_ms {self.rtt_p95_ms} below rtt_ms {self.rtt_ms}")
        return self
