"""Every command in the README runs as written, and output the README shows is what the
command prints (`…` stands for anything).

Rules: fenced ```bash blocks are executed line by line when a line starts with `bandwall` or
`sudo bandwall`; other lines (venv, pip, pytest) are the set-up CI itself runs. A block after
`<!-- readme-test: setup -->` is not executed; after `<!-- readme-test: lab -->` it runs only as
root (sudo dropped). A ```text block right after a bash block is the output of its last command.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import lab_name

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"(<!-- readme-test: (\w+) -->\n)?```(\w+)\n(.*?)```", re.S)


def blocks() -> list[tuple[str, str, str]]:
    """(tag, language, body) of every fenced block, in order."""
    return [(m.group(2) or "", m.group(3), m.group(4)) for m in FENCE.finditer(README.read_text())]


def commands() -> list[tuple[str, list[str], str | None]]:
    """(tag, argv, expected output) for every runnable README line."""
    out: list[tuple[str, list[str], str | None]] = []
    found = blocks()
    for i, (tag, lang, body) in enumerate(found):
        if lang != "bash" or tag == "setup":
            continue
        text = body.replace("\\\n", " ")
        lines = [ln.strip() for ln in text.splitlines()]
        runnable = [ln for ln in lines if ln.startswith(("bandwall ", "sudo bandwall "))]
        nxt = found[i + 1] if i + 1 < len(found) else None
        shown = nxt[2] if nxt is not None and nxt[1] == "text" and nxt[0] == "" else None
        for j, line in enumerate(runnable):
            argv = shlex.split(line.split(" #")[0])
            if argv[0] == "sudo":
                argv = argv[1:]
            expected = shown if j == len(runnable) - 1 else None
            out.append((tag, argv, expected))
    return out


def matches(shown: str, actual: str) -> bool:
    """Each shown line, with `…` as a wildcard, matches a line of the output, in order."""
    lines = actual.splitlines()
    at = 0
    for want in (ln for ln in shown.splitlines() if ln.strip()):
        pattern = re.compile(".*".join(re.escape(p) for p in want.split("…")) + r"\Z")
        while at < len(lines) and not pattern.match(lines[at]):
            at += 1
        if at == len(lines):
            return False
        at += 1
    return True


CASES = commands()


def test_the_readme_has_commands_for_every_group() -> None:
    names = {argv[1] for _, argv, _ in CASES}
    assert {"plan", "compare", "sweep", "scale", "infer", "validate", "collective"} <= names
    assert {"catalog", "doctor", "bench", "import", "lab", "calibrate", "plot", "report"} <= names


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("readme")


def _env(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        COLUMNS="80",
        BANDWALL_DB=str(workdir / "results.db"),
        BANDWALL_PROFILE_DIR=str(workdir / "profiles"),
        # the README's `lab down --all` must only meet the labs this test made
        BANDWALL_LAB_DIR=str(workdir / "labs"),
        # as after the README's set-up: the venv's `bandwall` is on PATH (lab run execs it)
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
    )
    return env


def _run(argv: list[str], workdir: Path) -> subprocess.CompletedProcess[str]:
    exe = [sys.executable, "-m", "bandwall", *argv[1:]]
    # the README's relative paths (tests/data/..., examples/...) are relative to the checkout
    args = [str(ROOT / a) if a.startswith(("tests/data/", "examples/")) else a for a in exe]
    return subprocess.run(
        args, cwd=workdir, env=_env(workdir), capture_output=True, text=True, timeout=600
    )


#: The README's commands each worker has run, by index into CASES: a command reads what the
#: ones above it made (`results list` the database `import` wrote), and under pytest-xdist
#: the parametrized commands can land on different workers, each with its own workdir.
_RAN: dict[Path, set[int]] = {}


@pytest.mark.parametrize(
    ("index", "tag", "argv", "expected"),
    [(i, *c) for i, c in enumerate(CASES) if c[0] != "lab"],
    ids=[" ".join(c[1][:3]) for c in CASES if c[0] != "lab"],
)
def test_readme_command_runs(
    index: int, tag: str, argv: list[str], expected: str | None, workdir: Path
) -> None:
    if argv[1] in ("bench", "probe", "monitor") or (argv[1] == "bench"):
        pytest.importorskip("torch", reason="bench needs the bench extra")
    ran = _RAN.setdefault(workdir, set())
    for i, (earlier_tag, earlier, _) in enumerate(CASES[:index]):
        if i not in ran and earlier_tag != "lab":  # what a reader would have run first
            _run(earlier, workdir)
            ran.add(i)
    ran.add(index)
    r = _run(argv, workdir)
    assert r.returncode == 0, f"{' '.join(argv)}\n{r.stderr}"
    if expected is not None:
        assert matches(expected, r.stdout), f"{' '.join(argv)} printed:\n{r.stdout}"


@pytest.mark.lab
def test_readme_lab_block_runs(workdir: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the lab needs root")
    block = [c for c in CASES if c[0] == "lab"]
    # the README's lab names, tagged with this run's (namespaces are global to the kernel)
    ours = {a[a.index("--name") + 1]: "" for _, a, _ in block if a[1:3] == ["lab", "up"]}
    ours = {n: lab_name(n) for n in ours}
    block = [(t, [ours.get(w, w) for w in a], e) for t, a, e in block]
    made = list(ours.values())
    try:
        for _, argv, expected in block:
            r = _run(argv, workdir)
            assert r.returncode == 0, f"{' '.join(argv)}\n{r.stdout}\n{r.stderr}"
            if expected is not None:
                assert matches(expected, r.stdout)
    finally:  # a failed line must not leave its lab behind for the next run
        for name in made:
            _run(["bandwall", "lab", "down", name], workdir)


def test_readme_python_blocks_run() -> None:
    for tag, lang, body in blocks():
        if lang == "python" and tag != "template":
            exec(compile(body, "README.md", "exec"), {})
