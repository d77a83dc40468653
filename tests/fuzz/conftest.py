"""The web fuzz's seeded database lives in a folder removed at the session's end (before the
session checks its temp dir for leftovers)."""

from __future__ import annotations

import shutil

import pytest

#: Folders the fuzz modules made at import, removed when the session finishes.
SESSION_FOLDERS: list[str] = []


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for folder in SESSION_FOLDERS:
        shutil.rmtree(folder, ignore_errors=True)
