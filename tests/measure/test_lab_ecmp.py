"""ECMP in the lab (issue 18 item 5): two leaves, P hashed spine paths, and the flow-collision
model (model/congestion.py) against what the spine counters and the clocks see."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandwall.errors import LabError
from bandwall.measure.lab import ecmp, netns
from tests.conftest import NEEDS_ROOT, lab_name, netns_names

ECU = lab_name("ecu")


def _lab(spines: int, hosts: int = 4, layout: str = "alternate") -> netns.Lab:
    return netns.Lab(
        "e",
        hosts,
        (1.0,) * hosts,
        "10.213.7",
        (),
        spines=spines,
        spine_rate_Gbps=0.2,
        layout=layout,
    )


# --- pure helpers (no root) -----------------------------------------------------------------


def test_layouts_put_ring_neighbours_across_or_together() -> None:
    assert [ecmp.leaf_of(i, 5, "alternate") for i in range(5)] == [0, 1, 0, 1, 0]
    assert [ecmp.leaf_of(i, 5, "packed") for i in range(5)] == [0, 0, 0, 1, 1]
    assert ecmp.ring_crossings(8, "alternate") == (4, 4)
    assert ecmp.ring_crossings(8, "packed") == (1, 1)


def test_each_leaf_routes_every_remote_host_over_every_spine() -> None:
    lab = _lab(spines=3)
    routes = ecmp.leaf_routes(lab, 0)
    assert [r[2] for r in routes] == ["10.213.7.2/32", "10.213.7.4/32"]  # hosts 1, 3: leaf 1
    for r in routes:
        assert r[3::7] == ["nexthop"] * 3
        assert r[5::7] == ["10.213.7.129", "10.213.7.131", "10.213.7.133"]  # leaf 1's ends
        assert r[7::7] == ["s0", "s1", "s2"]
    assert [r[2] for r in ecmp.leaf_routes(lab, 1)] == ["10.213.7.1/32", "10.213.7.3/32"]
    # the spine addresses never meet a host's (.1-.64) or the gateway (.254)
    ends = {ecmp.spine_address(lab.subnet, k, j) for k in (0, 1) for j in range(ecmp.MAX_SPINES)}
    assert len(ends) == 2 * ecmp.MAX_SPINES
    assert all(64 < int(a.rsplit(".", 1)[1]) < ecmp.GATEWAY for a in ends)


def test_loads_are_shares_of_the_bytes() -> None:
    assert ecmp.flow_loads([5_100, 1_700, 0], 4) == [3.0, 1.0, 0.0]
    assert ecmp.flow_loads([0, 0], 3) == [0.0, 0.0]


def test_model_distribution_is_the_congestion_models() -> None:
    pmf = ecmp.max_load_pmf(4, 2)
    assert pmf == pytest.approx({2: 6 / 16, 3: 8 / 16, 4: 2 / 16})
    assert ecmp.expected_max_load(4, 2) == pytest.approx(sum(k * p for k, p in pmf.items()))
    # the ring over 4 alternating hosts: two flows per leaf, two leaves hashing independently
    mean, ring = ecmp.ring_model(_lab(spines=2))
    assert ring == pytest.approx({1: 0.25, 2: 0.75}) and mean == pytest.approx(1.75)
    assert ecmp.ring_model(_lab(spines=2, layout="packed"))[0] == 1.0


def test_leaves_belong_to_their_lab() -> None:
    assert netns._own_namespace("e", "bw-e-l0") and netns._own_namespace("e", "bw-e-l1")
    for other in ("bw-e-l2", "bw-f-l0", "bw-e-l0x", "bw-e-s0"):
        assert not netns._own_namespace("e", other)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--spines", "1"], "spines"),
        (["--spines", "9"], "spines"),
        (["--spines", "2", "--layout", "diagonal"], "layout"),
        (["--spines", "2", "--delay", "1ms"], "delay"),
        (["--spines", "2", "--rates", "1gbit,1gbit"], "rates"),
        (["--spines", "2", "--spine-rate", "fast"], "spine-rate"),
        (["--spine-rate", "1gbit"], "spine-rate"),
        (["--layout", "packed"], "layout"),
        (["--spines", "2", "--name", "../x"], "name"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], field: str, run_cli) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("lab", "up", "--hosts", "2", *args)
    assert r.code == 2, r
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --{field}: "), r.err


# --- the lab (root) ---------------------------------------------------------------------------


@pytest.fixture
def lab_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "labs"
    monkeypatch.setattr(netns, "STATE_DIR", d)
    return d


@pytest.fixture
def build(lab_dir: Path) -> Iterator[object]:
    """ecmp_up under a test-only state directory; whatever the test made is removed."""
    made: list[str] = []

    def up(name: str, **kw: object) -> netns.Lab:
        made.append(name)
        return ecmp.ecmp_up(name, **kw)  # type: ignore[arg-type]

    yield up
    for name in made:
        if (lab_dir / f"{name}.json").exists():
            netns.lab_down(name)


@pytest.mark.lab
@NEEDS_ROOT
def test_cli_up_status_down_removes_exactly_what_it_made(tmp_path: Path) -> None:
    env = {**os.environ, "BANDWALL_LAB_DIR": str(tmp_path / "labs")}
    before = netns_names()

    def bw(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "bandwall", "lab", *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)

    r = bw("up", "--hosts", "4", "--spines", "3", "--rate", "200mbit", "--name", ECU)
    try:
        assert r.returncode == 0, r.stderr
        assert "3 spine paths" in r.stdout
        state = json.loads((tmp_path / "labs" / f"{ECU}.json").read_text())
        made = {f"bw-{ECU}-{n}" for n in ("l0", "l1", "h0", "h1", "h2", "h3")}
        assert set(state["namespaces"]) == made and made <= netns_names()
        assert state["spines"] == 3 and state["complete"]
        routes = subprocess.run(
            ["ip", "-n", f"bw-{ECU}-l0", "route", "show", f"{state['subnet']}.2"],
            capture_output=True,
            text=True,
        ).stdout
        assert routes.count("nexthop via") == 3, routes
        hash_policy = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                f"bw-{ECU}-l0",
                "sysctl",
                "-n",
                "net.ipv4.fib_multipath_hash_policy",
            ],
            capture_output=True,
            text=True,
        ).stdout.strip()
        assert hash_policy == "1"
        st = json.loads(bw("status", "--json").stdout)
        assert st[0]["spines"] == 3 and st[0]["healthy"]
    finally:
        r = bw("down", ECU)
    assert r.returncode == 0, r.stderr
    assert netns_names() == before
    assert not (tmp_path / "labs" / f"{ECU}.json").exists()


@pytest.mark.lab
@NEEDS_ROOT
@pytest.mark.parametrize(("spines", "flows", "sets"), [(2, 8, 24), (4, 12, 20)])
def test_flows_collide_like_balls_into_bins(
    build,  # type: ignore[no-untyped-def]
    spines: int,
    flows: int,
    sets: int,
) -> None:
    """Each set: `flows` fresh TCP connections of 1 MiB from leaf 0's hosts to leaf 1's at
    once. Every flow stays on one path (whole-flow loads), the busiest path's load averages
    the model's E[max] (within 4 standard errors of the model's own spread), and the set ends
    when the busiest path has carried its flows at the spine rate."""
    lab = build(lab_name("ecf"), hosts=4, spines=spines, rate="1gbit", spine_rate="200mbit")
    row, runs = ecmp.flows_vs_model(lab, flows, sets, 1 << 20, seed=spines)
    whole = [all(abs(x - round(x)) < 0.1 for x in r.measured_loads) for r in runs]
    assert sum(whole) >= 0.9 * sets, [r.measured_loads for r in runs]
    se = row.max_load_sd_model / math.sqrt(sets)
    assert abs(row.max_load_measured - row.max_load_model) < 4 * se, row
    assert len({round(max(r.measured_loads)) for r in runs}) > 1, "the hash never varied"
    # load only slows a flow down; the median set keeps to the formula
    assert 0.93 < row.time_ratio < 1.15, row


@pytest.mark.lab
@NEEDS_ROOT
@pytest.mark.quiet
def test_ring_busbw_follows_the_hash_outcome(build) -> None:  # type: ignore[no-untyped-def]
    """gloo all_reduce over 4 hosts on 2 spine paths at the host rate: alternating hosts put
    two ring flows on each leaf's uplinks, which the hash splits or stacks; packed hosts put
    one. The busbw is the line rate over the busiest path's load, whichever it was."""
    for layout in ecmp.LAYOUTS:
        lab = build(lab_name(f"e{layout[0]}"), hosts=4, spines=2, rate="200mbit", layout=layout)
        run = ecmp.run_ring(lab, 4 << 20, iters=5)
        assert all(abs(x - round(x)) < 0.15 for ld in run.loads for x in ld), run
        assert run.busiest in ((1, 2) if layout == "alternate" else (1,)), run
        assert 0.85 < run.busbw_Gbps / run.predicted_Gbps < 1.05, run
        netns.lab_down(lab.name)


def test_library_refuses_bad_spines_before_needing_root() -> None:
    with pytest.raises(LabError, match="between 2 and 8"):
        ecmp.ecmp_up("e", 4, 1)
    with pytest.raises(LabError, match="alternate, packed"):
        ecmp.ecmp_up("e", 4, 2, layout="x")
