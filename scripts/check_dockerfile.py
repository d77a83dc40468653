"""Lint the Dockerfile and check its version (CI: no Docker engine or hadolint here).

    python scripts/check_dockerfile.py   # exit 1 with one line per problem

The rules are the hadolint ones that matter for this image (pinned base, no ADD, a numeric
non-root USER, exec-form ENTRYPOINT/CMD, apt without recommends and with its lists removed,
pip without a cache), plus bandwall's own: the image's VERSION is `bandwall.__version__`,
only pyproject.toml, README.md and src/ are copied (and .dockerignore sends nothing else), and
every `serve --host 0.0.0.0` example carries `--allow-remote` (refused without it).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    out = []
    for line in re.sub(r"\\\n", " ", text).splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


def package_version() -> str:
    init = (ROOT / "src" / "bandwall" / "__init__.py").read_text()
    found = re.search(r'^__version__ = "([^"]+)"', init, re.M)
    if not found:
        raise SystemExit("src/bandwall/__init__.py has no __version__")
    return found.group(1)


def problems(text: str, version: str, ignore: str) -> list[str]:  # noqa: C901
    ins = instructions(text)
    args = dict(r.split("=", 1) for w, r in ins if w == "ARG" and "=" in r)
    bad = []
    base = args.get("BASE_IMAGE", "")
    if not re.fullmatch(r"[\w./-]+:[\w.-]+", base) or base.endswith(":latest"):
        bad.append(f"BASE_IMAGE {base!r} is not pinned to a tag (DL3006/DL3007)")
    if args.get("VERSION") != version:
        bad.append(f"ARG VERSION={args.get('VERSION')} but bandwall.__version__ is {version}")
    labels = " ".join(r for w, r in ins if w == "LABEL")
    if 'org.opencontainers.image.version="${VERSION}"' not in labels:
        bad.append('no LABEL org.opencontainers.image.version="${VERSION}"')
    if any(w == "ADD" for w, _ in ins):
        bad.append("ADD: use COPY (DL3020)")
    users = [r for w, r in ins if w == "USER"]
    if not users or not re.fullmatch(r"[1-9]\d*(:\d+)?", users[-1]):
        bad.append("the last USER must be a numeric non-root uid (DL3002)")
    for word in ("ENTRYPOINT", "CMD"):
        for r in (r for w, r in ins if w == word):
            try:
                ok = isinstance(json.loads(r), list)
            except ValueError:
                ok = False
            if not ok:
                bad.append(f"{word} {r!r} is not in exec (JSON) form (DL3025)")
    for r in (r for w, r in ins if w == "RUN"):
        if "apt-get install" in r:
            if "--no-install-recommends" not in r:
                bad.append("apt-get install without --no-install-recommends (DL3015)")
            if "rm -rf /var/lib/apt/lists" not in r:
                bad.append("apt lists not removed in the same RUN (DL3009)")
        if "pip install" in r and "--no-cache-dir" not in r and "PIP_NO_CACHE_DIR=1" not in text:
            bad.append("pip install keeps its cache (DL3042)")
    for r in (r for w, r in ins if w == "COPY"):
        sources = r.split()[:-1]
        if not set(sources) <= {"pyproject.toml", "README.md", "src", "./src"}:
            bad.append(f"COPY {r!r}: copy only pyproject.toml, README.md and src")
    for line in text.splitlines():
        if re.search(r"serve\b.*--host 0\.0\.0\.0", line) and "--allow-remote" not in line:
            bad.append(f"example refused at run time (needs --allow-remote): {line.strip()}")
    rules = [r.strip() for r in ignore.splitlines() if r.strip() and not r.startswith("#")]
    if rules[:1] != ["*"] or not {"!pyproject.toml", "!README.md", "!src/"} <= set(rules):
        bad.append(".dockerignore must exclude everything (*) but pyproject.toml, README.md, src/")
    return bad


def main() -> int:
    version = package_version()
    ignore = ROOT / ".dockerignore"
    found = problems(
        (ROOT / "Dockerfile").read_text(), version, ignore.read_text() if ignore.exists() else ""
    )
    for p in found:
        print(f"Dockerfile: {p}", file=sys.stderr)
    if not found:
        print(f"Dockerfile: ok (version {version})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
