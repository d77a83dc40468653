"""Properties across the request schema: `plan()` is one row of `sweep()`, field by field, and
a request one refuses the other marks invalid for the same field."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bandwall.errors import BandwallError, LayoutError
from bandwall.model.layout import RULE_FIELD, Rule
from bandwall.planning.api import MEMORY_TOLERANCE, plan, sweep
from bandwall.planning.presets import presets
from bandwall.planning.request import PlanRequest, make_request

MODELS = ["llama3-8b", "llama3-70b", "mixtral-8x7b", "resnet50", "bert-large", "gpt3-175b"]

requests = st.fixed_dictionaries(
    {
        "model": st.sampled_from(MODELS),
        "gpus": st.sampled_from([8, 16, 24, 64, 96, 256, 1024]),
        "preset": st.sampled_from(sorted(presets())),
    },
    optional={
        # mostly valid values, with a few that no layout allows
        "tp": st.sampled_from([1, 2, 4, 8, 8, 8, 3, 16]),
        "pp": st.sampled_from([1, 1, 2, 4, 4, 5]),
        "cp": st.sampled_from([1, 1, 1, 2]),
        "zero": st.sampled_from([0, 1, 1, 3]),
        "micro_batch": st.sampled_from([1, 1, 2]),
        "bandwidth_Gbps": st.sampled_from([1.0, 25.0, 400.0]),
        "global_batch": st.sampled_from([512, 1024, 2048, 4096, 96]),
        "local_sgd_steps": st.sampled_from([1, 50]),
        "failures": st.booleans(),
    },
)


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b or math.isclose(a, b, rel_tol=1e-12)
    return a == b


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(fields=requests, axis=st.sampled_from(["gpus", "bandwidth_Gbps", "tp"]))
def test_plan_is_one_row_of_sweep(fields: dict[str, object], axis: str) -> None:
    req = make_request(**fields)
    other = {"gpus": 128, "bandwidth_Gbps": 100.0, "tp": 2}[axis]
    value = getattr(req, axis)
    if value is None:
        return  # an unset layout axis is searched, not swept
    table = sweep(req, {axis: [other, value]})
    row = {k: np.asarray(v)[1].item() for k, v in table.items()}
    try:
        p = plan(req)
    except LayoutError as exc:
        # refused by plan: the sweep row is invalid or does not fit, for the same field
        if exc.field == "memory":
            assert row["valid"] and not row["fits"]
        else:
            assert not row["valid"]
            if not req.auto and exc.field != "gpus":
                if Rule(row["rule"]) is Rule.GPUS_DIVISIBLE:  # names the degree that alone
                    assert exc.field in ("tp", "pp", "cp")  # cannot divide the GPUs
                else:
                    assert RULE_FIELD[Rule(row["rule"])] == exc.field
        return
    except BandwallError as exc:
        # refused before any layout is priced (unknown price, sites without WAN, ...): the
        # sweep refuses it too, naming the same field
        try:
            sweep(req, {axis: [value]})
        except BandwallError as again:
            assert again.field == exc.field
            return
        raise AssertionError(f"sweep accepted what plan refused: {exc}") from None
    # plan prices a layout that fits, or one within the memory model's error (with a note)
    tolerated = row["memory_bytes"] <= row["memory_capacity_bytes"] * (1 + MEMORY_TOLERANCE)
    assert row["valid"] and (row["fits"] or tolerated)
    for name, expected in p.metrics.items():
        got = row[name]
        assert _same(float(got), float(expected)), (name, got, expected)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    tp=st.sampled_from([3, 16, 32]),
    model=st.sampled_from(["llama3-70b", "llama3-8b"]),
)
def test_bad_tp_refused_by_both_naming_tp(tp: int, model: str) -> None:
    req = make_request(model=model, gpus=64, tp=tp)
    try:
        plan(req)
    except LayoutError as exc:
        assert exc.field == "tp"
    else:
        raise AssertionError("plan accepted a tp outside the node")
    row = sweep(req, {"tp": [tp]})
    assert not bool(row["valid"][0])
    assert RULE_FIELD[Rule(int(row["rule"][0]))] == "tp"


def test_schema_fields_have_docs_and_units() -> None:
    """Every request field has a docstring; fields with a unit carry it in the name."""
    for name, info in PlanRequest.model_fields.items():
        assert info.description and len(info.description) > 10, name
    for name in ("bandwidth_Gbps", "latency_us", "jitter_us", "price_per_gpu_hour_usd"):
        assert name in PlanRequest.model_fields
