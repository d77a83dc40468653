"""What this node has: GPUs and their links (NVML), NICs, RDMA ports, NUMA, and the transport
torch.distributed would use. Every source is optional; a machine with none of them still gets
an answer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

SYS_NET = Path("/sys/class/net")
SYS_IB = Path("/sys/class/infiniband")
SYS_NODE = Path("/sys/devices/system/node")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def nics(root: Path = SYS_NET) -> list[dict[str, Any]]:
    """Interfaces with speed (Mb/s, None when the driver does not say), MTU, state, driver."""
    out = []
    for dev in sorted(root.iterdir()) if root.is_dir() else []:
        speed = _read(dev / "speed")
        driver = None
        link = dev / "device" / "driver"
        if link.exists():
            driver = os.path.basename(os.path.realpath(link))
        numa = _read(dev / "device" / "numa_node")
        out.append(
            {
                "name": dev.name,
                "state": _read(dev / "operstate"),
                "mtu": int(_read(dev / "mtu") or 0),
                "speed_Mbps": int(speed)
                if speed and speed.lstrip("-").isdigit() and int(speed) > 0
                else None,
                "driver": driver or ("loopback" if dev.name == "lo" else "virtual"),
                "address": _read(dev / "address"),
                "numa_node": int(numa) if numa and numa.lstrip("-").isdigit() else None,
            }
        )
    return out


def rdma(root: Path = SYS_IB) -> list[dict[str, Any]]:
    """RDMA devices and ports: state, rate, link layer (InfiniBand or Ethernet = RoCE)."""
    out = []
    for dev in sorted(root.iterdir()) if root.is_dir() else []:
        for port in sorted((dev / "ports").iterdir()) if (dev / "ports").is_dir() else []:
            out.append(
                {
                    "device": dev.name,
                    "port": port.name,
                    "state": _read(port / "state"),
                    "rate": _read(port / "rate"),
                    "link_layer": _read(port / "link_layer"),
                }
            )
    return out


def numa(root: Path = SYS_NODE) -> list[dict[str, Any]]:
    out = []
    for node in sorted(root.glob("node[0-9]*")):
        out.append({"node": int(node.name[4:]), "cpus": _read(node / "cpulist")})
    return out


def gpus() -> dict[str, Any]:
    """NVML when nvidia-ml-py and a driver are present; otherwise says why not."""
    try:
        import pynvml
    except ImportError:
        return {"available": False, "reason": "nvidia-ml-py not installed", "devices": []}
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVML raises its own error types
        return {"available": False, "reason": f"NVML unavailable: {exc}", "devices": []}
    try:
        devices = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            links = 0
            for link in range(18):
                try:
                    if pynvml.nvmlDeviceGetNvLinkState(h, link):
                        links += 1
                except Exception:  # no such link
                    break
            name = pynvml.nvmlDeviceGetName(h)
            devices.append(
                {
                    "index": i,
                    "name": name.decode() if isinstance(name, bytes) else name,
                    "memory_GB": pynvml.nvmlDeviceGetMemoryInfo(h).total / 1e9,
                    "nvlinks_up": links,
                    "pcie_gen": pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h),
                    "pcie_width": pynvml.nvmlDeviceGetCurrPcieLinkWidth(h),
                }
            )
        return {"available": True, "reason": None, "devices": devices}
    finally:
        pynvml.nvmlShutdown()


def transport(gpu_info: dict[str, Any], rdma_ports: list[dict[str, Any]]) -> dict[str, Any]:
    """Which backend and transport torch.distributed / NCCL would pick here."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return {
            "torch": None,
            "backend": None,
            "note": "torch not installed (pip install 'bandwall[bench]')",
        }
    cuda = torch.cuda.is_available()
    backend = "nccl" if cuda and dist.is_nccl_available() else "gloo"
    active = [p for p in rdma_ports if (p.get("state") or "").endswith("ACTIVE")]
    if backend == "nccl":
        net = (
            "IB verbs (" + ", ".join(sorted({p["link_layer"] or "?" for p in active})) + ")"
            if active
            else "sockets (no active RDMA port)"
        )
        intra = (
            "NVLink/P2P" if any(d.get("nvlinks_up") for d in gpu_info["devices"]) else "PCIe/SHM"
        )
    else:
        net, intra = "TCP sockets (gloo)", "shared memory / loopback TCP"
    return {
        "torch": torch.__version__,
        "cuda": cuda,
        "backend": backend,
        "inter_node": net,
        "intra_node": intra,
        "socket_ifname": os.environ.get("NCCL_SOCKET_IFNAME")
        or os.environ.get("GLOO_SOCKET_IFNAME"),
    }


def probe() -> dict[str, Any]:
    g = gpus()
    ports = rdma()
    return {
        "gpus": g,
        "nics": nics(),
        "rdma": ports,
        "numa": numa(),
        "transport": transport(g, ports),
    }
