"""Fuzz the CLI from the request schemas, as a careless user or an attacker types it.

Every option of every command comes from its request model (`PlanRequest`, `InferRequest`,
`bandwall.measure.requests`), with values drawn by `tests/fuzz/strategies.py`: valid ones
(to reach the engine), boundaries, and hostile text. Invariant (`harness.check`): exit 0, or
exit 2 with one line naming the problem; never a traceback, never over 20 s or 500 MB.

CI runs `EXAMPLES` per property (25); `BANDWALL_FUZZ_EXAMPLES=2000` for a long run and
`HYPOTHESIS_PROFILE=explore` for fresh draws (docs/testing.md has the counts of the last
long run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bandwall.errors import BandwallError
from bandwall.measure import requests as mreq
from bandwall.planning.request import VECTOR_FIELDS, InferRequest, PlanRequest
from bandwall.planning.rules import TRAINING_ONLY
from tests.fuzz.harness import Sandbox, check
from tests.fuzz.strategies import (
    EXAMPLES,
    cli_args,
    hostile,
    hostile_files,
    make_file,
    option_values,
    range_text,
    valid_text,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    return Sandbox(tmp_path, monkeypatch)


PLAN_NAMES = list(PlanRequest.model_fields)
INFER_NAMES = [n for n in InferRequest.model_fields if n not in TRAINING_ONLY]
#: The extra options each command adds so an example stays cheap when everything is valid.
TAIL = {
    "plan": [],
    "compare": ["--presets", "ai-factory-ib,hyperscaler-vm"],
    "scale": ["--gpus", "64,256"],
    "infer": [],
}
SKIP = {"compare": ("preset",), "scale": ("gpus",)}


@FUZZ
@given(command=st.sampled_from(["plan", "compare", "scale", "infer"]), data=st.data())
def test_request_commands(
    command: str, data: st.DataObject, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    model = InferRequest if command == "infer" else PlanRequest
    names = [n for n in (INFER_NAMES if command == "infer" else PLAN_NAMES)]
    names = [n for n in names if n not in SKIP.get(command, ())]
    # the tail goes first: a generated option of the same name then wins (last one counts)
    argv = [command, *TAIL[command], *data.draw(cli_args(model, names))]
    check(argv, capsys)


@st.composite
def sweep_args(draw: st.DrawFn) -> list[str]:
    names = draw(st.lists(st.sampled_from(PLAN_NAMES), min_size=1, max_size=3, unique=True))
    argv: list[str] = []
    for name in names:
        flag = "--" + (PlanRequest.model_fields[name].json_schema_extra or {}).get(  # type: ignore[union-attr]
            "flag", name.replace("_", "-")
        )
        valid = valid_text(PlanRequest, name)
        if valid is None:
            argv.append(flag)
            continue
        ranged = (
            range_text(valid)
            if name in VECTOR_FIELDS
            else st.lists(valid, min_size=1, max_size=3).map(",".join)
        )
        argv += [flag, draw(st.one_of(valid, ranged, hostile()))]
    return argv


@FUZZ
@given(args=sweep_args(), budget=st.sampled_from([None, "1", "1k", "²", "nan", "1e999"]))
# a fresh draw (2026-12-04): a range note printed before the engine refused the request
@example(args=["--layers", "1:3"], budget=None)
def test_sweep_grids(
    args: list[str], budget: str | None, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    argv = ["sweep", *args, "-o", "grid.csv"]
    if budget is not None:
        argv += ["--max-points", budget]
    check(argv, capsys)


def _names(model: type[Any], *skip: str) -> list[str]:
    return [
        n
        for n, info in model.model_fields.items()
        if n not in skip
        and not (
            isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("argument")
        )
    ]


#: Measurement commands run for real: options that would spawn ranks (--local) or run
#: forever (monitor without --count) are pinned so a valid example ends at once.
MEASURE = {
    "bench collectives": (mreq.BenchCollectives, ("local",), []),
    "bench links": (mreq.BenchLinks, ("local",), []),
    "bench train": (mreq.BenchTrain, ("local",), []),
    "monitor": (mreq.Monitor, (), ["--count", "1", "--interval", "0.01"]),
    "import nccl-tests": (mreq.ImportNcclTests, (), []),
}


@FUZZ
@given(command=st.sampled_from(sorted(MEASURE)), data=st.data())
def test_measurement_commands(
    command: str, data: st.DataObject, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    model, skip, tail = MEASURE[command]
    argv = command.split()
    if command == "import nccl-tests":
        log = data.draw(st.sampled_from(sorted(DATA.glob("*.log"))))
        argv += [str(log), "--db", "r.db"]
    argv += data.draw(cli_args(model, _names(model, *skip))) + tail
    check(argv, capsys)


@FUZZ
@given(model=st.sampled_from([mreq.LabUp, mreq.LabRun]), data=st.data())
def test_lab_requests_are_checked_before_anything_is_built(
    model: type[mreq.MeasureRequest], data: st.DataObject
) -> None:
    """Lab commands need root and change the machine: the fuzz checks their request models,
    which the commands build before touching anything (a value refused here never reaches
    `ip` or `tc`)."""
    names = list(model.model_fields)
    fields = {
        n: data.draw(option_values(model, n))
        for n in data.draw(st.lists(st.sampled_from(names), max_size=4, unique=True))
    }
    if "name" not in fields and model is mreq.LabRun:
        fields["name"] = "lab"
    try:
        mreq.build(model, **fields)
    except BandwallError as exc:
        assert "\n" not in str(exc)


READERS = {
    "import": lambda f: ["import", "nccl-tests", f, "--db", "r.db"],
    "results list": lambda f: ["results", "list", "--db", f],
    "results show": lambda f: ["results", "show", "1", "--db", f],
    "calibrate": lambda f: ["calibrate", f, "--name", "x"],
    "validate": lambda f: ["validate", f, "--fabric", "ib-ndr"],
    "plot": lambda f: ["plot", "busbw", "--results", "1", "--db", f, "-o", "p.png"],
}


@settings(FUZZ, max_examples=max(EXAMPLES, 2 * len(READERS)))
@given(kind=hostile_files(), reader=st.sampled_from(sorted(READERS)))
def test_readers_with_hostile_files(
    kind: str, reader: str, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    path = make_file(kind, sandbox.root / "files")
    before = sandbox.snapshot()
    out = check(READERS[reader](path), capsys)
    assert out.code == 2 or kind in ("text",), (reader, kind, out)
    changed = sandbox.changed(before)
    allowed = {"work/r.db", "work/p.png", "profiles/x.toml"}
    assert changed <= allowed, (reader, kind, changed)


@settings(FUZZ, max_examples=max(EXAMPLES, 12))
@given(kind=hostile_files())
def test_catalog_overlay_never_breaks_help(
    kind: str,
    capsys: pytest.CaptureFixture[str],
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hostile $BANDWALL_CATALOG_DIR/gpus.toml: --help works, a command that reads the
    catalog answers or says what is wrong in one line."""
    from bandwall.rawdata import raw_rows

    folder = sandbox.root / f"cat-{kind}"
    folder.mkdir(exist_ok=True)
    target = folder / "gpus.toml"
    if not (target.exists() or target.is_symlink()):
        src = Path(make_file(kind, sandbox.root / "files"))
        if kind in ("text", "empty", "nul_bytes", "long_line", "non_utf8", "deep_json"):
            target.write_bytes(src.read_bytes())
        elif kind != "missing":  # system files, folders, FIFOs, bombs, loops: linked there
            target.symlink_to(src)
    monkeypatch.setenv("BANDWALL_CATALOG_DIR", str(folder))
    raw_rows.cache_clear()
    from bandwall.catalog.loader import load_catalog

    load_catalog.cache_clear()
    try:
        assert check(["plan", "--help"], capsys).code == 0
        check(["catalog", "gpus", "--json"], capsys)
    finally:
        raw_rows.cache_clear()
        load_catalog.cache_clear()


TARGETS = ["/dev/full", "nodir/x.{ext}", "afolder", "x.unknown", "/proc/x.{ext}", "ok.{ext}"]
WRITERS = {
    "sweep": (["sweep", "--gpus", "8,16", "-o"], "csv"),
    "plot": (["plot", "cost", "--presets", "ai-factory-ib", "-o"], "png"),
    "report": (["report", "--presets", "ai-factory-ib", "-o"], "html"),
    "chart": (["compare", "--infer", "--presets", "ai-factory-ib", "--chart"], "png"),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("target", TARGETS)
def test_outputs_are_checked_and_atomic(
    writer: str, target: str, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """Every output goes through the one writer: a device, a missing folder, a folder, an
    unknown format or an unwritable place is exit 2 with one line, and nothing but the named
    output appears."""
    pytest.importorskip("matplotlib")
    args, ext = WRITERS[writer]
    (sandbox.root / "work" / "afolder").mkdir(exist_ok=True)
    path = target.format(ext=ext)
    before = sandbox.snapshot()
    out = check([*args, path], capsys)
    assert (out.code == 0) == (path == f"ok.{ext}"), (writer, path, out)
    changed = sandbox.changed(before)
    assert changed <= {f"work/ok.{ext}"}, changed


# --- the reproducers, each one line naming its field -----------------------------

KNOWN = [
    (["sweep", "--gpus", "1:2:+1e-320", "-o", "x.csv"], "--gpus"),
    (["sweep", "--gpus", "8,16", "--loss", "5e-324:0.5:x2", "-o", "x.csv"], "--loss"),
    (["plan", "--tcp-window-bytes", "1" + "0" * 400], "--tcp-window-bytes"),
    (["plan", "--gpus", "²"], "--gpus"),
    (["plan", "--gpus", "١٢"], "--gpus"),
    (["plot", "busbw", "--results", "²", "-o", "x.png"], "--results"),
    (["results", "show", "99999999999999999999999"], "run"),
    (["monitor", "--interval", "nan"], "--interval"),
    (["monitor", "--interval", "inf"], "--interval"),
    (["monitor", "--count", "-1"], "--count"),
    (["monitor", "--prometheus", ":²"], "--prometheus"),
    (["monitor", "--prometheus", "0.0.0.0:9100"], "--prometheus"),
    (["lab", "run", "lab", "--timeout", "-1", "--", "true"], "--timeout"),
    (["lab", "up", "--rate", "99999999tbit"], "--rate"),
    (["bench", "collectives", "--ops", ",", "--local", "2"], "--ops"),
    (["bench", "collectives", "--backend", "mpi", "--local", "2"], "--backend"),
    (["bench", "train", "--fabric", "nope", "--local", "2"], "--fabric"),
    (["plan", "--model", "resnet50", "--lora-rank", "8"], "--lora-rank"),
    (["plan", "--experts", "8"], "--experts"),
    (["plan", "--epochs", "3"], "--epochs"),
    (["plan", "--outer-compression", "int8"], "--outer-compression"),
    (["plan", "--gpus", "64", "--gpus-per-node", "7"], "--gpus-per-node"),
    (["plan", "--gpus", "8", "--sites", "64", "--wan", "internet-10g"], "--sites"),
    (["plan", "--lora-rank", "9000"], "--lora-rank"),
    (["plan", "--recompute-modules", "mlp"], "--recompute-modules"),
    (["plan", "--recompute", "selective", "--recompute-modules", "attn"], "--recompute-modules"),
    (["infer", "--max-concurrency", "256", "--concurrency", "512"], "--concurrency"),
    (["compare", "--infer-models", "llama3-8b"], "--infer-models"),
    (["compare", "--chart", "x.png"], "--chart"),
    (["plan", "--bandwidth", "100GB"], "--bandwidth"),
    (["plan", "--fabric", "internet-10g"], "--fabric"),
    (["plan", "--fabric", "measured:../../x"], "--fabric"),
    (["sweep", "--gpus", "1:1000000:+1", "-o", "x.csv"], "--gpus"),
    (["sweep", "--gpus", "8:1024:x1.01", "--bandwidth", "1Gbps:800Gbps:x1.001", "-o", "x.csv"], ""),
    (["sweep", "--loss", "0:0.5:+0.0005", "-o", "x.csv"], "--loss"),
    (["scale", "--gpus", "1k:10000k:+1k"], "--gpus"),
    (["sweep", "--gpus", "8", "-o", "/dev/full"], "--output"),
    (["collective", "--sizes", "1K:1T:x1.0000001"], "sizes"),
]


@pytest.mark.parametrize(("argv", "field"), KNOWN, ids=[" ".join(a)[:60] for a, _ in KNOWN])
def test_known_hostile_inputs(
    argv: list[str], field: str, capsys: pytest.CaptureFixture[str], sandbox: Sandbox
) -> None:
    """Issue 23's reproducers: exit 2, one line naming the field, nothing written."""
    before = sandbox.snapshot()
    out = check(argv, capsys)
    assert out.code == 2, (argv, out)
    assert field in out.err, (argv, out.err)
    assert sandbox.changed(before) == set(), argv
