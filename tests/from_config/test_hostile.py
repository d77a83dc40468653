"""Hostile `--from` files: each is refused with exit 2 and one line naming `--from`, never a
traceback, a hang or unbounded memory (issue 23's file-type cases, for this reader)."""

from __future__ import annotations

import gzip
import os
import stat
import sys
from pathlib import Path

import pytest

from bandwall.planning.from_config import MAX_CONFIG_BYTES


def _refused(run_cli, path: str | Path, *words: str) -> str:  # type: ignore[no-untyped-def]
    r = run_cli("plan", "--from", str(path))
    assert r.code == 2, (r.out, r.err)
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --from: "), r.err
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def test_fifo_is_refused_without_blocking(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fifo = tmp_path / "job.sh"
    os.mkfifo(fifo)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    _refused(run_cli, fifo, "not a regular file")


def test_dev_zero_and_proc_are_refused(run_cli) -> None:  # type: ignore[no-untyped-def]
    _refused(run_cli, "/dev/zero", "system file")
    _refused(run_cli, "/proc/self/status", "system file")


def test_folder_and_missing_file(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _refused(run_cli, tmp_path, "folder")
    _refused(run_cli, tmp_path / "nope.toml", "no such file")


def test_huge_config_stops_at_the_cap(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    big = tmp_path / "huge.json"
    with big.open("w") as fh:
        fh.write('{"hidden_size": 1, "pad": "')
        fh.write("x" * (MAX_CONFIG_BYTES + 1024))
        fh.write('"}')
    _refused(run_cli, big, "more than 16 MiB")


def test_gzip_bomb_stops_at_the_cap(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bomb = tmp_path / "bomb.json"
    bomb.write_bytes(gzip.compress(b"{" + b" " * (MAX_CONFIG_BYTES + 4096) + b"}"))
    _refused(run_cli, bomb, "more than 16 MiB", "decompressed")


def test_deep_json(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    deep = tmp_path / "deep.json"
    deep.write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    _refused(run_cli, deep, "nested deeper")


def test_bad_yaml_names_its_line(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "recipe.yaml"
    bad.write_text("trainer:\n  num_nodes: 2\n  devices: [8\nmodel:\n  x: 1\n")
    line = _refused(run_cli, bad, "invalid YAML")
    assert "recipe.yaml:" in line


def test_yaml_alias_bomb_is_bounded(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    levels = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev = chr(ord("a") + i - 1)
        cur = chr(ord("a") + i)
        levels.append(f"{cur}: &{cur} [{', '.join(['*' + prev] * 10)}]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(levels) + "\n")
    _refused(run_cli, bomb, "entries")


def test_deep_yaml(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 5_000 + "]" * 5_000 + "\n")
    _refused(run_cli, deep, "nested")


def test_nul_bytes_in_json(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    nul = tmp_path / "ds.json"
    nul.write_bytes(b'{"train_batch_size": 8,\x00 "bf16": {"enabled": true}}')
    _refused(run_cli, nul, "invalid JSON", "ds.json:1")


def test_binary_garbage(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 64)
    _refused(run_cli, junk, "is a binary file")


def test_an_executable_is_not_a_launch_script(run_cli) -> None:  # type: ignore[no-untyped-def]
    """An executable's strings read as a shell script gave flags that 'contradict' each
    other (`plan --from /bin/ls`); it is refused as binary."""
    _refused(run_cli, Path(sys.executable).resolve(), "is a binary file")


def test_unknown_json_and_toml(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    other = tmp_path / "package.json"
    other.write_text('{"name": "x", "version": "1.0"}')
    _refused(run_cli, other, "does not recognise")
    toml = tmp_path / "bad.toml"
    toml.write_text("[training]\nlocal_batch_size = = 2\n")
    _refused(run_cli, toml, "invalid TOML", "bad.toml:2")


@pytest.mark.parametrize("digits", ["9" * 400, "²", "1e999", "nan"])
def test_absurd_numbers_name_file_line_and_key(run_cli, tmp_path: Path, digits: str) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "train.sh"
    script.write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers {digits}\n")
    line = _refused(run_cli, script, "train.sh:1", "num-layers")
    assert "Traceback" not in line


def test_a_60000_character_line_is_cut_not_parsed_forever(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "long.sh"
    script.write_text("--num-layers " + "x" * 60_000 + "\n")
    _refused(run_cli, script)


def test_doubling_variables_stop_at_a_bound(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # fuzz round 15: 40 lines of A{i}="$A{i-1} $A{i-1}" grew past 10 GB; each value is capped
    lines = ["A0=1"] + [f'A{i}="$A{i - 1} $A{i - 1}"' for i in range(1, 41)]
    lines.append("python pretrain_gpt.py --num-layers $A40 --hidden-size 64")
    script = tmp_path / "bomb.sh"
    script.write_text("\n".join(lines) + "\n")
    _refused(run_cli, script, "--num-layers", "expands past 4,096 characters", "--layers")


def test_a_shift_in_shell_arithmetic_is_not_a_heredoc(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # fuzz round 15: '<<' in $(( 1 << 62 )) was read as a heredoc and skipped the script
    script = tmp_path / "shift.sh"
    script.write_text(
        "TP=$(( 1 << 62 ))\n"
        "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 \\\n"
        "  --num-attention-heads 32 --tensor-model-parallel-size $TP\n"
    )
    _refused(run_cli, script, "--tensor-model-parallel-size", "shell arithmetic", "--tp")
