"""docs/scenarios.md is generated from the commands it shows (scripts/scenarios.py): a model
change that moves one of its numbers fails here until the page is regenerated and its prose
re-read (`python scripts/scenarios.py --write`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_scenarios_page_is_what_its_commands_print() -> None:
    spec = importlib.util.spec_from_file_location("scenarios", ROOT / "scripts" / "scenarios.py")
    assert spec is not None and spec.loader is not None
    scenarios = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scenarios)
    page = scenarios.render()
    assert "{{" not in page
    assert (ROOT / "docs" / "scenarios.md").read_text() == page, (
        "docs/scenarios.md is stale: run `python scripts/scenarios.py --write` and re-read it"
    )
