"""The package's shape: import contracts, lazy heavy imports, the public API."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import bandwall

HEAVY = ("torch", "matplotlib", "fastapi", "uvicorn")


def test_import_contracts_hold() -> None:
    """catalog/workloads → model → plan → report/web/cli, measure beside; no cycles
    (import-linter contracts in pyproject.toml)."""
    exe = Path(sys.executable).parent / "lint-imports"
    lint = subprocess.run([str(exe), "--no-cache"], capture_output=True, text=True, check=False)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "0 broken" in lint.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["plan", "--model", "llama3-8b", "--gpus", "64"],
        ["plan", "--model", "llama3-8b", "--gpus", "64", "--json"],
        ["sweep", "--model", "llama3-8b", "--gpus", "64,128", "--tp", "8"],
        ["compare", "--model", "resnet50", "--gpus", "16"],
        ["scale", "--model", "llama3-8b", "--gpus", "64:128:x2"],
        ["collective", "--sizes", "8,1M", "--ranks", "8"],
        ["catalog", "gpus"],
        ["doctor", "--help"],
        ["infer", "--model", "llama3-8b"],
    ],
)
def test_commands_import_no_heavy_modules(argv: list[str]) -> None:
    code = (
        "import json, sys\n"
        "from bandwall.cli import main\n"
        f"rc = main({argv!r})\n"
        f"print(json.dumps([rc, sorted(m for m in {HEAVY!r} if m in sys.modules)]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    rc, loaded = json.loads(out.strip().splitlines()[-1])
    assert rc == 0
    assert loaded == [], f"{argv} imported {loaded}"


def test_public_api_resolves_and_is_lazy() -> None:
    code = "import sys, bandwall; print('numpy' in sys.modules, 'pydantic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]  # `import bandwall` loads nothing heavy
    for name in bandwall.__all__:
        assert getattr(bandwall, name) is not None
    with pytest.raises(AttributeError):
        bandwall.no_such_name  # noqa: B018


def test_store_commands_do_not_import_torch(tmp_path: Path) -> None:
    """`import` and `results` read and write the store: no torch (seconds of start-up). The
    bench runner used to import it at module level for two function lookups and @record."""
    db = tmp_path / "r.db"
    log = Path(__file__).parent / "data" / "nccl-tests" / "a40-nvlink-sys-node-all-reduce.log"
    for argv in (
        ["import", "nccl-tests", str(log), "--db", str(db)],
        ["results", "list", "--db", str(db), "--json"],
    ):
        code = (
            "import json, sys\nfrom bandwall.cli import main\n"
            f"rc = main({argv!r})\nprint(json.dumps([rc, 'torch' in sys.modules]))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        assert json.loads(out.strip().splitlines()[-1]) == [0, False], argv
