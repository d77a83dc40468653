"""Build, use and remove an emulated cluster of Linux network namespaces.

Layout for a lab NAME with N hosts: a switch namespace `bw-NAME-sw` holding a bridge, and host
namespaces `bw-NAME-h0..h{N-1}`, each joined to the bridge by a veth pair (`eth0` in the host,
`p{i}` on the switch). Each link is shaped in both directions with `tc tbf` (this kernel has
tbf/htb but no netem): host egress on `eth0`, host ingress on the switch port. Addresses come
from 10.213.0.0/16, a range the lab owns. Nothing is created in, or removed from, the root
namespace; `down` removes exactly the namespaces `up` recorded.

Link latency is NOT emulated (no netem here); stragglers are emulated at the rank level with a
per-rank delay (`lab run --straggler RANK:SECONDS`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bandwall.errors import LabError
from bandwall.units import parse_rate_Gbps

STATE_DIR = Path(os.environ.get("BANDWALL_LAB_DIR", "/run/bandwall/labs"))
NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,7}$")
#: LAB-NOTES: tbf needs a large burst or busbw collapses (64 kb gave ~420 Mb/s at 1 gbit).
TBF_BURST = "256kb"
TBF_LATENCY = "50ms"
MASTER_PORT = 29500
NOISE = ("hostname of the client socket cannot be retrieved",)


@dataclass(frozen=True)
class Lab:
    name: str
    hosts: int
    rates_Gbps: tuple[float, ...]
    subnet: str
    namespaces: tuple[str, ...]

    @property
    def switch_ns(self) -> str:
        return f"bw-{self.name}-sw"

    def host_ns(self, i: int) -> str:
        return f"bw-{self.name}-h{i}"

    def address(self, i: int) -> str:
        return f"{self.subnet}.{i + 1}"


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


def _state_path(name: str) -> Path:
    return STATE_DIR / f"{name}.json"


def _existing_namespaces() -> set[str]:
    res = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    return {line.split()[0] for line in res.stdout.splitlines() if line.strip()}


def _subnet_for(name: str) -> str:
    """10.213.K for the lab: the first K no other recorded lab uses."""
    used = set()
    for p in STATE_DIR.glob("*.json") if STATE_DIR.is_dir() else []:
        try:
            used.add(json.loads(p.read_text())["subnet"])
        except (OSError, ValueError, KeyError):
            continue
    for k in range(256):
        if f"10.213.{k}" not in used:
            return f"10.213.{k}"
    raise LabError(
        "all 256 lab subnets in 10.213.0.0/16 are in use; remove a lab first", field="lab"
    )


def parse_rates(hosts: int, rate: str, rates: str | None) -> tuple[float, ...]:
    if rates:
        values = tuple(parse_rate_Gbps(r.strip(), "rates") for r in rates.split(","))
        if len(values) != hosts:
            raise LabError(
                f"{len(values)} rates given for {hosts} hosts; give one per host", field="rates"
            )
        return values
    return (parse_rate_Gbps(rate, "rate"),) * hosts


def lab_up(name: str, hosts: int, rate: str = "1gbit", rates: str | None = None) -> Lab:
    """Create the lab; on any failure (or Ctrl-C) remove what was created so far."""
    _require_root()
    if not NAME_RE.match(name):
        raise LabError(
            f"{name!r} must be 1-8 lowercase letters/digits, starting with a letter", field="name"
        )
    if not 2 <= hosts <= 64:
        raise LabError(f"must be between 2 and 64, got {hosts}", field="hosts")
    if _state_path(name).exists():
        raise LabError(
            f"lab {name!r} already exists; `bandwall lab down {name}` first", field="name"
        )
    shaped = parse_rates(hosts, rate, rates)
    subnet = _subnet_for(name)
    created: list[str] = []
    lab = Lab(name, hosts, shaped, subnet, ())
    taken = _existing_namespaces()
    wanted = [lab.switch_ns] + [lab.host_ns(i) for i in range(hosts)]
    clash = [n for n in wanted if n in taken]
    if clash:
        raise LabError(
            f"namespace {clash[0]!r} exists and is not this lab's; pick another name", field="name"
        )
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _ip("netns", "add", lab.switch_ns)
        created.append(lab.switch_ns)
        _ip("-n", lab.switch_ns, "link", "set", "lo", "up")
        _ip("-n", lab.switch_ns, "link", "add", "br0", "type", "bridge")
        _ip("-n", lab.switch_ns, "link", "set", "br0", "up")
        for i in range(hosts):
            ns = lab.host_ns(i)
            _ip("netns", "add", ns)
            created.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
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
            _tc(ns, "eth0", shaped[i])
            _tc(lab.switch_ns, f"p{i}", shaped[i])
        lab = Lab(name, hosts, shaped, subnet, tuple(created))
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        _state_path(name).write_text(json.dumps(asdict(lab)))
        return lab
    except BaseException:
        for ns in reversed(created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
        raise
    finally:
        signal.signal(signal.SIGINT, old)


def load_lab(name: str) -> Lab:
    path = _state_path(name)
    if not path.exists():
        known = sorted(p.stem for p in STATE_DIR.glob("*.json")) if STATE_DIR.is_dir() else []
        raise LabError(f"no lab {name!r}; labs: {', '.join(known) or 'none'}", field="name")
    d = json.loads(path.read_text())
    return Lab(d["name"], d["hosts"], tuple(d["rates_Gbps"]), d["subnet"], tuple(d["namespaces"]))


def lab_down(name: str) -> list[str]:
    """Remove exactly the namespaces this lab recorded (their veths go with them)."""
    _require_root()
    lab = load_lab(name)
    present = _existing_namespaces()
    removed = []
    for ns in lab.namespaces:
        if ns in present:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
            removed.append(ns)
    _state_path(name).unlink(missing_ok=True)
    return removed


def lab_status() -> list[dict[str, Any]]:
    out = []
    present = _existing_namespaces()
    for p in sorted(STATE_DIR.glob("*.json")) if STATE_DIR.is_dir() else []:
        lab = load_lab(p.stem)
        out.append(
            {
                "name": lab.name,
                "hosts": lab.hosts,
                "rates_Gbps": list(lab.rates_Gbps),
                "addresses": [lab.address(i) for i in range(lab.hosts)],
                "healthy": all(ns in present for ns in lab.namespaces),
            }
        )
    return out


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


def lab_run(
    name: str, command: list[str], straggler: str | None = None, timeout_s: float | None = None
) -> int:
    """One rank per host with the torchrun environment; rank 0's output is shown, the others'
    errors too. Returns the first non-zero exit code, killing the other ranks then."""
    _require_root()
    lab = load_lab(name)
    if not command:
        raise LabError(
            "give the command after --, e.g. bandwall lab run a -- "
            "bandwall bench collectives --sizes 1M:16M",
            field="command",
        )
    delays = _parse_straggler(straggler, lab.hosts)
    base_env = {k: v for k, v in os.environ.items()}
    procs = []
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
            "BANDWALL_LAB": lab.name,
            "BANDWALL_LAB_RATES_GBPS": ",".join(f"{r:g}" for r in lab.rates_Gbps),
            "BANDWALL_STRAGGLER_DELAY_S": str(delays.get(i, 0.0)),
        }
        procs.append(
            subprocess.Popen(
                ["ip", "netns", "exec", lab.host_ns(i), *command],
                env=env,
                stdout=None if i == 0 else subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    code = 0
    try:
        errs = []
        for i, p in enumerate(procs):
            try:
                _, err = p.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
                code = code or 124
            errs.append((i, err))
            if p.returncode and not code:
                code = p.returncode
                for q in procs:
                    if q.poll() is None:
                        q.terminate()
        for i, err in errs:
            lines = [
                ln
                for ln in err.splitlines()
                if not any(n in ln for n in NOISE)
                and "Warning" not in ln
                and "warnings.warn" not in ln
            ]
            if lines and (i == 0 or code):
                sys.stderr.write("\n".join(f"[rank {i}] {ln}" if i else ln for ln in lines) + "\n")
    except KeyboardInterrupt:
        for q in procs:
            q.kill()
        raise
    return code
