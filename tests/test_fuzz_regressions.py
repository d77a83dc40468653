"""Inputs a fresh fuzz campaign (2026-12-06) found breaking the one-line rule, each kept as a
case: exit 2 with one line naming the option (or a clean answer where the input is evidence
to read, not an option), never a traceback; and never a 500 from the web API.

- paths the kernel cannot look up: a name over 255 bytes or a path over 4,095 (pathlib's
  `is_dir()` raises ENAMETOOLONG), or a NUL byte (a ValueError from every `os` call);
- `bandwall collective` options typed by hand without the request schema's bounds (a 400-digit
  --gpus-per-node overflowed float64 in the topology);
- integers of over 4,300 digits in a file (Python's `int()` limit raises a bare ValueError
  from json, tomllib, PyYAML and the nccl-tests header regexes).
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.harness import Sandbox, check
from tests.nccl_tests_text import TABLE_HEADER
from tests.nccl_tests_text import log as nccl_tests_log
from tests.nccl_tests_text import row as nccl_tests_row
from tests.profiler_trace import profiler_steps

LONG_NAME = "a" * 300 + ".json"
LONG_PATH = "/".join(["b" * 200] * 30) + ".json"
NUL = "x\x00y.json"
HUGE = "1" + "0" * 400
DIGITS = "1" * 5000


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    return Sandbox(tmp_path, monkeypatch)


#: (argv with {p} for the hostile path, the option the error must name)
PATH_OPTIONS = [
    (["doctor", "{p}"], "PATHS"),
    (["plan", "--from", "{p}"], "--from"),
    (["sweep", "--from", "{p}", "-o", "g.csv"], "--from"),
    (["validate", "--published", "--reference", "{p}"], "--reference"),
    (["validate", "{p}", "--fabric", "ib-ndr"], "results"),
    (["report", "--doctor", "{p}", "--no-plan", "-o", "r.html"], "--doctor"),
    (["import", "nccl-tests", "{p}", "--db", "r.db"], "log"),
    (["results", "list", "--db", "{p}"], "--db"),
    (["calibrate", "1", "--name", "x", "--db", "{p}"], "--db"),
    (["sweep", "--gpus", "8", "-o", "{p}"], "--output"),
    (["results", "export", "1", "-o", "{p}"], "--output"),
    (["compare", "--infer", "--presets", "ai-factory-ib", "--chart", "{p}"], "--chart"),
]


@pytest.mark.parametrize("path", [LONG_NAME, LONG_PATH, NUL], ids=["name", "path", "nul"])
@pytest.mark.parametrize(
    ("argv", "field"), PATH_OPTIONS, ids=[" ".join(a[:3]) for a, _ in PATH_OPTIONS]
)
def test_paths_the_kernel_cannot_look_up(
    argv: list[str],
    field: str,
    path: str,
    capsys: pytest.CaptureFixture[str],
    sandbox: Sandbox,
) -> None:
    before = sandbox.snapshot()
    out = check([a.replace("{p}", path) for a in argv], capsys)
    assert out.code == 2, out
    assert field in out.err, out.err
    assert any(w in out.err for w in ("NUL", "too long", "at most 4096")), out.err
    assert sandbox.changed(before) == set()


COLLECTIVE = [
    (["--gpus-per-node", HUGE], "--gpus-per-node"),
    (["--nics-per-node", HUGE], "--nics-per-node"),
    (["--tcp-streams", HUGE], "--tcp-streams"),
    (["--qps-per-connection", HUGE], "--qps-per-connection"),
    (["--oversubscription", "nan"], "--oversubscription"),
    (["--oversubscription", "1e309"], "--oversubscription"),
    (["--nodes-per-site", HUGE, "--wan", "internet-10g"], "--nodes-per-site"),
    (["--nodes-per-site", "2097153", "--wan", "internet-10g"], "--nodes-per-site"),
]


@pytest.mark.parametrize(("args", "field"), COLLECTIVE, ids=[a[0] for a, _ in COLLECTIVE])
def test_collective_options_take_the_schema_bounds(
    args: list[str], field: str, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    out = check(["collective", *args, "--sizes", "1K:4K"], capsys)
    assert out.code == 2, out
    assert out.err.startswith(f"error: {field}: "), out.err
    assert len(out.err) < 200, out.err  # the 401-digit value is cut, not echoed whole


#: (file name, content, argv with {f}, exit code, text the answer holds)
HUGE_INTEGERS = [
    ("c.json", '{"hidden_size": ' + DIGITS + "}", ["plan", "--from", "{f}"], 2, "4,300 digits"),
    ("c.toml", "[a]\nb = " + DIGITS + "\n", ["plan", "--from", "{f}"], 2, "4,300 digits"),
    ("c.yaml", "num_layers: " + DIGITS + "\n", ["plan", "--from", "{f}"], 2, "4,300 digits"),
    ("l.yaml", "model:\n  layers: [" + DIGITS + "]\n", ["plan", "--from", "{f}"], 2, "--from"),
    (
        "trace.json",
        '{"traceEvents": [{"ph": "X", "name": "k", "ts": ' + DIGITS + ', "dur": 1}]}',
        ["doctor", "{f}"],
        2,  # its one event has no usable start: no evidence, as an empty trace
        "was understood",
    ),
    (
        "nccl-tests.log",
        "#  nThread 1 nGpus 1 minBytes 8 maxBytes " + DIGITS + " step: 2(factor)\n",
        ["doctor", "{f}"],
        2,
        "was understood",
    ),
    (
        "nccl-tests.log",
        "#  nThread 1 nGpus 1 minBytes 8 maxBytes " + DIGITS + " step: 2(factor)\n",
        ["import", "nccl-tests", "{f}", "--db", "r.db"],
        2,
        "error: ",
    ),
]


@pytest.mark.parametrize(
    ("name", "content", "argv", "code", "shown"),
    HUGE_INTEGERS,
    ids=[f"{n}-{a[0]}" for n, _, a, _, _ in HUGE_INTEGERS],
)
def test_integers_past_pythons_digit_limit(
    name: str,
    content: str,
    argv: list[str],
    code: int,
    shown: str,
    capsys: pytest.CaptureFixture[str],
    sandbox: Sandbox,
) -> None:
    f = sandbox.root / name
    f.write_text(content)
    out = check([a.replace("{f}", str(f)) for a in argv], capsys)
    assert out.code == code, out
    assert shown in out.out + out.err, out


def test_web_config_upload_with_a_huge_integer_is_a_422() -> None:
    pytest.importorskip("fastapi", reason="web tests need the web extra")
    from fastapi.testclient import TestClient

    from bandwall.web import create_app

    client = TestClient(create_app(), base_url="http://127.0.0.1")
    body = {"files": [{"name": "config.json", "content": '{"a": ' + DIGITS + "}"}]}
    r = client.post("/api/from-config", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "from"], r.text


# --- a second round: options outside the request schema -----------------------------------

SECOND = [
    (["plot", "cost", "-o", "p.png", "--presets", ","], "--presets"),
    (["plot", "scaling", "-o", "p.png", "--presets", " "], "--presets"),
    (["report", "--no-plan", "-o", "r.html", "--presets", ","], "--presets"),
    # doctor's own argparse front: one line, not the usage block and 'bandwall doctor: error:'
    (["doctor", "x.log", "--ranks", "abc"], "--ranks"),
    (["doctor", "x.log", "--ranks", "1e3"], "--ranks"),
    (["doctor", "x.log", "--fail-on", "bad"], "--fail-on"),
    (["doctor", "x.log", "--op", "-1e309"], "--op"),
    (["doctor"], "PATHS"),
]


@pytest.mark.parametrize(("argv", "field"), SECOND, ids=[" ".join(a)[:40] for a, _ in SECOND])
def test_options_outside_the_schema(
    argv: list[str], field: str, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    before = sandbox.snapshot()
    out = check(argv, capsys)
    assert out.code == 2, out
    assert field in out.err, out.err
    assert sandbox.changed(before) == set()


@pytest.mark.parametrize(
    ("env", "argv"),
    [
        ("BANDWALL_CATALOG_DIR", ["catalog", "gpus"]),
        ("BANDWALL_CATALOG_DIR", ["plan"]),
        ("BANDWALL_PROFILE_DIR", ["plan", "--fabric", "measured:x"]),
    ],
)
def test_folders_from_the_environment_too_long_to_look_up(
    env: str,
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bandwall.catalog.loader import load_catalog
    from bandwall.rawdata import raw_rows

    monkeypatch.setenv(env, "a" * 300)
    raw_rows.cache_clear()
    load_catalog.cache_clear()
    try:
        out = check(argv, capsys)
    finally:
        raw_rows.cache_clear()
        load_catalog.cache_clear()
    assert out.code == 2, out
    assert f"${env}" in out.err, out.err


def test_serve_on_a_port_in_use_is_one_line(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """uvicorn logged 'ERROR: [Errno 98] ...' and exited with status 3."""
    pytest.importorskip("uvicorn", reason="serve needs the web extra")
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = check(["serve", "--port", str(port)], capsys)
    assert out.code == 2, out
    assert out.err.startswith("error: --port: cannot listen on 127.0.0.1:"), out.err


# --- a third round (2026-12-06, hand-made inputs a helper tried after the explore profile
# found nothing): subnormal bounds, stage layers, stdout, quantiles ------------------------

THIRD = [
    # a subnormal positive passed `gt=0` and printed inf/NaN with exit 0
    (["plan", "--gemm-efficiency", "1e-320"], "--gemm-efficiency"),
    (["plan", "--bucket-MiB", "1e-320"], "--bucket-MiB"),
    (["plan", "--slow-link-speed", "1e-320", "--slow-link-fraction", "0.5"], "--slow-link-speed"),
    (["plan", "--checkpoint-GBps", "1e-320"], "--checkpoint-GBps"),
    (["plan", "--tokens", "1e-300"], "--tokens"),
    (["infer", "--request-rate", "1e-320"], "--request-rate"),
    # stage layers that leave another stage empty, or more than the model has (Megatron
    # asserts; bandwall priced a 40-layer Llama 3 8B)
    (["plan", "--pp", "4", "--pp-first-stage-layers", "40"], "--pp-first-stage-layers"),
    (
        ["plan", "--pp", "2", "--pp-first-stage-layers", "30", "--pp-last-stage-layers", "30"],
        "--pp-first-stage-layers",
    ),
    (["plan", "--pp", "1", "--pp-first-stage-layers", "3"], "--pp-first-stage-layers"),
    # an empty output path was taken as no output
    (["sweep", "--gpus", "8,16", "-o", ""], "--output"),
    # the ranks parser spoke of byte sizes
    (["collective", "--ranks", "1e308"], "--ranks"),
    # click reads a negative argument as an option: the line now says so
    (["results", "show", "-1"], "a negative number where an argument was expected"),
]


@pytest.mark.parametrize(("argv", "field"), THIRD, ids=[" ".join(a)[:40] for a, _ in THIRD])
def test_third_round_inputs_are_one_line(
    argv: list[str], field: str, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    out = check(argv, capsys)
    assert out.code == 2, out
    assert field in out.err and "size" not in out.err, out.err


def test_a_given_first_stage_leaves_the_rest_to_the_others(run_cli) -> None:  # type: ignore[no-untyped-def]
    """Megatron spreads what --decoder-first-pipeline-num-layers leaves over the other
    stages: 29 of Llama 3 8B's 32 on the first of 4 leaves one layer each to the other three
    (the last kept the even split's 8: 37 layers priced)."""
    import json

    args = ["plan", "--gpus", "64", "--pp", "4", "--tp", "1", "--cp", "1", "--zero", "1"]
    args += ["--micro-batch", "1", "--virtual-stages", "1", "--json"]
    even = json.loads(run_cli(*args).out)
    given = json.loads(run_cli(*args, "--pp-first-stage-layers", "29").out)
    # the first stage holds 29 layers where the even split held 8: its compute sets the pace
    ratio = given["step_time_s"] / even["step_time_s"]
    assert 29 / 8 * 0.8 < ratio < 29 / 8 * 1.1, ratio


def test_serving_quantiles_are_never_negative(run_cli) -> None:  # type: ignore[no-untyped-def]
    """A short prompt's TTFT quantile moved the mean's by the marginal per-token cost and went
    below zero (p50 -13.3 ms at 0.5 requests/s)."""
    import json

    for extra in (["--request-rate", "0.5"], ["--tp", "8", "--concurrency", "1"]):
        row = json.loads(run_cli("infer", "--model", "llama3-8b", *extra, "--json").out)
        quantiles = [row[k] for k in ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s")]
        assert 0 < quantiles[0] <= quantiles[1] <= quantiles[2], quantiles


def test_energy_per_token_counts_the_tokens_the_steps_ran(run_cli) -> None:  # type: ignore[no-untyped-def]
    """A budget below one global batch still runs a whole step: J/token is that step's energy
    over its tokens (it was divided by the 1,000 asked: 500 J/token)."""
    import json

    small = json.loads(run_cli("plan", "--gpus", "16", "--tokens", "1000", "--json").out)
    batch = json.loads(run_cli("plan", "--gpus", "16", "--tokens", "4M", "--json").out)
    assert small["joules_per_token"] == pytest.approx(batch["joules_per_token"], rel=1e-9)


_MAIN = "import sys; from bandwall.cli import main; sys.exit(main())"


def _shell(line: str, **env: str) -> Any:
    """`python -c main ARGS` under sh, so a redirection such as `>&-` applies to the child."""
    import os
    import shlex
    import subprocess
    import sys

    command = f"{shlex.quote(sys.executable)} -c {shlex.quote(_MAIN)} {line}"
    return subprocess.run(
        ["sh", "-c", command],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("args", ["models --json", "presets"])
def test_stdout_that_cannot_be_written_is_one_line_and_never_exit_0(args: str) -> None:
    """A full disk (/dev/full) or a closed stdout (`>&-`) ended in a traceback, or in exit 0
    with nothing printed."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    full = _shell(f"{args} > /dev/full")
    assert full.returncode == 1, full.stderr
    assert full.stderr.strip() == (
        "error: output: cannot write to stdout (No space left on device)"
    ), full.stderr
    closed = _shell(f"{args} >&-")
    assert closed.returncode == 1, closed.stderr
    assert closed.stderr.strip() == "error: output: cannot write to stdout (stdout is closed)"


def test_a_stdout_without_unicode_still_prints_tables() -> None:
    """PYTHONIOENCODING=ascii (or LANG=C on an old Python) crashed every table on '×'."""
    r = _shell("plan --gpus 16", PYTHONIOENCODING="ascii")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "16 ? H100-SXM" in r.stdout and "MFU" in r.stdout


def test_scale_leaves_out_counts_that_cannot_run(run_cli) -> None:  # type: ignore[no-untyped-def]
    """`scale --gpus 8:64:x2` of a 70B model refused the whole range because 8 GPUs cannot
    hold it; sweep leaves such rows out with a note, and so does scale now."""
    import json

    r = run_cli("scale", "--model", "llama3-70b", "--gpus", "8:64:x2", "--json")
    assert r.code == 0, r.err
    assert [row["gpus"] for row in json.loads(r.out)] == [16, 32, 64]
    assert r.err.startswith("8 GPUs left out: memory: no layout of llama3-70b fits"), r.err
    alone = run_cli("scale", "--model", "llama3-70b", "--gpus", "8")
    assert alone.code == 2 and alone.err.startswith("error: memory:"), alone.err


@pytest.mark.parametrize("flag", ["--bandwidth", "--latency"])
def test_unit_fields_read_ascii_digits_only(flag: str, run_cli) -> None:  # type: ignore[no-untyped-def]
    """float() reads Arabic-Indic '١٢' as 12; every other parser refuses non-ASCII digits."""
    r = run_cli("plan", flag, "١٢")
    assert r.code == 2 and flag in r.err, r.err


def test_a_huge_number_in_a_config_is_shown_short(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """An HF config.json with hidden_size 1e308 printed the 309-digit integer in its error."""
    Path("config.json").write_text(
        '{"model_type": "llama", "hidden_size": 1e308, "num_hidden_layers": 2, '
        '"num_attention_heads": 2, "vocab_size": 100, "intermediate_size": 10}'
    )
    out = check(["plan", "--from", "config.json"], capsys)
    assert out.code == 2 and "hidden_size: 1e+308 is out of range" in out.err, out.err
    assert len(out.err) < 200, out.err


# --- a fourth round (2026-12-07, fuzz round 15: hand-made inputs; the explore profile found
# nothing) ---------------------------------------------------------------------------------

FOURTH = [
    # fp8 training on a GPU without fp8 tensor cores was priced as bf16 and labelled fp8
    (["plan", "--gpus", "16", "--precision", "fp8", "--gpu", "A100-SXM-80GB"], "--precision"),
    # --etp on a dense model ended in a search failure about "1 experts"
    (["plan", "--gpus", "16", "--etp", "2"], "--etp"),
    # a fraction rounding to every link named --failed-links, which was not given
    (["plan", "--gpus", "16", "--failed-link-fraction", "0.9999999"], "--failed-link-fraction"),
    # the work budget of report's scaling counts named --gpus
    (["report", "-o", "r.html", "--scaling-gpus", "8:16384:+8"], "--scaling-gpus"),
    # '' meant every preset in plot and report, a typo in compare
    (["plot", "cost", "-o", "c.svg", "--presets", ""], "--presets"),
    # one site holds every node: the WAN the title named was never crossed
    (
        ["collective", "--wan", "internet-1g", "--nodes-per-site", "3", "--ranks", "16"],
        "--nodes-per-site",
    ),
    # 1.5 nodes were refused only when --gpus-per-node 8 was typed
    (["plan", "--gpus", "12"], "--gpus"),
    # doctor took plan options unchecked
    (
        [
            "doctor",
            str(Path(__file__).parent / "data/nccl-logs/nccl-451-docker-ib-unopenable.log"),
            "--gpus",
            "0",
        ],
        "--gpus",
    ),
]


def test_a_from_file_that_leaves_the_request_invalid_is_one_line(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """The `--from` report went to stderr before the request was checked: 14 lines at exit 2."""
    Path("config.json").write_text(
        '{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, '
        '"num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, '
        '"intermediate_size": 14336}'
    )
    out = check(["plan", "--gpus", "16", "--from", "config.json"], capsys)
    assert out.code == 2 and out.err.startswith("error: ") and "seq-len" in out.err, out.err
    ok = check(["plan", "--gpus", "16", "--seq-len", "4096", "--from", "config.json"], capsys)
    assert ok.code == 0 and "read:" in ok.err, ok.err


def test_keys_from_a_file_are_printed_escaped(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """An unknown config.json key carrying ESC reached the terminal raw."""
    Path("config.json").write_text(
        '{"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 2, '
        '"num_attention_heads": 8, "vocab_size": 1000, "intermediate_size": 1024, '
        '"weird\\u001b[31mkey": 1}'
    )
    out = check(["plan", "--gpus", "8", "--seq-len", "1024", "--from", "config.json"], capsys)
    assert out.code == 0, out
    assert "\x1b" not in out.err and "weird\\x1b[31mkey" in out.err, out.err


def test_calibrate_refuses_a_run_of_one_size(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """Four rows of one size (20 µs and 2,000 µs) saved a profile with R² −1 and an efficiency
    printed as 1.038 but written as 1."""
    row = (
        "     1048576        262144     float     sum      -1    {t}   52.43   52.43      0"
        "    20.00   52.43   52.43      0\n"
    )
    # one rank per host, the layout calibrate fits
    text = nccl_tests_log(row.format(t="20.00") * 3 + row.format(t="2000.00"), footer=False)
    Path("nt.log").write_text(text.replace("Pid   1235 on node1", "Pid   1235 on node2"))
    imported = check(
        ["import", "nccl-tests", "nt.log", "--op", "all_reduce", "--db", "r.db"], capsys
    )
    assert imported.code == 0, imported
    out = check(["calibrate", "1", "--db", "r.db", "--name", "one", "--rate", "400Gbps"], capsys)
    assert out.code == 2 and "two sizes or more" in out.err, out


def test_a_config_without_its_shape_names_the_file_not_kv_heads(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """A config.json with num_key_value_heads but no hidden_size blamed --kv-heads, which the
    user never gave, on the default catalog model."""
    Path("config.json").write_text(
        '{"architectures": ["LlamaForCausalLM"], "num_key_value_heads": 8, '
        '"intermediate_size": 14336, "vocab_size": 128256}'
    )
    out = check(["plan", "--from", "config.json"], capsys)
    assert out.code == 2 and out.err.startswith("error: --from: "), out.err
    assert "no hidden_size, num_hidden_layers or num_attention_heads" in out.err, out.err


def test_a_megatron_script_with_fp16_and_bf16_is_refused(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    Path("train.sh").write_text(
        "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 \\\n"
        "  --num-attention-heads 32 --seq-length 4096 --micro-batch-size 1 \\\n"
        "  --global-batch-size 256 --fp16 --bf16\n"
    )
    out = check(["plan", "--from", "train.sh"], capsys)
    assert out.code == 2 and "--fp16 and --bf16 are both set" in out.err, out.err


def test_a_value_a_file_gave_is_refused_with_its_file_and_key(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """`--kv-heads: 64 does not divide --heads 32` named an option the user never typed;
    docs/from-config.md promises the file, line and key."""
    Path("config.json").write_text(
        '{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, '
        '"num_attention_heads": 32, "num_key_value_heads": 64, "vocab_size": 128256, '
        '"intermediate_size": 14336}'
    )
    out = check(["plan", "--gpus", "16", "--seq-len", "4096", "--from", "config.json"], capsys)
    assert out.code == 2 and out.err.startswith("error: --kv-heads: "), out.err
    assert "(from config.json:1 num_key_value_heads=64)" in out.err, out.err
    # given on the command line, the option is the user's own: no file named
    typed = ["plan", "--gpus", "16", "--seq-len", "4096", "--kv-heads", "64"]
    out = check([*typed, "--from", "config.json"], capsys)
    assert out.code == 2 and "from config.json" not in out.err, out.err


# --- a fifth round (2026-12-07, fuzz round 16) ----------------------------------------------

SWEEPS_THAT_RUN = [
    # the fixed options were checked without the axes: a WAN from a list, layers from a list
    ["sweep", "--gpus", "16", "--wan", "internet-1g,internet-10g", "--sites", "2"],
    [
        "sweep",
        "--gpus",
        "16",
        "--model",
        "custom",
        "--layers",
        "2,4",
        "--hidden",
        "64",
        "--heads",
        "2",
        "--vocab",
        "100",
        "--seq-len",
        "512",
    ],
    # a combination a rule refuses is one refused row, not the whole sweep
    ["sweep", "--gpus", "16", "--precision", "fp8,bf16", "--gpu", "A100-SXM-80GB"],
]


@pytest.mark.parametrize("argv", SWEEPS_THAT_RUN, ids=[" ".join(a[3:6]) for a in SWEEPS_THAT_RUN])
def test_sweeps_whose_axes_make_them_valid_run(
    argv: list[str], capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    out = check(argv, capsys)
    assert out.code == 0, out


def test_a_refused_sweep_combination_is_a_refused_row(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    out = check(
        ["sweep", "--gpus", "16", "--precision", "fp8,bf16", "--gpu", "A100-SXM-80GB", "--csv"],
        capsys,
    )
    assert out.code == 0, out
    rows = [line.split(",") for line in out.out.strip().splitlines()]
    head = rows[0]
    valid = {r[head.index("precision")]: r[head.index("valid")] for r in rows[1:]}
    assert valid == {"fp8": "false", "bf16": "true"}, valid
    assert "1 of 2 rows are refused" in out.err and "--precision" in out.err, out.err


def test_import_refuses_a_block_of_more_rows_than_a_run_holds(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """A 100,000-row block imported in 6 s, then `results show` took 109 s and 1.2 GB."""
    from bandwall.measure.importers.nccl_tests import MAX_BLOCK_ROWS

    row = (
        "  {size:>10}  {count:>10}     float     sum      -1    20.00   52.43   52.43      0"
        "    20.00   52.43   52.43      0\n"
    )
    rows = "".join(row.format(size=4 * (i + 1), count=i + 1) for i in range(MAX_BLOCK_ROWS + 1))
    Path("big.log").write_text(TABLE_HEADER + rows + "# Out of bounds values : 0 OK\n")
    out = check(["import", "nccl-tests", "big.log", "--op", "all_reduce", "--db", "r.db"], capsys)
    assert out.code == 2 and "at most 10,000" in out.err, out.err


def test_plot_scaling_runs_with_its_own_defaults(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """8 default counts × 6 presets ran over the work budget together: always exit 2."""
    out = check(["plot", "scaling", "-o", "s.svg"], capsys)
    assert out.code == 0 and Path("s.svg").stat().st_size > 0, out


SERVING_CONFLICTS = [
    # options a serving request dropped without a word
    (["infer", "--scenario", "offline", "--request-rate", "5"], "--request-rate"),
    (["infer", "--dataset", "sharegpt", "--prompt-tokens", "100"], "--prompt-tokens"),
    (["compare", "--infer", "--infer-models", "llama3-8b", "--model", "llama3-70b"], "--model"),
    # a cap above the board's limit was printed as the cap; fp8 serving on an A100
    (["infer", "--power-cap-w", "5000"], "--power-cap-w"),
    (["plan", "--gpus", "16", "--power-cap-w", "800", "--gpu", "A100-SXM-80GB"], "--power-cap-w"),
    (["infer", "--precision", "fp8", "--gpu", "A100-SXM-80GB"], "--precision"),
]


@pytest.mark.parametrize(
    ("argv", "field"), SERVING_CONFLICTS, ids=[" ".join(a)[:40] for a, _ in SERVING_CONFLICTS]
)
def test_serving_options_a_request_would_drop_are_refused(
    argv: list[str], field: str, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    out = check(argv, capsys)
    assert out.code == 2 and out.err.startswith(f"error: {field}:"), out.err


def test_names_from_an_imported_log_reach_the_terminal_escaped(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """A hostname carrying ESC[2J cleared the screen from `results list` and `results show`."""
    Path("nt.log").write_text(
        nccl_tests_log(
            "     1048576        262144     float     sum      -1    20.00   52.43   52.43      0"
            "    20.00   52.43   52.43      0\n"
            "     2097152        524288     float     sum      -1    30.00   69.91   69.91      0"
            "    30.00   69.91   69.91      0\n",
            host="n\x1b[2Jpwn",
        )
    )
    assert (
        check(["import", "nccl-tests", "nt.log", "--op", "all_reduce", "--db", "r.db"], capsys).code
        == 0
    )
    for argv in (["results", "list", "--db", "r.db"], ["results", "show", "1", "--db", "r.db"]):
        out = check(argv, capsys)
        assert out.code == 0 and "\x1b" not in out.out, out.out


SIXTH = [
    # the KV cache that does not fit was blamed on --gpus and on weights that fit
    (["infer", "--concurrency", "5000"], "--concurrency"),
    # --epochs on a serving comparison sent the user to --tokens, which serving refuses
    (["compare", "--infer", "--epochs", "3"], "--epochs"),
    # a parquet sweep without pyarrow ran the whole sweep, then failed in three lines
    (["sweep", "--gpus", "16", "--tp", "1,3", "-o", "s.parquet"], "--output"),
    # a 0-byte /dev/shm for NCCL
    (["launch", "k8s", "--shm-size", "0"], "--shm-size"),
]


@pytest.mark.parametrize(("argv", "field"), SIXTH, ids=[" ".join(a)[:40] for a, _ in SIXTH])
def test_sixth_round_inputs_name_their_option(
    argv: list[str], field: str, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    import importlib.util

    if argv[-1].endswith(".parquet") and importlib.util.find_spec("pyarrow") is not None:
        pytest.skip("pyarrow is installed: the parquet sweep is valid")
    out = check(argv, capsys)
    assert out.code == 2 and out.err.startswith(f"error: {field}:"), out.err


CONFIGS = Path(__file__).parent / "data" / "configs"


def test_framework_values_bandwall_cannot_read_are_named_as_what_they_are(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """A NeMo resolver was called a shell variable; torchtitan's shard degree 0 read as -1."""
    nemo = (CONFIGS / "nemo" / "llama3_1_70b.yaml").read_text()
    Path("nemo.yaml").write_text(nemo.replace("num_nodes: 128", "num_nodes: ${multiply:64,2}"))
    out = check(["plan", "--from", "nemo.yaml"], capsys)
    assert out.code == 2 and "OmegaConf interpolation ${multiply:64,2}" in out.err, out.err
    titan = (CONFIGS / "torchtitan" / "llama3_8b.toml").read_text()
    Path("t.toml").write_text(
        titan.replace("data_parallel_shard_degree = -1", "data_parallel_shard_degree = 0")
    )
    out = check(["plan", "--gpus", "8", "--from", "t.toml"], capsys)
    assert out.code == 2 and "must be -1 (the rest) or >= 1, got 0" in out.err, out.err


SEVENTH = [
    # a run id or an op given to a chart that does not read it was dropped without a word
    (["plot", "cost", "-o", "c.svg", "--results", "9"], "--results"),
    (["plot", "scaling", "-o", "c.svg", "--op", "all_gather"], "--op"),
    (["plot", "breakdown", "-o", "c.svg", "--scaling-gpus", "8:64"], "--scaling-gpus"),
    # a 1,024-GPU NVLink-4 node; caps below any board's minimum priced at the clock floor
    (["plan", "--gpus", "1024", "--gpus-per-node", "1024"], "--gpus-per-node"),
    (["plan", "--gpus", "16", "--power-cap-w", "150"], "--power-cap-w"),
]


def test_power_caps_are_refused_below_a_quarter_of_the_tdp(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """H100 SXM boards accept limits down to 200 W of 700 (nvidia-smi -q 'Min Power Limit'):
    175 W (25%) is the lowest cap planned, and it runs slower than 350 W."""
    out = check(["plan", "--gpus", "16", "--power-cap-w", "174", "--json"], capsys)
    assert out.code == 2 and "give 175-700 W" in out.err, out.err
    times = []
    for cap in ("175", "350"):
        out = check(["plan", "--gpus", "16", "--power-cap-w", cap, "--json"], capsys)
        assert out.code == 0, out.err
        times.append(json.loads(out.out)["step_time_s"])
    assert times[0] > times[1], times


def test_json_booleans_are_not_numbers() -> None:
    """pydantic's lax mode read `{"gpus": true}` as one GPU."""
    from bandwall.errors import ConfigError
    from bandwall.planning.request import PlanRequest

    for field in ("gpus", "power_cap_W", "tp"):
        with pytest.raises(ConfigError, match="True is not a number") as err:
            PlanRequest.model_validate({field: True})
        assert err.value.field == field
    assert PlanRequest.model_validate({"sequence_parallel": True}).sequence_parallel is True


def test_one_serving_model_that_does_not_fit_leaves_the_others(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """`--infer-models llama3-8b,llama3-405b` on 8 H100 failed as a whole."""
    argv = ["compare", "--infer", "--presets", "ai-factory-ib", "--infer-models"]
    out = check([*argv, "llama3-8b,llama3-405b"], capsys)
    assert out.code == 0 and "Llama 3 8B" in out.out, out
    assert "llama3-405b left out: --gpus:" in out.err and "does not fit" in out.err, out.err
    out = check([*argv, "llama3-405b,llama3-405b"], capsys)
    assert out.code == 2 and out.err.startswith("error: --gpus:"), out.err


def test_a_run_of_zero_byte_rows_is_refused_by_the_plot(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """nccl-tests -b 0 prints 0-byte rows: matplotlib warned about a log axis at exit 0."""
    Path("z.log").write_text(nccl_tests_log(nccl_tests_row(0, 1.0, 0.0, 0.0)))
    out = check(["import", "nccl-tests", "z.log", "--op", "all_reduce", "--db", "r.db"], capsys)
    assert out.code == 0, out.err
    out = check(["plot", "busbw", "--results", "1", "--db", "r.db", "-o", "p.svg"], capsys)
    assert out.code == 2 and out.err == (
        "error: --results: the run has no rows above 0 bytes to plot\n"
    ), out.err


def test_doctor_follows_a_link_to_a_folder_named_on_the_command_line(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """A symlink to a folder was 'a folder; give a file'; links inside are still not read."""
    Path("d").mkdir()
    Path("d/a.log").write_text(
        "n1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
        "n1:1:1 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
        "10.0.0.2<36857> failed : Connection refused\n"
    )
    Path("d/loop").symlink_to("../d")
    Path("link").symlink_to("d")
    from bandwall.cli import main

    code = main(["doctor", "link", "--json"])
    out = capsys.readouterr()
    assert code == 1 and out.err == "", out.err
    assert [i["path"] for i in json.loads(out.out)["inputs"]] == ["link/a.log"], out.out


def test_a_pipeline_across_sites_is_priced_the_same_alone_or_beside_others() -> None:
    """A chain whose stages are a whole node apart (tp·cp·dp = 8) skipped the site check: over
    two sites a fixed pp 4 was priced inside one site, 10x faster than its own WAN bytes allow,
    and the same sweep row changed price with its neighbours (fuzz round 17, C1)."""
    from bandwall.planning.api import plan, sweep
    from bandwall.planning.request import PlanRequest

    base = {"gpus": 32, "model": "llama3-70b", "sites": 2, "wan": "internet-10g", "zero": 2}
    fixed = {"tp": 2, "cp": 4, "micro_batch": 1, "virtual_stages": 1}
    alone = sweep(PlanRequest(**base, **fixed, pp=4), {})
    beside = sweep(PlanRequest(**base, **fixed, pp=4), {"pp": [4, 8]})
    assert float(alone["step_time_s"][0]) == pytest.approx(float(beside["step_time_s"][0]))
    searched = plan(PlanRequest(**base)).metrics["step_time_s"]
    assert searched <= float(alone["step_time_s"][0]) * (1 + 1e-9)
    # 1 Gb/s between sites: a fixed pp 4 cannot beat the WAN bytes it sends
    slow = plan(PlanRequest(**{**base, "model": "llama3-8b", "wan": "internet-1g"}, pp=4, tp=2))
    wan_s = slow.metrics["egress_bytes"] / slow.metrics["steps"] * 8 / 1e9
    assert slow.metrics["step_time_s"] >= wan_s


def test_an_integer_past_any_float_in_a_config_is_one_line(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """float() of a 401-digit integer overflowed: a traceback, and a 500 from the web upload."""
    config = json.loads(
        (CONFIGS / "hf" / "bert-large-uncased-whole-word-masking-config.json").read_text()
    )
    config["num_hidden_layers"] = 10**400
    Path("config.json").write_text(json.dumps(config))
    out = check(["plan", "--from", "config.json", "--gpus", "8"], capsys)
    assert out.code == 2 and "num_hidden_layers: a 401-digit number is out of range" in out.err


def test_every_gpu_count_of_scale_and_sweep_must_fill_whole_nodes(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """Only the first count was checked: `scale --gpus 8,27` priced 27 GPUs as dp27."""
    out = check(["scale", "--gpus", "8,27"], capsys)
    assert out.code == 0 and "27 GPUs left out: --gpus: 27 GPUs do not fill whole nodes" in out.err
    assert "│   27 │" not in out.out
    out = check(["sweep", "--gpus", "16,27", "--csv"], capsys)
    rows = out.out.strip().splitlines()
    head = rows[0].split(",")
    valid = {r.split(",")[head.index("gpus")]: r.split(",")[head.index("valid")] for r in rows[1:]}
    assert valid == {"16": "true", "27": "false"}, valid


def test_doctor_reads_a_huge_log_in_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 466 KB gzip of 20 M lines ran past 30 s (fuzz round 17, B1): past a budget only
    failure lines are parsed, and reading stops at a ceiling, each said in a note."""
    from bandwall.measure.doctor import diagnosis

    monkeypatch.setattr(diagnosis, "FULL_READ_LINES", 10)
    monkeypatch.setattr(diagnosis, "MAX_READ_LINES", 100)
    warn = "n1:1:1 [0] misc/ibvwrap.cc:106 NCCL WARN Call to ibv_reg_mr failed with error {}\n"
    lines = ["n1:1:1 [0] NCCL INFO x\n"] * 200
    lines[49] = warn.format("Cannot allocate memory")
    lines[149] = warn.format("Bad address")
    log = tmp_path / "big.log"
    log.write_text("".join(lines))
    diag = diagnosis.diagnose([str(log)])
    assert [f.code for f in diag.findings if f.severity != "info"] == ["memlock"]
    notes = diag.job.inputs[0].notes
    assert any("past line 10 only failure lines" in n for n in notes), notes
    assert any("read stopped at line 100" in n for n in notes), notes


def test_utf16_logs_and_empty_gzips(tmp_path: Path) -> None:
    """PowerShell's `>` writes UTF-16: 'nothing understood'; a gzip of garbage read as empty."""
    from bandwall.errors import ConfigError
    from bandwall.safeio import iter_lines

    text = "n1:1:1 [0] NCCL INFO NCCL version 2.18.3+cuda12.2\nsecond line\n"
    for encoding in ("utf-16", "utf-16-le", "utf-16-be"):
        path = tmp_path / f"{encoding}.log"
        path.write_bytes(text.encode(encoding))
        assert list(iter_lines(path, field="paths")) == text.splitlines(), encoding
    cr = tmp_path / "cr.log"  # old Mac line ends: one line numbered 0 before
    cr.write_bytes(text.replace("\n", "\r").encode())
    assert list(iter_lines(cr, field="paths")) == text.splitlines()
    bad = tmp_path / "bad.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(ConfigError, match="not a valid gzip file"):
        list(iter_lines(bad, field="paths"))


def _words(command: str) -> list[str]:
    """A command line as argv (the long ones read better as the user types them)."""
    return command.split()


UNEVEN_STAGES = _words(
    "plan --gpus 24 --model llama3-70b --pp 8 --pp-first-stage-layers 8 --pp-last-stage-layers 8"
)
TOP_K_ALONE = _words("plan --model custom --layers 2 --hidden 64 --heads 2 --vocab 100 --top-k 2")
EIGHTH = [
    # a fixed option no searched layout can work around was blamed on --gpus
    (["plan", "--gpus", "16", "--virtual-stages", "1000"], "--virtual-stages"),
    (["plan", "--gpus", "8", "--model", "resnet50", "--cp", "2"], "--cp"),
    # Megatron-Core asserts the middle stages split the rest evenly (82 layers were priced)
    (UNEVEN_STAGES, "--pp-first-stage-layers"),
    # another board's scale-up fabric (an A100 on NVLink 5 got NVLS)
    (["plan", "--gpus", "16", "--gpu", "A100-SXM-80GB", "--scale-up", "nvlink5"], "--scale-up"),
    (
        ["collective", "--ranks", "16", "--gpu", "A100-SXM-80GB", "--scale-up", "nvlink5"],
        "--scale-up",
    ),
    # kernels and fp8 formats the GPU cannot run were priced as something else
    (["plan", "--gpus", "16", "--attention-kernel", "fa4"], "--attention-kernel"),
    (["plan", "--gpus", "16", "--precision", "fp8", "--fp8-recipe", "mxfp8"], "--fp8-recipe"),
    (TOP_K_ALONE, "--top-k"),
]


#: Hand-made inputs of fuzz rounds 15 (fourth list), 16 leftovers (seventh) and 17 (eighth):
#: each is refused in one line naming the option the user gave.
NAMED = FOURTH + SEVENTH + EIGHTH


@pytest.mark.parametrize(("argv", "field"), NAMED, ids=[" ".join(a)[:40] for a, _ in NAMED])
def test_hand_made_inputs_name_their_option(
    argv: list[str], field: str, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    out = check(argv, capsys)
    assert out.code == 2 and out.err.startswith(f"error: {field}:"), out.err
    assert "None" not in out.err, out.err


def test_the_work_budget_counts_the_layouts_the_engine_prices(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """A one-row DeepSeek-V3 sweep was refused as 3.3 M points; the engine's prefilter keeps
    ~1% of the product it counted, and `plan` answers the same request in 0.6 s."""
    from bandwall.planning.budget import layouts_searched
    from bandwall.planning.request import PlanRequest

    req = PlanRequest(model="deepseek-v3", gpus=1024)
    assert layouts_searched(req) < 200_000
    out = check(["sweep", "--gpus", "1024", "--model", "deepseek-v3", "--csv"], capsys)
    assert out.code == 0, out.err
    # a flag that takes a value in sweep no longer swallows the next option
    out = check(["sweep", "--gpus", "16,32", "--failures", "--csv"], capsys)
    assert out.code == 2 and out.err.startswith("error: --failures: takes a value"), out.err
    out = check(["sweep", "--gpus", "16", "--failures", "true,false", "--csv"], capsys)
    assert sorted(r.split(",")[0] for r in out.out.strip().splitlines()[1:]) == ["false", "true"]


def test_tcp_and_roce_settings_on_an_infiniband_fabric_say_they_are_not_priced(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """They were dropped without a word, as --loss on RDMA had been (fuzz round 17, E3)."""
    out = check(["plan", "--gpus", "16", "--tcp-streams", "4", "--rdma-cc", "pfc"], capsys)
    assert out.code == 0
    said = " ".join(out.out.split())  # plan's notes follow its table
    assert "--tcp-streams is not priced: ib-ndr is RDMA" in said, said
    assert "--rdma-cc pfc is not priced" in said, said
    out = check(["plan", "--gpus", "16", "--fabric", "roce-400", "--rdma-cc", "pfc"], capsys)
    assert "not priced" not in out.out + out.err, out.out


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter", "all_reduce"])
def test_more_nics_never_slow_a_fixed_ring_ll(
    op: str, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """Under LL's whole-GPU cap more channels (more NICs) split the same rate into slower
    ones, and the chunk-per-channel term made 4 MiB over 1,024 ranks 2.6 ms at 1 NIC and
    5.1 ms at 4 (fuzz round 17, C5)."""
    times = []
    for nics in ("1", "2", "4", "8"):
        out = check(
            [
                "collective",
                "--op",
                op,
                "--ranks",
                "1024",
                "--sizes",
                "64K,4M,256M",
                "--algo",
                "ring",
                "--protocol",
                "LL",
                "--nics-per-node",
                nics,
                "--json",
            ],
            capsys,
        )
        data = json.loads(out.out)
        rows = data["rows"] if isinstance(data, dict) else data
        times.append([r["time_s"] for r in rows])
    for fewer, more in itertools.pairwise(times):
        assert all(b <= a * (1 + 1e-9) for a, b in zip(fewer, more, strict=True)), times


@pytest.mark.parametrize("concurrency", ["1", "2", "8"])
def test_a_prompt_waits_at_least_its_own_prefill(
    concurrency: str, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """Its prefill was averaged over the o iterations of a request: an 8,000-token prompt of
    Llama 3 70B had 28 ms of TTFT against 357 ms of its own prefill (fuzz round 18, C1)."""
    out = check(
        [
            *_words("infer --model llama3-70b --tp 8 --dataset fixed --prompt-tokens 8000"),
            *_words(f"--output-tokens 100 --concurrency {concurrency} --json"),
        ],
        capsys,
    )
    assert out.code == 0, out.err
    data = json.loads(out.out)
    m = data.get("metrics", data)
    assert m["ttft_s"] >= m["prefill_s"] * (1 - 1e-9), (m["ttft_s"], m["prefill_s"])


def test_calibrate_refuses_an_imported_run_with_ranks_sharing_a_host(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """The fit is one rank per host on one link: a 2 x 8 B200 run fitted so priced its own
    8 GiB all_gather at 10 ms through `collective` against 31 ms measured (fuzz round 18, C4)."""
    log = Path(__file__).parent / "data" / "nccl-tests" / "gke-a4-b200-16-ranks-all-gather.log"
    out = check(["import", "nccl-tests", str(log), "--op", "all_gather", "--db", "r.db"], capsys)
    assert out.code == 0, out.err
    out = check(["calibrate", "1", "--db", "r.db", "--name", "gke", "--rate", "3200Gbps"], capsys)
    assert out.code == 2 and "run 1 has 8 ranks on a host (2 hosts)" in out.err, out.err


def test_serving_tensor_parallelism_stays_inside_a_node(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """`infer --tp 16` on nodes of 8 priced tp over the scale-out fabric; plan refuses it."""
    out = check(_words("infer --model llama3-8b --tp 16 --pp 1 --gpus 16"), capsys)
    assert out.code == 2 and out.err.startswith("error: --tp: 16 must be at most the 8 GPUs")
    out = check(_words("infer --model llama3-8b --tp 16 --gpus 16 --gpus-per-node 16"), capsys)
    assert out.code == 0, out.err


def test_ttft_percentiles_never_fall_as_the_rate_rises(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """The per-token prefill cost came from 1/294 of a prompt at one sequence in flight: p99
    was 620 ms at 0.5 requests/s and 65 ms at 5 (fuzz round 18, C2)."""
    tails = []
    for rate in ("0.5", "1", "2", "5"):
        out = check(
            _words(f"infer --model llama3-70b --gpus 16 --tp 8 --request-rate {rate} --json"),
            capsys,
        )
        assert out.code == 0, out.err
        data = json.loads(out.out)
        m = data.get("metrics", data)
        tails.append((m["ttft_p50_s"], m["ttft_p99_s"]))
    for lower, higher in itertools.pairwise(tails):
        assert higher[0] >= lower[0] * (1 - 1e-6) and higher[1] >= lower[1] * (1 - 1e-6), tails


def test_scale_counts_are_checked_as_the_field_they_are(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """A range to 1e12 GPUs was priced past the schema's 2,097,152 and printed $inf."""
    out = check(_words("scale --gpus 8:1e12:x2"), capsys)
    assert out.code == 2 and out.err.startswith("error: --gpus: Input should be less than"), out
    assert "$inf" not in out.out
    out = check(_words("plot scaling -o s.svg --scaling-gpus 8:1e12:x2"), capsys)
    assert out.code == 2 and out.err.startswith("error: --scaling-gpus: Input should be"), out


def test_calibrate_refuses_rows_faster_than_the_rate_and_holds_a_fit_at_it(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """CI refused a 1 Gbit lab run whose rows all sat below 1 Gb/s because the α-β fit's slope
    reached 1.17 Gb/s; what shows a wrong --rate is a row faster than it, not the slope."""
    from tests.nccl_tests_text import row

    rows = ""
    for k, slow in zip(range(20, 24), (3.0, 2.0, 1.4, 1.0), strict=True):
        size = 1 << k
        busbw = 19.0 / slow  # GB/s, 152 Gb/s at the largest
        t_us = size / (busbw * 1e3) * 1.0  # one rank per host: busbw = algbw
        rows += row(size, t_us, busbw, busbw)
    text = nccl_tests_log(rows, footer=False).replace("Pid   1235 on node1", "Pid   1235 on node2")
    Path("nt.log").write_text(text)
    out = check(["import", "nccl-tests", "nt.log", "--op", "all_reduce", "--db", "r.db"], capsys)
    assert out.code == 0, out.err
    out = check(["calibrate", "1", "--db", "r.db", "--name", "x", "--rate", "100Gbps"], capsys)
    assert out.code == 2 and "the run measured 152 Gb/s, 1.52 x the 100 Gb/s" in out.err, out
    out = check(_words("calibrate 1 --db r.db --name y --rate 155Gbps --json"), capsys)
    assert out.code == 0, out.err
    fit = json.loads(out.out)
    assert fit["efficiency"] <= 1.0 and fit["bandwidth_Bps"] * 8 / 1e9 <= 155 * (1 + 1e-9)


def test_server_board_power_follows_the_load(capsys: pytest.CaptureFixture[str]) -> None:
    """At 0.1 request/s a 0.8 s request leaves the replica empty ~92% of the time: the board
    drew its busy power throughout and J/token grew as 1/rate (fuzz round 18, C5). It now
    draws busy power for the share of time the replica holds a request (the queue's
    `occupied_share`), and idle power otherwise: two rates at one layout give back the
    catalog's idle draw."""
    from bandwall.catalog.power import load_power

    rows = []
    for rate in ("0.05", "0.2", "10"):
        out = check(_words(f"infer --request-rate {rate} --tp 1 --gpus 1 --json"), capsys)
        assert out.code == 0, out.err
        m = json.loads(out.out)
        rows.append((m["occupied_share"], m["gpu_power_W"], m))
    assert rows[0][1] < rows[1][1] < rows[2][1], [r[1] for r in rows]
    (h1, p1, m1), (h2, p2, m2), _ = rows
    # at both low rates the replica runs one sequence when it runs any: one busy power
    assert m1["flop_util"] == m2["flop_util"] and h1 < h2 < 0.5
    idle = (h2 * p1 - h1 * p2) / (h2 - h1)
    assert idle == pytest.approx(load_power().gpu("H100-SXM").idle_W, rel=1e-6)


def test_bench_sizes_are_whole_elements_each_once(capsys: pytest.CaptureFixture[str]) -> None:
    """`bench collectives --sizes 1,2,3,5` measured four identical 4-byte float32 rows, which
    fits then counted as four samples (fuzz round 18, D1): a size below one element is refused
    before any rank starts, and sizes that round to one count are measured once."""
    from bandwall.measure.requests import BenchCollectives

    out = check(_words("bench collectives --local 2 --backend gloo --sizes 1,2,3,5"), capsys)
    assert out.code == 2 and "sizes: 1 B is less than one float32 element (4 B)" in out.err
    req = BenchCollectives(sizes="4,5,6,8,9", dtype="float32")
    assert req.size_list == (4, 8)
    assert BenchCollectives(sizes="2,3,4", dtype="bfloat16").size_list == (2, 4)


def test_old_layout_nccl_tests_without_a_footer_imports_complete(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """The older nccl-tests layout (`error` column, no `root`) as Azure's examples print it
    has no footer; its complete tables were listed as failed runs in `results list` and the
    HTML report (fuzz round 18, D2). A newer table cut before its footer still is."""
    log = Path(__file__).parent / "data" / "nccl-tests" / "azure-nd-v100-a100-old-format.log"
    out = check(["import", "nccl-tests", str(log), "--op", "all_reduce", "--db", "r.db"], capsys)
    assert out.code == 0, out.err
    listed = check(_words("results list --db r.db"), capsys)
    assert "complete: no footer (the older nccl-tests layout)" in listed.out, listed.out
    assert "failed" not in listed.out
    cut = nccl_tests_log(nccl_tests_row(1 << 20, 50.0, 20.97, 20.97), footer=False)
    Path("cut.log").write_text(cut)
    out = check(["import", "nccl-tests", "cut.log", "--op", "all_reduce", "--db", "c.db"], capsys)
    listed = check(_words("results list --db c.db"), capsys)
    assert "failed: log ends before the '# Avg bus bandwidth' footer" in listed.out, listed.out


def test_collective_says_tcp_settings_on_rdma_are_not_priced_and_prints_whole_us(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`collective --tcp-window 64K` on ib-ndr dropped the window without a word, as plan did
    before fuzz round 17 (E3); a 1 PiB all-reduce printed '4.57e+09' in the µs column."""
    out = check(_words("collective --op all_reduce --ranks 16 --fabric ib-ndr --sizes 1G"), capsys)
    assert out.code == 0 and "not priced" not in out.out
    words = "collective --op all_reduce --ranks 16 --fabric ib-ndr --sizes 1G --tcp-window 64K"
    out = check(_words(words), capsys)
    assert "note: --tcp-window is not priced: ib-ndr is RDMA" in " ".join(out.out.split())
    out = check(_words("collective --op all_reduce --ranks 16 --fabric ib-ndr --sizes 1P"), capsys)
    assert out.code == 0 and "e+0" not in out.out
    assert re.search(r"│ +\d{1,3}(,\d{3}){3} │", out.out), out.out


def test_a_deepspeed_batch_smaller_than_its_ranks_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`train_batch_size` 8 with accumulation 1 over 16 data-parallel ranks derived a
    micro-batch of 0 and divided by it: ZeroDivisionError in plan, sweep and compare, HTTP 500
    from /api/from-config (fuzz round 19, A1, on the repo's own zf_config.json)."""
    cfg = Path(__file__).parent / "data" / "configs" / "deepspeed" / "zf_config.json"
    for cmd in ("plan", "sweep"):
        out = check([cmd, "--from", str(cfg), "--gpus", "16", "--model", "llama3-8b"], capsys)
        assert out.code == 2 and out.err.count("\n") == 1, out
        assert "train_batch_size 8 is less than accumulation 1 × 16 data-parallel ranks" in out.err


_MEGATRON_JOB = (
    "torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
    "--num-attention-heads 32 --num-query-groups 8 --group-query-attention --ffn-hidden-size "
    "14336 --swiglu --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
    "--global-batch-size 512 --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 "
    "--bf16 --use-distributed-optimizer --recompute-activations --vocab-size 128256 "
    "--train-iters 10000\n"
)


def _megatron_log(times_ms: list[float], preamble: str = "", gb: int = 512) -> str:
    """Megatron-LM's iteration lines (training.py training_log), one per time."""
    out = [preamble]
    for i, t in enumerate(times_ms):
        it = 10 + 10 * i
        out.append(
            f" [2024-05-01 10:{i:02d}:00] iteration {it:8d}/   10000 | consumed samples: "
            f"{it * gb:12d} | elapsed time per iteration (ms): {t} | learning rate: 1.0E-04 | "
            f"global batch size: {gb:5d} | lm loss: 2.5E+00 | loss scale: 1.0 | grad norm: 0.9 "
            "| number of skipped iterations:   0 | number of nan iterations:   0 |\n"
        )
    return "".join(out)


def test_calibrate_from_a_log_slower_than_the_model_can_be_is_refused(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """A log of 1e12 ms per iteration was fitted at the 1% floor, called a match beside a
    100% held-out error, and saved (fuzz round 19, B4); the too-fast side was refused."""
    Path("job.sh").write_text(_MEGATRON_JOB)
    Path("huge.log").write_text(_megatron_log([1e12] * 6))
    words = "calibrate --from-log huge.log --from job.sh --gpus 16 --name huge"
    out = check(_words(words), capsys)
    assert out.code == 2 and "slower than the model at 1% GEMM efficiency" in out.err, out
    assert "nothing was saved" in out.err
    Path("ok.log").write_text(_megatron_log([20000, 20400, 19600, 20200, 19800, 20000]))
    out = check(_words("calibrate --from-log ok.log --from job.sh --gpus 16 --name ok"), capsys)
    assert out.code == 0, out.err


def test_doctor_reads_a_training_log_past_a_long_preamble(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """Megatron prints its argument dump and data-loader lines before iteration 1; past 64
    KiB of them the log was 'nothing understood' while calibrate read it (fuzz round 19, C1)."""
    pre = "".join(
        f"  > building train, validation, and test datasets ... shard {i:05d}\n"
        for i in range(1200)
    )
    Path("pre.log").write_text(_megatron_log([20000, 20400, 19600, 20200, 19800, 20000], pre))
    assert Path("pre.log").stat().st_size > 1 << 16
    out = check(_words("doctor pre.log --json"), capsys)
    assert out.code in (0, 1), out.err
    report = json.loads(out.out)
    assert report["inputs"][0]["kinds"] == ["training-log"], report["inputs"]
    assert "6 step(s)" in report["inputs"][0]["notes"][0], report["inputs"]


def test_doctor_finds_a_training_log_that_starts_past_its_detection_sample(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the 4 MiB detection sample the same log was 'nothing understood' (exit 2) while
    calibrate read it (fuzz round 20, C1): the later lines are shown to the detectors a
    window at a time, and the format starts where it is found. (Sample and window are made
    small here so the file is 0.5 MB, not 5.)"""
    from bandwall.measure.doctor import diagnosis

    monkeypatch.setattr(diagnosis, "DETECT_BYTES", 1 << 18)
    monkeypatch.setattr(diagnosis.LateDetection, "WINDOW_CHARS", 1 << 16)
    detect_bytes = diagnosis.DETECT_BYTES
    line = "  > building train, validation, and test datasets ... shard {:07d}\n"
    n = detect_bytes // len(line.format(0)) + 2_000
    pre = "".join(line.format(i) for i in range(n))
    Path("late.log").write_text(_megatron_log([20000, 20400, 19600, 20200, 19800, 20000], pre))
    assert Path("late.log").stat().st_size > detect_bytes + (1 << 17)
    out = check(_words("doctor late.log --json"), capsys)
    assert out.code in (0, 1), out.err
    report = json.loads(out.out)
    assert report["inputs"][0]["kinds"] == ["training-log"], report["inputs"]
    assert "6 step(s)" in report["inputs"][0]["notes"][0], report["inputs"]


def test_a_size_repeated_in_one_nccl_tests_block_is_kept_as_its_spread(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """nccl-tests `-N` cycles print each size once per cycle; the store kept the last cycle
    only while the import counted every row (fuzz round 19, C3). The cycles now make one
    row: their median time, their spread as p10/p90, and the count printed is the count kept."""
    rows = "".join(
        nccl_tests_row(size, t, size / t / 1e3, size / t / 1e3)
        for size, t in (
            (1 << 30, 22660.0),
            (1 << 31, 45000.0),
            (1 << 30, 99999.0),
            (1 << 30, 23000.0),
        )
    )
    Path("dup.log").write_text(nccl_tests_log(rows))
    out = check(_words("import nccl-tests dup.log --op all_reduce --db d.db"), capsys)
    assert out.code == 0 and "4 rows" in out.out, out.out
    exported = check(_words("results export 1 --db d.db"), capsys)
    data = json.loads(exported.out)
    got = {(r["size_bytes"], r["inplace"]): r for r in data["rows"]}
    assert len(data["rows"]) == 4
    one = got[(1 << 30, 0)]
    assert one["time_median_s"] == pytest.approx(23000e-6)
    assert one["time_min_s"] == pytest.approx(22660e-6) and one["time_p90_s"] > 23000e-6


def test_calibrate_from_a_log_of_another_global_batch_is_refused(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """The log's own 'global batch size: 7' against a config of 512 was fitted and saved,
    a job of 73x the work per step (fuzz round 19, C4); doctor only noted it."""
    Path("job.sh").write_text(_MEGATRON_JOB)
    Path("gb7.log").write_text(_megatron_log([20000.0] * 6, gb=7))
    out = check(_words("calibrate --from-log gb7.log --from job.sh --gpus 16 --name g"), capsys)
    assert out.code == 2 and "the log's global batch 7 differs from the config's 512" in out.err


def test_calibrate_from_a_trace_never_suggests_an_efficiency_plan_refuses(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """A trace far slower than a tiny request was fitted at 0.001 and the user told to pass
    `--gemm-efficiency 0.001`, which plan refuses below 0.01 (fuzz round 19, C5)."""
    trace = {
        "traceEvents": profiler_steps(gemm_us=50_000),
        "distributedInfo": {"rank": 0, "world_size": 8},
    }
    Path("t.json").write_text(json.dumps(trace))
    words = (
        "calibrate --from-trace t.json --gpus 8 --model custom --layers 2 --hidden 256 --heads 4 "
        "--vocab 1000 --seq-len 128 --global-batch 8 --micro-batch 1 --tp 1 --pp 1 --zero 0"
    )
    out = check(_words(words), capsys)
    assert out.code == 2 and "lowest GEMM efficiency a plan takes, 0.01" in out.err, out


def test_hf_configs_price_what_they_describe(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """Fuzz round 19: a multimodal config keeps its language model under text_config (Gemma 3:
    refused as "no setting the model uses", D1); an unknown model_type without hidden_act was
    priced with a two-matrix MLP (Llama 3 8B's shape as 6.15B, B5); T5's decoder stack was
    "not part of the model's shape" (B6)."""
    llama = dict(
        hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
        intermediate_size=14336, vocab_size=128256,
    )  # fmt: skip
    gemma = dict(
        model_type="gemma3",
        text_config=dict(model_type="gemma3_text", **llama),
        vision_config=dict(hidden_size=1152, num_hidden_layers=27),
    )
    Path("gemma3.json").write_text(json.dumps(gemma))
    out = check(_words("plan --from gemma3.json --seq-len 4096 --gpus 16 --json"), capsys)
    assert out.code == 0, out.err
    assert "--layers 32 <- gemma3.json:1 text_config.num_hidden_layers" in out.err
    Path("m.json").write_text(json.dumps(dict(model_type="fancynet", **llama)))
    out = check(_words("plan --from m.json --seq-len 4096 --gpus 16"), capsys)
    assert out.code == 2 and "model_type fancynet is not a family bandwall knows" in out.err
    out = check(_words("plan --from m.json --seq-len 4096 --gpus 16 --gated-mlp --json"), capsys)
    assert out.code == 0, out.err
    # a state-space family is refused outright: its Mamba layers are not attention (fuzz
    # round 22, B3: Jamba priced at 92B of its 52B)
    Path("s.json").write_text(json.dumps(dict(model_type="mamba2", **llama)))
    out = check(_words("plan --from s.json --seq-len 4096 --gpus 16 --gated-mlp"), capsys)
    assert out.code == 2 and "model_type mamba2: a state-space (Mamba) model" in out.err
    t5 = dict(
        model_type="t5", d_model=512, num_layers=6, num_heads=8, d_ff=2048, vocab_size=32128,
        num_decoder_layers=6,
    )  # fmt: skip
    Path("t5.json").write_text(json.dumps(t5))
    out = check(_words("plan --from t5.json --seq-len 512 --gpus 16 --json"), capsys)
    assert out.code == 0 and json.loads(out.out)["request"]["layers"] == 12, out.err
    assert "cross-attention is not priced" in out.err


def test_one_corrupt_run_leaves_the_others_listed(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """A run whose host cell is not JSON failed `results list`, the report and every
    /api/results call, the healthy runs' too (fuzz round 19, C8): it is left out with a note,
    and asked for by id it is still refused by name."""
    import sqlite3

    log = nccl_tests_log(nccl_tests_row(1 << 20, 50.0, 20.97, 20.97))
    Path("a.log").write_text(log)
    for _ in range(2):
        out = check(_words("import nccl-tests a.log --op all_reduce --db r.db"), capsys)
        assert out.code == 0, out.err
    with sqlite3.connect("r.db") as db:
        db.execute("UPDATE runs SET host = 'not json{' WHERE id = 2")
    listed = check(_words("results list --db r.db"), capsys)
    assert listed.code == 0 and "note: left out: 'r.db': run 2: host is" in listed.err, listed
    assert re.search(r"│ 1 +│", listed.out), listed.out
    shown = check(_words("results show 2 --db r.db"), capsys)
    assert shown.code == 2 and "run 2: host is" in shown.err


def test_config_odds_and_ends_of_fuzz_round_19(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """C7: a config.json with UTF-8's BOM was invalid JSON while its UTF-16 twin was read;
    D4: torchtitan's deepseek_v3 flavour 671B is the built-in deepseek-v3; D5: an error about
    --from named a field 'from'."""
    llama = (
        '{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, '
        '"num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, '
        '"vocab_size": 128256}'
    )
    Path("bom.json").write_bytes(b"\xef\xbb\xbf" + llama.encode())
    out = check(_words("plan --from bom.json --seq-len 4096 --gpus 16 --json"), capsys)
    assert out.code == 0, out.err
    Path("tt.toml").write_text('[model]\nname = "deepseek_v3"\nflavor = "671B"\n')
    out = check(
        _words("plan --from tt.toml --gpus 256 --cp 2 --ep 32 --micro-batch 1 --json"), capsys
    )
    assert out.code == 0 and json.loads(out.out)["model"] == "deepseek-v3", out.err
    assert "--model deepseek-v3 <- tt.toml" in out.err, out.err
    Path("x.log").write_text("nothing\n")
    out = check(_words("calibrate --from-log x.log --name q"), capsys)
    assert out.code == 2 and out.err.startswith("error: --from: give the logged job's config")


def test_a_value_past_float_range_in_a_training_log_skips_its_line(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """`tps: 1e999` in a torchtitan line was a ValueError traceback in doctor and calibrate
    (fuzz round 20, A1): the line is skipped with a note and the rest of the log reads."""
    good = (
        "[titan] 2024-05-01 10:00:0{i},000 - root - INFO - step: {i}  loss:  2.5  "
        "memory: 30.0GiB(40%)  tps: {tps}  tflops: 300.0  mfu: 30.0%\n"
    )
    text = "".join(good.format(i=i, tps="1e999" if i == 3 else "4,000") for i in range(1, 8))
    Path("titan.log").write_text(text)
    out = check(_words("doctor titan.log --json"), capsys)
    assert out.code in (0, 1), out.err
    notes = json.loads(out.out)["inputs"][0]["notes"]
    assert any("line 3: 1e999 is not a finite number; line skipped" in n for n in notes), notes
    assert "6 step(s)" in notes[0], notes


def _infer(words: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    out = check(_words(f"infer {words} --json"), capsys)
    assert out.code == 0, out.err
    data: dict[str, Any] = json.loads(out.out)
    return data


def test_server_ttft_quantiles_take_the_whole_queue_tail(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """At 99% busy the TTFT p99 was 32 s beside a 43.5 s mean: the quantile was taken over the
    first 64 waits of the geometric tail, normalised by themselves (fuzz round 20, B1). An
    M/M/1-like wait of mean W has its p99 near ln(100) W. (Rates 1.9, 2.0, 2.01 then; the
    serving constant's refit of 2026-12-07 moved the capacity to ~1.97 requests/s.)"""
    base = "--gpus 1 --dataset fixed --prompt-tokens 16000 --output-tokens 50"
    for rate in (1.9, 1.95, 1.96):
        m = _infer(f"{base} --request-rate {rate}", capsys)
        assert m["ttft_p50_s"] <= m["ttft_p90_s"] <= m["ttft_p99_s"], m
        if m["utilisation"] > 0.98:
            assert m["ttft_p99_s"] > 3 * m["ttft_s"], m


def test_long_prompts_never_make_batching_slower(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """Prompts past the 8,192-token chunk counted every other sequence's prompt once per chunk
    (tokens/s down 46% from 1 to 8 sequences), and at 2 output tokens the size-biased count of
    others priced a life with 1.5 other prompts for the 1 there is (fuzz round 20, B2)."""
    base = "--model llama3-8b --gpus 1 --tp 1 --dataset fixed"
    for prompt, output in ((16000, 1), (2000, 2)):
        rates = [
            _infer(
                f"{base} --prompt-tokens {prompt} --output-tokens {output} --concurrency {c}",
                capsys,
            )["tokens_per_s_replica"]
            for c in (1, 2, 4, 8)
        ]
        assert all(b >= a * 0.995 for a, b in itertools.pairwise(rates)), (prompt, rates)


def test_calibrate_drops_the_steps_of_a_batch_ramp_up(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """Megatron's --rampup-batch-size logs small-batch steps first; calibrate fitted them as
    full ones and saved a profile 2.2x too efficient (fuzz round 20, B3). Steps of another
    global batch than the one the log ends at are dropped, as the first step is."""
    lines = [
        _megatron_log([t], gb=gb).replace(f"iteration {10:8d}/", f"iteration {10 * (i + 1):8d}/")
        for i, (t, gb) in enumerate([(15000.0, 256)] * 5 + [(30000.0, 512)] * 4)
    ]
    Path("job.sh").write_text(_MEGATRON_JOB)
    Path("ramp.log").write_text("".join(lines))
    out = check(_words("calibrate --from-log ramp.log --from job.sh --gpus 16 --name r"), capsys)
    assert out.code == 0, out.err
    text = " ".join(out.out.split())
    assert "median of 3 fitted steps" in text, text  # 4 of batch 512, 1 held out
    assert float(re.findall(r"compute efficiency (0\.\d+)", text)[0]) < 0.5, text


def test_round_20_messages_name_what_the_user_can_do(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """C4: infer's server scenario without a rate named 'request-rate-per-s', a flag that does
    not exist; D2: a model too big at fp8 was told to use --precision fp8; D3: a store whose
    only run is unreadable said 'no  runs ... yet'."""
    import sqlite3

    out = check(_words("infer --scenario server"), capsys)
    assert out.code == 2 and out.err.startswith("error: --request-rate: "), out.err
    words = "infer --dataset fixed --prompt-tokens 800 --output-tokens 1 --max-itl-ms 100"
    out = check(_words(words), capsys)  # C2: one output token has no gap to hold
    assert out.code == 2 and "one output token have no inter-token latency" in out.err
    out = check(_words("infer --model deepseek-v3 --gpus 8 --precision fp8"), capsys)
    assert out.code == 2 and "--precision fp8" not in out.err, out.err
    Path("a.log").write_text(nccl_tests_log(nccl_tests_row(1 << 20, 50.0, 20.97, 20.97)))
    assert check(_words("import nccl-tests a.log --op all_reduce --db r.db"), capsys).code == 0
    with sqlite3.connect("r.db") as db:
        db.execute("UPDATE runs SET host = 'not json{' WHERE id = 1")
    out = check(_words("results show latest --db r.db"), capsys)
    assert out.code == 2 and "1 left out as unreadable" in out.err, out.err


def _params(words: str, capsys: pytest.CaptureFixture[str]) -> float:
    out = check(_words(f"plan {words} --json"), capsys)
    assert out.code == 0, out.err
    return float(json.loads(out.out)["params"])


def test_t5_configs_keep_their_decoder_head_width_and_gated_mlp(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """t5-base's config.json has no num_decoder_layers (T5Config defaults it to num_layers),
    T5-11B's heads are d_kv = 128 wide against d_model 1024, and flan-T5's MLP is
    feed_forward_proj 'gated-gelu': priced as 134M, 6.7B and 1.94B of 223M, 11.3B and 2.85B
    (fuzz round 20, B4). Cross-attention is still not priced (the note says so): within 15%."""
    t5 = '{{"model_type": "t5", "d_model": {d}, "num_layers": {n}, "num_heads": {h}, "d_kv": {kv}, "d_ff": {ff}, "vocab_size": 32128, "feed_forward_proj": "{proj}"}}'  # noqa: E501
    cases = {
        "base": (dict(d=768, n=12, h=12, kv=64, ff=3072, proj="relu"), 223e6),
        "11b": (dict(d=1024, n=24, h=128, kv=128, ff=65536, proj="relu"), 11.3e9),
        "flan-xl": (dict(d=2048, n=24, h=32, kv=64, ff=5120, proj="gated-gelu"), 2.85e9),
    }
    for name, (dims, published) in cases.items():
        Path(f"{name}.json").write_text(t5.format(**dims))
        got = _params(f"--from {name}.json --seq-len 512 --gpus 16", capsys)
        assert 0.85 * published <= got <= published, (name, got)


def test_the_language_models_keys_win_over_a_wrappers(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """A LLaVA config's own hidden_size (its vision side) shadowed text_config.hidden_size,
    which was then 'not part of the model's shape': 1.76B priced of Llama 3 8B (fuzz round
    20, C8)."""
    text = {
        "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
        "vocab_size": 128256, "hidden_act": "silu",
    }  # fmt: skip
    wrapper = {"model_type": "llava_next", "hidden_size": 1024, "text_config": text}
    Path("llava.json").write_text(json.dumps(wrapper))
    got = _params("--from llava.json --seq-len 4096 --gpus 16", capsys)
    assert abs(got - 8.03e9) < 0.01e9, got


def test_an_nccl_tests_block_of_several_types_is_refused_not_merged(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """`all_reduce_perf -d all` prints each size once per type: the import merged them as
    repeats into one median row labelled with the first type (fuzz round 20, B5)."""
    one = nccl_tests_row(1 << 20, 50.0, 20.97, 20.97)
    rows = one + one.replace("float", "int8 ").replace("50.00", "200.0")
    Path("dall.log").write_text(nccl_tests_log(rows))
    out = check(_words("import nccl-tests dall.log --op all_reduce --db d.db"), capsys)
    assert out.code == 2 and "the block mixes 2 data types or reductions" in out.err, out.err


def test_calibrate_refuses_an_archive_as_doctor_does(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """calibrate --from-log read a .tar.gz as text and fitted the lines between its headers
    at exit 0, where doctor refused it as an archive (fuzz round 20, C7)."""
    import tarfile

    Path("job.sh").write_text(_MEGATRON_JOB)
    Path("run.log").write_text(_megatron_log([20000, 20400, 19600, 20200, 19800, 20000]))
    with tarfile.open("logs.tar.gz", "w:gz") as tar:
        tar.add("run.log")
    out = check(_words("calibrate --from-log logs.tar.gz --from job.sh --gpus 16 --name t"), capsys)
    assert out.code == 2 and "is a tar archive: extract it" in out.err, out.err
    out = check(_words("calibrate --from-log run.log --from job.sh --gpus 16 --name t"), capsys)
    assert out.code == 0, out.err


def test_torchtitan_degrees_that_do_not_divide_the_gpus_are_named(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """A torchtitan TOML with pipeline_parallel_degree 3 and --gpus 16 was told to 'give
    --gpus' (fuzz round 20, C3): the error names the degree."""
    toml = '[model]\nname = "llama3"\nflavor = "8B"\n[parallelism]\npipeline_parallel_degree = 3\n'
    Path("pp3.toml").write_text(toml)
    out = check(_words("plan --from pp3.toml --gpus 16"), capsys)
    assert out.code == 2 and "give --gpus" not in out.err, out.err
    assert "pipeline_parallel_degree" in out.err and "3" in out.err, out.err


def test_a_pending_journal_is_named_not_a_readonly_database(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """A read-only command on a store with a journal left by an interrupted write said
    'attempt to write a readonly database' (fuzz round 20, D4): it names the journal and
    what recovers it, and a writing command does."""
    import os

    Path("a.log").write_text(nccl_tests_log(nccl_tests_row(1 << 20, 50.0, 20.97, 20.97)))
    assert check(_words("import nccl-tests a.log --op all_reduce --db j.db"), capsys).code == 0
    Path("j.db-journal").write_bytes(os.urandom(4096))
    out = check(_words("results list --db j.db"), capsys)
    assert out.code == 2 and "rollback journal (j.db-journal)" in out.err, out.err
    assert check(_words("import nccl-tests a.log --op all_reduce --db j.db"), capsys).code == 0
    assert check(_words("results list --db j.db"), capsys).code == 0


def test_doctor_notes_trace_events_whose_time_it_cannot_read(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """A trace whose kernels all have negative durations read as a CPU trace of idle ranks,
    with no word about the events it dropped (fuzz round 20, C6)."""
    Path("neg.json").write_text(json.dumps({"traceEvents": profiler_steps(gemm_us=-50_000)}))
    out = check(_words("doctor neg.json --json"), capsys)
    assert out.code in (0, 1), out.err
    text = json.dumps(json.loads(out.out))
    assert "5 events with a negative, non-finite, missing or impossible time" in text, text
    assert "no GPU kernel was readable" in text
    # and no 'ranks idle 100%' from a step with nothing readable in it
    assert "idle" not in [f["code"] for f in json.loads(out.out)["findings"]]
    assert "idle time not judged" in text


def test_doctor_says_a_trace_of_impossible_times_is_one(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """Steps of 1e290 µs printed 300-digit times (fuzz round 21, C3): every event is now left
    out as impossible, and the refusal says that is what the file held; a text file doctor
    cannot read is still told apart from it."""
    events = profiler_steps(gemm_us=50_000)
    for e in events:
        e["dur"] = 1e290
    Path("huge.json").write_text(json.dumps({"traceEvents": events}))
    out = check(_words("doctor huge.json"), capsys)
    assert out.code == 2
    assert "is a profiler trace with no usable event (10 event(s) read, 10 with an impossible" in (
        out.err
    )
    Path("other.log").write_text("******* All Reduce Network Benchmark Starts *******\n")
    out = check(_words("doctor other.log"), capsys)
    assert out.code == 2 and "other.log is" not in out.err, out.err


def test_results_export_never_writes_over_the_store_it_reads(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """`-o` naming the --db file replaced the whole results store with one run's CSV at exit
    0 (fuzz round 22, D1); `-o x.csv` without --format was refused with 'use one of: .json'
    (C2): the suffix now says the format."""
    rows = nccl_tests_row(1 << 30, 22660.0, 47.4, 47.4)
    Path("one.log").write_text(nccl_tests_log(rows))
    assert (
        check(_words("import nccl-tests one.log --op all_reduce --db store.csv"), capsys).code == 0
    )
    before = Path("store.csv").read_bytes()
    out = check(_words("results export latest --db store.csv --format csv -o store.csv"), capsys)
    assert out.code == 2 and "is the results database being read" in out.err, out.err
    assert Path("store.csv").read_bytes() == before
    out = check(_words("results export latest --db store.csv -o run.txt"), capsys)
    assert out.code == 2 and "use one of: .json, .csv" in out.err, out.err
    out = check(_words("results export latest --db store.csv -o run.csv"), capsys)
    assert out.code == 0, out.err
    assert Path("run.csv").read_text().startswith("op,size_bytes,")


def test_hf_moe_configs_say_which_layers_are_moe_and_how_many_experts_a_token_takes(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """DBRX's n_heads and nested attn_config/ffn_config were not read (a 132B MoE priced as a
    dense 25B); Qwen-MoE's mlp_only_layers and decoder_sparse_step were 'not part of the
    model's shape'; experts without num_experts_per_tok were priced top-1 (fuzz round 22, B2,
    B1, B7)."""
    dbrx = {
        "model_type": "dbrx", "d_model": 6144, "n_heads": 48, "n_layers": 40,
        "vocab_size": 100352, "attn_config": {"kv_n_heads": 8},
        "ffn_config": {"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4},
    }  # fmt: skip
    Path("dbrx.json").write_text(json.dumps(dbrx))
    out = check(_words("plan --from dbrx.json --seq-len 4096 --gpus 64 --json"), capsys)
    assert out.code == 0, out.err
    assert 131e9 < json.loads(out.out)["params"] < 133e9  # published: 132B
    qwen = {
        "model_type": "qwen3_moe", "hidden_size": 2048, "num_hidden_layers": 48,
        "num_attention_heads": 32, "num_key_value_heads": 4, "intermediate_size": 6144,
        "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
        "vocab_size": 151936, "head_dim": 128, "decoder_sparse_step": 1,
    }  # fmt: skip
    Path("q.json").write_text(json.dumps({**qwen, "mlp_only_layers": [0, 1, 2, 3]}))
    out = check(_words("plan --from q.json --seq-len 4096 --gpus 64"), capsys)
    assert out.code == 0 and "--dense-layers 4 <- q.json:1 mlp_only_layers" in out.err, out.err
    for bad in ({"mlp_only_layers": [1, 5]}, {"decoder_sparse_step": 2}):
        Path("q.json").write_text(json.dumps({**qwen, **bad}))
        out = check(_words("plan --from q.json --seq-len 4096 --gpus 64"), capsys)
        assert out.code == 2, out.err
        assert "not expressible" in out.err or "are not the leading ones" in out.err, out.err
    Path("q.json").write_text(
        json.dumps({k: v for k, v in qwen.items() if k != "num_experts_per_tok"})
    )
    out = check(_words("plan --from q.json --seq-len 4096 --gpus 64"), capsys)
    assert out.code == 2 and "give --top-k" in out.err, out.err


def test_deepspeed_auto_micro_batch_with_a_fixed_accumulation_asks_for_the_batch(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """`train_micro_batch_size_per_gpu: "auto"` beside `gradient_accumulation_steps: 1` was
    priced with 8 accumulation steps under the default 4 Mi-token batch (fuzz round 22, B6)."""
    ds = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 1,
          "zero_optimization": {"stage": 3}, "bf16": {"enabled": True}}  # fmt: skip
    Path("ds.json").write_text(json.dumps(ds))
    words = "plan --from ds.json --model llama3-8b --gpus 64 --seq-len 1024"
    out = check(_words(words), capsys)
    assert out.code == 2 and "gradient_accumulation_steps 1" in out.err, out.err
    out = check(_words(words + " --global-batch 256 --json"), capsys)
    assert out.code == 0, out.err
    assert json.loads(out.out)["micro_batches"] == 1


def test_torchtitan_degrees_give_way_to_the_gpus_on_the_command_line(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """data_parallel_shard_degree = 3 with --gpus 64 made a global batch of 3 and an error
    naming --global-batch, an option the file and the user never set (fuzz round 22, C1):
    --gpus wins, the shard degree is what it leaves, and the report says so."""
    Path("tt.toml").write_text(
        '[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 1\n'
        "seq_len = 8192\n[parallelism]\ndata_parallel_shard_degree = 3\n"
    )
    out = check(_words("plan --from tt.toml --gpus 64 --json"), capsys)
    assert out.code == 0, out.err
    assert json.loads(out.out)["dp"] == 64 and json.loads(out.out)["global_batch"] == 64
    assert "the command line gives --gpus: tt.toml:8" in out.err, out.err


def test_launch_refuses_a_command_bandwall_does_not_have(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """`launch slurm|k8s --command "nonexistent --foo"` wrote a job that fails only once
    queued and scheduled (fuzz round 22, C3)."""
    for kind in ("slurm", "k8s"):
        out = check(["launch", kind, "--command", "nonexistent --foo"], capsys)
        assert out.code == 2 and "unknown value 'nonexistent'" in out.err, out.err
        out = check(["launch", kind, "--command", "bench collectives --ops all"], capsys)
        assert out.code == 0 and "collectives" in out.out, out.err


def test_a_shell_variable_an_if_or_a_loop_decides_is_not_read_as_settled(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """`if [ "$BIG" = 1 ]; then L=80; else L=24; fi` priced 80 layers without a word, and a
    loop's updates were ignored (1 layer for bash's 32) (fuzz round 22, B5)."""
    tail = (
        "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers $L --hidden-size 2048 "
        "--num-attention-heads 16 --seq-length 2048 --vocab-size 50304 --micro-batch-size 1 "
        "--global-batch-size 64 --bf16\n"
    )
    scripts = {
        "if.sh": 'if [ "$BIG" = 1 ]; then\n  L=80\nelse\n  L=24\nfi\n' + tail,
        "loop.sh": "L=1\nfor i in 1 2 3 4 5; do L=$((L*2)); done\n" + tail,
        "loop2.sh": "L=1\nfor i in 1 2 3; do\n  L=$((L*2))\ndone\n" + tail,
    }
    for name, text in scripts.items():
        Path(name).write_text("#!/bin/bash\n" + text)
        out = check(_words(f"plan --from {name}"), capsys)
        assert out.code == 2 and "is the shell variable $L, set in a loop" in out.err, out.err
        assert check(_words(f"plan --from {name} --layers 24"), capsys).code == 0
    # a branch the file settles is still read
    Path("set.sh").write_text(
        '#!/bin/bash\nBIG=1\nif [ "$BIG" = 1 ]; then\n  L=80\nelse\n  L=24\nfi\n' + tail
    )
    out = check(_words("plan --from set.sh --json"), capsys)
    assert out.code == 0 and "--layers 80 <- set.sh" in out.err, out.err


def test_shell_expansions_the_reader_does_not_evaluate_are_named_as_such(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """`$(echo 24)` and `${X:3}` with X set in the file were refused as 'the shell variable
    ..., set outside the file' (fuzz round 22, C4)."""
    tail = (
        "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers {L} --hidden-size 2048 "
        "--num-attention-heads 16 --seq-length 2048 --vocab-size 50304 --micro-batch-size 1 "
        "--global-batch-size 64 --bf16\n"
    )
    for value, said in (
        ("$(echo 24)", "is the command substitution $(echo 24)"),
        ("${X:3}", "is the shell expansion ${X:3}"),
        ("${#X}", "is the shell expansion ${#X}"),
    ):
        Path("s.sh").write_text("#!/bin/bash\nX=abc24\n" + tail.replace("{L}", value))
        out = check(_words("plan --from s.sh"), capsys)
        assert out.code == 2 and said in out.err and "outside the file" not in out.err, out.err


def test_ignored_keys_are_filed_under_their_own_reason_and_a_malformed_zero_block_refused(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """rms_norm_eps was an 'optimizer hyper-parameter' and final_logit_softcapping 'logging';
    `"zero_optimization": [3]` was ignored and priced as ZeRO 0 (fuzz round 22, C5)."""
    hf = {
        "model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16,
        "num_attention_heads": 16, "intermediate_size": 8192, "vocab_size": 32000,
        "rms_norm_eps": 1e-5, "final_logit_softcapping": 30.0,
    }  # fmt: skip
    Path("c.json").write_text(json.dumps(hf))
    out = check(_words("plan --from c.json --seq-len 2048 --gpus 8"), capsys)
    assert out.code == 0, out.err
    text = " ".join(out.err.split())
    assert "norm epsilon): no effect on the step: c.json:1 rms_norm_eps" in text, text
    assert "the step's cost: c.json:1 final_logit_softcapping" in text, text
    ds = {"train_batch_size": 64, "bf16": {"enabled": True}, "zero_optimization": [3]}
    Path("ds.json").write_text(json.dumps(ds))
    out = check(_words("plan --from ds.json --model llama3-8b --gpus 8 --seq-len 1024"), capsys)
    assert out.code == 2 and "zero_optimization must be an object" in out.err, out.err


def test_a_comment_inside_a_continued_command_is_noted(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """Flags after a `# ... \\` line inside a backslash-continued command were read without a
    word, though bash ends the command at the comment (fuzz round 22, D2)."""
    Path("c.sh").write_text(
        "#!/bin/bash\ntorchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 24 \\\n"
        "  --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 \\\n"
        "  # --fp8-format hybrid \\\n"
        "  --vocab-size 50304 --micro-batch-size 1 --global-batch-size 64 --bf16\n"
    )
    out = check(_words("plan --from c.sh"), capsys)
    assert out.code == 0, out.err
    assert "c.sh:4: a comment inside a continued command ends it in bash" in " ".join(
        out.err.split()
    ), out.err


def test_an_nccl_tests_block_whose_only_row_does_not_read_is_quoted(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """A 20-digit size hid its block behind 'no nccl-tests result rows' (fuzz round 22, D3)."""
    row = nccl_tests_row(1 << 30, 22660.0, 47.4, 47.4).replace(str(1 << 30), "1" + "0" * 19, 1)
    Path("huge.log").write_text(nccl_tests_log(row))
    out = check(_words("import nccl-tests huge.log --op all_reduce --db d.db"), capsys)
    assert out.code == 2 and "does not read as a row" in out.err and "10000000000" in out.err


# --- fuzz round 23 (2026-12-07) ---------------------------------------------------------------


def test_a_collective_grid_past_its_budget_is_refused_naming_the_longer_axis(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """A million (size, ranks) rows took 15-33 s and 3 GB, three million a MemoryError
    traceback: `collective_work` existed and nothing called it (A1). The budget's sum adds up
    (C2: '1 rows × 6,720 layouts = 21,720' left out 15,000 of set-up)."""
    out = check(_words("collective --ranks 8:8000:+8 --sizes 1:1000:+1 --json"), capsys)
    assert out.code == 2 and out.err.startswith("error: --sizes: 1,000,000 rows + 15,000 set-up")
    out = check(_words("sweep --max-points 1k"), capsys)
    assert out.code == 2 and "1 row × 6,720 layouts searched + 15,000 set-up = 21,720" in " ".join(
        out.err.split()
    ), out.err


@pytest.mark.parametrize(
    ("command", "field", "words"),
    [
        ("collective --scale-up pcie4 --protocol LL128 --sizes 1M", "--protocol", "LL128 needs"),
        ("collective --algo nvls_tree --ranks 8,16 --sizes 1M", "--algo", "at 8 ranks (16 can)"),
        ("collective --algo nvls --ranks 8,16 --sizes 1M --csv", "--algo", "at 16 ranks (8 can)"),
    ],
)
def test_a_forced_algorithm_or_protocol_some_ranks_cannot_run_is_refused(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox, command: str, field: str, words: str
) -> None:
    """They printed `inf` µs and 0.00 GB/s (JSON null, an empty CSV cell) at exit 0 (B2)."""
    out = check(_words(command), capsys)
    assert out.code == 2 and out.err.startswith(f"error: {field}:") and words in out.err


def test_auto_recompute_filled_to_the_capacity_fits(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """AUTO sizes memory to the capacity; a rounding step above it made `fits` false, the
    search skip the layout and sweep drop the row unexplained (B3, C1)."""
    out = check(_words("plan --tp 1 --pp 1 --cp 1 --zero 1 --micro-batch 1 --json"), capsys)
    metrics = json.loads(out.out)
    assert metrics["fits"] and metrics["recompute_share"] > 0
    out = check(_words("sweep --tp 1 --pp 1 --cp 1 --zero 1 --micro-batch 1 --csv"), capsys)
    assert out.code == 0 and "0 fastest" not in out.out


def test_sweep_says_why_each_kind_of_dropped_row_was_dropped(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """Only the first dropped row was explained; when `plan` priced that one, every other
    dropped row went unmentioned (C1). Grid labels read as typed (C3: tokens=1000000000000.0)."""
    out = check(
        _words("sweep --gpus 8:800:+8 --tp 1 --pp 1 --cp 1 --zero 1 --micro-batch 1"), capsys
    )
    said = " ".join(out.err.split())
    assert out.code == 0 and "rows are refused" in said and "328 GPUs" in said, out.err
    out = check(_words("sweep --tokens 1T,300B --power-cap-w 500,700"), capsys)
    said = " ".join(out.out.split())
    assert "tokens=1T" in said and "power-cap-w=700W" in said, out.out
    out = check(_words("sweep --lora-rank 0,8"), capsys)
    assert out.code == 2 and "(got 0)" in out.err


def test_compare_names_its_own_presets_option_and_the_web_refuses_plan_preset(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """A bad entry of --presets was reported as --preset, an option compare lacks; the web's
    compare dropped plan.preset without a word (C4); its JSON check let a multipart body
    through when the boundary said json (D1)."""
    from fastapi.testclient import TestClient

    from bandwall.web import create_app

    out = check(_words("compare --presets ai-factory-ib,bogus"), capsys)
    assert out.code == 2 and out.err.startswith("error: --presets: unknown preset 'bogus'")
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    r = client.post("/api/compare", json={"presets": ["bogus"]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "presets"]
    body = {"plan": {"preset": "hyperscaler-vm", "gpus": 64}, "presets": ["ai-factory-ib"]}
    r = client.post("/api/compare", json=body)
    assert r.status_code == 422 and "not plan.preset" in r.json()["detail"][0]["msg"]
    r = client.post(
        "/api/plan", content=b"{}", headers={"content-type": "multipart/form-data; boundary=json"}
    )
    assert r.status_code == 415


def test_the_web_collective_has_the_cli_defaults_and_its_scale_up_field(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """64 ranks and 1K:1G:x4 on the web against 8 and 1K:8G in the CLI gave one empty request
    two answers; the web had no scale-up field its error pointed to (C5)."""
    from fastapi.testclient import TestClient

    from bandwall.web import create_app

    client = TestClient(create_app(), base_url="http://127.0.0.1")
    web = client.post("/api/collective", json={}).json()
    out = check(_words("collective --json"), capsys)
    assert web == json.loads(out.out)
    r = client.post("/api/collective", json={"ranks": 8, "scale_up": "nvlink5", "gpu": "B200"})
    assert r.status_code == 200


def test_calibrate_names_the_kind_of_run_and_refuses_an_empty_name(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """A links, train or failed run got 'found 0 rows'; --name '' overwrote my-fabric (C6);
    validate took a scale-up fabric for a run that spans nodes (C7)."""
    from bandwall.measure.bench.store import Store

    with Store("d.db") as s:
        links = s.start_run("links", 2, "gloo", {"hostname": "a"}, {}, {})
        s.finish_run(links, "complete")
        failed = s.start_run("collectives", 16, "nccl", {"hostname": "a"}, {}, {})
        s.finish_run(failed, "failed", "rank 0 killed by SIGKILL")
    out = check(_words(f"calibrate {links} --db d.db"), capsys)
    assert out.code == 2 and "is a bench links run" in out.err
    out = check(_words(f"calibrate {failed} --db d.db"), capsys)
    assert out.code == 2 and "failed before any measurement" in out.err
    out = check([*_words(f"calibrate {failed} --db d.db --name"), ""], capsys)
    assert out.code == 2 and out.err.startswith("error: --name: an empty name")
    out = check(_words(f"validate {failed} --db d.db --fabric nvlink4"), capsys)
    assert out.code == 2 and "is a scale-up fabric" in out.err


def test_bench_sizes_that_are_not_whole_elements_or_not_in_memory_are_refused(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """links measured 3 B as 4 B (D2); collectives named `sizes:`, not --sizes; 8 GiB buffers
    on a CPU host ran until the kernel's OOM killer ended them (A2)."""
    out = check(_words("bench links --local 2 --size 3"), capsys)
    assert out.code == 2 and out.err.startswith("error: --size: 3 B is not a whole number")
    out = check(_words("bench collectives --local 2 --sizes 3"), capsys)
    assert out.code == 2 and out.err.startswith("error: --sizes: 3 B is less than one")
    if Path("/proc/meminfo").exists() and not Path("/dev/nvidiactl").exists():
        out = check(_words("bench collectives --local 2 --sizes 1T"), capsys)
        assert out.code == 2 and "GiB of host memory" in out.err, out.err


def test_a_dropped_row_of_a_sweep_without_axes_has_no_empty_example(
    capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """With no axis the example point is empty: 'e.g. ;' must not be printed (C1's wording)."""
    import numpy as np

    from bandwall.cli.app import _explain_dropped

    table = {"rule": np.array([0]), "valid": np.array([True]), "fits": np.array([False])}
    _explain_dropped({}, {}, table, np.array([False]), every_row=True)
    err = " ".join(capsys.readouterr().err.split())
    assert "1 of 1 rows are refused, over the GPU's memory (plan prices it as given" in err, err
    assert "e.g. ;" not in err
