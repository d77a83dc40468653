"""A userspace delay line: one-way delay and jitter on the lab's links, since this kernel has
no netem (shared/LAB-NOTES.md).

One process per lab. For every host it creates two TUN devices, `eth0` in the host's namespace
and `t{i}` in the lab's switch namespace (which routes between them), and holds each packet the
kernel sends out of one for the link's delay before writing it into the other. Rates stay with
the kernel: `tc tbf` on both TUN devices, as on the veth links, so a packet is queued and
serialised at the link rate first and then propagates, the order of a real link.

Why it keeps up in Python: the devices are opened with IFF_VNET_HDR and TSO/checksum offload
(TUNSETOFFLOAD), so the kernel hands over TCP super-packets of up to 64 KB and TCP still counts
its window in 1448-byte segments (MTU 1500). A read or write per 64 KB instead of per 1.5 KB is
what takes the loop from ~0.4 to several Gbit/s. The 10-byte virtio-net header is passed through
unchanged. Constants: linux/if_tun.h (TUNSETIFF = _IOW('T', 202, int), TUNSETOFFLOAD =
_IOW('T', 208, unsigned int)); design notes in notes/wan-tcp.md section 6.

Timing: select() on this kind of VM oversleeps by 50-150 µs (more after long sleeps and on a
busy machine), four times per round trip. The loop sleeps to 0.4 ms before a packet is due,
then for the rest less the oversleep it has learnt on such short sleeps (a moving average),
then polls until the due time, so the added delay is within a few tens of µs of the setting.

Jitter is an extra one-way delay per packet drawn from an exponential distribution with mean J
(so std J too: the shifted exponential the cost model assumes, model/collectives.py), added
once per path, on the sender's uplink. Packets of one link never overtake each other: a packet
is released no earlier than the one ahead of it, as on a real path, where jitter is queueing.
Loss, also once per path on the uplink, drops each packet with probability p; with loss the
devices run without offload so that a packet is one segment (Mathis et al.'s random loss).

The process exits on SIGTERM/SIGINT/SIGHUP, and by itself within a second once the lab's switch
namespace is gone, so no lab teardown, however interrupted, leaves it running; its TUN devices
are not persistent and vanish with it.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import json
import os
import random
import select
import signal
import struct
import sys
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: linux/if_tun.h, computed as _IOW('T', nr, int): (1 << 30) | (4 << 16) | (ord('T') << 8) | nr.
TUNSETIFF = 0x400454CA
TUNSETOFFLOAD = 0x400454D0
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
IFF_VNET_HDR = 0x4000
TUN_F_CSUM = 0x01
TUN_F_TSO4 = 0x02
TUN_F_TSO6 = 0x04
#: struct ifreq: 16-byte name, then a union of 24 bytes whose first member is the short flags.
IFREQ = "16sH22x"
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_TIMERSLACK = 29
#: Where `ip netns add` bind-mounts a namespace.
NETNS_DIR = Path("/run/netns")
#: One read: the virtio-net header plus the largest GSO packet.
READ_BYTES = 10 + 65535
#: Packets read from one device per wake-up before the others get a turn.
READ_BURST = 64
#: A wait longer than this ends in two sleeps: one to this much before the due time, then a
#: short one corrected by the oversleep learnt on short sleeps, then polling.
APPROACH_S = 4e-4
MODULE = "bandwall.measure.lab.delayline"

_libc = ctypes.CDLL(None, use_errno=True)


def prctl(option: int, arg: int) -> None:
    """prctl(2) with one argument (PR_SET_PDEATHSIG, PR_SET_TIMERSLACK)."""
    if _libc.prctl(option, arg, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl: {os.strerror(err)}")


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextlib.contextmanager
def in_netns(ns: str) -> Iterator[None]:
    """Run the block in network namespace `ns` (a name `ip netns` knows), then come back.

    Sockets and TUN devices opened inside stay in `ns`; so do /proc/sys/net writes.
    """
    home = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        target = os.open(NETNS_DIR / ns, os.O_RDONLY | os.O_CLOEXEC)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)


def open_tun(ns: str, name: str, offload: bool = True) -> int:
    """Create TUN device `name` in namespace `ns`, with GSO offload unless told not to (then
    every packet is one MTU-sized segment); return its fd.

    Not persistent: the device disappears when the fd is closed (or the process dies).
    """
    with in_netns(ns):
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            ifr = struct.pack(IFREQ, name.encode(), IFF_TUN | IFF_NO_PI | IFF_VNET_HDR)
            fcntl.ioctl(fd, TUNSETIFF, ifr)
            if offload:
                fcntl.ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6)
        except BaseException:
            os.close(fd)
            raise
    return fd


def set_sysctl(ns: str, key: str, value: str) -> None:
    """Write a net.* sysctl inside `ns` only (the /proc/sys/net view follows the namespace)."""
    with in_netns(ns):
        Path("/proc/sys", *key.split(".")).write_text(value)


def get_sysctl(ns: str, key: str) -> str:
    with in_netns(ns):
        return Path("/proc/sys", *key.split(".")).read_text().strip()


@dataclass(frozen=True)
class LinkSpec:
    """One host's link: its device, the switch-side device, and the delay of each direction."""

    host_ns: str
    switch_dev: str
    up_delay_s: float
    up_jitter_s: float
    down_delay_s: float
    up_loss: float = 0.0
    host_dev: str = "eth0"


@dataclass(frozen=True)
class Spec:
    lab: str
    switch_ns: str
    links: tuple[LinkSpec, ...]
    seed: int = 0

    @property
    def offload(self) -> bool:
        """GSO super-packets, unless packets are dropped: a lost 64 KB super-packet would be
        a burst of ~44 lost segments, where random loss means one segment at a time."""
        return not any(link.up_loss > 0 for link in self.links)

    def to_json(self) -> str:
        return json.dumps(
            {
                "lab": self.lab,
                "switch_ns": self.switch_ns,
                "seed": self.seed,
                "links": [vars(link) for link in self.links],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Spec:
        d = json.loads(text)
        return cls(
            lab=d["lab"],
            switch_ns=d["switch_ns"],
            seed=int(d.get("seed", 0)),
            links=tuple(LinkSpec(**link) for link in d["links"]),
        )


@dataclass
class _Direction:
    """Packets read from `src`, each written to `dst` once its due time has come."""

    src: int
    dst: int
    delay_s: float
    jitter_s: float
    rng: random.Random
    loss: float = 0.0
    queue: deque[tuple[float, bytes]] = field(default_factory=deque)
    last_due: float = 0.0
    packets: int = 0
    dropped: int = 0

    def admit(self, now: float, packet: bytes) -> None:
        if self.loss and self.rng.random() < self.loss:
            self.dropped += 1
            return
        due = now + self.delay_s
        if self.jitter_s > 0:
            due += self.rng.expovariate(1.0 / self.jitter_s)
        due = max(due, self.last_due)  # no overtaking within a link
        self.last_due = due
        self.queue.append((due, packet))

    def release(self, now: float) -> None:
        q = self.queue
        while q and q[0][0] <= now:
            packet = q.popleft()[1]
            try:
                os.write(self.dst, packet)
                self.packets += 1
            except OSError:  # device down or the kernel refused the packet: the wire lost it
                self.dropped += 1


def _drain(fd: int, direction: _Direction, now: float) -> None:
    for _ in range(READ_BURST):
        try:
            packet = os.read(fd, READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # EIO/EBADFD while a device goes away: nothing to forward
            return
        direction.admit(now, packet)


def serve(directions: list[_Direction], alive: Path, check_every_s: float = 0.5) -> None:
    """The loop: read whatever is ready, release what is due, sleep until the next due time.

    Returns when `alive` (the switch namespace's mount) disappears.
    """
    by_fd = {d.src: d for d in directions}
    fds = list(by_fd)
    mono = time.monotonic
    oversleep = 1e-4
    next_check = mono() + check_every_s
    while True:
        now = mono()
        for d in directions:
            if d.queue and d.queue[0][0] <= now:
                d.release(now)
        if now >= next_check:
            if not alive.exists():
                return
            next_check = now + check_every_s
        nxt = min((d.queue[0][0] for d in directions if d.queue), default=None)
        if nxt is None:
            timeout = check_every_s
        elif nxt - now > APPROACH_S:
            # a long sleep oversleeps more, and by more on a busy machine: stop short first
            timeout = min(nxt - now - APPROACH_S, check_every_s)
        else:
            timeout = max(0.0, nxt - now - oversleep)
        start = mono()
        ready, _, _ = select.select(fds, [], [], timeout)
        after = mono()
        if not ready and 0 < timeout <= APPROACH_S:
            late = after - start - timeout
            oversleep = min(max(0.8 * oversleep + 0.2 * late, 0.0), APPROACH_S)
        for fd in ready:
            _drain(fd, by_fd[fd], after)


def _directions(spec: Spec) -> list[_Direction]:
    rng = random.Random(spec.seed)
    out = []
    for link in spec.links:
        host = open_tun(link.host_ns, link.host_dev, spec.offload)
        switch = open_tun(spec.switch_ns, link.switch_dev, spec.offload)
        seed = rng.getrandbits(32)
        up = random.Random(seed)
        out.append(_Direction(host, switch, link.up_delay_s, link.up_jitter_s, up, link.up_loss))
        out.append(_Direction(switch, host, link.down_delay_s, 0.0, random.Random(seed + 1)))
    return out


def _stop(signum: int, _frame: object) -> None:
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> int:
    """Create the devices, print `ready` on stdout, then forward until stopped."""
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}")
    parser.add_argument("--lab", required=True, help="lab name (also makes the process findable)")
    parser.add_argument("--spec", required=True, help="JSON, as Spec.to_json writes it")
    args = parser.parse_args(argv)
    spec = Spec.from_json(args.spec)
    if spec.lab != args.lab:
        print(f"--lab {args.lab} does not match the spec's {spec.lab}", file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    prctl(PR_SET_TIMERSLACK, 1)  # 1 ns: no timer coalescing on our wake-ups
    try:
        directions = _directions(spec)
        switch = os.open(NETNS_DIR / spec.switch_ns, os.O_RDONLY | os.O_CLOEXEC)
        _setns(switch)  # live in the lab's switch namespace: `ip netns pids` shows us there
        os.close(switch)
    except OSError as exc:
        print(f"delay line: {exc}", file=sys.stderr)
        return 1
    os.chdir("/")
    print(f"ready {len(directions)}", flush=True)
    devnull = os.open(os.devnull, os.O_RDWR)
    for std in (0, 1, 2):
        os.dup2(devnull, std)
    serve(directions, NETNS_DIR / spec.switch_ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
