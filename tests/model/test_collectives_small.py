"""Per-call overheads fitted on published nccl-tests curves: the data, the split, the fit and
its held-out errors (measure/calibrate/collective_fit.py, docs/network.md)."""

from __future__ import annotations

import csv
import hashlib
import itertools
import math
from importlib import resources

import pytest

from bandwall.measure.calibrate import collective_fit as cf
from bandwall.model.collectives import overheads


def _raw() -> list[dict[str, str]]:
    text = resources.files("bandwall.measure.calibrate").joinpath("data", cf.FILE).read_text()
    return list(csv.DictReader(text.splitlines()))


def test_every_row_names_its_source_and_date_and_the_split_fits_a_third() -> None:
    rows = _raw()
    assert len({r["id"] for r in rows}) == len(rows)
    assert all(r["url"].startswith("https://github.com/") and r["date"][:2] == "20" for r in rows)
    assert all(r["op"] == "all_reduce" and float(r["time_us"]) > 0 for r in rows)
    fitted = [r for r in rows if cf.is_fit_row(r["id"])]
    assert 0.25 <= len(fitted) / len(rows) <= 1 / 3 + 0.02
    # the rule is sha256 of the id, so it cannot move with the data or the model
    for r in rows[:20]:
        digest = int(hashlib.sha256(r["id"].encode()).hexdigest(), 16)
        assert cf.is_fit_row(r["id"]) is (digest % 3 == 0)


def test_rows_printed_with_too_few_digits_are_not_used() -> None:
    usable = {r.id for r in cf.load_rows()}
    for r in _raw():
        coarse = r["measured"] == "busbw" and float(r["busbw_GBps"]) < cf.MIN_BUSBW_GBPS
        assert (r["id"] in usable) is not coarse


@pytest.fixture(scope="module")
def shipped() -> tuple[list[cf.Row], dict[str, float]]:
    """Every usable row and its model time with the pipeline fill as shipped and no per-call
    constants (those add to it)."""
    rows = cf.load_rows()
    with cf._fill(overheads.PIPELINE_FILL_BYTES, overheads.PIPELINE_FILL_BYTES_IN_NODE):
        base = cf.model_s(rows)
    return rows, base


def _loss(
    rows: list[cf.Row],
    base: dict[str, float],
    launch: dict[str, float],
    net: dict[str, float],
    harness: dict[str, float],
) -> float:
    fit = [r for r in rows if r.fitted and cf.FIT_BYTES[0] <= r.size_bytes <= cf.FIT_BYTES[1]]
    return sum(
        abs(math.log((base[r.id] + cf._overhead_s(r, launch, net, harness)) / r.measured_s))
        for r in fit
    )


def test_shipped_constants_are_the_fit(shipped: tuple[list[cf.Row], dict[str, float]]) -> None:
    """overheads.py holds what collective_fit finds: each per-call constant at the minimum of
    the fitted rows' Σ|log error| (a 0.1 µs step either way is no better) and the fill at the
    minimum of its 16 KiB grid, each of the two (across nodes, within one)."""
    rows, base = shipped
    launch = {a.value: v for a, v in overheads.LAUNCH_US.items()}
    net = dict(overheads.NETWORK_CALL_US)
    harness = dict(overheads.HARNESS_CALL_US)
    best = _loss(rows, base, launch, net, harness)
    used = {r.arch for r in rows} | {r.transport for r in rows} | {r.tool for r in rows}
    for table in (launch, net, harness):
        for key in list(table):
            if key not in used:
                continue
            for step in (-0.1, 0.1):
                if table[key] + step < 0:
                    continue
                table[key] += step
                assert _loss(rows, base, launch, net, harness) >= best - 1e-9, (key, step)
                table[key] -= step
    fit = [r for r in rows if r.fitted and cf.FIT_BYTES[0] <= r.size_bytes <= cf.FIT_BYTES[1]]
    for which, step in itertools.product((0, 1), (-16 * 2**10, 16 * 2**10)):
        fills = [overheads.PIPELINE_FILL_BYTES, overheads.PIPELINE_FILL_BYTES_IN_NODE]
        fills[which] += step
        with cf._fill(*fills):
            other = cf.model_s(fit)
        *_, loss = cf._additive(fit, other, 0.1, 2)
        assert loss >= best - 1e-6, (which, step)


def test_fit_and_held_out_errors(shipped: tuple[list[cf.Row], dict[str, float]]) -> None:
    """The errors docs/network.md reports, fit and held out apart (a regression guard: the
    held-out third was not looked at by the fit). Since the 2-8 node NDR curves of
    nccl-tests#309 joined (2026-12-06; scored once first: held out 13.6%, bias +1.9%) no goal
    is met: 32 KiB-16 MiB held out 12.2% (goal 10%), max 64.4% (50%: the 4-node B200 curve
    timed through torch), 8 B-1 MiB 20.4% (15%): the published curves disagree with each
    other by more than that (docs). (12.7% and 22.3% before torch.distributed's timing loop
    was converted as its own per-call constant, 2026-12-07.)"""
    rows, base = shipped
    launch = {a.value: v for a, v in overheads.LAUNCH_US.items()}
    net = dict(overheads.NETWORK_CALL_US)
    harness = dict(overheads.HARNESS_CALL_US)
    errors = {
        r.id: (base[r.id] + cf._overhead_s(r, launch, net, harness)) / r.measured_s - 1
        for r in rows
    }
    summary = cf.OverheadFit(
        launch,
        net,
        harness,
        overheads.PIPELINE_FILL_BYTES,
        overheads.PIPELINE_FILL_BYTES_IN_NODE,
        errors,
        rows,
        0.0,
    ).summary()
    mid = summary["32KiB-16MiB"]
    assert mid["fit"]["median_abs_error"] <= 0.15
    assert mid["held_out"]["median_abs_error"] <= 0.125
    assert mid["held_out"]["max_abs_error"] <= 0.66
    assert abs(mid["held_out"]["bias"]) <= 0.025
    small = summary["8B-1MiB"]
    assert small["fit"]["median_abs_error"] <= 0.205
    assert small["held_out"]["median_abs_error"] <= 0.21


def test_a_fabric_with_its_own_call_overhead_replaces_the_transports() -> None:
    """gcp-tcpxo's 45 µs (catalog call_overhead_us, set on Google's 2-node all_gather: 84-87
    µs at 256 B-16 KB where NCCL's step latencies give 40) is charged per call across nodes in
    place of the RoCE transport's fitted value, and not inside one node."""
    from bandwall.model.topology import build_topology

    tcpxo = build_topology(gpus_per_node=8, scale_out="gcp-tcpxo", gpu="H100-SXM", nics_per_node=8)
    roce = build_topology(gpus_per_node=8, scale_out="roce-200", gpu="H100-SXM", nics_per_node=8)
    launch = overheads.LAUNCH_US[tcpxo.arch] * 1e-6
    across, inside = overheads.per_call_s(tcpxo, [True, False])
    assert across == pytest.approx(launch + 45e-6)
    assert inside == pytest.approx(launch)
    assert overheads.per_call_s(roce, [True])[0] == pytest.approx(
        launch + overheads.NETWORK_CALL_US.get("roce", 0.0) * 1e-6
    )


def test_gcp_tcpxo_reproduces_googles_small_message_floor() -> None:
    """Google's 2 × 8 H100 all_gather on A3 Mega (cluster-toolkit examples/gke-a3-megagpu,
    2ee5a53): 86.95 µs at 256 B, 84.41 µs at 16 KB, 133.87 µs at 1 MB; within 10%."""
    import numpy as np

    from bandwall.model.collectives import Algo, Op, collective_time_s
    from bandwall.model.topology import build_topology

    topo = build_topology(gpus_per_node=8, scale_out="gcp-tcpxo", gpu="H100-SXM", nics_per_node=8)
    sizes = np.array([256.0, 16384.0, 2.0**20])
    t = collective_time_s(Op.ALL_GATHER, Algo.AUTO, sizes, np.full(3, 16.0), topo) * 1e6
    assert t == pytest.approx([86.95, 84.41, 133.87], rel=0.10)


def test_blind_gcp_tcpxo_curves_at_large_sizes_within_10_percent() -> None:
    """The blind Ethernet batch's A3 Mega curves (dstack's two all_gather tunings, a fork of
    Google's guide for all_reduce; collective_blind_ethernet.csv) from 2 GB up, priced on
    gcp-tcpxo, whose efficiency came from Google's own run, not from these."""
    import numpy as np

    from bandwall.model.collectives import Algo, Op, collective_time_s
    from bandwall.model.topology import build_topology

    text = (
        resources.files("bandwall.measure.calibrate")
        .joinpath("data", "collective_blind_ethernet.csv")
        .read_text()
    )
    rows = [
        r
        for r in csv.DictReader(text.splitlines())
        if "a3mega" in r["curve"] and float(r["size_bytes"]) >= 2 * 2**30 and r["time_us"]
    ]
    assert len(rows) >= 8
    topo = build_topology(gpus_per_node=8, scale_out="gcp-tcpxo", gpu="H100-SXM", nics_per_node=8)
    for r in rows:
        op = Op.ALL_GATHER if r["op"] == "all_gather" else Op.ALL_REDUCE
        t = collective_time_s(
            op, Algo.AUTO, np.array([float(r["size_bytes"])]), np.array([16.0]), topo
        )[0]
        assert t * 1e6 == pytest.approx(float(r["time_us"]), rel=0.10), r["id"]
