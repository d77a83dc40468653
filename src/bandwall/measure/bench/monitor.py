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


#: (metric, help, Sample field) for per-interface kernel counters: exported as counters in
#: base units, named as Prometheus asks (bandwall_ prefix, unit suffix, `_total`).
NIC_COUNTERS = (
    ("bandwall_nic_rx_bytes", "Bytes received (kernel counter)", "rx_bytes"),
    ("bandwall_nic_tx_bytes", "Bytes sent (kernel counter)", "tx_bytes"),
    ("bandwall_nic_rx_packets", "Packets received", "rx_packets"),
    ("bandwall_nic_tx_packets", "Packets sent", "tx_packets"),
    ("bandwall_nic_rx_dropped_packets", "Received packets dropped", "rx_drop"),
    ("bandwall_nic_tx_dropped_packets", "Packets dropped on send", "tx_drop"),
    ("bandwall_nic_rx_errors", "Receive errors", "rx_errs"),
    ("bandwall_nic_tx_errors", "Send errors", "tx_errs"),
)
#: RDMA port counters: data counters count 4-byte words, exported in bytes.
RDMA_COUNTERS = (
    ("bandwall_rdma_rx_bytes", "Bytes received on the RDMA port", "port_rcv_data", 4),
    ("bandwall_rdma_tx_bytes", "Bytes sent on the RDMA port", "port_xmit_data", 4),
    ("bandwall_rdma_rx_errors", "Receive errors on the RDMA port", "port_rcv_errors", 1),
    (
        "bandwall_rdma_tx_discarded_packets",
        "Packets the RDMA port discarded on send",
        "port_xmit_discards",
        1,
    ),
    ("bandwall_rdma_symbol_errors", "Symbol errors on the RDMA link", "symbol_error", 1),
    ("bandwall_rdma_link_downed", "Times the RDMA link went down", "link_downed", 1),
)


class MonitorCollector:
    """Exposes the latest :class:`Sample` at scrape time. Totals are counters (rates belong
    to PromQL's rate()); gauges only for levels: link up, speed, MTU, sample interval."""

    def __init__(self, sys_net: Path | None = None) -> None:
        self.sample: Sample | None = None
        self.interval_s = 0.0
        self.samples = 0
        self.sys_net = sys_net
        self.wall_time = 0.0

    def update(self, s: Sample, interval_s: float = 0.0) -> None:
        self.sample, self.interval_s = s, interval_s
        self.samples += 1
        self.wall_time = time.time()

    def collect(self) -> Any:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        from bandwall.measure.bench.probe import SYS_NET, nics

        s = self.sample
        samples = CounterMetricFamily(
            "bandwall_monitor_samples", "Samples taken since start", value=self.samples
        )
        yield samples
        if s is None:
            return
        for name, help_, key in NIC_COUNTERS:
            fam = CounterMetricFamily(name, help_, labels=["iface"])
            for iface, c in sorted(s.ifaces.items()):
                fam.add_metric([iface], float(c.get(key, 0)))
            yield fam
        retrans = CounterMetricFamily(
            "bandwall_tcp_retransmits", "TCP segments retransmitted (RetransSegs)"
        )
        retrans.add_metric([], float(s.tcp_retrans))
        yield retrans
        for name, help_, key, scale in RDMA_COUNTERS:
            fam = CounterMetricFamily(name, help_, labels=["port"])
            for port, c in sorted(s.rdma.items()):
                if key in c:
                    fam.add_metric([port], float(c[key] * scale))
            yield fam
        up = GaugeMetricFamily("bandwall_nic_up", "1 if the interface is up", labels=["iface"])
        speed = GaugeMetricFamily(
            "bandwall_nic_speed_bytes_per_second",
            "Link speed the driver reports",
            labels=["iface"],
        )
        mtu = GaugeMetricFamily("bandwall_nic_mtu_bytes", "Interface MTU", labels=["iface"])
        for n in nics(self.sys_net or SYS_NET):
            if n["name"] not in s.ifaces:
                continue
            up.add_metric([n["name"]], 1.0 if n["state"] == "up" else 0.0)
            mtu.add_metric([n["name"]], float(n["mtu"]))
            if n["speed_Mbps"]:
                speed.add_metric([n["name"]], n["speed_Mbps"] * 1e6 / 8)
        yield from (up, speed, mtu)
        yield GaugeMetricFamily(
            "bandwall_monitor_interval_seconds", "Seconds between samples", value=self.interval_s
        )
        yield GaugeMetricFamily(
            "bandwall_monitor_last_sample_timestamp_seconds",
            "Unix time of the last sample",
            value=self.wall_time,
        )


def exposition(collector: MonitorCollector) -> str:
    """The text a scrape returns (for tests and `--prometheus -` style dumps)."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    registry.register(collector)
    return str(generate_latest(registry).decode())


class PrometheusExporter:
    """The same counters as Prometheus metrics on an HTTP endpoint (127.0.0.1 by default)."""

    def __init__(self, listen: str) -> None:
        try:
            from prometheus_client import CollectorRegistry, start_http_server
        except ImportError:
            raise ConfigError(
                "needs prometheus-client; pip install 'bandwall[bench]'", field="prometheus"
            ) from None
        host, _, port = listen.rpartition(":")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"{listen!r} must be [HOST]:PORT, e.g. :9100", field="prometheus")
        self.registry = CollectorRegistry()
        self.collector = MonitorCollector()
        self.registry.register(self.collector)
        self._last: float | None = None
        try:
            self.server, self.thread = start_http_server(
                int(port), addr=host.strip("[]") or "127.0.0.1", registry=self.registry
            )
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on {listen!r}: {exc.strerror}", field="prometheus"
            ) from None

    def update(self, s: Sample) -> None:
        interval = s.t - self._last if self._last is not None else 0.0
        self._last = s.t
        self.collector.update(s, interval)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
