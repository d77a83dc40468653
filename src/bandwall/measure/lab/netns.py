"""Build, use and remove an emulated cluster of Linux network namespaces.

Layout for a lab NAME with N hosts: a switch namespace `bw-NAME-sw` and host namespaces
`bw-NAME-h0..h{N-1}`, addresses from 10.213.0.0/16 (a range the lab owns). Nothing is created
in, or removed from, the root namespace. Two kinds of link:

- without `--delay`: a veth pair per host (`eth0` in the host, `p{i}` on a bridge in the
  switch namespace), shaped in both directions with `tc tbf` (this kernel has tbf/htb but no
  netem): host egress on `eth0`, host ingress on the switch port;
- with `--delay`/`--jitter`: a TUN device per host (`eth0`) and one per switch port (`t{i}`,
  the switch routes between them), joined by the lab's delay-line process
  (`delayline.py`), which holds every packet for the link's delay; `tc tbf` shapes both TUN
  devices as it shapes the veths.

Ownership. Every lab object lives inside a namespace whose name carries the `bw-NAME-` prefix,
and the lab's state file (`$BANDWALL_LAB_DIR/NAME.json`, default /run/bandwall/labs) records
each namespace *before* it is created and the delay line's pid as soon as it exists, so an
interrupted `up` (Ctrl-C, SIGTERM, kill -9) leaves a record of everything it may have made.
`down NAME` stops the lab's processes (the delay line; every rank `lab run` started, found by
the `BANDWALL_LAB=NAME` their environment carries), then deletes exactly the recorded
namespaces (veths, bridges, TUN devices and qdiscs go with them) and the state file;
`down --all` does that for every state file. Names are checked against one strict pattern at
every entry point, and recorded namespaces against the lab's own prefix, so neither a typed
name nor an edited state file can reach anything else.

Stragglers are emulated at the rank level with a per-rank delay (`lab run --straggler
RANK:SECONDS`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Any

from bandwall.errors import LabError
from bandwall.measure.lab import delayline
from bandwall.units import parse_duration_s, parse_rate_Gbps

STATE_DIR = Path(os.environ.get("BANDWALL_LAB_DIR", "/run/bandwall/labs"))
NAME_RE = re.compile(r"[a-z][a-z0-9]{0,7}")
NAME_RULE = "1-8 lowercase letters or digits, starting with a letter (e.g. a, lab2)"
MAX_HOSTS = 64
#: LAB-NOTES: tbf needs a large burst or busbw collapses (64 kb gave ~420 Mb/s at 1 gbit).
TBF_BURST = "256kb"
TBF_LATENCY = "50ms"
MASTER_PORT = 29500
NOISE = ("hostname of the client socket cannot be retrieved",)
#: Bounds on what the delay line is asked to emulate: the largest intercontinental RTTs are
#: ~0.3 s (notes/wan-tcp.md §2). Its Python loop and 4 ranks share 2 cores here: at 200 Mbit/s
#: links reach their rate, at 1 Gbit/s a 16 MiB all_reduce only ~60% of it (docs/lab.md).
MAX_DELAY_S = 1.0
MAX_JITTER_S = 0.1
MAX_DELAY_RATE_Gbps = 1.0
#: With loss the delay line forwards one 1500-byte segment per read (no offload).
MAX_LOSS = 0.2
MAX_LOSSY_RATE_Gbps = 0.2
CC_RE = re.compile(r"[a-z][a-z0-9_]{0,15}")
#: How long `lab up` waits for the delay line to create its devices.
DELAYLINE_START_S = 20.0
#: How long stopped processes get between SIGTERM and SIGKILL.
GRACE_S = 3.0
#: In every rank's environment: which lab (so `down` finds ranks) and which run (so `run`
#: finds a rank's children, wherever they went).
LAB_VAR = "BANDWALL_LAB"
RUN_VAR = "BANDWALL_LAB_RUN"


@dataclass(frozen=True)
class Lab:
    """A lab as its state file records it."""

    name: str
    hosts: int
    rates_Gbps: tuple[float, ...]
    subnet: str
    namespaces: tuple[str, ...]
    """Every namespace `up` created or was about to create, in order."""
    delay_s: float | None = None
    """One-way host-to-host delay; None: veth links and no delay line."""
    jitter_s: float = 0.0
    """Mean (and std) of the exponential extra one-way delay per packet."""
    delayline_pid: int | None = None
    delayline_start: int | None = None
    """The delay line's start time (/proc/PID/stat field 22): a recycled pid is not ours."""
    complete: bool = True
    """False while `up` runs, and forever if it was killed: `down` still removes it."""
    cc: str | None = None
    """TCP congestion control in the hosts' namespaces (None: not known, an old record)."""
    loss: float = 0.0
    """Probability that a packet is dropped, once per path (the sender's uplink)."""
    spines: int = 0
    """Equal-cost spine paths between two leaves (ecmp.py); 0: one switch, no routing."""
    spine_rate_Gbps: float = 0.0
    layout: str = ""
    """Which leaf each host hangs off (ecmp.LAYOUTS); empty without spines."""

    @property
    def switch_ns(self) -> str:
        return f"bw-{self.name}-sw"

    def host_ns(self, i: int) -> str:
        return f"bw-{self.name}-h{i}"

    def address(self, i: int) -> str:
        return f"{self.subnet}.{i + 1}"

    @property
    def emulates_delay(self) -> bool:
        return self.delay_s is not None


class _Signalled(BaseException):
    """SIGTERM or SIGHUP arrived: unwind, clean up, then die of the same signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_signalled(signum: int, _frame: FrameType | None) -> None:
    raise _Signalled(signum)


@contextlib.contextmanager
def _shielded() -> Iterator[None]:
    """Ignore SIGINT/SIGTERM/SIGHUP for the block: a cleanup must not be cut short (it is
    bounded by GRACE_S; kill -9 still works, and `lab down` finishes the job then)."""
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in sigs}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """Turn SIGINT into KeyboardInterrupt and SIGTERM/SIGHUP into _Signalled for the block."""
    handlers = {
        signal.SIGINT: signal.default_int_handler,
        signal.SIGTERM: _raise_signalled,
        signal.SIGHUP: _raise_signalled,
    }
    old = {sig: signal.signal(sig, h) for sig, h in handlers.items()}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def _die_of(exc: BaseException) -> None:
    """After cleaning up for a SIGTERM/SIGHUP, exit the conventional way: by that signal."""
    if isinstance(exc, _Signalled):
        signal.signal(exc.signum, signal.SIG_DFL)
        os.kill(os.getpid(), exc.signum)


def check_name(name: str) -> str:
    """The one pattern every lab name must match: no `/`, no `..`, nothing to escape with."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise LabError(f"{name!r} is not a lab name: {NAME_RULE}", field="name")
    return name


def _own_namespace(lab_name: str, ns: str) -> bool:
    """Whether `ns` is one of the names lab `lab_name` gives its namespaces."""
    m = re.fullmatch(rf"bw-{re.escape(lab_name)}-(?:sw|l[01]|h(\d{{1,2}}))", ns)
    return m is not None and (m.group(1) is None or int(m.group(1)) < MAX_HOSTS)


def _require_root() -> None:
    if os.geteuid() != 0:
        raise LabError(
            "needs root to create network namespaces and tc qdiscs; run as "
            "root (sudo bandwall lab ...)",
            field="lab",
        )


def _ip(*args: str) -> None:
    res = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if res.returncode:
        raise LabError(f"`ip {' '.join(args)}` failed: {res.stderr.strip()}", field="lab")


def _tc(ns: str, dev: str, rate_Gbps: float) -> None:
    rate = f"{rate_Gbps * 1000:.3f}mbit"
    res = subprocess.run(
        [
            "tc",
            "-n",
            ns,
            "qdisc",
            "replace",
            "dev",
            dev,
            "root",
            "tbf",
            "rate",
            rate,
            "burst",
            TBF_BURST,
            "latency",
            TBF_LATENCY,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if res.returncode:
        raise LabError(f"tc tbf on {ns}/{dev} failed: {res.stderr.strip()}", field="lab")


# --- state files ------------------------------------------------------------------------


def _state_path(name: str) -> Path:
    return STATE_DIR / f"{check_name(name)}.json"


def _run_tmp(name: str, run_id: str) -> Path:
    """A fresh temp dir for one `run`'s ranks, beside the lab's state file."""
    folder = STATE_DIR / f".{check_name(name)}.run-{run_id}"
    folder.mkdir(mode=0o700, parents=True)
    return folder


def _write_state(lab: Lab) -> None:
    """Atomically: a reader (or a `down` after kill -9) sees the old record or the new one."""
    path = _state_path(lab.name)
    tmp = path.with_name(f".{lab.name}.json.tmp")
    tmp.write_text(json.dumps(asdict(lab)))
    os.replace(tmp, path)


def _claim_state(lab: Lab) -> None:
    """Create the state file, failing if it exists: two `up`s of one name cannot both win."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(_state_path(lab.name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise LabError(
            f"lab {lab.name!r} already exists; `bandwall lab down {lab.name}` first",
            field="name",
        ) from None
    os.close(fd)
    _write_state(lab)


def _recorded_names() -> list[str]:
    if not STATE_DIR.is_dir():
        return []
    return sorted(p.stem for p in STATE_DIR.glob("*.json") if NAME_RE.fullmatch(p.stem))


def load_lab(name: str) -> Lab:
    path = _state_path(name)
    if not path.exists():
        raise LabError(
            f"no lab {name!r}; labs: {', '.join(_recorded_names()) or 'none'}", field="name"
        )
    try:
        d = json.loads(path.read_text())
        lab = Lab(
            name=d["name"],
            hosts=int(d["hosts"]),
            rates_Gbps=tuple(float(r) for r in d["rates_Gbps"]),
            subnet=str(d["subnet"]),
            namespaces=tuple(str(n) for n in d["namespaces"]),
            delay_s=None if d.get("delay_s") is None else float(d["delay_s"]),
            jitter_s=float(d.get("jitter_s", 0.0)),
            delayline_pid=d.get("delayline_pid"),
            delayline_start=d.get("delayline_start"),
            complete=bool(d.get("complete", True)),
            cc=d.get("cc"),
            loss=float(d.get("loss", 0.0)),
            spines=int(d.get("spines", 0)),
            spine_rate_Gbps=float(d.get("spine_rate_Gbps", 0.0)),
            layout=str(d.get("layout", "")),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LabError(
            f"state file {path} is unreadable ({exc}); not touching it", field="name"
        ) from None
    if lab.name != name:
        raise LabError(f"state file {path} names lab {lab.name!r}, not {name!r}", field="name")
    foreign = [ns for ns in lab.namespaces if not _own_namespace(name, ns)]
    if foreign:
        raise LabError(
            f"state file {path} lists {foreign[0]!r}, which is not a bw-{name}-* namespace; "
            "not touching it",
            field="name",
        )
    return lab


def _existing_namespaces() -> set[str]:
    res = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    return {line.split()[0] for line in res.stdout.splitlines() if line.strip()}


def _subnet_for(name: str) -> str:
    """10.213.K for the lab: the first K no other recorded lab uses."""
    used = set()
    for p in STATE_DIR.glob("*.json") if STATE_DIR.is_dir() else []:
        try:
            used.add(json.loads(p.read_text())["subnet"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    for k in range(256):
        if f"10.213.{k}" not in used:
            return f"10.213.{k}"
    raise LabError(
        "all 256 lab subnets in 10.213.0.0/16 are in use; remove a lab first", field="lab"
    )


# --- processes --------------------------------------------------------------------------


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) of a live process, None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    state, start = fields[0], int(fields[19])
    return None if state in "ZX" else (state, start)


def _alive(pid: int, start: int | None = None) -> bool:
    st = _proc_stat(pid)
    return st is not None and (start is None or st[1] == start)


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _environ_has(pid: int, entry: str) -> bool:
    try:
        return entry.encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _is_delayline(pid: int, name: str) -> bool:
    args = _cmdline(pid)
    return any(a.endswith("measure/lab/delayline.py") for a in args) and any(
        a == "--lab" and b == name for a, b in itertools.pairwise(args)
    )


def _all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _pids_in_namespaces(namespaces: list[str]) -> list[int]:
    """Processes whose network namespace is one of these (what `ip netns pids` does)."""
    ids = set()
    for ns in namespaces:
        try:
            st = os.stat(delayline.NETNS_DIR / ns)
        except OSError:
            continue
        ids.add((st.st_dev, st.st_ino))
    out = []
    for pid in _all_pids() if ids else []:
        try:
            st = os.stat(f"/proc/{pid}/ns/net")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in ids:
            out.append(pid)
    return out


def _stop(pids: list[int], grace_s: float = GRACE_S) -> list[int]:
    """SIGTERM, then SIGKILL what is still there after `grace_s`; returns the pids stopped."""
    pids = [p for p in pids if p != os.getpid() and _alive(p)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, sig)
        deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 5.0)
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            for p in pids:  # reap our own children (a delay line `up` started in-process)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(p, os.WNOHANG)
            time.sleep(0.02)
        if not any(_alive(p) for p in pids):
            break
    return pids


def _lab_processes(lab: Lab) -> list[int]:
    """What the lab started: its delay line (wherever it is, even half-started) and the rank
    processes in its namespaces (their environment carries BANDWALL_LAB=NAME)."""
    found = set()
    pid = lab.delayline_pid
    if pid is not None and _alive(pid, lab.delayline_start) and _is_delayline(pid, lab.name):
        found.add(pid)
    found.update(p for p in _all_pids() if _is_delayline(p, lab.name))
    mark = f"{LAB_VAR}={lab.name}"
    found.update(p for p in _pids_in_namespaces(list(lab.namespaces)) if _environ_has(p, mark))
    return sorted(found)


def _teardown(lab: Lab) -> list[str]:
    """Stop the lab's processes, delete its recorded namespaces that exist, forget it.

    If a namespace cannot be deleted, the record keeps it (and only it) and the error says
    so: the next `down` retries instead of forgetting something that still exists.
    """
    _stop(_lab_processes(lab))
    present = _existing_namespaces()
    removed: list[tuple[str, str]] = []
    failed: list[tuple[str, str]] = []
    for ns in reversed(lab.namespaces):
        if ns in present and _own_namespace(lab.name, ns):
            res = subprocess.run(["ip", "netns", "del", ns], capture_output=True, text=True)
            (failed if res.returncode else removed).append((ns, res.stderr.strip()))
    if failed:
        _write_state(replace(lab, namespaces=tuple(ns for ns, _ in reversed(failed))))
        raise LabError(
            f"could not delete {', '.join(f'{ns} ({err})' for ns, err in failed)}; "
            f"`bandwall lab down {lab.name}` retries",
            field="name",
        )
    _state_path(lab.name).unlink(missing_ok=True)
    _state_path(lab.name).with_name(f".{lab.name}.json.tmp").unlink(missing_ok=True)
    for folder in STATE_DIR.glob(f".{lab.name}.run-*"):  # ranks' temp dirs `run` made
        shutil.rmtree(folder, ignore_errors=True)
    return [ns for ns, _ in reversed(removed)]


# --- up ---------------------------------------------------------------------------------


def parse_rates(hosts: int, rate: str, rates: str | None) -> tuple[float, ...]:
    if rates:
        values = tuple(parse_rate_Gbps(r.strip(), "rates") for r in rates.split(","))
        if len(values) != hosts:
            raise LabError(
                f"{len(values)} rates given for {hosts} hosts; give one per host", field="rates"
            )
        return values
    return (parse_rate_Gbps(rate, "rate"),) * hosts


def parse_delay(delay: str | None, jitter: str | None) -> tuple[float | None, float]:
    """(one-way delay, jitter) in seconds; a jitter alone means a zero delay."""
    jitter_s = parse_duration_s(jitter, "jitter") if jitter else 0.0
    delay_s = parse_duration_s(delay, "delay") if delay else None
    if delay_s is None and jitter:
        delay_s = 0.0
    if delay_s is not None and delay_s > MAX_DELAY_S:
        raise LabError(
            f"one-way delay must be at most {MAX_DELAY_S * 1e3:,.0f} ms, got {delay}",
            field="delay",
        )
    if jitter_s > MAX_JITTER_S:
        raise LabError(
            f"jitter must be at most {MAX_JITTER_S * 1e3:,.0f} ms, got {jitter}", field="jitter"
        )
    return delay_s, jitter_s


def parse_loss(text: str | None) -> float:
    """'0.1%' or '0.001' → 0.001."""
    if not text:
        return 0.0
    t = text.strip()
    try:
        p = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise LabError(
            f"{text!r} must be a probability, e.g. 0.1% or 0.001", field="loss"
        ) from None
    if not 0 <= p <= MAX_LOSS:
        raise LabError(f"must be between 0 and {MAX_LOSS:.0%}, got {text}", field="loss")
    return p


def lab_up(
    name: str,
    hosts: int,
    rate: str = "1gbit",
    rates: str | None = None,
    delay: str | None = None,
    jitter: str | None = None,
    cc: str | None = None,
    loss: str | None = None,
) -> Lab:
    """Create the lab; on any failure, Ctrl-C or SIGTERM remove what was created so far.

    `delay` is the one-way delay between any two hosts (RTT = 2 × delay): each link holds
    packets for delay/2 in each direction. `jitter` adds an exponential extra delay per packet
    (mean = std = jitter) once per path, and `loss` drops packets with that probability once
    per path. Any of them turns on the TUN links and the delay line.
    `cc` sets the TCP congestion control in the lab's namespaces (the kernel allows `reno`
    and whatever net.ipv4.tcp_allowed_congestion_control lists); the default is the
    machine's, which is what makes results differ between machines at high RTT.
    """
    check_name(name)
    _require_root()
    if not 2 <= hosts <= MAX_HOSTS:
        raise LabError(f"must be between 2 and {MAX_HOSTS}, got {hosts}", field="hosts")
    shaped = parse_rates(hosts, rate, rates)
    delay_s, jitter_s = parse_delay(delay, jitter)
    loss_p = parse_loss(loss)
    if loss_p and delay_s is None:
        delay_s = 0.0
    if loss_p and max(shaped) > MAX_LOSSY_RATE_Gbps:
        raise LabError(
            f"with --loss the delay line forwards one segment at a time and keeps up to "
            f"{MAX_LOSSY_RATE_Gbps:g} Gbit/s per link; got {max(shaped):g} Gbit/s",
            field="rates" if rates else "rate",
        )
    if cc is not None and not CC_RE.fullmatch(cc):
        raise LabError(f"{cc!r} is not a congestion control name, e.g. reno", field="cc")
    if delay_s is not None and max(shaped) > MAX_DELAY_RATE_Gbps:
        raise LabError(
            f"with --delay the links go through a userspace delay line that keeps up to "
            f"{MAX_DELAY_RATE_Gbps:g} Gbit/s per link; got {max(shaped):g} Gbit/s",
            field="rates" if rates else "rate",
        )
    if _state_path(name).exists():
        raise LabError(
            f"lab {name!r} already exists; `bandwall lab down {name}` first", field="name"
        )
    lab = Lab(
        name,
        hosts,
        shaped,
        _subnet_for(name),
        (),
        delay_s,
        jitter_s,
        complete=False,
        cc=cc,
        loss=loss_p,
    )
    return create(lab, [lab.switch_ns], _build_tun if lab.emulates_delay else _build_veth)


def create(lab: Lab, switches: list[str], build: Callable[[dict[str, Lab]], None]) -> Lab:
    """Claim the state file, `build` (which records each namespace before making it), mark
    the record complete; on any failure or signal remove what was made (also for ecmp.py)."""
    taken = _existing_namespaces()
    wanted = switches + [lab.host_ns(i) for i in range(lab.hosts)]
    clash = [n for n in wanted if n in taken]
    if clash:
        raise LabError(
            f"namespace {clash[0]!r} exists and is not this lab's; pick another name", field="name"
        )
    state = {"lab": lab}
    with _interruptible():
        _claim_state(lab)
        try:
            build(state)
            done = replace(state["lab"], complete=True)
            _write_state(done)
            return done
        except BaseException as exc:
            with _shielded():
                _teardown(state["lab"])
            _die_of(exc)
            raise


def add_namespace(state: dict[str, Lab], ns: str) -> None:
    """Record the namespace, then create it: a kill between the two leaves a record of a
    namespace that does not exist, never a namespace without a record."""
    lab = state["lab"]
    state["lab"] = lab = replace(lab, namespaces=(*lab.namespaces, ns))
    _write_state(lab)
    try:
        _ip("netns", "add", ns)
    except LabError:
        # not made by us (it appeared since the clash check): drop it from the record
        state["lab"] = lab = replace(lab, namespaces=lab.namespaces[:-1])
        _write_state(lab)
        raise
    _ip("-n", ns, "link", "set", "lo", "up")
    if re.fullmatch(r"bw-[a-z0-9]+-h\d+", ns):
        _set_cc(state, ns)


def _set_cc(state: dict[str, Lab], ns: str) -> None:
    """Apply the lab's congestion control in `ns`, or record the one the kernel gave it."""
    lab = state["lab"]
    key = "net.ipv4.tcp_congestion_control"
    if lab.cc is not None:
        try:
            delayline.set_sysctl(ns, key, lab.cc)
        except OSError as exc:
            allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
            raise LabError(
                f"the kernel refused {lab.cc!r} in a namespace ({exc.strerror}); allowed "
                f"there: {allowed.read_text().strip() if allowed.exists() else 'reno'}",
                field="cc",
            ) from None
    elif ns == lab.host_ns(0):
        state["lab"] = replace(lab, cc=delayline.get_sysctl(ns, key))
        _write_state(state["lab"])


def _build_veth(state: dict[str, Lab]) -> None:
    lab = state["lab"]
    add_namespace(state, lab.switch_ns)
    _ip("-n", lab.switch_ns, "link", "add", "br0", "type", "bridge")
    _ip("-n", lab.switch_ns, "link", "set", "br0", "up")
    for i in range(lab.hosts):
        ns = lab.host_ns(i)
        add_namespace(state, ns)
        _ip(
            "-n",
            ns,
            "link",
            "add",
            "eth0",
            "type",
            "veth",
            "peer",
            "name",
            f"p{i}",
            "netns",
            lab.switch_ns,
        )
        _ip("-n", ns, "addr", "add", f"{lab.address(i)}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", lab.switch_ns, "link", "set", f"p{i}", "master", "br0")
        _ip("-n", lab.switch_ns, "link", "set", f"p{i}", "up")
        _tc(ns, "eth0", lab.rates_Gbps[i])
        _tc(lab.switch_ns, f"p{i}", lab.rates_Gbps[i])


def _build_tun(state: dict[str, Lab]) -> None:
    lab = state["lab"]
    add_namespace(state, lab.switch_ns)
    delayline.set_sysctl(lab.switch_ns, "net.ipv4.ip_forward", "1")
    for i in range(lab.hosts):
        add_namespace(state, lab.host_ns(i))
    _start_delayline(state)
    for i in range(lab.hosts):
        ns = lab.host_ns(i)
        _ip("-n", ns, "addr", "add", f"{lab.address(i)}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", lab.switch_ns, "link", "set", f"t{i}", "up")
        _ip("-n", lab.switch_ns, "route", "add", f"{lab.address(i)}/32", "dev", f"t{i}")
        _tc(ns, "eth0", lab.rates_Gbps[i])
        _tc(lab.switch_ns, f"t{i}", lab.rates_Gbps[i])


def _start_delayline(state: dict[str, Lab]) -> None:
    lab = state["lab"]
    assert lab.delay_s is not None
    half = lab.delay_s / 2
    spec = delayline.Spec(
        lab=lab.name,
        switch_ns=lab.switch_ns,
        links=tuple(
            delayline.LinkSpec(lab.host_ns(i), f"t{i}", half, lab.jitter_s, half, lab.loss)
            for i in range(lab.hosts)
        ),
        seed=int.from_bytes(os.urandom(4), "little"),
    )
    # by path, with -I: the process lives as long as the lab and needs nothing but the stdlib
    proc = subprocess.Popen(
        [sys.executable, "-I", delayline.__file__, "--lab", lab.name, "--spec", spec.to_json()],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a Ctrl-C at the terminal later must not reach it
    )
    st = _proc_stat(proc.pid)
    state["lab"] = lab = replace(lab, delayline_pid=proc.pid, delayline_start=st[1] if st else None)
    _write_state(lab)
    assert proc.stdout is not None and proc.stderr is not None
    ready, _, _ = select.select([proc.stdout], [], [], DELAYLINE_START_S)
    line = proc.stdout.readline().decode() if ready else ""
    if not line.startswith("ready"):
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
        err = proc.stderr.read().decode().strip()
        raise LabError(
            f"the delay line did not start: {err or f'no answer in {DELAYLINE_START_S:g} s'}",
            field="delay",
        )
    proc.stdout.close()
    proc.stderr.close()
    # It outlives this process (and is re-parented to init); `down` stops it by its recorded
    # pid. Mark the Popen finished so that it does not warn about a running child at exit.
    proc.returncode = 0


# --- down, status -----------------------------------------------------------------------


def lab_down(name: str) -> list[str]:
    """Stop the lab's processes and remove exactly the namespaces it recorded (veths, TUN
    devices, bridges and qdiscs go with them). Works on labs whose `up` was interrupted."""
    check_name(name)
    _require_root()
    lab = load_lab(name)
    with _shielded():
        return _teardown(lab)


def lab_down_all() -> dict[str, list[str]]:
    """`down` every lab with a state file: the recovery path after any interruption."""
    _require_root()
    out: dict[str, list[str]] = {}
    errors = []
    for name in _recorded_names():
        try:
            out[name] = lab_down(name)
        except LabError as exc:
            errors.append(exc.reason)
    if errors:
        raise LabError("; ".join(errors), field="name")
    return out


def lab_status() -> list[dict[str, Any]]:
    out = []
    present = _existing_namespaces()
    for name in _recorded_names():
        try:
            lab = load_lab(name)
        except LabError as exc:
            out.append({"name": name, "healthy": False, "problem": exc.reason})
            continue
        delayline_ok = not lab.emulates_delay or (
            lab.delayline_pid is not None
            and _alive(lab.delayline_pid, lab.delayline_start)
            and _is_delayline(lab.delayline_pid, lab.name)
        )
        namespaces_ok = all(ns in present for ns in lab.namespaces)
        problem = None
        if not lab.complete:
            problem = f"interrupted while being built; `bandwall lab down {name}` removes it"
        elif not namespaces_ok:
            problem = "namespaces missing"
        elif not delayline_ok:
            problem = "delay line not running"
        out.append(
            {
                "name": lab.name,
                "hosts": lab.hosts,
                "rates_Gbps": list(lab.rates_Gbps),
                "delay_s": lab.delay_s,
                "jitter_s": lab.jitter_s,
                "addresses": [lab.address(i) for i in range(lab.hosts)],
                "delayline_pid": lab.delayline_pid,
                "cc": lab.cc,
                "loss": lab.loss,
                "spines": lab.spines,
                "spine_rate_Gbps": lab.spine_rate_Gbps,
                "healthy": problem is None,
                "problem": problem,
            }
        )
    return out


# --- run --------------------------------------------------------------------------------


def _parse_straggler(spec: str | None, hosts: int) -> dict[int, float]:
    if not spec:
        return {}
    out = {}
    for part in spec.split(","):
        rank_s, _, delay_s = part.partition(":")
        try:
            rank, delay = int(rank_s), float(delay_s)
        except ValueError:
            raise LabError(
                f"{part!r} must be RANK:SECONDS, e.g. 2:0.05", field="straggler"
            ) from None
        if not 0 <= rank < hosts or delay < 0:
            raise LabError(
                f"rank must be in [0, {hosts}) and delay >= 0, got {part!r}", field="straggler"
            )
        out[rank] = delay
    return out


def _die_with_parent() -> Callable[[], None]:
    """preexec_fn: the rank gets SIGKILL if `lab run` dies, even by kill -9."""
    parent = os.getpid()

    def hook() -> None:
        delayline.prctl(delayline.PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the prctl took effect
            os._exit(137)

    return hook


def _stop_ranks(procs: list[subprocess.Popen[bytes]], signum: int, grace_s: float) -> None:
    """Send `signum` to every rank's process group, SIGKILL the groups still there later."""
    for sig, wait_s in ((signum, grace_s), (signal.SIGKILL, 5.0)):
        live = [p for p in procs if p.poll() is None]
        if not live:
            return
        for p in live:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(p.poll() is None for p in live):
            time.sleep(0.02)


def _sweep(lab: Lab, mark: str) -> list[int]:
    """Every process in the lab's host namespaces carrying this run's mark (a rank's children
    that left its process group included): SIGKILL."""
    hosts = [lab.host_ns(i) for i in range(lab.hosts)]
    left = [p for p in _pids_in_namespaces(hosts) if _environ_has(p, mark)]
    return _stop(left, grace_s=0.0) if left else []


def lab_run(
    name: str,
    command: list[str],
    straggler: str | None = None,
    timeout_s: float | None = None,
    grace_s: float = GRACE_S,
) -> int:
    """One rank per host with the torchrun environment; rank 0's output is shown, the others'
    errors too. Returns the first non-zero exit code (stopping the other ranks then), 124 on
    timeout, 128 + N after signal N (SIGINT, SIGTERM, SIGHUP), which is forwarded to every
    rank; no rank process, nor any child of one, outlives the call."""
    check_name(name)
    _require_root()
    lab = load_lab(name)
    if not command:
        raise LabError(
            "give the command after --, e.g. bandwall lab run a -- "
            "bandwall bench collectives --sizes 1M:16M",
            field="command",
        )
    if not lab.complete:
        raise LabError(
            f"lab {name!r} was interrupted while being built; `bandwall lab down {name}` "
            "and up again",
            field="name",
        )
    if lab.emulates_delay and not (
        lab.delayline_pid is not None and _alive(lab.delayline_pid, lab.delayline_start)
    ):
        raise LabError(
            f"the delay line of lab {name!r} is not running; `bandwall lab down {name}` and "
            "up again",
            field="name",
        )
    delays = _parse_straggler(straggler, lab.hosts)
    run_id = f"{os.getpid()}.{time.time_ns()}"
    run_mark = f"{RUN_VAR}={run_id}"
    base_env = dict(os.environ)
    procs: list[subprocess.Popen[bytes]] = []
    errs = [tempfile.TemporaryFile() for _ in range(lab.hosts)]  # noqa: SIM115 (closed below)
    # the ranks' temp dir, beside the lab's state (so `lab down` finds it after a kill -9) and
    # removed after the run: torch leaves its inductor cache (torchinductor_USER) and error
    # files there, none of which should outlive the run
    run_tmp = str(_run_tmp(lab.name, run_id))
    code = 0
    try:
        with _interruptible():
            try:
                for i in range(lab.hosts):
                    env = {
                        **base_env,
                        "MASTER_ADDR": lab.address(0),
                        "MASTER_PORT": str(MASTER_PORT),
                        "RANK": str(i),
                        "WORLD_SIZE": str(lab.hosts),
                        "LOCAL_RANK": "0",
                        "LOCAL_WORLD_SIZE": "1",
                        "GLOO_SOCKET_IFNAME": "eth0",
                        "OMP_NUM_THREADS": "1",
                        LAB_VAR: lab.name,
                        "BANDWALL_LAB_RATES_GBPS": ",".join(f"{r:g}" for r in lab.rates_Gbps),
                        "BANDWALL_LAB_DELAY_S": f"{lab.delay_s or 0.0:g}",
                        "BANDWALL_LAB_JITTER_S": f"{lab.jitter_s:g}",
                        "BANDWALL_STRAGGLER_DELAY_S": str(delays.get(i, 0.0)),
                        RUN_VAR: run_id,
                        "TMPDIR": run_tmp,
                    }
                    procs.append(
                        subprocess.Popen(
                            ["ip", "netns", "exec", lab.host_ns(i), *command],
                            env=env,
                            stdout=None if i == 0 else subprocess.DEVNULL,
                            stderr=errs[i],
                            start_new_session=True,
                            preexec_fn=_die_with_parent(),
                        )
                    )
                code = _wait_ranks(procs, timeout_s, grace_s)
            except KeyboardInterrupt:
                code = 128 + signal.SIGINT
                _stop_ranks(procs, signal.SIGINT, grace_s)
            except _Signalled as sig:
                code = 128 + sig.signum
                _stop_ranks(procs, sig.signum, grace_s)
    finally:
        with _shielded():
            _stop_ranks(procs, signal.SIGTERM, grace_s)
            _sweep(lab, run_mark)
        _show_errors(errs, code)
        shutil.rmtree(run_tmp, ignore_errors=True)
    return code


def _wait_ranks(procs: list[subprocess.Popen[bytes]], timeout_s: float | None, grace: float) -> int:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        codes = [p.poll() for p in procs]
        failed = [c for c in codes if c]
        if failed:
            _stop_ranks(procs, signal.SIGTERM, grace)
            return failed[0] if failed[0] > 0 else 128 - failed[0]  # -N: killed by signal N
        if all(c == 0 for c in codes):
            return 0
        if deadline is not None and time.monotonic() > deadline:
            _stop_ranks(procs, signal.SIGKILL, 0.0)
            return 124
        time.sleep(0.02)


def _show_errors(errs: list[Any], code: int) -> None:
    for i, fh in enumerate(errs):
        try:
            fh.seek(0)
            text = fh.read().decode(errors="replace")
        finally:
            fh.close()
        lines = [
            ln
            for ln in text.splitlines()
            if not any(n in ln for n in NOISE) and "Warning" not in ln and "warnings.warn" not in ln
        ]
        if lines and (i == 0 or code):
            sys.stderr.write("\n".join(f"[rank {i}] {ln}" if i else ln for ln in lines) + "\n")
