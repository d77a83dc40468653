"""Every table a command prints fits an 80-column terminal, with no cell cut short."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bandwall.cli import main
from tests.nccl_tests_text import log as nccl_tests_log

COMMANDS = [
    ["plan", "--model", "llama3-70b", "--gpus", "1024"],
    ["plan", "--model", "resnet50", "--gpus", "16", "--preset", "decentralized-geo"],
    ["compare", "--model", "llama3-8b", "--gpus", "64"],
    ["scale", "--model", "llama3-70b", "--gpus", "1k:4k:x2"],
    ["collective", "--sizes", "8,1M,1G", "--ranks", "8,64"],
    # a million ranks, a WAN and a petabyte: 13-digit µs times and halving_doubling/Simple
    [
        "collective",
        "--ranks",
        "1M",
        "--sizes",
        "1,1P",
        "--wan",
        "wan-intercontinental-1g",
        "--nodes-per-site",
        "1",
    ],
    ["catalog", "gpus"],
    ["catalog", "fabrics"],
    ["catalog", "providers"],
    ["catalog", "failures"],
    ["catalog", "perf"],
    ["catalog", "power"],
    ["infer", "--model", "llama3-70b"],
    ["compare", "--infer", "--model", "llama3-8b"],
    ["compare", "--infer", "--model", "llama3-70b"],
    ["models"],
    ["presets"],
    ["validate", "--published"],
    ["sweep", "--model", "llama3-70b", "--gpus", "64:1024:x2", "--tp", "4,8", "--pp", "1,2,4"],
    ["launch", "slurm", "--nodes", "2", "--gpus-per-node", "8"],
    ["launch", "k8s", "--nodes", "2"],
    ["probe"],
    ["--help"],
    ["plan", "--help"],
    # a [high] finding exits 1 by default (--fail-on high): width is what this test checks
    ["doctor", "tests/data/nccl-logs/nccl-451-docker-ib-unopenable.log", "--fail-on", "never"],
]

#: Tables whose first column is a key a user types next, with the command that lists those
#: keys as JSON and the field holding them.
KEYED = [
    (["presets"], "key"),
    (["models"], "key"),
    (["catalog", "gpus"], "name"),
    (["catalog", "fabrics"], "key"),
    (["catalog", "providers"], "key"),
    (["catalog", "failures"], "key"),
    (["catalog", "perf"], "gpu"),
    (["catalog", "power"], "key"),
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


def test_results_list_fits_80_columns_with_a_failed_run(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A failure's message is a sentence: printed under the table, whole, not folded into a
    column a few characters wide."""
    from bandwall.measure.bench.store import Store

    db = str(tmp_path / "r.db")
    error = "rank 1 hung during all_reduce at 4 MiB (timeout 300 s); kept 3 sizes in run 2"
    with Store(db) as s:
        s.finish_run(
            s.start_run("collectives", 4, "gloo", {"hostname": "node-a"}, {}, {}), "complete"
        )
        s.finish_run(
            s.start_run("train", 4, "nccl", {"hostname": "node-b"}, {}, {}), "failed", error
        )
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["results", "list", "--db", db]) == 0
    out = capsys.readouterr().out
    assert not [line for line in out.splitlines() if len(line) > 80]
    assert "…" not in out and "collectives" in out
    assert f"run 2 failed: {error}" in " ".join(out.split())


@pytest.mark.parametrize(("argv", "field"), KEYED, ids=lambda a: " ".join(a) if a else "")
def test_keys_are_never_split_at_80_columns(
    argv: list[str],
    field: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every key the table lists appears whole on one line, between cell borders or spaces
    (issue 24: `ai-factory-i│b`, `llama3-405│b`, `A100-│SXM-8│0GB` were split)."""
    assert main([*argv, "--json"]) == 0
    keys = {str(row[field]) for row in json.loads(capsys.readouterr().out)}
    monkeypatch.setenv("COLUMNS", "80")
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not [line for line in lines if len(line) > 80]
    edge = r"(?:^|[\s│┃])"
    split = [
        k
        for k in keys
        if not any(re.search(edge + re.escape(k) + r"(?:$|[\s│┃])", line) for line in lines)
    ]
    assert not split, f"keys split or missing: {sorted(split)}"


def test_a_sweep_point_keeps_its_values_whole_at_80_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prose cell folds between words, never inside one: the sweep's grid point
    `preset=ai-factory-ib` printed as `preset=ai-fac` / `tory-ib` (a newcomer audit)."""
    monkeypatch.setenv("COLUMNS", "80")
    presets = ["ai-factory-ib", "decentralized-geo", "hyperscaler-vm"]
    argv = ["sweep", "--model", "llama3-70b", "--gpus", "256,512", "--preset", ",".join(presets)]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not [line for line in lines if len(line) > 80]
    for key in presets:
        assert any(f"preset={key}" in line for line in lines), key


@pytest.mark.parametrize(
    ("argv", "keys"),
    [
        (["plan", "--help"], ["ai-factory-spectrum-x", "wan-intercontinental-1g", "xgmi-mi300x"]),
        (["collective", "--help"], ["rail-optimized"]),
        (["doctor", "--help"], ["docs/from-config.md"]),
    ],
)
def test_help_folds_between_words_not_after_hyphens(
    argv: list[str],
    keys: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The choices a help lists are keys a user types: `ai-factory-` / `spectrum-x` was a
    line break inside one (click's and argparse's wrappers break after hyphens)."""
    monkeypatch.setenv("COLUMNS", "80")
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert not [line for line in out.splitlines() if len(line) > 80]
    for key in keys:
        assert key in out, key


def test_results_show_fits_80_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`results show` printed 12 no-wrap columns into 80: every cell cut, the size column
    empty (fuzz round 15). Narrow, it prints one table per op and type."""
    log = tmp_path / "nt.log"
    log.write_text(
        nccl_tests_log(
            "  2147483648     536870912     float     sum      -1  10000.0  214.75  214.75      0"
            "  10000.0  214.75  214.75      0\n"
        )
    )
    db = str(tmp_path / "r.db")
    assert main(["import", "nccl-tests", str(log), "--op", "all_reduce", "--db", db]) == 0
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["results", "show", "1", "--db", db]) == 0
    out = capsys.readouterr().out
    assert not [line for line in out.splitlines() if len(line) > 80], out
    assert "…" not in out and "2G" in out and "214.75" in out, out
