"""The cost model's latency and TCP terms against the lab with a delay line (docs/lab.md).

Every prediction comes from the library: `collective_time_s` and `Topology.link_Bps` on a
Gloo `Topology` with one rank per node and a scale-out TCP `Link` that describes the lab link:

- bandwidth = the tbf rate; efficiency = 1448 / 1500, the share of an IP packet that is TCP
  payload (MSS with timestamps over the MTU; tbf on a TUN device counts IP bytes): derived,
  not fitted;
- latency = the emulated one-way delay plus the one-way latency the lab measures with no delay
  at all (kernel, delay line and gloo on 2 shared cores), measured at its own operating point
  and never fitted to the row it predicts;
- congestion control, loss and MSS as set in the lab; the window per stream as the kernel
  gives it: Gloo's SO_SNDBUF = min(message, 32 MiB), capped at net.core.wmem_max and doubled
  by the kernel, so 2 × wmem_max for Gloo; 2 × SO_SNDBUF for the TCP probe when it sets one
  (as Gloo does on a kernel with the old 212,992-byte wmem_max), else tcp_rmem's maximum.

`python -m bandwall.measure.lab.validate` (root) measures and prints the tables; the lab tests
run a small subset. All predictions are the model's (`collective_time_s` on a Gloo topology,
whose ring pays gloo's receiver-ready round trip per segment pair).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bandwall.errors import LabError
from bandwall.measure.lab import netns, workload
from bandwall.model.collectives import Algo, Op, collective_time_s
from bandwall.model.topology import Link, Topology
from bandwall.units import parse_rate_Gbps

MSS_BYTES = 1448
MTU_BYTES = 1500
TCP_PAYLOAD_SHARE = MSS_BYTES / MTU_BYTES


def _sysctl_int(key: str, field_index: int = 0) -> int:
    """A net.* value as this kernel has it (the lab's namespaces start from the same)."""
    return int(Path("/proc/sys", *key.split(".")).read_text().split()[field_index])


def gloo_window_bytes() -> float:
    """Gloo's in-flight bound on this kernel: 2 × net.core.wmem_max (model/tcp.py)."""
    return 2.0 * _sysctl_int("net.core.wmem_max")


def autotuned_window_bytes() -> float:
    """An autotuned socket's bound: tcp_rmem's maximum."""
    return float(_sysctl_int("net.ipv4.tcp_rmem", 2))


@dataclass(frozen=True)
class LabLink:
    """A lab link as the model sees it."""

    rate_Gbps: float
    delay_s: float
    """Emulated one-way delay between two hosts (RTT = 2 × delay)."""
    floor_s: float = 0.0
    """One-way latency the lab measures at zero delay."""
    loss: float = 0.0
    cc: str = "reno"
    window_bytes: float | None = None
    """Bytes in flight per stream; None: Gloo's on this kernel."""

    @property
    def alpha_s(self) -> float:
        return self.delay_s + self.floor_s

    def link(self) -> Link:
        return Link(
            name="lab",
            bandwidth_Bps=self.rate_Gbps * 1e9 / 8,
            latency_s=self.alpha_s,
            efficiency=TCP_PAYLOAD_SHARE,
            tcp=True,
            loss_rate=self.loss,
            mss_bytes=MSS_BYTES,
            transport="tcp",
        )

    def topology(self, streams: int | None = None) -> Topology:
        window = gloo_window_bytes() if self.window_bytes is None else self.window_bytes
        return Topology(
            gpus_per_node=1,
            scale_up=None,
            scale_out=self.link(),
            tcp_streams=streams,
            backend="gloo",
            congestion_control=self.cc,
            tcp_window_bytes=window,
        )


def predict_one_way_s(link: LabLink) -> float:
    """α as a 4-byte send/recv."""
    return float(collective_time_s(Op.SEND_RECV, Algo.DIRECT, 4, 2, link.topology()))


def predict_all_reduce_s(link: LabLink, size_bytes: int, ranks: int) -> float:
    """gloo runs a ring (gloo/allreduce.cc), so does the model's Gloo backend."""
    return float(collective_time_s(Op.ALL_REDUCE, Algo.RING, size_bytes, ranks, link.topology()))


def predict_stream_Bps(link: LabLink, streams: int) -> float:
    """k parallel streams over the link: min(k × one stream's limits, link rate)."""
    topo = link.topology(streams)
    return float(topo.link_Bps(link.link(), streams))


def error(predicted: float, measured: float) -> float:
    return predicted / measured - 1


# --- measuring --------------------------------------------------------------------------


@dataclass
class Bench:
    """Runs workloads on throwaway labs; one lab at a time, removed whatever happens."""

    rate: str = "200mbit"
    hosts: int = 4
    cc: str = "reno"
    name: str = "bwval"
    workdir: Path | None = None
    """Where ranks write their results (a fresh temporary directory per run if None)."""

    def _lab(self, hosts: int, delay_s: float, loss: float = 0.0) -> netns.Lab:
        return netns.lab_up(
            self.name,
            hosts,
            self.rate,
            delay=f"{delay_s * 1e3:g}ms",
            cc=self.cc,
            loss=f"{loss:g}" if loss else None,
        )

    def _run(self, lab: netns.Lab, *args: str, timeout_s: float = 300) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="bwval-") as tmp:
            out = Path(self.workdir or tmp) / f"{args[0]}.json"
            out.unlink(missing_ok=True)
            cmd = [sys.executable, "-I", workload.__file__, *args, "--out", str(out)]
            code = netns.lab_run(lab.name, cmd, timeout_s=timeout_s)
            if code or not out.exists():
                raise LabError(f"workload {args[0]} failed (exit {code})", field="lab")
            result: dict[str, Any] = json.loads(out.read_text())
        return result

    def ring(
        self, delay_s: float, sizes: list[int], iters: int = 3, warmup: int = 1, pings: int = 10
    ) -> dict[str, Any]:
        """Ping-pong α and all_reduce times (median of the slowest rank) at this delay."""
        lab = self._lab(self.hosts, delay_s)
        try:
            raw = self._run(
                lab,
                "ring",
                "--sizes",
                ",".join(map(str, sizes)),
                "--iters",
                str(iters),
                "--warmup",
                str(warmup),
                "--pings",
                str(pings),
            )
        finally:
            netns.lab_down(self.name)
        return {
            "one_way_s": raw["pingpong_one_way_s"],
            # the quieter quarter: what the wire costs when the 2 cores are not busy elsewhere
            "one_way_low_s": statistics.quantiles(raw["pingpong_s"], n=4)[0] / 2,
            "all_reduce_s": {
                r["size_bytes"]: statistics.median(r["times_s"]) for r in raw["all_reduce"]
            },
            "cc": lab.cc,
        }

    def streams(
        self,
        delay_s: float,
        counts: list[int],
        sndbuf_bytes: int = 0,
        loss: float = 0.0,
        warmup_s: float = 1.0,
        seconds: float = 2.0,
    ) -> dict[int, float]:
        """Steady-state bytes/s of k TCP streams host 0 → host 1, for each k."""
        lab = self._lab(2, delay_s, loss)
        try:
            return {
                k: self._run(
                    lab,
                    "tcp",
                    "--server",
                    lab.address(1),
                    "--streams",
                    str(k),
                    "--sndbuf",
                    str(sndbuf_bytes),
                    "--warmup",
                    str(warmup_s),
                    "--seconds",
                    str(seconds),
                )["Bps"]
                for k in counts
            }
        finally:
            netns.lab_down(self.name)

    def ping(self, delay_s: float, jitter_s: float, count: int = 100) -> list[float]:
        """UDP round trips, host 0 ↔ host 1."""
        lab = netns.lab_up(
            self.name, 2, self.rate, delay=f"{delay_s * 1e3:g}ms", jitter=f"{jitter_s * 1e3:g}ms"
        )
        try:
            rtts: list[float] = self._run(
                lab, "ping", "--server", lab.address(1), "--count", str(count)
            )["rtt_s"]
            return rtts
        finally:
            netns.lab_down(self.name)


# --- the report ------------------------------------------------------------------------


def _row(
    what: str, rtt_ms: float, case: str, pred: float, meas: float, unit: str
) -> dict[str, Any]:
    return {
        "what": what,
        "rtt_ms": rtt_ms,
        "case": case,
        "predicted": pred,
        "measured": meas,
        "unit": unit,
        "error": error(pred, meas),
    }


def ring_rows(
    bench: Bench, rtts_ms: list[float], sizes: list[int], iters: int, floor_factor: float = 5.0
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """α and all_reduce rows; sizes whose predicted time is under `floor_factor` × the CPU
    floor (a 4 KiB all_reduce at zero delay) are measured but left out of the rows."""
    rate = parse_rate_Gbps(bench.rate, "rate")
    floor = bench.ring(0.0, sorted({4096, *sizes}), iters=iters)
    cpu_floor_s = floor["all_reduce_s"][4096]
    info = {
        "floor_one_way_s": floor["one_way_s"],
        "cpu_floor_s": cpu_floor_s,
        "cc": floor["cc"],
        "gloo_window_bytes": gloo_window_bytes(),
    }
    rows = []
    for rtt in rtts_ms:
        delay = rtt / 2e3
        m = bench.ring(delay, sizes, iters=iters)
        link = LabLink(rate, delay, floor["one_way_s"], cc=bench.cc)
        rows.append(_row("alpha", rtt, "1 element", predict_one_way_s(link), m["one_way_s"], "s"))
        for size in sizes:
            pred = predict_all_reduce_s(link, size, bench.hosts)
            if pred < floor_factor * cpu_floor_s:
                continue
            rows.append(_row("all_reduce", rtt, _size(size), pred, m["all_reduce_s"][size], "s"))
    return rows, info


def stream_rows(
    bench: Bench,
    rtt_ms: float,
    counts: list[int],
    floor_s: float,
    sndbuf_bytes: int = 212_992,
    seconds: float = 2.0,
) -> list[dict[str, Any]]:
    """Window-bound streams (SO_SNDBUF as Gloo sets it). One stream against the model's
    window term, 2 × SO_SNDBUF / RTT; then k streams against min(k × one stream, link), the
    model's streams term, with the window one stream actually kept in flight (the kernel's
    send-buffer accounting lets it exceed 2 × SO_SNDBUF by up to ~20%)."""
    rate = parse_rate_Gbps(bench.rate, "rate")
    got = bench.streams(rtt_ms / 2e3, sorted({1, *counts}), sndbuf_bytes, seconds=seconds)
    link = LabLink(rate, rtt_ms / 2e3, floor_s, cc=bench.cc, window_bytes=2.0 * sndbuf_bytes)
    rows = [
        _row(
            "window",
            rtt_ms,
            f"1 × SO_SNDBUF {sndbuf_bytes:,} B",
            predict_stream_Bps(link, 1),
            got[1],
            "Bps",
        )
    ]
    kept = replace(link, window_bytes=got[1] * 2 * link.alpha_s)
    for k in counts:
        if k != 1:
            case = f"{k} streams, window of 1"
            rows.append(_row("streams", rtt_ms, case, predict_stream_Bps(kept, k), got[k], "Bps"))
    return rows


def loss_rows(
    bench: Bench,
    rtts_ms: list[float],
    loss: float,
    counts: list[int],
    floor_s: float,
    seconds: float = 10.0,
) -> list[dict[str, Any]]:
    """Loss-bound streams: Mathis per stream, times the streams (the model's tcp_streams)."""
    rate = parse_rate_Gbps(bench.rate, "rate")
    rows = []
    for rtt in rtts_ms:
        got = bench.streams(rtt / 2e3, counts, loss=loss, warmup_s=2.0, seconds=seconds)
        link = LabLink(
            rate, rtt / 2e3, floor_s, loss, cc=bench.cc, window_bytes=autotuned_window_bytes()
        )
        for k in counts:
            case = f"{k} × loss {loss:.2%}"
            rows.append(_row("mathis", rtt, case, predict_stream_Bps(link, k), got[k], "Bps"))
    return rows


def median_of(
    runs: list[tuple[list[dict[str, Any]], dict[str, Any]]],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per row (term, RTT, case) the median prediction and measurement over the runs that
    have it; `info` the medians of the floors."""
    keyed: dict[tuple[str, float, str], list[dict[str, Any]]] = {}
    for rows, _ in runs:
        for r in rows:
            keyed.setdefault((r["what"], r["rtt_ms"], r["case"]), []).append(r)
    out = []
    for same in keyed.values():
        r = dict(same[0])
        for k in ("predicted", "measured"):
            if k in r:
                r[k] = statistics.median(x[k] for x in same)
        r["error"] = error(r["predicted"], r["measured"])
        r["runs"] = len(same)
        out.append(r)
    info = dict(runs[0][1])
    for k in ("floor_one_way_s", "cpu_floor_s"):
        info[k] = statistics.median(i[k] for _, i in runs)
    return out, info


def _size(n: int) -> str:
    for unit, f in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= f:
            return f"{n / f:g} {unit}"
    return f"{n} B"


def _fmt(value: float, unit: str) -> str:
    if unit == "Bps":
        return f"{value * 8e-6:,.1f} Mb/s"
    return f"{value * 1e3:,.2f} ms"


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| term | RTT | case | predicted | measured | error |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['what']} | {r['rtt_ms']:g} ms | {r['case']} | {_fmt(r['predicted'], r['unit'])}"
            f" | {_fmt(r['measured'], r['unit'])} | {r['error']:+.1%} |"
        )
    errs = sorted(abs(r["error"]) for r in rows)
    lines.append("")
    lines.append(
        f"median |error| {statistics.median(errs):.1%}, max {errs[-1]:.1%} over {len(rows)} rows"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bandwall.measure.lab.validate")
    parser.add_argument("--rate", default="200mbit")
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--rtts-ms", default="1,10,50")
    parser.add_argument("--sizes", default="65536,1048576,4194304,16777216")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--cc", default="reno")
    parser.add_argument("--repeat", type=int, default=1, help="runs; rows report medians")
    parser.add_argument("--json", dest="as_json", action="store_true")
    args = parser.parse_args(argv)
    bench = Bench(rate=args.rate, hosts=args.hosts, cc=args.cc)
    rtts = [float(x) for x in args.rtts_ms.split(",")]
    sizes = [int(x) for x in args.sizes.split(",")]
    runs = []
    for _ in range(args.repeat):
        rows, info = ring_rows(bench, rtts, sizes, args.iters)
        floor_s = info["floor_one_way_s"]
        rows += stream_rows(bench, 50.0, [2, 4], floor_s, seconds=4.0)
        lossy = Bench(rate="100mbit", hosts=2, cc=args.cc)
        rows += loss_rows(lossy, [10.0, 50.0], 0.001, [1, 4], floor_s, seconds=15.0)
        runs.append((rows, info))
    rows, info = median_of(runs)
    if args.as_json:
        print(json.dumps({"info": info, "rows": rows}, indent=1))
        return 0
    print(
        f"rate {args.rate}, {args.hosts} hosts, tcp {info['cc']}; zero-delay one-way latency "
        f"{info['floor_one_way_s'] * 1e3:.3f} ms, CPU floor (4 KiB all_reduce) "
        f"{info['cpu_floor_s'] * 1e3:.2f} ms\n"
    )
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
