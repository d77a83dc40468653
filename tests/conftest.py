"""Shared fixtures: the CLI run in-process as a user types it, and the shared/ reference data.

Two session rules (issue 24):

- **No silent skips in CI.** With BANDWALL_CI=1 (set by .ci/run) a test that skips fails
  instead, with its reason: a missing browser or shared/ folder must turn CI red, not pass
  unseen. Only the skips CI's machine cannot avoid (no GPU) are let through.
- **Nothing left in the temp dir.** The session gets its own temporary folder (TMPDIR, so
  subprocesses, spawned ranks and xdist workers use it too); at the end anything in it other
  than pytest's own tmp_path folders is a leftover, named, and the session fails.
"""

from __future__ import annotations

import csv
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from bandwall.cli import main

SHARED = Path(__file__).resolve().parents[2] / "shared"

IN_CI = os.environ.get("BANDWALL_CI") == "1"
#: Skip reasons CI accepts: what no machine of this project's CI has (a GPU).
CI_ALLOWED_SKIPS = ("needs CUDA", "a GPU is here")

#: The session's temp folder, made in `pytest_configure`. pytest-xdist workers (the README's
#: `-n 2`) share the controller's, which they inherit as TMPDIR: the controller checks it once,
#: after every worker has finished.
SESSION_TMP = Path(tempfile.gettempdir())


def _xdist_worker(config: pytest.Config) -> bool:
    """An xdist worker itself (xdist gives it `workerinput`), not a pytest run started under
    one, which inherits the worker's PYTEST_XDIST_* variables but is a session of its own."""
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    global SESSION_TMP
    if _xdist_worker(config):
        return
    SESSION_TMP = Path(tempfile.mkdtemp(prefix="bandwall-tests-"))
    os.environ["TMPDIR"] = str(SESSION_TMP)
    tempfile.tempdir = str(SESSION_TMP)


#: Modules whose setup takes minutes (the 5-fold refit of the published-run constants: about
#: 2-3 minutes on this machine): collected first, so xdist hands them to one worker at the
#: start while the other takes the rest, instead of one worker waiting for them at the end
#: (it ran last and alone: the suite's last ~3 minutes, issue 24).
SLOW_FIRST = ("tests/validation/test_calibration.py",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not item.nodeid.startswith(SLOW_FIRST))  # stable


def _ci_forbids(reason: str) -> bool:
    return IN_CI and not any(ok in reason for ok in CI_ALLOWED_SKIPS)


def _skip_reason(longrepr: object) -> str:
    return str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and not hasattr(rep, "wasxfail") and _ci_forbids(_skip_reason(rep.longrepr)):
        rep.outcome = "failed"
        rep.longrepr = f"BANDWALL_CI=1: skipping is a failure in CI: {_skip_reason(rep.longrepr)}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):  # type: ignore[no-untyped-def]
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and _ci_forbids(_skip_reason(rep.longrepr)):
        rep.outcome = "failed"
        rep.longrepr = f"BANDWALL_CI=1: skipping is a failure in CI: {_skip_reason(rep.longrepr)}"


#: The quiet lab tests' two lock files in the session's temp folder (`pytest_runtest_protocol`).
LAB_LOCKS = ("lab-quiet.turnstile", "lab-quiet.rw")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):  # type: ignore[no-untyped-def]
    """Under xdist a `quiet` lab test measures while the other worker waits between tests.

    The lab measures the model against links on the 2 cores; beside the other worker's
    CPU-bound tests it measured the cores instead: CI failed on a floor whose lower quartile
    sat at 1 ms (a 17.7% α miss) and on a jittered upper quartile 1.6 ms over its reference
    (tolerance 1.58 ms), in two runs in a row. A fair reader-writer lock over two files
    (flock): every test holds the shared side while it runs, a quiet test the exclusive side,
    and the turnstile keeps the other worker's next test from starving it. Only the timing
    measurements are quiet (~3 of the lab's 4 minutes): the rest of the lab overlaps as
    before. The quiet tests still measure their own baselines against whatever else runs."""
    if not _xdist_worker(item.config):
        yield
        return
    import fcntl

    quiet = item.get_closest_marker("quiet") is not None
    turnstile, rw = (open(SESSION_TMP / name, "a") for name in LAB_LOCKS)  # noqa: SIM115
    try:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(rw, fcntl.LOCK_EX if quiet else fcntl.LOCK_SH)
        if not quiet:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        yield
    finally:
        fcntl.flock(rw, fcntl.LOCK_UN)
        fcntl.flock(turnstile, fcntl.LOCK_UN)
        rw.close()
        turnstile.close()


def leftovers(folder: Path) -> list[str]:
    """What the session left in its temp folder, besides pytest's own tmp_path folders and
    the lab's lock files."""
    return sorted(
        p.name
        for p in folder.iterdir()
        if not p.name.startswith("pytest-of-") and p.name not in LAB_LOCKS
    )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _xdist_worker(session.config):
        return
    left = leftovers(SESSION_TMP) if SESSION_TMP.is_dir() else []
    if left:
        session.config.get_terminal_writer().line(
            f"\nleft in the temp dir {SESSION_TMP}: {', '.join(left[:10])}"
            + (f" and {len(left) - 10} more" if len(left) > 10 else ""),
            red=True,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    elif session.exitstatus == pytest.ExitCode.OK:
        shutil.rmtree(SESSION_TMP, ignore_errors=True)


#: The suite is deterministic: each property test draws the same examples every run, so a red
#: CI means a change, not an unlucky draw. `HYPOTHESIS_PROFILE=explore` draws fresh ones
#: (and keeps failures in .hypothesis/ for replay): the way to go looking for new bugs.
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    def _run(*args: str) -> CliResult:
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return _run


def reference_rows(name: str) -> list[dict[str, str]]:
    path = SHARED / "reference" / name
    if not path.is_file():
        pytest.skip(f"shared/reference/{name} not present beside the repo")
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


#: The layout the old defaults gave where a test does not search: plain DP, ZeRO-1.
PINNED = {"tp": 1, "pp": 1, "cp": 1, "ep": 1, "zero": 1}


def plan_of(**fields: object):  # type: ignore[no-untyped-def]
    """A plan from request fields, as `bandwall plan` makes it (unset layout axes searched)."""
    from bandwall.planning.api import plan
    from bandwall.planning.request import make_request

    return plan(make_request(**fields))


#: Network namespaces are global to the kernel: a test run killed mid-lab leaves its
#: namespaces behind, and two runs on one machine share them. Every lab a test makes carries
#: this run's tag so runs never meet (a lab name is at most 8 characters: stem <= 3 + 5).
RUN_TAG = "".join(secrets.choice("0123456789abcdefghijklmnopqrstuvwxyz") for _ in range(5))


def lab_name(stem: str) -> str:
    """A lab name unique to this test run, e.g. `tup` -> `tup3k9a0`."""
    assert 1 <= len(stem) <= 3 and stem.isalpha(), stem
    return stem + RUN_TAG


#: The lab needs root, iproute2 and tc; tests that build one skip without them.
NEEDS_ROOT = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("tc") is None,
    reason="lab tests need root, iproute2 and tc",
)


def bw(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`bandwall ARGS` in a fresh interpreter, as a user (or root) types it."""
    return subprocess.run(
        [sys.executable, "-m", "bandwall", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def netns_names() -> set[str]:
    """The machine's network namespaces (`ip netns list`) but other test runs' labs: those come
    and go with that run (a second CI or a developer's run on the same machine), so a test
    comparing before and after sees only this run's labs and what no lab made."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    names = {line.split()[0] for line in out.splitlines() if line.strip()}
    other_run = re.compile(rf"bw-[a-z]{{1,3}}(?!{RUN_TAG}-)[0-9a-z]{{5}}-")
    return {n for n in names if not other_run.match(n)}


def root_links() -> str:
    """The root namespace's links, to check a lab leaves none behind."""
    return subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout


DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.fixture(scope="session")
def docs_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where tests write the images docs/ shows: a temporary folder, so a test run leaves the
    checkout as it found it; docs/ itself with BANDWALL_WRITE_DOCS=1 (how the committed
    images are made, then looked at)."""
    if os.environ.get("BANDWALL_WRITE_DOCS") == "1":
        return DOCS
    return tmp_path_factory.mktemp("docs")
