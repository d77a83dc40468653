"""What `validate.py` runs on the lab's hosts, one process per host under `lab run`.

Run by path (`python -I .../workload.py ring|tcp ...`): it needs the standard library, and
torch for `ring`, but nothing from bandwall, so it starts fast and measures only itself.

- `ring`: gloo over the lab's links. Rank 0 and 1 ping-pong a one-element tensor (half the
  round trip is the one-way latency α), then every rank runs all_reduce per size, back to back
  as nccl-tests and `bench` do, timing each iteration on every rank and keeping the slowest
  rank's time (a collective ends when its last rank does). With `--isolated` each iteration
  starts alone: rank 0 names an instant a second ahead, every rank waits for it on the
  machine's monotonic clock (one kernel, so one clock for every namespace) and times from it,
  so no operation overlaps the previous one.
- `burst`: host 0 sends S bytes to host 1 on a fresh TCP connection (the handshake done
  before the clock starts, then three one-byte round trips that measure the path without
  growing the window) and waits for a one-byte reply: the transfer plus a one-way trip,
  slow start included. `--idle X` also sends the same S again on that connection after X
  seconds of silence (after more than its retransmission timeout Linux restarts from the
  initial window) and right away (a warm window).
- `ping`: UDP round trips between host 0 and host 1 (no torch): the delay line's own delay
  and jitter.
- `tcp`: plain TCP streams from host 0 to host 1, to measure what more streams gain. With
  `--sndbuf X` the sender sets SO_SNDBUF = X as gloo does (gloo/transport/tcp/pair.cc), which
  turns autotuning off: the kernel keeps 2X and at most that is in flight, so each stream is
  window-bound (throughput = 2X / RTT). The receiver counts bytes over a steady interval.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

TCP_PORT = 29611
#: One-byte round trips measured on each burst connection before its transfer.
PINGS = 3


def _ring(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    out: dict[str, Any] = {"world": world, "pingpong_s": [], "all_reduce": []}
    tiny = torch.zeros(1)
    dist.barrier()
    if rank in (0, 1):
        for i in range(-3, args.pings):
            t0 = time.perf_counter()
            if rank == 0:
                dist.send(tiny, 1)
                dist.recv(tiny, 1)
            else:
                dist.recv(tiny, 0)
                dist.send(tiny, 0)
            if i >= 0:
                out["pingpong_s"].append(time.perf_counter() - t0)
    for size in args.sizes:
        buf = torch.ones(max(size // 4, 1))
        dist.barrier()
        for _ in range(args.warmup):
            dist.all_reduce(buf)
        times = torch.zeros(args.iters, dtype=torch.float64)
        for i in range(args.iters):
            if args.isolated:
                start = torch.tensor([time.monotonic() + 1.0], dtype=torch.float64)
                dist.broadcast(start, 0)
                t0 = float(start[0])
                time.sleep(max(t0 - time.monotonic(), 0.0))
                dist.all_reduce(buf)
                times[i] = time.monotonic() - t0
                continue
            t0 = time.perf_counter()
            dist.all_reduce(buf)
            times[i] = time.perf_counter() - t0
        dist.all_reduce(times, op=dist.ReduceOp.MAX)
        out["all_reduce"].append({"size_bytes": size, "times_s": times.tolist()})
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        if out["pingpong_s"]:
            out["pingpong_one_way_s"] = statistics.median(out["pingpong_s"]) / 2
        Path(args.out).write_text(json.dumps(out))
    return 0


def _burst(args: argparse.Namespace) -> int:
    rank = int(os.environ["RANK"])
    cases = [(size, r) for size in args.sizes for r in range(args.repeats)]
    if rank == 1:
        lis = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lis.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lis.bind(("0.0.0.0", TCP_PORT))
        lis.listen(4)
        lis.settimeout(60)
        buf = bytearray(1 << 20)
        rounds = 3 if args.idle else 1
        for size, _ in cases:
            conn, _ = lis.accept()
            with conn:
                for _ in range(PINGS):
                    if conn.recv(1) != b"p":
                        raise ConnectionError("no ping")
                    conn.sendall(b"p")
                for _ in range(rounds):
                    got = 0
                    while got < size:
                        n = conn.recv_into(buf, min(len(buf), size - got))
                        if not n:
                            raise ConnectionError("sender went away")
                        got += n
                    conn.sendall(b"k")
        return 0
    if rank != 0:
        return 0
    payload = b"\0" * max(args.sizes)
    out: dict[str, Any] = {"fresh": {}, "idle": {}, "warm": {}, "rtt_s": []}

    def timed(conn: socket.socket, size: int) -> float:
        t0 = time.perf_counter()
        conn.sendall(memoryview(payload)[:size])
        if conn.recv(1) != b"k":
            raise ConnectionError("no reply")
        return time.perf_counter() - t0

    for size, _ in cases:
        conn = _connect(args.server)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn:
            for _ in range(PINGS):  # one byte each way: the path's round trip, cwnd untouched
                t0 = time.perf_counter()
                conn.sendall(b"p")
                if conn.recv(1) != b"p":
                    raise ConnectionError("no ping reply")
                out["rtt_s"].append(time.perf_counter() - t0)
            out["fresh"].setdefault(str(size), []).append(timed(conn, size))
            if args.idle:
                time.sleep(args.idle)
                out["idle"].setdefault(str(size), []).append(timed(conn, size))
                out["warm"].setdefault(str(size), []).append(timed(conn, size))
    out["cc"] = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    Path(args.out).write_text(json.dumps(out))
    return 0


def _serve(args: argparse.Namespace) -> int:
    lis = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lis.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if args.clamp:  # inherited by the accepted sockets (the request sock copies it)
        lis.setsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP, args.clamp)
    lis.bind(("0.0.0.0", TCP_PORT))
    lis.listen(args.streams)
    lis.settimeout(30)
    counts = [0] * args.streams

    def drain(k: int, conn: socket.socket) -> None:
        buf = bytearray(1 << 20)
        with conn:
            while n := conn.recv_into(buf):
                counts[k] += n

    threads = []
    for k in range(args.streams):
        conn, _ = lis.accept()
        threads.append(threading.Thread(target=drain, args=(k, conn), daemon=True))
        threads[-1].start()
    time.sleep(args.warmup)
    t1, b1 = time.monotonic(), sum(counts)
    time.sleep(args.seconds)
    t2, b2 = time.monotonic(), sum(counts)
    info = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    Path(args.out).write_text(
        json.dumps({"streams": args.streams, "Bps": (b2 - b1) / (t2 - t1), "cc": info})
    )
    for t in threads:
        t.join(timeout=args.seconds + 30)
    return 0


def _send(args: argparse.Namespace) -> int:
    conns = [_connect(args.server) for _ in range(args.streams)]
    if args.sndbuf:
        for c in conns:
            c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, args.sndbuf)
    stop = time.monotonic() + args.warmup + args.seconds + 0.5
    payload = b"\0" * (256 << 10)

    def pump(conn: socket.socket) -> None:
        with conn:
            while time.monotonic() < stop:
                conn.sendall(payload)

    threads = [threading.Thread(target=pump, args=(c,)) for c in conns]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 0


def _tcp(args: argparse.Namespace) -> int:
    rank = int(os.environ["RANK"])
    if rank == 1:
        return _serve(args)
    if rank == 0:
        return _send(args)
    return 0


def _connect(server: str) -> socket.socket:
    deadline = time.monotonic() + 20
    while True:
        try:
            return socket.create_connection((server, TCP_PORT), timeout=5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _ping(args: argparse.Namespace) -> int:
    """UDP echo: one datagram each way and nothing else on the wire (no ACKs queued next to
    it), so the round trips show the delay line's own delay and jitter."""
    rank = int(os.environ["RANK"])
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with sock:
        if rank == 1:
            sock.bind(("0.0.0.0", TCP_PORT))
            sock.settimeout(30)
            while True:
                data, peer = sock.recvfrom(64)
                if data == b"quit":
                    return 0
                sock.sendto(data, peer)
        if rank != 0:
            return 0
        sock.settimeout(1.0)
        rtts: list[float] = []
        seq = 0
        while len(rtts) < args.count + 3:
            seq += 1
            t0 = time.perf_counter()
            sock.sendto(seq.to_bytes(8, "little"), (args.server, TCP_PORT))
            try:
                while int.from_bytes(sock.recv(64), "little") != seq:
                    pass
            except TimeoutError:  # the server is not up yet (or the packet was lost)
                continue
            rtts.append(time.perf_counter() - t0)
        sock.sendto(b"quit", (args.server, TCP_PORT))
    Path(args.out).write_text(json.dumps({"rtt_s": rtts[3:]}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="workload.py")
    sub = parser.add_subparsers(dest="what", required=True)
    ring = sub.add_parser("ring")
    ring.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[])
    ring.add_argument("--iters", type=int, default=3)
    ring.add_argument("--warmup", type=int, default=1)
    ring.add_argument("--pings", type=int, default=10)
    ring.add_argument("--isolated", action="store_true", help="no overlap between iterations")
    ring.add_argument("--out", required=True)
    burst = sub.add_parser("burst")
    burst.add_argument("--server", required=True, help="host 1's address")
    burst.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], required=True)
    burst.add_argument("--repeats", type=int, default=3)
    burst.add_argument("--idle", type=float, default=0.0, help="seconds idle before a resend")
    burst.add_argument("--out", required=True)
    tcp = sub.add_parser("tcp")
    tcp.add_argument("--server", required=True, help="host 1's address")
    tcp.add_argument("--streams", type=int, default=1)
    tcp.add_argument("--clamp", type=int, default=0, help="receive window clamp, bytes")
    tcp.add_argument("--sndbuf", type=int, default=0, help="SO_SNDBUF of each stream, bytes")
    tcp.add_argument("--warmup", type=float, default=1.0)
    tcp.add_argument("--seconds", type=float, default=2.0)
    tcp.add_argument("--out", required=True)
    ping = sub.add_parser("ping")
    ping.add_argument("--server", required=True, help="host 1's address")
    ping.add_argument("--count", type=int, default=100)
    ping.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    return {"ring": _ring, "tcp": _tcp, "ping": _ping, "burst": _burst}[args.what](args)


if __name__ == "__main__":
    sys.exit(main())
