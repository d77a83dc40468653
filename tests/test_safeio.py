"""The one input/output layer: bounded, streamed reads and checked, atomic writes."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from bandwall.errors import ConfigError
from bandwall.safeio import (
    MIB,
    atomic_output,
    check_output,
    iter_lines,
    read_bytes,
    read_text,
    write_output,
)


def test_lines_are_streamed_cut_and_cleaned(tmp_path: Path) -> None:
    p = tmp_path / "log.txt"
    p.write_bytes(b"a\x00b\r\n" + b"x" * 100_000 + b"\n\xff\xfeend")
    lines = list(iter_lines(p, field="log", max_line_chars=50))
    assert lines[0] == "a\ufffdb"
    assert lines[1] == "x" * 50
    assert lines[2].endswith("end") and "\ufffd" in lines[2]


def test_lf_crlf_and_a_lone_cr_each_end_a_line_wherever_they_are(tmp_path: Path) -> None:
    """Universal newlines, as `str.splitlines`: a log opening with more than a chunk of CR-only
    progress frames was split on CR throughout, its later LF lines merged (fuzz round 21,
    B3). A CRLF split across two chunks is one line end, not two."""
    from bandwall import safeio

    frames = b"".join(b"\rDownloading: %3d%%" % (i % 100) for i in range(8_000))  # ~150 KB
    body = b"NCCL INFO one\nNCCL INFO two\r\nthree\rfour"
    p = tmp_path / "bar.log"
    p.write_bytes(frames + b"\n" + body)
    lines = list(iter_lines(p, field="log"))
    assert lines[-4:] == ["NCCL INFO one", "NCCL INFO two", "three", "four"]
    assert lines == (frames + b"\n" + body).decode().splitlines()
    # a CRLF straddling a chunk boundary
    chunk = len(next(safeio.iter_chunks(p, field="log")))
    q = tmp_path / "edge.log"
    q.write_bytes(b"a" * (chunk - 1) + b"\r\nb\r")
    assert list(iter_lines(q, field="log", max_line_chars=chunk)) == ["a" * (chunk - 1), "b"]


def test_gzip_is_read_and_a_bomb_stops_at_the_cap(tmp_path: Path) -> None:
    p = tmp_path / "log.gz"
    p.write_bytes(gzip.compress(b"line one\nline two\n"))
    assert read_text(p, field="log") == "line one\nline two"
    bomb = tmp_path / "bomb.gz"
    bomb.write_bytes(gzip.compress(b"\0" * (8 * MIB)))  # 8 MiB of zeros is ~8 KB compressed
    with pytest.raises(ConfigError, match="more than 1 MiB once decompressed") as err:
        read_bytes(bomb, field="log", max_bytes=MIB)
    assert err.value.field == "log"


def test_corrupt_gzip_is_one_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.gz"
    p.write_bytes(b"\x1f\x8b" + b"garbage" * 10)
    with pytest.raises(ConfigError, match="not a valid gzip file"):
        read_bytes(p, field="trace")


@pytest.mark.parametrize("target", ["/dev/zero", "/proc/self/mem", "/sys/kernel"])
def test_special_files_are_refused(target: str) -> None:
    with pytest.raises(ConfigError, match="system file"):
        read_bytes(target, field="log")


def test_fifo_and_folder_are_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        read_bytes(fifo, field="log")
    with pytest.raises(ConfigError, match="is a folder"):
        read_bytes(tmp_path, field="log")
    with pytest.raises(ConfigError, match="no such file"):
        read_bytes(tmp_path / "missing", field="log")


def test_writes_check_the_target_and_are_atomic(tmp_path: Path) -> None:
    out = tmp_path / "grid.csv"
    write_output(out, "a,b\n", field="output", formats=(".csv",))
    assert out.read_text() == "a,b\n"
    with pytest.raises(ConfigError, match=r"unknown format '\.xls'"):
        check_output(tmp_path / "grid.xls", field="output", formats=(".csv", ".json"))
    with pytest.raises(ConfigError, match="does not exist"):
        check_output(tmp_path / "no" / "grid.csv", field="output")
    with pytest.raises(ConfigError, match="is a folder"):
        check_output(tmp_path, field="output")
    with pytest.raises(ConfigError, match="not a regular file"):
        check_output("/dev/full", field="output")
    # an error half-way leaves the old content and no temporary file behind
    with pytest.raises(RuntimeError), atomic_output(out, field="output") as fh:
        fh.write("partial")
        raise RuntimeError("boom")
    assert out.read_text() == "a,b\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.csv"]
