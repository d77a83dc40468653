"""`bandwall doctor` and `calibrate --from-trace` as a user meets them: the commands invoked
in-process on the stored evidence, output read back. The commands are mounted on a local Typer
app here (their registration in cli/app.py is the lead's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from bandwall.cli.doctor import calibrate_from_trace, doctor
from bandwall.errors import ConfigError
from bandwall.measure.doctor import diagnose, fit_gemm_efficiency, html_section
from bandwall.planning.api import plan
from bandwall.planning.request import make_request

DATA = Path(__file__).resolve().parents[1] / "data"
STRAGGLER = DATA / "traces" / "lab-gloo-4hosts-straggler-h2"
LOGS = DATA / "nccl-logs"

cli = typer.Typer()
cli.command("doctor")(doctor)


@cli.command("calibrate-trace")
def _cal(traces: list[str], model: str = "llama3-8b", gpus: str = "8") -> None:
    calibrate_from_trace(traces, {"model": model, "gpus": gpus}, as_json=True)


def run(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args), env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    return res.stdout


def test_text_report_ranks_findings_by_cost() -> None:
    out = run("doctor", str(STRAGGLER), str(LOGS / "nccl-1537-roce-gdr-disabled.log"))
    first = out.index("1. [high] Straggler: rank 2 on bw-doc-h2")
    assert first < out.index("Exposed communication") < out.index("GPUDirect RDMA is off")
    assert "ms/step" in out and "% of the step" in out
    assert "transport (" in out and "RoCE without GPUDirect RDMA" in out
    assert "unpriced" in out  # the GDR fault has no trace of its own job to price it


def test_json_and_html(tmp_path: Path) -> None:
    page = tmp_path / "doctor.html"
    data = json.loads(run("doctor", str(LOGS), "--json", "--html", str(page)))
    codes = {f["code"] for f in data["findings"]}
    assert {"gdr_off", "socket_fallback", "nccl_timeout", "p2p_disabled", "nic_far"} <= codes
    assert data["findings"][0]["severity"] == "critical"
    assert len(data["nccl_logs"]) == 13 and all(i["kinds"] for i in data["inputs"])
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") or "<html" in html
    assert "Doctor" in html and "GPUDirect RDMA is off" in html and "<script" not in html


def test_html_section_escapes(tmp_path: Path) -> None:
    log = tmp_path / "evil.log"
    log.write_text(
        "h:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to <b>x</b>\n"
        "h:1:1 [0] NCCL WARN Bootstrap : no socket interface found\n"
    )
    section = html_section(diagnose([str(log)]))
    assert "<b>x</b>" not in section and "&lt;b&gt;x&lt;/b&gt;" in section


def test_plan_comparison_when_the_job_is_described() -> None:
    data = json.loads(
        run("doctor", str(STRAGGLER), "--json", "--model", "llama3-8b", "--gpus", "8")
    )
    plan_ = data["plan"]
    assert plan_["measured_step_s"] == pytest.approx(data["trace"]["step_s"])
    assert plan_["predicted_step_s"] > 0 and "exposed_error" in plan_
    exposed = next(f for f in data["findings"] if f["code"] == "exposed_comm")
    assert "The model predicts" in exposed["reason"]


def test_bad_paths_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="neither a file nor a folder") as err:
        diagnose([str(tmp_path / "missing")])
    assert err.value.field == "paths"
    res = CliRunner().invoke(cli, ["doctor", str(tmp_path)])
    assert isinstance(res.exception, ConfigError) and "no files" in str(res.exception)


def test_fit_gemm_efficiency_recovers_a_known_efficiency() -> None:
    req = make_request(model="llama3-8b", gpus=16, tp=1, pp=1, cp=1, zero=1, micro_batch=1)
    truth = float(plan(req.model_copy(update={"gemm_efficiency": 0.55})).metrics["compute_s"])
    fit = fit_gemm_efficiency(truth, req)
    assert fit["gemm_efficiency"] == pytest.approx(0.55, rel=0.01)
    assert abs(fit["error"]) < 2e-3
    with pytest.raises(ConfigError, match="not the traced job"):
        fit_gemm_efficiency(truth / 50, req)


def test_calibrate_from_trace_needs_the_job_and_reports_the_fit() -> None:
    with pytest.raises(ConfigError, match="--model") as err:
        calibrate_from_trace([str(STRAGGLER)], {}, as_json=True)
    assert err.value.field == "model"
    res = CliRunner().invoke(cli, ["calibrate-trace", str(STRAGGLER)])
    # the lab's tiny MLP computes far faster than llama3-8b could at any efficiency
    assert isinstance(res.exception, ConfigError) and "not the traced job" in str(res.exception)
