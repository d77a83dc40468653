"""Three questions of issue 22 put to the lab (docs/lab.md, "Rates, back-to-back operations
and slow start"): does throughput follow the NIC rate continuously, what do back-to-back
operations cost, and what does TCP slow start add to a short burst at high RTT.

- **Rates** (veth links shaped with tbf, no delay line): gloo all_reduce busbw of 4 ranks at
  rates between 100 Mbit/s and 2 Gbit/s. NCCL's ring search plans channels on a ladder of
  per-channel speeds (src/graph/search.cc, `speedArrayInter`); bandwall once priced a socket
  NIC at the rung below its rate (15 Gb/s at 9.6). If transfers followed the ladder, busbw
  would step at the rungs (0.96 and 1.92 Gb/s are rungs here); the model prices the link.
- **Back to back** (delay line): 1 MiB all_reduce at 10 ms RTT, each iteration started alone
  at an instant every rank waits for, against iterations issued back to back: the model's
  lone Gloo ring (`collective_time_s`) and its pipelined price (`tcp.steady_op_s`).
- **Slow start** (delay line, 2 hosts): S bytes on a fresh connection (and on one idle for
  longer than its retransmission timeout, and on a warm one) with reno and with BBR, against
  `tcp.transfer_s` (from the initial window) and `tcp.steady_transfer_s` (full window).

`sudo python -m bandwall.measure.lab.tcp_terms` prints the tables (about 3 minutes).
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bandwall.errors import LabError
from bandwall.measure.lab import netns, workload
from bandwall.model import tcp
from bandwall.model.collectives import Algo, Op, collective_time_s
from bandwall.model.nccl import SPEEDS_INTER, ladder_floor
from bandwall.model.topology import Link, Topology
from bandwall.units import parse_rate_Gbps

MSS_BYTES = 1448
#: tbf on a veth counts Ethernet frames: 1448 B of TCP payload (with timestamps) per
#: 1514-byte frame. On the delay line's TUN devices it counts IP packets (1500 B).
VETH_PAYLOAD_SHARE = MSS_BYTES / 1514
TUN_PAYLOAD_SHARE = MSS_BYTES / 1500


def ring_busbw_Bps(size_bytes: float, ranks: int, seconds: float) -> float:
    """nccl-tests' bus bandwidth of an all_reduce: 2(n − 1)/n · S / t."""
    return 2 * (ranks - 1) / ranks * size_bytes / seconds


def gloo_topology(rate_Gbps: float, one_way_s: float, share: float) -> Topology:
    """One rank per host on a lab link, as validate.py describes it to the model."""
    link = Link(
        name="lab",
        bandwidth_Bps=rate_Gbps * 1e9 / 8,
        latency_s=one_way_s,
        efficiency=share,
        tcp=True,
        mss_bytes=MSS_BYTES,
        transport="tcp",
    )
    return Topology(
        gpus_per_node=1,
        scale_up=None,
        scale_out=link,
        backend="gloo",
        congestion_control="reno",
        tcp_window_bytes=float(2 * _wmem_max()),
    )


def _wmem_max() -> int:
    return int(Path("/proc/sys/net/core/wmem_max").read_text().split()[0])


def ladder_rung_Gbps(rate_Gbps: float) -> float:
    """What a channel ladder would carry on one NIC of this rate: the fastest rung at or
    below it times the channels it fits (NCCL's Hopper inter-node ladder), in Gb/s."""
    rate_GBps = rate_Gbps / 8
    rung = float(ladder_floor(rate_GBps, SPEEDS_INTER["sm90"]))
    rung = min(rung, rate_GBps)
    return float(max(np.floor(rate_GBps / rung), 1.0)) * rung * 8


@dataclass
class Runner:
    """One lab at a time, removed whatever happens; results land in `workdir`."""

    name: str = field(default_factory=lambda: "tt" + secrets.token_hex(3))
    """A lab name of this run's own (namespaces are global to the kernel)."""
    workdir: Path | None = None
    timeouts_s: dict[str, float] = field(default_factory=lambda: {"ring": 120.0, "burst": 120.0})

    def run(self, lab: netns.Lab, *args: str) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="bwtcp-") as tmp:
            out = Path(self.workdir or tmp) / f"{args[0]}.json"
            out.unlink(missing_ok=True)
            cmd = [sys.executable, "-I", workload.__file__, *args, "--out", str(out)]
            code = netns.lab_run(lab.name, cmd, timeout_s=self.timeouts_s[args[0]])
            if code or not out.exists():
                raise LabError(f"workload {args[0]} failed (exit {code})", field="lab")
            result: dict[str, Any] = json.loads(out.read_text())
        return result

    def rates(
        self, rates: list[str], size: int, iters: int, hosts: int = 4
    ) -> list[dict[str, Any]]:
        """Median all_reduce busbw per rate, shaped veth links, gloo back to back."""
        rows = []
        for rate in rates:
            lab = netns.lab_up(self.name, hosts, rate)
            try:
                raw = self.run(
                    lab, "ring", "--sizes", str(size), "--iters", str(iters), "--pings", "0"
                )
            finally:
                netns.lab_down(self.name)
            seconds = statistics.median(raw["all_reduce"][0]["times_s"])
            gbps = parse_rate_Gbps(rate, "rate")
            topo = gloo_topology(gbps, 0.0, VETH_PAYLOAD_SHARE)
            predicted = float(collective_time_s(Op.ALL_REDUCE, Algo.RING, size, hosts, topo))
            rows.append(
                {
                    "rate_Gbps": gbps,
                    "size_bytes": size,
                    "busbw_Gbps": ring_busbw_Bps(size, hosts, seconds) * 8e-9,
                    "model_Gbps": ring_busbw_Bps(size, hosts, predicted) * 8e-9,
                    "ladder_Gbps": ladder_rung_Gbps(gbps) * VETH_PAYLOAD_SHARE,
                    "times_s": raw["all_reduce"][0]["times_s"],
                }
            )
        return rows

    def overlap(
        self, delay_s: float, size: int, iters: int, rate: str = "200mbit", hosts: int = 4
    ) -> dict[str, Any]:
        """One size at one delay: iterations started alone, then back to back."""
        lab = netns.lab_up(self.name, hosts, rate, delay=f"{delay_s * 1e3:g}ms", cc="reno")
        try:
            # started alone after a pause, a connection idle past its retransmission timeout
            # would restart from the initial window (the burst experiment's subject): keep
            # the window so that only the overlap differs
            keep_window(lab)
            common = ["--sizes", str(size), "--iters", str(iters), "--warmup", "1"]
            alone = self.run(lab, "ring", *common, "--pings", "10", "--isolated")
            chained = self.run(lab, "ring", *common, "--pings", "0")
        finally:
            netns.lab_down(self.name)
        gbps = parse_rate_Gbps(rate, "rate")
        # α as measured (the emulated delay plus the lab's own floor), never fitted
        one_way = float(alone["pingpong_one_way_s"])
        topo = gloo_topology(gbps, one_way, TUN_PAYLOAD_SHARE)
        single = float(collective_time_s(Op.ALL_REDUCE, Algo.RING, size, hosts, topo))
        bandwidth = 2 * (hosts - 1) / hosts * size / (gbps * 1e9 / 8 * TUN_PAYLOAD_SHARE)
        chain = 2 * (hosts - 1) * 2 * one_way  # a receiver-ready round trip per ring step
        return {
            "rtt_ms": 2 * delay_s * 1e3,
            "size_bytes": size,
            "one_way_s": one_way,
            "alone_s": statistics.median(alone["all_reduce"][0]["times_s"]),
            "back_to_back_s": statistics.median(chained["all_reduce"][0]["times_s"]),
            "model_alone_s": single,
            "model_back_to_back_s": float(tcp.steady_op_s(chain, bandwidth)),
            "alone_times_s": alone["all_reduce"][0]["times_s"],
            "chained_times_s": chained["all_reduce"][0]["times_s"],
        }

    def bursts(
        self,
        delay_s: float,
        sizes: list[int],
        cc: str,
        repeats: int,
        idle_s: float = 0.0,
        rate: str = "200mbit",
    ) -> dict[str, Any]:
        """Median seconds per size for fresh (and idle, warm) connections, one cc."""
        lab = netns.lab_up(self.name, 2, rate, delay=f"{delay_s * 1e3:g}ms", cc=cc)
        try:
            args = ["--server", lab.address(1), "--sizes", ",".join(map(str, sizes))]
            args += ["--repeats", str(repeats), "--idle", f"{idle_s:g}"]
            raw = self.run(lab, "burst", *args)
        finally:
            netns.lab_down(self.name)
        gbps = parse_rate_Gbps(rate, "rate")
        # the round trip as measured on the connections (the emulated 2 × delay plus the
        # lab's own), never fitted
        rtt = statistics.median(raw["rtt_s"])
        rate_Bps = gbps * 1e9 / 8 * TUN_PAYLOAD_SHARE
        out: dict[str, Any] = {"cc": raw["cc"], "rtt_ms": rtt * 1e3, "rows": []}
        for size in sizes:
            # the one-byte reply comes back a one-way trip after the last byte lands
            start = float(tcp.transfer_s(size, rtt_s=rtt, rate_Bps=rate_Bps)) + rtt / 2
            steady = float(tcp.steady_transfer_s(size, rtt_s=rtt, rate_Bps=rate_Bps)) + rtt / 2
            row = {
                "size_bytes": size,
                "fresh_s": statistics.median(raw["fresh"][str(size)]),
                "model_slow_start_s": start,
                "model_rate_only_s": steady,
            }
            if idle_s:
                row["idle_s"] = statistics.median(raw["idle"][str(size)])
                row["warm_s"] = statistics.median(raw["warm"][str(size)])
            out["rows"].append(row)
        return out


def keep_window(lab: netns.Lab) -> None:
    """net.ipv4.tcp_slow_start_after_idle = 0 in every host namespace of `lab` (a
    per-namespace setting, gone with the lab)."""
    for i in range(lab.hosts):
        subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                lab.host_ns(i),
                "sysctl",
                "-qw",
                "net.ipv4.tcp_slow_start_after_idle=0",
            ],
            check=True,
        )


def _err(pred: float, meas: float) -> str:
    return f"{pred / meas - 1:+.1%}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bandwall.measure.lab.tcp_terms")
    parser.add_argument("--rates", default="100mbit,300mbit,700mbit,1200mbit,1500mbit,2gbit")
    parser.add_argument("--json", dest="as_json", action="store_true")
    args = parser.parse_args(argv)
    runner = Runner()
    rates = runner.rates(args.rates.split(","), 16 << 20, 4)
    overlap = [runner.overlap(0.005, 1 << 20, 5), runner.overlap(0.025, 1 << 20, 5)]
    sizes = [64 << 10, 256 << 10, 1 << 20, 4 << 20]
    bursts = [runner.bursts(0.025, sizes, cc, 3, idle_s=1.0) for cc in ("reno", "bbr")]
    if args.as_json:
        print(json.dumps({"rates": rates, "overlap": overlap, "bursts": bursts}, indent=1))
        return 0
    print("| rate | busbw | busbw / rate | model | ladder would give |")
    print("|---|---|---|---|---|")
    for r in rates:
        print(
            f"| {r['rate_Gbps']:g} Gb/s | {r['busbw_Gbps']:.3f} Gb/s | "
            f"{r['busbw_Gbps'] / r['rate_Gbps']:.3f} | {r['model_Gbps']:.3f} Gb/s | "
            f"{r['ladder_Gbps']:.3f} Gb/s |"
        )
    print("\n| RTT | size | alone | model | back to back | model |")
    print("|---|---|---|---|---|---|")
    for o in overlap:
        print(
            f"| {o['rtt_ms']:g} ms | {o['size_bytes'] >> 10} KiB | {o['alone_s'] * 1e3:.1f} ms"
            f" | {_err(o['model_alone_s'], o['alone_s'])} | {o['back_to_back_s'] * 1e3:.1f} ms"
            f" | {_err(o['model_back_to_back_s'], o['back_to_back_s'])} |"
        )
    print("\n| cc | size | fresh | slow-start model | rate-only model | idle | warm |")
    print("|---|---|---|---|---|---|---|")
    for b in bursts:
        for r in b["rows"]:
            print(
                f"| {b['cc']} | {r['size_bytes'] >> 10} KiB | {r['fresh_s'] * 1e3:.0f} ms | "
                f"{_err(r['model_slow_start_s'], r['fresh_s'])} | "
                f"{_err(r['model_rate_only_s'], r['fresh_s'])} | {r['idle_s'] * 1e3:.0f} ms | "
                f"{r['warm_s'] * 1e3:.0f} ms |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
