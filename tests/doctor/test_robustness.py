"""Bad and hostile input: a clear exit 2 or a bounded, correct reading, never a traceback, hang
or invented number."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from bandwall.errors import ConfigError
from bandwall.measure.doctor import analyze_trace, diagnose
from bandwall.measure.doctor.render import render_text

LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl-logs"
GDR_LOG = LOGS / "nccl-1537-roce-gdr-disabled.log"


def doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bandwall", "doctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("path", ["/dev/zero", "/proc/self/mem"])
def test_special_files_are_refused(path: str) -> None:
    res = doctor(path)
    assert res.returncode == 2 and res.stderr.startswith("error: PATHS:")
    assert "Traceback" not in res.stderr


def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    res = doctor(str(fifo))
    assert res.returncode == 2 and "not a regular file" in res.stderr


def test_corrupt_gzip_and_gzip_bomb(tmp_path: Path) -> None:
    good = gzip.compress(GDR_LOG.read_bytes())
    (tmp_path / "bad.log.gz").write_bytes(good[:10] + b"\xff" * 200)  # invalid deflate blocks
    res = doctor(str(tmp_path / "bad.log.gz"))
    assert res.returncode == 2 and "not a valid gzip file" in res.stderr
    (tmp_path / "cut.log.gz").write_bytes(good[: len(good) // 2])  # cut: read up to the cut
    res = doctor(str(tmp_path / "cut.log.gz"))
    assert res.returncode in (0, 1) and "Traceback" not in res.stderr
    assert "nccl-log" in res.stdout
    bomb = tmp_path / "bomb.log.gz"
    comp = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"0" * (1 << 24)
    with bomb.open("wb") as fh:
        for _ in range(33):  # 528 MiB once inflated, ~0.5 MB on disk
            fh.write(comp.compress(block))
        fh.write(comp.flush())
    res = doctor(str(bomb))
    assert res.returncode == 2 and "MiB once decompressed" in res.stderr


def test_a_nul_byte_does_not_make_a_log_binary(tmp_path: Path) -> None:
    log = tmp_path / "nul.log"
    log.write_bytes(
        GDR_LOG.read_bytes().replace(
            b"NCCL INFO Using network IB", b"\x00NCCL INFO Using network IB", 1
        )
    )
    diag = diagnose([str(log)])
    assert diag.inputs[0].kinds[0] == "nccl-log"
    assert diag.findings[0].code == "gdr_off"


@pytest.mark.parametrize(
    "line",
    [
        "NCCL INFO " * 6000,
        "a:" * 30000,
        "[0] " * 15000,
        "host:1:1 [0] " * 4600,
        "NET/IB : Using " + "[0]mlx5_0:1/IB " * 4000,
        "Channel 00/02 : " + " 0" * 30000,
        "GPU/0 :" + " NET/0 (1/2.0/PHB)" * 3300,
        "x" * 60000,
    ],
)
def test_a_60000_character_line_cannot_stall_the_patterns(tmp_path: Path, line: str) -> None:
    log = tmp_path / "long.log"
    log.write_text("h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n" + line + "\n")
    t0 = time.perf_counter()
    diagnose([str(log)])
    assert time.perf_counter() - t0 < 30


def test_deep_json_and_wrong_typed_trace_fields(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"traceEvents": [' + "[" * 200_000 + "]" * 200_000 + "]}")
    r = analyze_trace(deep)
    assert r.truncated and "nested too deeply" in r.truncated
    odd = tmp_path / "odd.json"
    events = [
        {"ph": "X", "name": "ProfilerStep#1", "ts": "abc", "dur": 10},
        {"ph": "X", "name": "ProfilerStep#2", "ts": 0, "dur": [1], "pid": {"a": 1}},
        {"ph": "X", "name": "ProfilerStep#3", "ts": float("nan"), "dur": 5},
        {"ph": "X", "name": "k", "cat": "kernel", "ts": 1, "dur": -5, "args": {"correlation": "x"}},
        {"ph": "X", "name": "ProfilerStep#4", "ts": 100, "dur": 50, "pid": [1], "tid": None},
        {
            "ph": "X",
            "name": "aten::mm",
            "cat": "cpu_op",
            "ts": 110,
            "dur": 10,
            "pid": [1],
            "tid": None,
        },
    ]
    odd.write_text(
        json.dumps({"traceEvents": events, "bandwall": {"rank": "zero"}}).replace("NaN", "NaN")
    )
    r = analyze_trace(odd)
    assert r.rank is None and len(r.steps) == 1
    assert r.steps[0].step_s == pytest.approx(50e-6) and r.steps[0].compute_s >= 0


def test_garbage_numbers_are_never_printed(tmp_path: Path) -> None:
    """nccl-tests rows with absurd or negative bandwidths are dropped, not compared."""
    table = tmp_path / "table.log"
    table.write_text(
        "# nThread 1 nGpus 8 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20\n"  # noqa: E501
        "#  Rank  0 Group  0 Pid 1 on host1 device  0 [0x1b] NVIDIA H100 80GB HBM3\n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"  # noqa: E501
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"  # noqa: E501
        "   1073741824     268435456     float     sum      -1      0.0 2777777777777777664 2777777777777777664      0      0.0 -16.0 -16.0      0\n"  # noqa: E501
        "# Out of bounds values : 0 OK\n"
    )
    diag = diagnose([str(table)], op="all_reduce", ranks=8)
    out, err = render_text(diag)
    assert "2777777777777777664" not in out + err and "-16%" not in out + err
    assert all(not t.comparison for t in diag.job.tests)


def _peak_rss_kb(path: Path) -> tuple[int, int]:
    """(lines read, peak RSS in KiB) of a fresh process that diagnoses `path`."""
    code = (
        "import resource, sys\n"
        "from bandwall.measure.doctor import diagnose\n"
        f"d = diagnose([{str(path)!r}])\n"
        # VmHWM: this process's own peak (ru_maxrss can carry the forking pytest's peak)
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')]\n"
        "print(d.job.logs[0].lines, int(hwm[0].split()[1]) if hwm else "
        "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True
    )
    lines, rss_kb = map(int, res.stdout.split())
    return lines, rss_kb


@pytest.mark.slow
def test_a_large_log_is_streamed_in_bounded_memory(tmp_path: Path) -> None:
    """A 96 MB log costs no more memory than a 1 MB one, give or take 24 MiB: doctor streams
    it (reading it whole would hold the text and its lines, several times 96 MB). Measured
    against the small log's peak, so the interpreter and imports cancel out."""
    line = "h:1:1 [0] NCCL INFO Channel 00 : 0[1000] -> 1[2000] via P2P/IPC " + "x" * 900 + "\n"
    chunk = line * 1024
    sizes = {"small": 1 << 20, "big": 96 << 20}
    peaks = {}
    for name, size in sizes.items():
        path = tmp_path / f"{name}.log"
        chunks = max(size // len(chunk), 1)
        with path.open("w") as fh:
            for _ in range(chunks):
                fh.write(chunk)
        lines, peaks[name] = _peak_rss_kb(path)
        assert lines == chunks * 1024
    grown = peaks["big"] - peaks["small"]
    assert grown < 24 * 1024, f"peak RSS grew {grown / 1024:,.0f} MiB from a 1 MB to a 96 MB log"


def test_explicit_bad_path_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        diagnose([str(tmp_path / "nope")])
    assert err.value.field == "paths"
    (tmp_path / "d").mkdir()
    with pytest.raises(ConfigError, match="no files"):
        diagnose([str(tmp_path / "d")])


def test_a_folder_of_sources_is_not_read_as_logs(tmp_path: Path) -> None:
    """NCCL's messages sit in its sources as string literals: a folder of code is not
    evidence of a run (it raised hundreds of findings), so doctor skips it and says so, and a
    source named explicitly is still read."""
    src = Path(__file__).resolve().parents[2] / "src" / "bandwall" / "measure" / "doctor"
    code = tmp_path / "code"
    code.mkdir()
    for f in sorted(src.glob("*.py"))[:6]:
        (code / f.name).write_text(f.read_text(encoding="utf-8"), encoding="utf-8")
    only_code = doctor(str(code))
    assert only_code.returncode == 2, only_code.stderr
    assert only_code.stderr.count("\n") == 1
    assert (
        "no logs in" in only_code.stderr
        and "6 source, document or image file(s)" in only_code.stderr
    )
    (code / "rank0.log").write_text(GDR_LOG.read_text(encoding="utf-8"), encoding="utf-8")
    d = diagnose([str(code)])
    assert [i.path for i in d.job.inputs] == [str(code / "rank0.log")]
    assert any("6 source, document or image file(s)" in n for n in d.job.notes)
    named = diagnose([str(code / sorted(p.name for p in code.glob("*.py"))[0])])
    assert len(named.job.inputs) == 1
