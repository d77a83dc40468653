"""Fuzz the CLI as a careless user or an attacker types it: random and hostile values for the
request schema's options, `collective`, `sweep`. Invariant: exit 0, or exit 2 with one line on
stderr; never a traceback, never a hang (each example is time-bounded).

CI runs a bounded number of examples; `BANDWALL_FUZZ_EXAMPLES=5000 python -m pytest
tests/cli/test_fuzz_cli.py` runs a long campaign (docs/testing.md).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bandwall.cli import main
from bandwall.planning.request import PlanRequest, field_flag

EXAMPLES = int(os.environ.get("BANDWALL_FUZZ_EXAMPLES", "120"))
SECONDS_PER_EXAMPLE = 20

HOSTILE = [
    "",
    " ",
    "-1",
    "0",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e999",
    "1e-999",
    "99999999999999999999999",
    "0x10",
    "1_000",
    "½",
    "١٢",  # Arabic-Indic digits
    "10µs",
    "10μs",
    "15Gbps",
    "15 Gb/s",
    "1T",
    "1K:1T:x1.0000001",
    "1:1G:+1",
    "8,",
    ",,,",
    "a" * 300,
    "../../etc/passwd",
    "measured:../../x",
    "measured:a/b",
    "\x00",
    "\ud7ff",
    "'; rm -rf / #",
    "$(reboot)",
    "true",
    "None",
]
OPTIONS = [field_flag(name) for name in PlanRequest.model_fields]
values = st.one_of(
    st.sampled_from(HOSTILE),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=40),
)


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    def fail(*_: object) -> None:
        raise TimeoutError(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def check(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with deadline(SECONDS_PER_EXAMPLE):
        code = main(argv)
    captured = capsys.readouterr()
    assert code in (0, 2), (argv, code, captured.err)
    assert "Traceback" not in captured.err + captured.out, argv
    if code == 2:
        lines = [line for line in captured.err.splitlines() if line.strip()]
        assert len(lines) == 1, (argv, captured.err)
        assert lines[0].startswith("error: "), (argv, captured.err)


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@FUZZ
@given(
    command=st.sampled_from(["plan", "compare", "scale", "sweep"]),
    pairs=st.lists(st.tuples(st.sampled_from(OPTIONS), values), min_size=1, max_size=3),
)
def test_request_options_never_crash(
    command: str, pairs: list[tuple[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command, "--model", "llama3-8b", "--gpus", "16"] if command != "scale" else [command]
    for flag, value in pairs:
        argv += [f"--{flag}", value]
    if command == "sweep":
        argv += ["-o", os.devnull]
    check(argv, capsys)


@FUZZ
@given(
    pairs=st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "op",
                    "ranks",
                    "sizes",
                    "fabric",
                    "algo",
                    "protocol",
                    "gpus-per-node",
                    "oversubscription",
                    "tcp-streams",
                    "tcp-window",
                    "wan",
                    "nodes-per-site",
                ]
            ),
            values,
        ),
        min_size=1,
        max_size=3,
    )
)
def test_collective_options_never_crash(
    pairs: list[tuple[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["collective"]
    for flag, value in pairs:
        argv += [f"--{flag}", value]
    check(argv, capsys)


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--fabric", "measured:../../x"],
        ["collective", "--sizes", "1K:1T:x1.0000001"],
        ["collective", "--sizes", "1:1G:+1"],
        ["plan", "--latency", "10µs"],
        ["plan", "--bandwidth", "nan"],
        ["plan", "--tokens", "1e999"],
        ["plan", "--gpus", "99999999999999999999"],
        ["sweep", "--gpus", "1:1000000:+1", "-o", os.devnull],
        ["sweep", "--gpus", "8:1024:x1.01", "--bandwidth", "1Gbps:800Gbps:x1.001"],
    ],
)
def test_known_hostile_inputs(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 14: huge ranges refused before any value is built, path traversal in measured
    profiles refused, µ accepted, nan/inf and overflow refused with the field named."""
    check(argv, capsys)
