"""Issue 24 items 8 and 9: the Python API reads like the CLI's JSON (every metric an attribute,
counts as ints), and the human `plan` output shows the assumptions that decide the answer."""

from __future__ import annotations

import json

import numpy as np
import pytest

import bandwall
from bandwall.model.engine import COUNT_FIELDS


@pytest.fixture(scope="module")
def plan70() -> bandwall.Plan:
    return bandwall.plan(bandwall.PlanRequest(model="llama3-70b", gpus=1024, tp=8))


def test_every_metric_is_an_attribute(plan70: bandwall.Plan) -> None:
    for name, value in plan70.metrics.items():
        assert getattr(plan70, name) == value
    assert plan70.mfu == plan70.metrics["mfu"] and 0 < plan70.mfu < 1
    assert {"mfu", "step_time_s", "cost_usd"} <= set(dir(plan70))
    with pytest.raises(AttributeError, match="no attribute or metric 'mfu_typo'"):
        _ = plan70.mfu_typo


def test_counts_are_ints_in_plan_and_sweep(plan70: bandwall.Plan) -> None:
    for name in COUNT_FIELDS:
        assert type(getattr(plan70, name)) is int, name
    req = bandwall.PlanRequest(model="llama3-8b", gpus=64, tp=8)
    grid = bandwall.sweep(req, {"gpus": [64, 128], "bandwidth_Gbps": ["100Gbps", "400Gbps"]})
    for name in COUNT_FIELDS:
        assert grid[name].dtype == np.int64, name
    assert grid["gpus"].tolist() == [64, 64, 128, 128]
    assert grid["bandwidth_Gbps"].dtype == np.float64  # a rate stays a float
    row = bandwall.plan(req.model_copy(update={"gpus": 128, "bandwidth_Gbps": 400.0}))
    assert row.dp == int(grid["dp"][3]) and type(row.dp) is int


def test_plan_prints_the_assumptions_that_decide_the_answer(run_cli) -> None:  # type: ignore[no-untyped-def]
    argv = ["plan", "--model", "llama3-70b", "--gpus", "1024", "--tp", "8"]
    doc = json.loads(run_cli(*argv, "--json").out)
    out = run_cli(*argv).out
    block = out.split("Assumptions that decide the answer", 1)[1]
    lines = " ".join(" ".join(line.strip("│ ").split()) for line in block.splitlines())
    gb, seq = doc["global_batch"], 8192  # Llama 3 70B's sequence length (models.toml)
    assert f"{gb:,} sequences × {seq:,} = {gb * seq:,} tokens per step (default)" in lines
    assert f"{doc['tokens']:,.0f} tokens (20 per parameter, the default" in lines
    assert "bf16 compute, gradients reduced in fp32" in lines
    assert f"({doc['recompute_share']:.0%} of layers fully recomputed)" in lines
    assert "--gemm-efficiency" in lines
    assert max(len(line) for line in out.splitlines()) <= 80
    given = run_cli(*argv, "--tokens", "1T", "--gemm-efficiency", "0.5", "--reduce-dtype", "bf16")
    text = " ".join(given.out.split())
    assert "1,000,000,000,000 tokens (--tokens)" in text
    assert "0.500 (--gemm-efficiency)" in text and "gradients reduced in bf16" in text
    # the attention kernel: Megatron's TE/cuDNN attention on Hopper is priced as FA3; FSDP2
    # calls PyTorch SDPA (FA2); an option says so
    assert "FlashAttention-3 (megatron's default)" in lines
    fsdp = " ".join(run_cli(*argv, "--stack", "fsdp2").out.split())
    assert "FlashAttention-2 (fsdp2's default)" in fsdp
    asked = " ".join(run_cli(*argv, "--attention-kernel", "fa2").out.split())
    assert "FlashAttention-2 (--attention-kernel)" in asked
