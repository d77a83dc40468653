"""The whole job as the evidence shows it: every NCCL log, nccl-tests table and trace given
together, the hosts and what each one runs (versions, plugins, NICs, interfaces, GDR), and the
hardware read from the logs, with what could not be read said so rather than assumed."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bandwall.measure.doctor.evidence import Line
from bandwall.measure.doctor.nccl_log import NcclLog

#: Catalog GPU for a device name as nccl-tests, torch and nvidia-smi print it.
GPU_NAMES = (
    # the PCIe boards of the SXM parts have no NVSwitch (at most an NVLink bridge per pair):
    # priced as their SXM twin they would read a healthy PCIe all-gather as a fault
    (r"H100 NVL", "H100-NVL"),
    (r"GH200", "GH200"),
    (r"(?:A100|A800|H100|H800).*PCIe|H200 NVL", None),
    (r"GB300", "GB300"),
    (r"GB200", "GB200"),
    (r"B300", "B300"),
    (r"B200", "B200"),
    (r"H200", "H200"),
    # H20 stands in as H100-SXM: the same NVLink 4 (900 GB/s) and NICs, so right for busbw and
    # NCCL-version checks, which is all doctor reads a name for; not for step time, since it
    # has about 1/6.7 of the compute (148 vs 989 dense bf16 TFLOPS, NVIDIA H20 datasheet).
    (r"H100|H800|H20\b", "H100-SXM"),
    (r"A100|A800", "A100-SXM-80GB"),
    (r"L40S", "L40S"),
    (r"4090", "RTX-4090"),
    (r"MI300X", "MI300X"),
)
#: Consumer GPU names: no P2P between them (NVIDIA/nccl-tests#287, sjeaugey).
CONSUMER_GPU = re.compile(r"GeForce|RTX [2-5]0[5-9]0|TITAN", re.IGNORECASE)
#: GPUs that reach each other over PCIe only (no NVLink/NVSwitch in the box): consumer and
#: workstation cards and the PCIe data-centre parts. Their peer-to-peer traffic crosses PCIe
#: switches or the root complex, where ACS and the IOMMU can redirect or block it (NCCL
#: troubleshooting guide, "PCI Access Control Services (ACS)" and "IOMMU"). The Tesla K, M and
#: P cards of one or two digits (K40, K80, M40, M60, P4, P40) and the T4 are PCIe boards
#: (NVIDIA's datasheets); the P100/V100 SXM2 parts have NVLink and three digits.
PCIE_GPU = re.compile(
    r"GeForce|TITAN|Quadro|RTX\s?(A\d{4}|\d{4}\s?Ada|PRO)|RTX [2-5]0[5-9]0|\bA(10|16|2|30|40)\b"
    r"|\bL(4|40S?)\b|PCIe|\bH[12]00 NVL\b|\bTesla\s(?:[KMP]\d{1,2}|T4)\b",
    re.IGNORECASE,
)
#: Largest busbw (GB/s) a real GPU collective reports; beyond it a number is garbage.
MAX_BUSBW_GBPS = 20_000.0


def gpu_from_name(name: str | None) -> str | None:
    """'NVIDIA H100 80GB HBM3' -> 'H100-SXM'; None for GPUs the catalog lacks."""
    if not name:
        return None
    for pattern, key in GPU_NAMES:
        if re.search(pattern, name, re.IGNORECASE):
            return key
    return None


@dataclass
class Input:
    """One file and what was made of it."""

    path: str
    kinds: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class TestBlock:
    """One nccl-tests result block and its comparison with the model (when one was possible)."""

    source: str
    first_line: int
    op: str | None
    ranks: int | None
    rows: list[dict[str, Any]]
    devices: list[str]
    hosts: list[str]
    comparison: dict[str, Any] | None = None
    not_compared: str = ""
    line: Line | None = None
    """The block's header line, for quoting."""
    wrong_rows: list[Line] = field(default_factory=list)
    """Result rows whose #wrong column counts wrong elements (corrupted data)."""

    @property
    def best_busbw_GBps(self) -> float | None:
        vals = [
            float(r["busbw_GBps"])
            for r in self.rows
            if isinstance(r.get("busbw_GBps"), (int, float))
            and math.isfinite(r["busbw_GBps"])
            and 0 <= r["busbw_GBps"] <= MAX_BUSBW_GBPS
        ]
        return max(vals) if vals else None


@dataclass
class Hardware:
    """What the evidence says about the machines; None where it does not say."""

    gpu: str | None = None
    gpu_name: str | None = None
    gpu_line: Line | None = None
    nic_link: str | None = None
    """'IB', 'RoCE', 'EFA', 'Socket' as seen."""
    nics: int | None = None
    nic_speed_GBps: float | None = None
    consumer_gpu: bool = False
    pcie_gpu: bool = False
    """Every GPU named is a PCIe-only part (PCIE_GPU)."""

    def describe(self) -> str:
        parts = [
            f"GPU {self.gpu_name or self.gpu}" if (self.gpu or self.gpu_name) else "GPU unknown"
        ]
        if self.nic_link == "Socket":
            parts.append("network: TCP sockets (NIC type and speed unknown)")
        elif self.nic_link:
            nic = f"{self.nics} " if self.nics else ""
            speed = (
                f" at {self.nic_speed_GBps:,.1f} GB/s" if self.nic_speed_GBps else ", speed unknown"
            )
            parts.append(f"{nic}{self.nic_link} NIC(s){speed}")
        else:
            parts.append("network hardware unknown")
        return "; ".join(parts)


@dataclass
class HostView:
    """What one host's lines say."""

    host: str
    versions: set[str] = field(default_factory=set)
    plugin_lines: list[Line] = field(default_factory=list)
    plugin_absent: list[Line] = field(default_factory=list)
    networks: Counter[str] = field(default_factory=Counter)
    network_lines: list[Line] = field(default_factory=list)
    nics: dict[str, str] = field(default_factory=dict)
    nic_line: Line | None = None
    gdr_net: list[bool] = field(default_factory=list)
    gdr_lines: list[Line] = field(default_factory=list)


@dataclass
class Job:
    """Everything given, joined."""

    inputs: list[Input] = field(default_factory=list)
    logs: list[NcclLog] = field(default_factory=list)
    tests: list[TestBlock] = field(default_factory=list)
    trace_paths: list[str] = field(default_factory=list)
    trace: Any = None
    """bandwall.measure.doctor.trace.JobTrace when traces were given."""
    plan: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, list[Any]] = field(default_factory=dict)
    """Results of formats registered by other modules (e.g. training logs), by format name."""
    notes: list[str] = field(default_factory=list)

    # --- joined views ---------------------------------------------------------------------------

    def all(self, attr: str) -> list[Any]:
        """An attribute's items across every log, in input order."""
        out: list[Any] = []
        for log in self.logs:
            out.extend(getattr(log, attr))
        return out

    @property
    def understood(self) -> bool:
        """Whether anything in the inputs was read as evidence (logs, tests, traces, other
        registered formats)."""
        return bool(self.logs or self.tests or self.trace is not None or self.extra)

    @property
    def multi_node(self) -> bool:
        if any(log.multi_node for log in self.logs):
            return True
        hosts = {h for t in self.tests for h in t.hosts}
        return len(hosts) > 1

    def hosts(self) -> dict[str, HostView]:  # noqa: C901
        """Per-host facts, for comparing nodes (only lines that carry a host prefix)."""
        out: dict[str, HostView] = {}

        def view(line: Line) -> HostView | None:
            if not line.host:
                return None
            return out.setdefault(line.host, HostView(line.host))

        for log in self.logs:
            for version, lines in log.versions.items():
                for ln in lines:
                    if (v := view(ln)) is not None:
                        v.versions.add(version)
            for _, ln in log.plugins:
                if (v := view(ln)) is not None:
                    v.plugin_lines.append(ln)
            for ln in log.plugin_absent:
                if (v := view(ln)) is not None:
                    v.plugin_absent.append(ln)
            for name, ln in log.networks:
                if (v := view(ln)) is not None:
                    v.networks[name] += 1
                    v.network_lines.append(ln)
            for nics, ln in log.ib_by_line:
                if (v := view(ln)) is not None:
                    v.nics = dict(nics)
                    v.nic_line = ln
            for c in log.net_connections:
                if c.net and "socket" not in c.net.lower() and (v := view(c.line)) is not None:
                    v.gdr_net.append(c.gdr)
                    v.gdr_lines.append(c.line)
        return out

    def hardware(self) -> Hardware:
        """The GPU and the NICs, from the logs and tables (None where unknown)."""
        hw = Hardware()
        names: list[tuple[str, Line | None]] = []
        for log in self.logs:
            names += [(n, ln) for n, ln in log.device_names]
        for t in self.tests:
            names += [(d, t.line) for d in t.devices]
        found = {gpu_from_name(n) for n, _ in names} - {None}
        if names:
            hw.gpu_name, hw.gpu_line = names[0]
            hw.consumer_gpu = any(CONSUMER_GPU.search(n) for n, _ in names)
            hw.pcie_gpu = all(PCIE_GPU.search(n) for n, _ in names)
        if len(found) == 1:
            hw.gpu = found.pop()
        links: Counter[str] = Counter()
        nic_names: set[str] = set()
        speeds: list[float] = []
        for log in self.logs:
            for dev, _ in log.ib_devices.values():
                links[dev.link] += 1
                nic_names.add(dev.name)
            speeds += [s for s in log.nic_speed_GBps.values() if 0 < s < 1000]
            if log.net_transport == "EFA" or (
                log.plugins and any("ofi" in p.lower() for p, _ in log.plugins)
            ):
                links["EFA"] += 1
            elif log.net_transport == "Socket":
                links["Socket"] += 1
        if links:
            hw.nic_link = links.most_common(1)[0][0]
        if nic_names:
            hw.nics = len(nic_names)
        if speeds:
            hw.nic_speed_GBps = max(speeds)
        return hw
