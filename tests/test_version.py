"""Issue 24 item 3: one version (bandwall.__version__) for `bandwall --version`, the package
metadata (`pip show`) and the image label; the Dockerfile lint CI runs (no Docker engine
here, so the file is parsed)."""

from __future__ import annotations

import importlib.util
import json
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import bandwall
from bandwall.cli import main

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "check_dockerfile", ROOT / "scripts/check_dockerfile.py"
)
assert _spec and _spec.loader
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)


def test_the_version_is_declared_once(capsys: pytest.CaptureFixture[str]) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "bandwall.__version__"}
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"bandwall {bandwall.__version__}"


def test_installed_metadata_says_the_same_version() -> None:
    """What `pip show bandwall` prints, for an install of this checkout (CI's)."""
    # an editable install puts src/ on the path, where setuptools' bandwall.egg-info (no
    # direct_url.json) shadows the installed dist-info: take the one pip wrote
    found = [d for d in metadata.distributions(name="bandwall") if d.read_text("direct_url.json")]
    dist = found[0] if found else metadata.distribution("bandwall")
    url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
    if not url.startswith("file://") or Path(url.removeprefix("file://")).resolve() != ROOT:
        pytest.skip(f"bandwall is installed from {url or 'an index'}, not this checkout")
    assert dist.version == bandwall.__version__


def test_the_dockerfile_passes_its_lint_with_the_package_version() -> None:
    text = (ROOT / "Dockerfile").read_text()
    ignore = (ROOT / ".dockerignore").read_text()
    assert check.problems(text, bandwall.__version__, ignore) == []
    assert "--allow-remote" in text and "--token" in text  # the safe serve example is there


@pytest.mark.parametrize(
    ("old", "new", "flagged"),
    [
        ("ARG VERSION=", "ARG VERSION=9", "ARG VERSION="),
        ("serve --host 0.0.0.0 --allow-remote", "serve --host 0.0.0.0", "needs --allow-remote"),
        ("USER 10001", "USER root", "numeric non-root"),
        ("COPY src ./src", "COPY . ./src", "copy only"),
        ("COPY src ./src", "ADD src ./src", "ADD"),
        ("--no-install-recommends", "", "--no-install-recommends"),
        ("python:3.11.11-slim-bookworm", "python:latest", "not pinned"),
    ],
)
def test_the_lint_catches_each_rule(old: str, new: str, flagged: str) -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert old in text
    found = check.problems(
        text.replace(old, new, 1), bandwall.__version__, (ROOT / ".dockerignore").read_text()
    )
    assert any(flagged in p for p in found), found
    assert check.problems(text, bandwall.__version__, "") != []  # .dockerignore is required
