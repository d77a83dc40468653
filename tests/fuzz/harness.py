"""The invariant every fuzzed command must keep, and a sandbox to keep it in.

`check(argv)`: exit 0, or exit 2 with exactly one line on stderr starting `error: `; never a
traceback, never longer than `SECONDS_PER_EXAMPLE`, never more than `MAX_GROWTH_BYTES` of
memory on top of what the test process held before.

`Sandbox`: a temporary working folder, HOME, XDG folders, profile and lab folders, so a
command writes nowhere else; `snapshot()` lists every file with its size and modification
time, and `changed()` tells what differs from the snapshot (the test then allows only the
outputs it named).
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bandwall.cli import main

#: The issue's bound on any hostile input.
SECONDS_PER_EXAMPLE = 20
MAX_GROWTH_BYTES = 500 << 20


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    def fail(*_: object) -> None:
        raise TimeoutError(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@dataclass
class Outcome:
    code: int
    out: str
    err: str


def check(
    argv: list[str], capsys: pytest.CaptureFixture[str], baseline: int | None = None
) -> Outcome:
    """Run `argv` in-process and assert the invariant; returns what it printed."""
    start = baseline if baseline is not None else _peak_bytes()
    with deadline(SECONDS_PER_EXAMPLE):
        code = main(argv)
    captured = capsys.readouterr()
    assert code in (0, 2), (argv, code, captured.err[-2000:])
    assert "Traceback" not in captured.err + captured.out, (argv, captured.err[-2000:])
    if code == 2:
        lines = [line for line in captured.err.splitlines() if line.strip()]
        assert len(lines) == 1, (argv, captured.err[-2000:])
        assert lines[0].startswith("error: "), (argv, captured.err)
    grown = _peak_bytes() - start
    assert grown < MAX_GROWTH_BYTES, (argv, f"peak memory grew {grown / 2**20:,.0f} MiB")
    return Outcome(code, captured.out, captured.err)


class Sandbox:
    """A folder that is cwd, HOME and every bandwall location for the duration."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        for sub in ("home", "work", "xdg-data", "xdg-config", "profiles", "labs"):
            (root / sub).mkdir(exist_ok=True)
        monkeypatch.chdir(root / "work")
        monkeypatch.setenv("HOME", str(root / "home"))
        monkeypatch.setenv("XDG_DATA_HOME", str(root / "xdg-data"))
        monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "xdg-config"))
        monkeypatch.setenv("BANDWALL_PROFILE_DIR", str(root / "profiles"))
        monkeypatch.setenv("BANDWALL_LAB_DIR", str(root / "labs"))
        monkeypatch.delenv("BANDWALL_DB", raising=False)
        monkeypatch.delenv("BANDWALL_CATALOG_DIR", raising=False)

    #: Caches other libraries keep under HOME (matplotlib's font list, built once per user):
    #: not bandwall's writes, and not data.
    CACHES = ("home/.cache",)

    def snapshot(self) -> dict[str, tuple[int, int]]:
        """Every file (size, mtime) and folder (existence) under the sandbox."""
        out = {}
        for dirpath, dirnames, filenames in os.walk(self.root):
            for name in dirnames:
                out[str((Path(dirpath) / name).relative_to(self.root))] = (0, 0)
            for name in filenames:
                p = Path(dirpath) / name
                with contextlib.suppress(OSError):
                    st = p.lstat()
                    out[str(p.relative_to(self.root))] = (st.st_size, st.st_mtime_ns)
        return {k: v for k, v in out.items() if not k.startswith(self.CACHES)}

    def changed(self, before: dict[str, tuple[int, int]]) -> set[str]:
        after = self.snapshot()
        return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
