"""A real run with one slowed rank, recorded by torch.profiler and diagnosed: on loopback
(gloo across local processes, always) and in the lab (gloo across network namespaces, as
root). Doctor must name the slowed rank and host, and state the exposed-communication share
within 10% of what the trace itself shows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bandwall.measure.doctor import analyze_job, diagnose
from tests import conftest
from tests.conftest import NEEDS_ROOT, lab_name

from .test_trace import reference_exposed_share

DTR = lab_name("dtr")

pytest.importorskip("torch", reason="recording traces needs torch")

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def record(out: Path, *args: str, timeout: float = 240) -> list[Path]:
    res = subprocess.run(
        [sys.executable, "-m", "bandwall.measure.doctor.profile", "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ENV,
        check=False,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return sorted(out.glob("trace-rank*.json"))


@pytest.mark.slow
def test_loopback_run_with_a_slowed_rank(tmp_path: Path) -> None:
    traces = record(
        tmp_path,
        "--local",
        "2",
        "--straggler",
        "1:0.25",
        "--steps",
        "4",
        "--warmup",
        "1",
        "--depth",
        "2",
    )
    assert len(traces) == 2
    job = analyze_job(traces)
    assert job.straggler is not None and job.straggler.rank == 1
    assert job.straggler_excess_s == pytest.approx(0.25, rel=0.2)
    ref = [reference_exposed_share(p) for p in traces]
    assert job.exposed_share == pytest.approx(sum(ref) / len(ref), rel=0.10)
    top = diagnose([str(tmp_path)]).findings[0]
    assert top.code == "straggler" and "rank 1" in top.title


@pytest.mark.lab
@NEEDS_ROOT
def test_lab_run_names_the_slow_host(tmp_path: Path) -> None:
    env = {**ENV, "BANDWALL_LAB_DIR": str(tmp_path / "labs"), "BANDWALL_DB": str(tmp_path / "db")}

    def bw(*args: str) -> subprocess.CompletedProcess[str]:
        return conftest.bw(*args, env=env)

    up = bw("lab", "up", "--hosts", "3", "--rate", "1gbit", "--name", DTR)
    assert up.returncode == 0, up.stderr
    try:
        out = tmp_path / "traces"
        run = bw(
            "lab",
            "run",
            DTR,
            "--straggler",
            "1:0.2",
            "--timeout",
            "240",
            "--",
            sys.executable,
            "-m",
            "bandwall.measure.doctor.profile",
            "--out",
            str(out),
            "--steps",
            "4",
            "--warmup",
            "1",
        )
        assert run.returncode == 0, run.stderr[-2000:]
    finally:
        down = bw("lab", "down", DTR)
    assert down.returncode == 0, down.stderr
    traces = sorted(out.glob("trace-rank*.json"))
    job = analyze_job(traces)
    assert job.straggler is not None
    assert (job.straggler.rank, job.straggler.host) == (1, f"bw-{DTR}-h1")
    ref = [reference_exposed_share(p) for p in traces]
    assert job.exposed_share == pytest.approx(sum(ref) / len(ref), rel=0.10)
