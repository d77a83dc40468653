"""Live NIC counters: per-interface rates, drops and errors (/proc/net/dev), TCP
retransmissions (/proc/net/snmp) and RDMA port counters (/sys/class/infiniband)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bandwall.errors import ConfigError

PROC_NET_DEV = Path("/proc/net/dev")
PROC_SNMP = Path("/proc/net/snmp")
SYS_IB = Path("/sys/class/infiniband")
#: RDMA data counters count 4-byte words (IBTA PortXmitData / PortRcvData).
RDMA_WORD_BYTES = 4
DEV_FIELDS = (
    "rx_bytes",
    "rx_packets",
    "rx_errs",
    "rx_drop",
    "rx_fifo",
    "rx_frame",
    "rx_compressed",
    "rx_multicast",
    "tx_bytes",
    "tx_packets",
    "tx_errs",
    "tx_drop",
    "tx_fifo",
    "tx_colls",
    "tx_carrier",
    "tx_compressed",
)


@dataclass(frozen=True)
class Sample:
    t: float
    ifaces: dict[str, dict[str, int]]
    tcp_retrans: int
    rdma: dict[str, dict[str, int]]


def read_net_dev(path: Path = PROC_NET_DEV) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines()[2:]:
        name, _, rest = line.partition(":")
        values = [int(v) for v in rest.split()]
        out[name.strip()] = dict(zip(DEV_FIELDS, values, strict=False))
    return out


def read_tcp_retrans(path: Path = PROC_SNMP) -> int:
    lines = [ln.split() for ln in path.read_text().splitlines() if ln.startswith("Tcp:")]
    if len(lines) < 2:
        return 0
    header, values = lines[0], lines[1]
    return int(values[header.index("RetransSegs")]) if "RetransSegs" in header else 0


def read_rdma(root: Path = SYS_IB) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for dev in sorted(root.iterdir()) if root.is_dir() else []:
        for port in sorted((dev / "ports").iterdir()) if (dev / "ports").is_dir() else []:
            c = port / "counters"
            vals = {}
            for name in (
                "port_xmit_data",
                "port_rcv_data",
                "port_xmit_discards",
                "port_rcv_errors",
                "symbol_error",
                "link_downed",
            ):
                try:
                    vals[name] = int((c / name).read_text())
                except (OSError, ValueError):
                    continue
            out[f"{dev.name}/{port.name}"] = vals
    return out


def sample(ifaces: list[str] | None = None) -> Sample:
    dev = read_net_dev()
    if ifaces:
        missing = [i for i in ifaces if i not in dev]
        if missing:
            raise ConfigError(
                f"unknown interface {missing[0]!r}; choose one of: " + ", ".join(sorted(dev)),
                field="iface",
            )
        dev = {k: v for k, v in dev.items() if k in ifaces}
    return Sample(time.monotonic(), dev, read_tcp_retrans(), read_rdma())


def rates(a: Sample, b: Sample) -> dict[str, Any]:
    """Per-second rates between two samples (bits for throughput, counts for the rest)."""
    dt = max(b.t - a.t, 1e-9)
    out: dict[str, Any] = {"interval_s": dt, "ifaces": {}, "rdma": {}}
    for name, now in b.ifaces.items():
        before = a.ifaces.get(name, now)
        d = {k: now[k] - before.get(k, now[k]) for k in now}
        out["ifaces"][name] = {
            "rx_Gbps": d["rx_bytes"] * 8 / dt / 1e9,
            "tx_Gbps": d["tx_bytes"] * 8 / dt / 1e9,
            "rx_pps": d["rx_packets"] / dt,
            "tx_pps": d["tx_packets"] / dt,
            "drops": d["rx_drop"] + d["tx_drop"],
            "errors": d["rx_errs"] + d["tx_errs"],
            "rx_bytes_total": now["rx_bytes"],
            "tx_bytes_total": now["tx_bytes"],
        }
    out["tcp_retrans_per_s"] = (b.tcp_retrans - a.tcp_retrans) / dt
    out["tcp_retrans_total"] = b.tcp_retrans
    for port, now in b.rdma.items():
        before = a.rdma.get(port, now)
        out["rdma"][port] = {
            "tx_Gbps": (now.get("port_xmit_data", 0) - before.get("port_xmit_data", 0))
            * RDMA_WORD_BYTES
            * 8
            / dt
            / 1e9,
            "rx_Gbps": (now.get("port_rcv_data", 0) - before.get("port_rcv_data", 0))
            * RDMA_WORD_BYTES
            * 8
            / dt
            / 1e9,
            "errors": sum(
                now.get(k, 0) - before.get(k, 0)
                for k in ("port_rcv_errors", "symbol_error", "link_downed")
            ),
            "discards": now.get("port_xmit_discards", 0) - before.get("port_xmit_discards", 0),
        }
    return out


class PrometheusExporter:
    """The same counters as Prometheus metrics on an HTTP endpoint (127.0.0.1 by default)."""

    def __init__(self, listen: str) -> None:
        try:
            from prometheus_client import CollectorRegistry, Gauge, start_http_server
        except ImportError:
            raise ConfigError(
                "needs prometheus-client; pip install 'bandwall[bench]'", field="prometheus"
            ) from None
        host, _, port = listen.rpartition(":")
        if not port.isdigit():
            raise ConfigError(f"{listen!r} must be [HOST]:PORT, e.g. :9100", field="prometheus")
        self.registry = CollectorRegistry()
        labels = ["iface"]
        self.g = {
            "rx_bytes": Gauge(
                "bandwall_nic_rx_bytes_total", "Bytes received", labels, registry=self.registry
            ),
            "tx_bytes": Gauge(
                "bandwall_nic_tx_bytes_total", "Bytes sent", labels, registry=self.registry
            ),
            "rx_Gbps": Gauge(
                "bandwall_nic_rx_gbps", "Receive rate, Gb/s", labels, registry=self.registry
            ),
            "tx_Gbps": Gauge(
                "bandwall_nic_tx_gbps", "Send rate, Gb/s", labels, registry=self.registry
            ),
            "drops": Gauge(
                "bandwall_nic_drops", "Drops in the last interval", labels, registry=self.registry
            ),
            "errors": Gauge(
                "bandwall_nic_errors", "Errors in the last interval", labels, registry=self.registry
            ),
        }
        self.retrans = Gauge(
            "bandwall_tcp_retransmits_total", "TCP segments retransmitted", registry=self.registry
        )
        self.server, self.thread = start_http_server(
            int(port), addr=host or "127.0.0.1", registry=self.registry
        )

    def update(self, r: dict[str, Any]) -> None:
        for name, v in r["ifaces"].items():
            self.g["rx_bytes"].labels(name).set(v["rx_bytes_total"])
            self.g["tx_bytes"].labels(name).set(v["tx_bytes_total"])
            for k in ("rx_Gbps", "tx_Gbps", "drops", "errors"):
                self.g[k].labels(name).set(v[k])
        self.retrans.set(r["tcp_retrans_total"])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
