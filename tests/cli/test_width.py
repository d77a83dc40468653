"""Every table a command prints fits an 80-column terminal, with no cell cut short."""

from __future__ import annotations

import pytest

from bandwall.cli import main

COMMANDS = [
    ["plan", "--model", "llama3-70b", "--gpus", "1024"],
    ["plan", "--model", "resnet50", "--gpus", "16", "--preset", "decentralized-geo"],
    ["compare", "--model", "llama3-8b", "--gpus", "64"],
    ["scale", "--model", "llama3-70b", "--gpus", "1k:4k:x2"],
    ["collective", "--sizes", "8,1M,1G", "--ranks", "8,64"],
    ["catalog", "gpus"],
    ["catalog", "fabrics"],
    ["catalog", "providers"],
    ["catalog", "failures"],
    ["catalog", "perf"],
    ["catalog", "power"],
    ["infer", "--model", "llama3-70b"],
    ["compare", "--infer", "--model", "llama3-8b"],
    ["models"],
    ["presets"],
    ["validate", "--published"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_tables_fit_80_columns(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.strip()
    wide = [line for line in out.splitlines() if len(line) > 80]
    assert not wide, f"{len(wide)} lines over 80 columns, e.g. {wide[0]!r}"
    assert "…" not in out, "a cell was cut short"
