"""`infer` and `compare --infer` as a user meets them: the command run in-process on an
80-column console, errors as one line, the chart written lazily."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from bandwall.cli.infer import infer, run_compare_infer

app = typer.Typer(pretty_exceptions_enable=False, rich_markup_mode=None)
app.command()(infer)


@app.command("cmp")
def _cmp(chart: str | None = None, as_json: bool = False) -> None:
    run_compare_infer(
        {"gpus": "8"},
        ["ai-factory-ib", "decentralized-geo"],
        models=["llama3-8b", "llama3-70b"],
        chart=chart,
        as_json=as_json,
    )


def test_infer_prints_latency_cost_and_energy_in_80_columns() -> None:
    res = CliRunner().invoke(
        app, ["infer", "--model", "llama3-8b", "--gpus", "8"], env={"COLUMNS": "80"}
    )
    assert res.exit_code == 0, res.output
    for text in ("time to first token", "inter-token latency", "per million", "J/token"):
        assert text in res.output
    assert all(len(line) <= 80 for line in res.output.splitlines())
    assert "…" not in res.output


def test_infer_json_has_the_metrics() -> None:
    res = CliRunner().invoke(app, ["infer", "--gpus", "8", "--prompt-tokens", "512", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["prompt_tokens"] == 512
    for key in (
        "ttft_s",
        "itl_s",
        "tokens_per_s_per_gpu",
        "cost_per_million_tokens_usd",
        "joules_per_token",
        "co2_g_per_million_tokens",
    ):
        assert data[key] > 0


def test_compare_infer_table_fits_and_chart_is_written(tmp_path: Path) -> None:
    args = ["cmp"]
    has_mpl = importlib.util.find_spec("matplotlib") is not None
    chart = tmp_path / "infer.png"
    if has_mpl:
        args += ["--chart", str(chart)]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    assert "decentralized-geo" in res.output and "$/Mtok" in res.output
    assert all(len(line) <= 80 for line in res.output.splitlines())
    assert "…" not in res.output
    if has_mpl:
        assert chart.stat().st_size > 1000


def test_bad_value_names_the_field() -> None:
    from bandwall.errors import ConfigError

    res = CliRunner().invoke(app, ["infer", "--output-tokens", "0"])
    assert res.exit_code != 0
    assert isinstance(res.exception, ConfigError)
    assert res.exception.field == "output_tokens"


@pytest.mark.parametrize(
    ("args", "field", "words"),
    [
        (["--tp", "8", "--pp", "2"], "pp", "16 GPUs, more than --gpus 8"),
        (["--tp", "3"], "tp", "does not divide"),
        (["--tp", "16"], "tp", "more than --gpus 8"),
    ],
)
def test_a_replica_the_request_fixes_must_exist(args: list[str], field: str, words: str) -> None:
    """A review found `--tp 8 --pp 2` on 8 GPUs priced as '0 x 16 H100' and `--tp 3` accepted
    for 64 heads; plan refuses both, so infer does too."""
    from bandwall.errors import LayoutError

    res = CliRunner().invoke(app, ["infer", "--model", "llama3-70b", "--gpus", "8", *args])
    assert isinstance(res.exception, LayoutError), res.output
    assert res.exception.field == field and words in str(res.exception)


def test_not_fitting_says_what_the_weights_need_on_these_gpus() -> None:
    from bandwall.errors import LayoutError

    res = CliRunner().invoke(app, ["infer", "--model", "llama3-70b", "--gpus", "1"])
    assert isinstance(res.exception, LayoutError)
    assert "need 141.1 GB per GPU spread over all 1 (tp 1 x pp 1)" in str(res.exception)


def test_infer_imports_no_plotting() -> None:
    code = (
        "import sys, typer\n"
        "from bandwall.cli.infer import infer\n"
        "app = typer.Typer(); app.command()(infer)\n"
        "app(['--gpus', '8', '--json'], standalone_mode=False)\n"
        "print('matplotlib' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.parametrize(
    "flag",
    [
        "--pue",
        "--grid-region",
        "--price-per-kwh",
        "--power-cap-w",
        "--dataset",
        "--request-rate",
        "--scenario",
        "--runtime",
        "--weight-format",
        "--remote-client",
        "--max-ttft-ms",
    ],
)
def test_serving_and_energy_options_exist(flag: str) -> None:
    res = CliRunner().invoke(app, ["infer", "--help"], env={"COLUMNS": "200"})
    assert flag in res.output


@pytest.mark.parametrize("flag", ["--stack", "--cuda-graphs", "--fp8-recipe", "--global-batch"])
def test_training_only_options_are_not_offered(flag: str) -> None:
    res = CliRunner().invoke(app, ["infer", "--help"], env={"COLUMNS": "200"})
    assert flag not in res.output


def test_server_scenario_prints_percentiles_in_80_columns() -> None:
    args = ["infer", "--model", "llama3-8b", "--gpus", "2", "--dataset", "sharegpt"]
    res = CliRunner().invoke(app, [*args, "--request-rate", "20"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    for text in ("sharegpt", "server at 20 requests/s", "p99", "p50"):
        assert text in res.output
    assert all(len(line) <= 80 for line in res.output.splitlines())


def test_power_cap_is_printed() -> None:
    args = ["infer", "--model", "llama3-8b", "--gpus", "1", "--power-cap-w", "400"]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    assert "capped at 400 W" in res.output


def test_server_without_a_rate_names_the_field() -> None:
    from bandwall.errors import ConfigError

    res = CliRunner().invoke(app, ["infer", "--scenario", "server"])
    assert isinstance(res.exception, ConfigError)
    assert res.exception.field == "request_rate_per_s"


def test_a_server_serves_what_arrives() -> None:
    """At 10 requests/s a replica serves 10 x the mean output tokens per second, and the cost
    per token is the GPU-hours over those (a review found 3,552 tok/s reported for 2,944
    arriving, the cost 17% low), whatever concurrency its slots allow."""
    res = CliRunner().invoke(
        app,
        [
            "infer", "--model", "llama2-70b", "--gpus", "8", "--precision", "fp8",
            "--scenario", "server", "--request-rate", "10", "--json",
        ],
    )  # fmt: skip
    r = json.loads(res.stdout)
    assert r["tokens_per_s"] == pytest.approx(10 * r["output_tokens"])
    gpu_usd_per_s = r["price_per_gpu_hour_usd"] * 8 / 3600
    assert r["cost_per_million_tokens_usd"] == pytest.approx(
        gpu_usd_per_s / r["tokens_per_s"] * 1e6
    )


def test_compare_infer_takes_the_serving_options_infer_takes(run_cli) -> None:  # type: ignore[no-untyped-def]
    """`compare --infer --request-rate 5` prices the server scenario on each preset as `infer
    --request-rate 5` does on one; without --infer the option would be ignored, so it is
    refused."""
    import json

    args = ("--gpus", "8", "--request-rate", "5", "--dataset", "sharegpt", "--json")
    rows = json.loads(run_cli("compare", "--infer", "--presets", "ai-factory-ib", *args).out)
    alone = json.loads(run_cli("infer", "--preset", "ai-factory-ib", *args).out)
    for key in ("scenario", "request_rate_per_s", "dataset", "ttft_p90_s", "tokens_per_s"):
        assert rows[0][key] == alone[key], key
    assert rows[0]["scenario"] == "server" and rows[0]["request_rate_per_s"] == 5
    r = run_cli("compare", "--request-rate", "5")
    assert r.code == 2 and "--request-rate" in r.err and "add --infer" in r.err
