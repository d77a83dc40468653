"""`bandwall calibrate --from-log LOG --from CONFIG --name NAME` and `plan --profile NAME`:
one compute-efficiency constant fitted on two thirds of a real log's steps (a fixed SHA-256
rule), checked on the other third, saved as a profile the planner applies."""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path

import pytest

from bandwall.measure.calibrate.compute_profile import split
from bandwall.measure.importers.training_log import Step

DATA = Path(__file__).resolve().parents[1] / "data"
BLOOM = [
    "--from-log",
    str(DATA / "train_logs" / "megatron_bloom176b_tr11.log"),
    "--from",
    str(DATA / "configs" / "megatron" / "tr11-176B-ml.slurm"),
    "--gpu",
    "A100-SXM-80GB",
]


@pytest.fixture
def profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BANDWALL_PROFILE_DIR", str(tmp_path))
    return tmp_path / "compute"


def test_split_holds_out_every_third_step_in_sha256_order() -> None:
    steps = [Step(n, n) for n in range(31215, 31221)]
    fit, held = split(steps)
    order = sorted(range(31215, 31221), key=lambda n: hashlib.sha256(str(n).encode()).hexdigest())
    assert [s.step for s in held] == [order[2], order[5]]
    assert sorted(s.step for s in fit + held) == list(range(31215, 31221))


def test_calibrate_from_a_bloom_log_and_plan_with_the_profile(run_cli, profiles: Path) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("calibrate", *BLOOM, "--name", "jeanzay", "--json")
    assert r.code == 0, r.err
    fit = json.loads(r.out)
    assert (fit["fitted_steps"], fit["held_out_steps"]) == (4, 2)
    assert (
        0 < fit["gemm_efficiency_p10"] <= fit["gemm_efficiency"] <= fit["gemm_efficiency_p90"] <= 1
    )
    # the held-out steps (106.33-107.53 s) are within 1% of the fitted constant's step
    assert fit["held_out_median_abs_error"] < 0.01 and abs(fit["held_out_bias"]) < 0.01
    doc = tomllib.loads((profiles / "jeanzay.toml").read_text())["profile"]
    assert doc["gpu"] == "A100-SXM-80GB" and doc["gemm_efficiency"] == pytest.approx(
        fit["gemm_efficiency"], rel=1e-5
    )
    assert doc["fit_rule"].startswith("kept steps ordered by SHA-256")
    plan = run_cli(
        "plan",
        "--from",
        str(DATA / "configs" / "megatron" / "tr11-176B-ml.slurm"),
        "--gpu",
        "A100-SXM-80GB",
        "--profile",
        "jeanzay",
        "--json",
    )
    assert plan.code == 0, plan.err
    # the profile's plan gives the log's median step (106.345 s), within the bisection's 0.1%
    assert json.loads(plan.out)["step_time_s"] == pytest.approx(106.345, rel=0.01)


def test_calibrate_text_output(run_cli, profiles: Path) -> None:  # type: ignore[no-untyped-def]
    r = run_cli("calibrate", *BLOOM, "--name", "jz")
    assert r.code == 0, r.err
    out = " ".join(r.out.split())  # the console wraps at 80 columns
    assert "compute efficiency 0." in out and "held-out steps: median |error|" in out
    assert "use --profile jz" in out


def test_one_step_is_not_enough_to_fit(run_cli, profiles: Path) -> None:  # type: ignore[no-untyped-def]
    r = run_cli(
        "calibrate",
        "--from-log",
        str(DATA / "train_logs" / "torchtitan_llama3_8b_32xh100.log"),
        "--from",
        str(DATA / "configs" / "torchtitan" / "llama3_8b.toml"),
        "--from",
        str(DATA / "configs" / "torchtitan" / "1.llama_3_8b_torchtitan.sh"),
    )
    assert r.code == 2 and "a fit needs at least 3" in r.err


def test_profile_errors(run_cli, profiles: Path) -> None:  # type: ignore[no-untyped-def]
    profiles.mkdir(parents=True)
    (profiles / "h100.toml").write_text(
        "[profile]\nname = 'h100'\ngpu = 'H100-SXM'\ngemm_efficiency = 0.5\n"
        "gemm_efficiency_p10 = 0.49\ngemm_efficiency_p90 = 0.51\ncatalog_gemm_efficiency = 0.8\n"
        "fitted_steps = 4\nheld_out_steps = 2\nfit_median_abs_error = 0.01\n"
        "held_out_median_abs_error = 0.01\nheld_out_bias = 0.0\n"
    )
    r = run_cli("plan", "--profile", "nope")
    assert r.code == 2 and "no compute profile 'nope'" in r.err and "known: h100" in r.err
    r = run_cli("plan", "--profile", "h100", "--gpu", "A100-SXM-80GB")
    assert r.code == 2 and "--profile: profile 'h100' was fitted on H100-SXM" in r.err
    ok = run_cli("plan", "--profile", "h100", "--gpu", "H100-SXM", "--json")
    slow = run_cli("plan", "--gemm-efficiency", "0.5", "--gpu", "H100-SXM", "--json")
    assert ok.code == 0 and json.loads(ok.out)["step_time_s"] == json.loads(slow.out)["step_time_s"]
    (profiles / "bad.toml").write_text(
        "[profile]\nname = 'bad'\ngpu = 'H100-SXM'\ngemm_efficiency = 7\n"
    )
    r = run_cli("plan", "--profile", "bad", "--gpu", "H100-SXM")
    assert r.code == 2 and "gemm_efficiency" in r.err
