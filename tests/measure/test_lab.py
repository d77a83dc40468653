"""The emulated cluster, as root: shaped links, the slowest-link finder, and the model
calibrated at one rate predicting runs at another (cross-validation, not self-fit)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bandwall.errors import LabError
from tests.conftest import NEEDS_ROOT, bw, lab_name, netns_names, root_links

pytest.importorskip("torch", reason="lab runs need torch")

TUP, TSL = lab_name("tup"), lab_name("tsl")


@pytest.fixture
def lab_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "BANDWALL_DB": str(tmp_path / "lab.db"),
        "BANDWALL_PROFILE_DIR": str(tmp_path / "profiles"),
        "BANDWALL_LAB_DIR": str(tmp_path / "labs"),
    }


def test_not_root_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from bandwall.measure.lab import netns

    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    with pytest.raises(LabError, match="needs root"):
        netns.lab_up("x", 2)


@pytest.mark.lab
@NEEDS_ROOT
def test_up_status_down_touch_only_their_own(lab_env: dict[str, str]) -> None:
    before_links, before_ns = root_links(), netns_names()
    r = bw(
        "lab", "up", "--hosts", "3", "--rates", "1gbit,1gbit,250mbit", "--name", TUP, env=lab_env
    )
    assert r.returncode == 0, r.stderr
    assert "link latency is not emulated" in r.stdout
    mine = {f"bw-{TUP}-sw", f"bw-{TUP}-h0", f"bw-{TUP}-h1", f"bw-{TUP}-h2"}
    assert mine <= netns_names()
    qd = subprocess.run(
        ["tc", "-n", f"bw-{TUP}-h2", "qdisc", "show", "dev", "eth0"], capture_output=True, text=True
    ).stdout
    assert "tbf" in qd and "250Mbit" in qd
    st = json.loads(bw("lab", "status", "--json", env=lab_env).stdout)
    assert st[0]["name"] == TUP and st[0]["healthy"] and st[0]["rates_Gbps"][2] == 0.25
    again = bw("lab", "up", "--hosts", "2", "--name", TUP, env=lab_env)
    assert again.returncode == 2 and "already exists" in again.stderr
    down = bw("lab", "down", TUP, env=lab_env)
    assert down.returncode == 0 and "removed 4 namespaces" in down.stdout
    assert netns_names() == before_ns
    assert root_links() == before_links


@pytest.mark.lab
@NEEDS_ROOT
def test_failed_up_cleans_up(lab_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from bandwall.measure.lab import netns

    monkeypatch.setattr(netns, "STATE_DIR", Path(lab_env["BANDWALL_LAB_DIR"]))
    calls = {"n": 0}
    real_tc = netns._tc

    def flaky_tc(ns: str, dev: str, rate: float) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise LabError("lab: injected tc failure")
        real_tc(ns, dev, rate)

    monkeypatch.setattr(netns, "_tc", flaky_tc)
    before = netns_names()
    with pytest.raises(LabError, match="injected"):
        netns.lab_up(lab_name("tf"), 3)
    assert netns_names() == before
    assert not (Path(lab_env["BANDWALL_LAB_DIR"]) / f"{lab_name('tf')}.json").exists()


def _run_rate(name: str, rate: str, sizes: str, iters: str, env: dict[str, str]) -> None:
    up = bw("lab", "up", "--hosts", "4", "--rate", rate, "--name", name, env=env)
    assert up.returncode == 0, up.stderr
    try:
        r = bw(
            "lab",
            "run",
            name,
            "--",
            sys.executable,
            "-m",
            "bandwall",
            "bench",
            "collectives",
            "--sizes",
            sizes,
            "--iters",
            iters,
            "--warmup",
            "1",
            "--json",
            env=env,
        )
        assert r.returncode == 0, r.stderr
        t = bw(
            "lab",
            "run",
            name,
            "--",
            sys.executable,
            "-m",
            "bandwall",
            "bench",
            "train",
            "--model",
            "mlp",
            "--iters",
            "5",
            "--warmup",
            "1",
            "--json",
            env=env,
        )
        assert t.returncode == 0, t.stderr
    finally:
        bw("lab", "down", name, env=env)


@pytest.mark.lab
@NEEDS_ROOT
@pytest.mark.quiet
def test_shaped_busbw_and_cross_validation(lab_env: dict[str, str]) -> None:
    """1 Gbit and 200 Mbit: busbw at >= 4 MB never above the rate, median row >= 80% of it;
    calibrate on one rate and predict the other: median error <= 15% (collectives >= 1 MB),
    <= 20% (DDP step)."""
    _run_rate(lab_name("tg"), "1gbit", "1M:16M", "4", lab_env)  # runs 1 (collectives), 2 (train)
    _run_rate(lab_name("tm"), "200mbit", "1M:8M", "3", lab_env)  # runs 3, 4
    from bandwall.measure.bench import Store

    with Store(lab_env["BANDWALL_DB"]) as store:
        for run_id, rate in ((1, 1.0), (3, 0.2)):
            rows = [r for r in store.results(run_id) if r["size_bytes"] >= 4 << 20]
            assert rows and all(r["wrong"] == 0 for r in rows)
            shares = sorted(r["busbw_GBps"] * 8 / rate for r in rows)
            # The shaper caps every row (a burst of 256 kB is < 7% of a 4 MB row). TCP loss
            # recovery behind tbf's drop-tail queue costs single 8 MB rows up to ~25% on a
            # loaded 2-core machine (measured 0.75-0.94 of 200 Mbit), so the floor of
            # LAB-NOTES (>= 80%) holds for the median row, and no row falls below 60%.
            assert shares[-1] <= 1.07, (rate, shares)
            assert shares[0] >= 0.6, (rate, shares)
            assert shares[len(shares) // 2] >= 0.8, (rate, shares)
        train = {1.0: store.train(2)[0], 0.2: store.train(4)[0]}
    for fit_run, fit_name, other_run, other_rate in ((1, "g1", 3, 0.2), (3, "m2", 1, 1.0)):
        cal = bw("calibrate", str(fit_run), "--name", fit_name, "--json", env=lab_env)
        assert cal.returncode == 0, cal.stderr
        assert 0.85 <= json.loads(cal.stdout)["efficiency"] <= 1.0
        val = json.loads(
            bw(
                "validate",
                str(other_run),
                "--fabric",
                f"measured:{fit_name}",
                "--json",
                env=lab_env,
            ).stdout
        )
        assert val["bandwidth_Gbps"] == pytest.approx(other_rate)
        assert val["summary"]["median_abs_error"] <= 0.15, val
        from bandwall.catalog import load_catalog
        from bandwall.measure.calibrate import predict_train

        os.environ["BANDWALL_PROFILE_DIR"] = lab_env["BANDWALL_PROFILE_DIR"]
        try:
            fab = load_catalog().fabric(f"measured:{fit_name}")
        finally:
            del os.environ["BANDWALL_PROFILE_DIR"]
        pred = predict_train(train[other_rate], fab, 4, other_rate)
        assert abs(pred["error"]) <= 0.20, pred


@pytest.mark.lab
@NEEDS_ROOT
def test_links_flags_the_slow_host(lab_env: dict[str, str]) -> None:
    up = bw(
        "lab",
        "up",
        "--hosts",
        "4",
        "--rates",
        "1gbit,1gbit,1gbit,250mbit",
        "--name",
        TSL,
        env=lab_env,
    )
    assert up.returncode == 0, up.stderr
    try:
        r = bw(
            "lab",
            "run",
            TSL,
            "--",
            sys.executable,
            "-m",
            "bandwall",
            "bench",
            "links",
            "--size",
            "2M",
            "--iters",
            "3",
            "--json",
            env=lab_env,
        )
        assert r.returncode == 0, r.stderr
        rows = json.loads(r.stdout)
    finally:
        bw("lab", "down", TSL, env=lab_env)
    assert len(rows) == 12
    slowest = min(rows, key=lambda x: x["bw_GBps"])
    assert 3 in (slowest["src"], slowest["dst"])
    via_slow = [x["bw_GBps"] for x in rows if 3 in (x["src"], x["dst"])]
    others = [x["bw_GBps"] for x in rows if 3 not in (x["src"], x["dst"])]
    assert max(via_slow) < min(others)
