"""Issue 24 item 7: install hints print as written (Rich once ate `[bench]`) and say what the
extra really pins (a range, not torch==2.13.0)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _without_torch(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a fresh interpreter where `import torch` fails, as on a planning-only
    install."""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from bandwall.cli import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )


def test_probe_without_torch_names_the_bench_extra() -> None:
    r = _without_torch(["probe"])
    assert r.returncode == 0, r.stderr
    assert "pip install 'bandwall[bench]'" in r.stdout


def test_bench_without_torch_names_the_extra_and_its_range(tmp_path: Path) -> None:
    r = _without_torch(
        ["bench", "collectives", "--local", "2", "--sizes", "1K", "--db", str(tmp_path / "r.db")]
    )
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert "pip install 'bandwall[bench]'" in line and "torch>=2.4,<3" in line
    assert "pins torch==" not in line


@pytest.mark.parametrize("text", ["pip install 'bandwall[web]'", "[bold]not a style[/bold]"])
def test_the_console_prints_brackets_as_text(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    from bandwall.report.text import console, err_console

    console.print(text)
    err_console.print(text)
    out = capsys.readouterr()
    assert out.out.strip() == text and out.err.strip() == text
