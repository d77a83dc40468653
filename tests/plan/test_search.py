"""The layout search is complete: for random requests, the searched plan is never slower than
any valid layout of the same request that fits (issue 21), and any GPU count plans."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bandwall.errors import ConfigError
from bandwall.model.engine import evaluate
from bandwall.planning.api import _layout_grid, evaluate_points, plan, step_options
from bandwall.planning.request import make_request
from bandwall.planning.resolve import resolve_cluster, resolve_workload

MODELS = ["llama3-8b", "llama3-70b", "mixtral-8x7b", "gpt3-175b", "bert-large"]


AXES = ("tp", "pp", "cp", "ep", "etp", "zero", "micro_batch", "virtual_stages")


@st.composite
def fixed_layouts(draw: st.DrawFn) -> dict[str, object]:
    """A request with a fixed global batch (so step times compare) and one of its layouts that
    is valid and fits, drawn from everything the engine accepts on the search's axes."""
    base = {
        "model": draw(st.sampled_from(MODELS)),
        "gpus": draw(st.sampled_from([8, 16, 48, 64, 96, 256])),
        "global_batch": draw(st.sampled_from([256, 384, 512, 1024])),
        "preset": draw(st.sampled_from(["ai-factory-ib", "ai-factory-roce", "hyperscaler-vm"])),
        "failures": False,
    }
    req = make_request(**base)
    w = resolve_workload(req)
    cl = resolve_cluster(req)
    lay, _, _ = _layout_grid(req, w, cl.gpus_per_node, {}, 1)
    m = evaluate(w, cl, lay, step_options(req, req.global_batch))
    ok = np.flatnonzero(np.broadcast_to(m.valid & m.fits, m.step_time_s.shape).reshape(-1))
    assume(len(ok) > 0)
    i = int(ok[draw(st.integers(0, len(ok) - 1))])
    row = m.row(i)
    return base | {a: int(row[a]) for a in AXES}


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fixed_layouts())
def test_searched_layout_is_never_slower_than_a_fixed_one(fields: dict[str, object]) -> None:
    _, m, _ = evaluate_points(make_request(**fields), {})
    row = m.row(0)
    assert row["valid"] and row["fits"]
    best = plan(make_request(**{k: v for k, v in fields.items() if k not in AXES}))
    assert best.metrics["step_time_s"] <= row["step_time_s"] * (1 + 1e-9), (
        best.layout,
        {k: row[k] for k in AXES},
    )


def test_any_gpu_count_plans_or_names_gpus() -> None:
    """--gpus 1000 plans (the default batch follows the layout); a count no layout can split
    into data-parallel shares of the default batch names --gpus and nearby counts that work."""
    p = plan(make_request(model="llama3-70b", gpus=1000))
    assert p.metrics["valid"] and p.metrics["gpus"] == 1000
    # the batch stays within a quarter of the default 4 Mi tokens
    assert abs(p.metrics["global_batch"] * 8192 / 2**22 - 1) <= 0.25
    # 997 is a prime: neither whole 8-GPU nodes (refused when the request is made) nor a
    # count the default batch splits over (refused by the search), each naming --gpus
    for gpus, kw in ((997, {}), (997, {"gpus_per_node": 1})):
        try:
            plan(make_request(model="llama3-70b", gpus=gpus, **kw))
        except ConfigError as exc:
            assert exc.field == "gpus" and "try --gpus" in exc.reason, exc
        else:
            raise AssertionError("997 GPUs (a prime) cannot split a batch of 512")


@pytest.mark.parametrize(
    "fields",
    [
        {"model": "mixtral-8x7b", "gpus": 64},
        {"model": "llama3-70b", "gpus": 96, "tp": 8},
        {"model": "gpt3-175b", "gpus": 1000, "pp": 4},
        {"model": "bert-large", "gpus": 16},
    ],
)
def test_search_keeps_exactly_the_product_rows_the_rules_allow(fields: dict[str, object]) -> None:
    """The prefilter keeps, in the product's order, every candidate row with virtual stages
    only under pipeline parallelism, no more chunks than layers + 2 and a model-parallel size
    that splits the GPUs into data-parallel replicas the experts fold into; checked against
    the product written out row by row."""
    import itertools

    from bandwall.planning.api import candidates

    req = make_request(**fields, failures=False)
    w = resolve_workload(req)
    gpn = resolve_cluster(req).gpus_per_node
    lay, searched, n = _layout_grid(req, w, gpn, {}, 1)
    values = [candidates(a, w, req, gpn) for a in searched]
    expected = []
    for combo in itertools.product(*values):
        row = {a: getattr(req, a) or 1 for a in AXES} | dict(zip(searched, combo, strict=True))
        tp, pp, cp, ep, etp, v = (row[a] for a in ("tp", "pp", "cp", "ep", "etp", "virtual_stages"))
        dp = max(req.gpus // (tp * pp * cp), 1)
        if (
            (v == 1 or pp > 1)
            and pp * v <= w.layers + 2
            and req.gpus % (tp * pp * cp) == 0
            and (tp * cp * dp) % (ep * etp) == 0
        ):
            expected.append(combo)
    got = list(zip(*(np.ravel(getattr(lay, a)).tolist() for a in searched), strict=True))
    assert n == len(expected) > 0
    assert got == expected
