"""`bandwall doctor` and `calibrate --from-trace` as a user meets them: `bandwall.cli.main` as
the console script calls it, and the real command in a pipe; exit status, width, JSON."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bandwall.cli import main
from bandwall.cli.doctor import calibrate_from_trace
from bandwall.errors import ConfigError
from bandwall.measure.doctor import diagnose, fit_gemm_efficiency, html_section
from bandwall.planning.api import plan
from bandwall.planning.request import make_request

DATA = Path(__file__).resolve().parents[1] / "data"
STRAGGLER = DATA / "traces" / "lab-gloo-4hosts-straggler-h2"
LOGS = DATA / "nccl-logs"
CORPUS = Path(__file__).resolve().parent / "corpus"
GDR = str(LOGS / "nccl-1537-roce-gdr-disabled.log")
HEALTHY = str(CORPUS / "dstack-2712-ib-after-libibverbs.log")


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["doctor", *args])
    return code, out.getvalue(), err.getvalue()


def test_exit_status_clean_findings_and_bad_input(tmp_path: Path) -> None:
    assert run(HEALTHY)[0] == 0
    code, out, _ = run(GDR)
    assert code == 1 and "[high] GPUDirect RDMA is off" in out
    assert run(GDR, "--fail-on", "critical")[0] == 0
    assert run(GDR, "--fail-on", "never")[0] == 0
    assert run(GDR, "--fail-on", "medium")[0] == 1
    code, _, err = run(str(tmp_path / "missing.log"))
    assert code == 2 and err.startswith("error: PATHS:") and err.count("\n") == 1
    code, _, err = run(GDR, "--fail-on", "sometimes")
    assert code == 2 and "invalid choice" in err


def test_input_it_cannot_read_is_bad_input_not_a_clean_run(tmp_path: Path) -> None:
    """A binary, an empty file or prose is exit 2 with one line (a CI gate must not pass on
    it), and an empty path never means the current folder (a review found `doctor ''`
    reading the whole checkout)."""
    binary = tmp_path / "core.bin"
    binary.write_bytes(bytes(range(32)) * 64)
    empty = tmp_path / "empty.log"
    empty.write_text("")
    prose = tmp_path / "notes.txt"
    prose.write_text("We trained a model last week and it went fine.\n")
    for path in (binary, empty, prose):
        code, out, err = run(str(path))
        assert code == 2 and out == "" and err.count("\n") == 1, (path, err)
        assert "nothing in" in err and "was understood" in err
    code, _, err = run("")
    assert code == 2 and "an empty path" in err and err.count("\n") == 1


def test_an_empty_or_cut_short_trace_is_no_evidence(tmp_path: Path) -> None:
    """A profiler trace with no usable event (cut short before its first one, an empty event
    list, a folder holding only such a file) is exit 2 with the one 'nothing understood' line,
    not 'no finding' and exit 0 (an audit found all of these passing as clean); beside real
    evidence it is a note on that file and the run goes on."""
    cut = tmp_path / "cut.json"
    cut.write_text('{"traceEvents": [')
    empty = tmp_path / "empty.json"
    empty.write_text('{"traceEvents": []}')
    meta_only = tmp_path / "meta.json"
    meta_only.write_text(
        json.dumps({"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {}}]})
    )
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "rank0.json").write_text('{"traceEvents": [')
    for args in (
        [str(cut)],
        [str(empty)],
        [str(meta_only)],
        [str(empty), "--json"],
        [str(folder)],
        [str(cut), str(empty), "--fail-on", "never"],
        [str(cut), "--model", "llama3-8b", "--gpus", "8"],  # the full CLI
    ):
        code, out, err = run(*args)
        assert code == 2 and out == "" and err.count("\n") == 1, (args, out, err)
        assert err.startswith("error: PATHS: nothing in") and "was understood" in err, err
    code, out, err = run(GDR, str(cut))
    assert code == 1 and "[high] GPUDirect RDMA is off" in out
    assert "1 nccl-log" in out and "trace" not in out.splitlines()[0]
    flat = " ".join(err.split())
    assert "cut.json: not understood: a profiler trace with no usable event" in flat, err
    data = json.loads(run(GDR, str(cut), "--json")[1])
    assert data["trace"] is None
    (item,) = (i for i in data["inputs"] if i["path"] == str(cut))
    assert item["kinds"] == [] and "no usable event" in item["notes"][0]


def test_op_is_checked_against_the_collectives() -> None:
    """`--op nope` is bad input (exit 2, one line naming --op and every collective), on the
    fast path and the full CLI alike; a spelling the model reads (`All-Reduce`) is taken."""
    from bandwall.model.collectives import Op

    ops = tuple(op.value for op in Op)
    for extra in ([], ["--gpu", "H100-SXM"], ["--json"]):
        code, out, err = run(GDR, "--op", "nope", *extra)
        assert code == 2 and out == "" and err.count("\n") == 1, (extra, err)
        assert err.startswith("error: --op: unknown value 'nope'; choose one of:"), err
        assert all(op in err for op in ops), err
    assert run(GDR, "--op", "")[0] == 2
    code, out, _ = run(GDR, "--op", "All-Reduce")
    assert code == 1 and "GPUDirect RDMA is off" in out
    code, help_text, _ = run("--help")
    flat = " ".join(help_text.split())
    assert code == 0 and all(op in flat for op in ops)
    assert "severe. (default: high)" in flat


def test_errors_name_the_inputs_as_the_help_does(tmp_path: Path) -> None:
    """The positional inputs are PATHS in the help: errors about them say `PATHS:`, never an
    option `--paths` that does not exist, on the fast path and the full CLI alike."""
    missing = str(tmp_path / "missing.log")
    for args in ([missing], [missing, "--gpu", "H100-SXM"], [""], [GDR, ""]):
        code, out, err = run(*args)
        assert code == 2 and out == "" and err.count("\n") == 1, (args, err)
        assert err.startswith("error: PATHS: ") and "--paths" not in err, (args, err)
    code, help_text, _ = run("--help")
    assert code == 0 and "PATHS..." in help_text and "--paths" not in help_text


def test_text_fits_80_columns_in_a_pipe() -> None:
    """The real command, stdout a pipe: every line (findings, quotes, tables) <= 80."""
    res = subprocess.run(
        [sys.executable, "-m", "bandwall", "doctor", str(LOGS), str(STRAGGLER)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )
    assert res.returncode == 1, res.stderr
    lines = res.stdout.splitlines() + res.stderr.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "1. [critical]" in res.stdout and "transport (" in res.stdout


def test_quoted_tabs_are_expanded_so_the_width_holds() -> None:
    """A pasted `show_gids` table is tab-separated: a terminal shows each tab as up to 8
    columns, so the quote is folded on the expanded line (nccl#1538's excerpt)."""
    gids = CORPUS / "nccl1538-k8s-roce-version-sysfs-segfault.log"
    res = subprocess.run(
        [sys.executable, "-m", "bandwall", "doctor", str(gids)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80"},
        check=False,
    )
    assert res.returncode == 1 and "mlx5_0" in res.stdout, res.stderr
    assert max(len(line.expandtabs()) for line in res.stdout.splitlines()) <= 80


def test_json_schema_is_stable(tmp_path: Path) -> None:
    code, out, _ = run(str(LOGS), "--json")
    data = json.loads(out)
    assert code == 1 and data["schema"] == "bandwall.doctor/1"
    assert set(data) >= {
        "inputs",
        "findings",
        "hardware",
        "nccl_logs",
        "nccl_tests",
        "trace",
        "plan",
        "notes",
    }
    f = data["findings"][0]
    assert set(f) >= {
        "code",
        "title",
        "severity",
        "confidence",
        "mechanism",
        "reason",
        "impact",
        "impact_source",
        "check",
        "fix",
        "evidence",
        "partial",
        "cost_s",
        "cost_share",
        "cost_basis",
    }
    ev = f["evidence"][0]
    assert set(ev) == {"source", "line", "text", "truncated"}
    assert (
        Path(ev["source"])
        .read_text()
        .splitlines()[ev["line"] - 1]
        .strip()
        .endswith(ev["text"][-20:])
    )
    assert "NaN" not in out and "Infinity" not in out


def test_text_report_ranks_findings_by_cost() -> None:
    code, out, _ = run(str(STRAGGLER), GDR)
    assert code == 1
    first = out.index("1. [high] Straggler: rank 2 on bw-doc-h2")
    assert first < out.index("Exposed communication") < out.index("GPUDirect RDMA is off")
    assert "ms/step" in out and "% of the step" in out
    assert "RoCE without GPUDirect RDMA" in out and "unpriced" in out


def test_html_report_and_escaping(tmp_path: Path) -> None:
    page = tmp_path / "doctor.html"
    code, _, err = run(GDR, "--html", str(page))
    assert code == 1 and "wrote" in err
    html = page.read_text()
    assert "GPUDirect RDMA is off" in html and "<script" not in html
    evil = tmp_path / "evil.log"
    evil.write_text(
        "h:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to <b>x</b>\n"
        "h:1:1 [0] NCCL WARN Bootstrap : no socket interface found\n"
    )
    section = html_section(diagnose([str(evil)]))
    assert "<b>x</b>" not in section and "&lt;b&gt;x&lt;/b&gt;" in section
    assert run(GDR, "--html", str(tmp_path / "no" / "dir.html"))[0] == 2
    assert run(GDR, "--html", str(tmp_path / "x.pdf"))[0] == 2


def test_plan_options_go_to_the_full_cli() -> None:
    code, out, _ = run(str(STRAGGLER), "--json", "--model", "llama3-8b", "--gpus", "8")
    data = json.loads(out)
    assert data["plan"]["measured_step_s"] == pytest.approx(data["trace"]["step_s"])
    assert code == 1 and run(GDR, "--gpu", "H100-SXM")[0] == 1
    code, _, err = run(GDR, "--gpu", "NoSuchGPU")
    assert code == 2 and "--gpu" in err


def test_fit_gemm_efficiency_recovers_a_known_efficiency() -> None:
    req = make_request(model="llama3-8b", gpus=16, tp=1, pp=1, cp=1, zero=1, micro_batch=1)
    truth = float(plan(req.model_copy(update={"gemm_efficiency": 0.55})).metrics["compute_s"])
    fit = fit_gemm_efficiency(truth, req)
    assert fit["gemm_efficiency"] == pytest.approx(0.55, rel=0.01)
    with pytest.raises(ConfigError, match="not the traced job"):
        fit_gemm_efficiency(truth / 50, req)


def test_calibrate_from_trace_needs_the_job() -> None:
    with pytest.raises(ConfigError, match="--model") as err:
        calibrate_from_trace([str(STRAGGLER)], {}, as_json=True)
    assert err.value.field == "model"


def test_a_log_run_and_help_load_nothing_heavy() -> None:
    """Start-up: `bandwall doctor LOG` and `--help` import neither Typer, Pydantic, numpy, rich
    nor the trace reader (the measured times are in the branch report, not asserted here)."""
    heavy = (
        "typer",
        "pydantic",
        "numpy",
        "rich",
        "pandas",
        "torch",
        "bandwall.measure.doctor.trace",
        "bandwall.model",
    )
    for argv in (["doctor", GDR], ["doctor", "--help"]):
        code = (
            "import contextlib, io, json, sys\n"
            "from bandwall.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"  # noqa: E501
            f"    rc = main({argv!r})\n"
            f"print(json.dumps([rc, sorted(m for m in {heavy!r} if m in sys.modules)]))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        rc, loaded = json.loads(out.strip().splitlines()[-1])
        assert loaded == [], (argv, loaded)
        assert rc == (1 if argv[1] == GDR else 0)
