"""benchmarks/gpu_check.sh: the first-GPU check. Parsed always; run only where CUDA is."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.sh"


def test_script_parses_and_refuses_a_machine_without_gpus(tmp_path: Path) -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPT)], check=False).returncode == 0
    torch = pytest.importorskip("torch", reason="the check needs torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the full run below covers it")
    res = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert res.returncode == 3 and "no CUDA GPU" in res.stderr


def test_full_check_on_a_gpu(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch", reason="the check needs torch")
    if not torch.cuda.is_available() or shutil.which("bandwall") is None:
        pytest.skip("needs CUDA and the bandwall command")
    out = tmp_path / "gpu"
    env = {**os.environ, "SIZES": "1M:256M", "STEPS": "3", "PYTHON": sys.executable}
    res = subprocess.run(
        ["bash", str(SCRIPT), str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env=env,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    doctor = json.loads((out / "doctor.json").read_text())
    assert doctor["trace"]["ranks"] and doctor["nccl_logs"]
    assert json.loads((out / "validate.json").read_text())["summary"]["rows"] > 0
