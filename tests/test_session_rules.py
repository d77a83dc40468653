"""The session rules of tests/conftest.py hold under the README's `-n 2`: a file one xdist
worker leaves in the temp dir fails the whole run and is named, and a clean run removes the
folder. Each case runs a small pytest session of its own, with this suite's conftest, in a
subprocess whose temp dir is pytester's (so a failing inner run leaves nothing here)."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = Path(__file__).with_name("conftest.py")

pytest_plugins = ["pytester"]


def _run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, body: str
) -> tuple[pytest.RunResult, Path]:
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_inner=body)
    tmp = pytester.mkdir("tmp")
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.delenv("BANDWALL_CI", raising=False)
    return pytester.runpytest_subprocess("-n", "2", "-p", "xdist", "-q"), tmp


def test_a_file_left_by_a_worker_fails_the_run_and_is_named(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, _ = _run(
        pytester,
        monkeypatch,
        """
import tempfile
from pathlib import Path

def test_leaves_a_file():
    Path(tempfile.gettempdir(), "stray-output.bin").write_bytes(b"x")

def test_other():
    pass
""",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "stray-output.bin" in result.stdout.str()
    result.assert_outcomes(passed=2)


def test_a_clean_run_passes_and_removes_its_folder(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, tmp = _run(
        pytester,
        monkeypatch,
        """
def test_one(tmp_path):
    (tmp_path / "a").write_text("x")

def test_two():
    pass
""",
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert [p.name for p in tmp.iterdir()] == []
