"""Issue 15 items 5 and 9: the Prometheus exposition follows Prometheus' naming (counters
`_total` in base units, gauges only for levels), the shipped Grafana dashboard asks only for
metrics the exporter emits, the compose example wires monitor -> Prometheus -> Grafana on
loopback, and the Dockerfile is linted structurally (no Docker engine here to build it)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bandwall.measure.bench.monitor import MonitorCollector, Sample, exposition

pytest.importorskip("prometheus_client", reason="needs prometheus-client (bench extra)")
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
#: Units a metric name may end with (Prometheus: base units, plural, suffixed).
UNITS = ("bytes", "seconds", "packets", "errors", "retransmits", "downed", "samples")


def _sample(tmp_path: Path) -> tuple[MonitorCollector, str]:
    sys_net = tmp_path / "net"
    for name, state, speed in (("eth0", "up", "100000"), ("lo", "unknown", "")):
        d = sys_net / name
        d.mkdir(parents=True)
        (d / "operstate").write_text(state)
        (d / "mtu").write_text("9000" if name == "eth0" else "65536")
        if speed:
            (d / "speed").write_text(speed)
    counters = {
        k: i * 1000
        for i, k in enumerate(
            ("rx_bytes", "rx_packets", "rx_errs", "rx_drop", "tx_bytes", "tx_packets"), 1
        )
    } | {"tx_errs": 1, "tx_drop": 2}
    rdma = {
        "mlx5_0/1": {
            "port_xmit_data": 250,
            "port_rcv_data": 500,
            "port_xmit_discards": 3,
            "port_rcv_errors": 4,
            "symbol_error": 5,
            "link_downed": 1,
        }
    }
    c = MonitorCollector(sys_net=sys_net)
    c.update(Sample(1.0, {"eth0": counters, "lo": counters}, 7, rdma), 2.0)
    return c, exposition(c)


def test_exposition_names_and_types_follow_prometheus(tmp_path: Path) -> None:
    _, text = _sample(tmp_path)
    families = list(text_string_to_metric_families(text))
    assert families
    for fam in families:
        assert fam.name.startswith("bandwall_"), fam.name
        assert re.fullmatch(r"[a-z_]+", fam.name), fam.name
        assert not re.search(r"gbps|mbps|_ms\b|_kb|_mb|_gb", fam.name), fam.name
        if fam.type == "counter":
            assert all(s.name == f"{fam.name}_total" for s in fam.samples), fam.name
            assert fam.name.endswith(UNITS), fam.name
        else:
            assert fam.type == "gauge", fam.name
            assert not fam.name.endswith("_total"), fam.name
            assert fam.name.endswith(("_bytes", "_bytes_per_second", "_seconds", "_up")), fam.name


def test_exposition_values_are_the_kernel_totals_in_base_units(tmp_path: Path) -> None:
    _, text = _sample(tmp_path)
    values = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }
    assert values[("bandwall_nic_rx_bytes_total", (("iface", "eth0"),))] == 1000
    assert values[("bandwall_nic_tx_dropped_packets_total", (("iface", "lo"),))] == 2
    assert values[("bandwall_tcp_retransmits_total", ())] == 7
    # RDMA data counters are 4-byte words; exported in bytes
    assert values[("bandwall_rdma_tx_bytes_total", (("port", "mlx5_0/1"),))] == 1000
    assert values[("bandwall_nic_speed_bytes_per_second", (("iface", "eth0"),))] == 100e9 / 8
    assert values[("bandwall_nic_up", (("iface", "eth0"),))] == 1
    assert values[("bandwall_nic_up", (("iface", "lo"),))] == 0
    assert values[("bandwall_monitor_interval_seconds", ())] == 2.0


def _emitted(tmp_path: Path) -> set[str]:
    _, text = _sample(tmp_path)
    return {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_dashboard_uses_only_metrics_the_exporter_emits(tmp_path: Path) -> None:
    dash = json.loads((DEPLOY / "grafana" / "dashboards" / "bandwall.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    queries = [v["query"]["query"] for v in dash["templating"]["list"] if "query" in v]
    used = {m for e in exprs + queries for m in re.findall(r"\bbandwall_[a-z_]+", e)}
    emitted = _emitted(tmp_path)
    assert used and used <= emitted, used - emitted
    for e in exprs:  # counters are only ever read through rate()/increase()
        for m in re.findall(r"\bbandwall_[a-z_]+_total\b", e):
            assert re.search(rf"(rate|increase)\({m}\b", e), e
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)) and dash["uid"] == "bandwall-nics"


def test_compose_wires_monitor_prometheus_grafana_on_loopback() -> None:
    yaml = pytest.importorskip("yaml", reason="needs PyYAML (dev extra)")
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    svc = compose["services"]
    cmd = svc["bandwall-monitor"]["command"]
    listen = cmd[cmd.index("--prometheus") + 1]
    assert listen.startswith("127.0.0.1:")
    prom = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    targets = [t for j in prom["scrape_configs"] for c in j["static_configs"] for t in c["targets"]]
    assert targets == [listen]
    for name in ("prometheus", "grafana"):
        image = svc[name]["image"]
        assert re.fullmatch(r"[a-z/]+:v?\d+\.\d+\.\d+", image), image  # pinned
    assert "--web.listen-address=127.0.0.1:9090" in svc["prometheus"]["command"]
    assert svc["grafana"]["environment"]["GF_SERVER_HTTP_ADDR"] == "127.0.0.1"
    ds = yaml.safe_load(
        (DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )
    dash = json.loads((DEPLOY / "grafana" / "dashboards" / "bandwall.json").read_text())
    uids = {t["datasource"]["uid"] for p in dash["panels"] for t in p["targets"]}
    assert uids == {ds["datasources"][0]["uid"]}
    for mount in svc["prometheus"]["volumes"] + svc["grafana"]["volumes"]:
        src = mount.split(":")[0]
        assert not src.startswith("./") or (DEPLOY / src).exists(), mount


def _instructions(text: str) -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_is_pinned_non_root_with_bandwall_entrypoint() -> None:
    text = (ROOT / "Dockerfile").read_text()
    ins = _instructions(text)
    args = {r.split("=", 1)[0]: r.split("=", 1)[1] for w, r in ins if w == "ARG" and "=" in r}
    base = args["BASE_IMAGE"]
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-[a-z]+", base), base  # pinned, not :latest
    froms = [r for w, r in ins if w == "FROM"]
    assert froms == ["${BASE_IMAGE}"]
    users = [r for w, r in ins if w == "USER"]
    assert users and users[-1] not in ("root", "0", "0:0")
    assert re.fullmatch(r"\d+(:\d+)?", users[-1])  # numeric, so runAsNonRoot can check it
    entry = [r for w, r in ins if w == "ENTRYPOINT"]
    assert entry and json.loads(entry[-1]) == ["bandwall"]
    order = [w for w, _ in ins]
    assert order.index("USER") < order.index("ENTRYPOINT")
    assert not any(w == "ADD" for w, _ in ins)  # COPY only, no remote ADD
    copies = [r for w, r in ins if w == "COPY"]
    assert all(not r.startswith(". ") for r in copies)  # never the whole tree (.venv, .git)
    assert "EXTRAS" in args and "bench" not in args["EXTRAS"]  # the CPU image has no torch
