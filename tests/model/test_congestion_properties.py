"""Properties of the congestion terms over their input space (hypothesis; profile `ci` draws
the same examples every run, `HYPOTHESIS_PROFILE=explore` fresh ones):

- packed placement is never slower than scattered, for the collision factor and for the
  collective it prices;
- more NIC bandwidth never makes the scale-out capacity (NIC rate × collision factor /
  oversubscription) smaller, nor a training step slower (issue 22: Llama 3 8B on 512 GPUs
  on ai-factory-roce was 16.31 s at 7 Gb/s and 17.06 s at 11 Gb/s).
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bandwall.model import congestion, nccl
from bandwall.model.collectives import Algo, Op, collective_time_s
from bandwall.model.topology import Link, Topology, build_topology
from tests.conftest import plan_of

NIC_Bps = 50e9


def leaf_fabric(
    *, host_ports: int, paths: int, speed: float, nics: int, rail: bool, placement: str
) -> Topology:
    """A RoCE fabric whose leaves have exactly these host ports and uplinks."""
    out = Link(
        "roce-test",
        bandwidth_Bps=NIC_Bps,
        latency_s=4e-6,
        efficiency=0.93,
        transport="roce",
        load_balancing="ecmp",
        switch_Bps=(host_ports + paths * speed) * NIC_Bps,
        switch_port_Bps=speed * NIC_Bps,
        congestion_control="dcqcn",
    )
    up = Link("up", bandwidth_Bps=450e9, latency_s=1e-6, efficiency=0.824, transport="nvlink")
    return Topology(
        gpus_per_node=nics,
        scale_up=up if nics > 1 else None,
        scale_out=out,
        nics_per_node=nics,
        oversubscription=max(1.0, host_ports / (paths * speed)),
        placement=placement,
        rail_optimized=rail,
        fabric_tiers=2,
        leaf_ports=float(host_ports),
        ecmp_paths=float(paths),
    )


fabric_args = st.fixed_dictionaries(
    {
        "host_ports": st.sampled_from([4, 8, 16, 32]),
        "paths": st.sampled_from([2, 4, 8, 16, 32]),
        "speed": st.sampled_from([1.0, 2.0]),
        "nics": st.sampled_from([1, 2, 4, 8]),
        "rail": st.booleans(),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    args=fabric_args,
    nodes=st.integers(2, 600),
    flows=st.integers(1, 32),
    spacing=st.integers(1, 16),
    peers=st.sampled_from([1, 3, 15]),
    dispersion=st.sampled_from([None, 1.0, 0.5]),
)
def test_packed_never_below_scattered(
    args: dict[str, object],
    nodes: int,
    flows: int,
    spacing: int,
    peers: int,
    dispersion: float | None,
) -> None:
    """The collision factor of a packed group is at least the scattered one, for rings
    (one peer) and point-to-point to several peers, any member spacing."""
    packed = replace(
        leaf_fabric(**args, placement="packed"),  # type: ignore[arg-type]
        member_spacing_nodes=float(spacing),
        hash_dispersion=dispersion,
    )
    scattered = replace(packed, placement="scattered")
    kw = {"nodes": float(nodes), "flows_per_nic": float(flows), "peers": float(peers)}
    p = congestion.collisions(packed, **kw).factor
    s = congestion.collisions(scattered, **kw).factor
    assert float(p) >= float(s) - 1e-12


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fabric=st.sampled_from(["roce-100", "roce-200", "roce-400"]),
    ranks=st.sampled_from([16, 32, 64, 256, 1024, 4096]),
    size=st.sampled_from([2**20, 2**26, 2**32]),
    rail=st.booleans(),
    op=st.sampled_from([Op.ALL_REDUCE, Op.ALL_GATHER, Op.ALL_TO_ALL]),
)
def test_packed_collective_never_slower_than_scattered(
    fabric: str, ranks: int, size: int, rail: bool, op: Op
) -> None:
    """The collective priced on a packed placement never takes longer than on a scattered
    one (issue 22: 32 ranks on roce-400 top-of-rack, 4 GiB: 27.0 ms packed, 22.9 ms
    scattered, the whole job under one leaf)."""
    times = [
        float(
            collective_time_s(
                op,
                Algo.AUTO,
                size,
                ranks,
                build_topology(
                    gpus_per_node=8,
                    scale_out=fabric,
                    load_balancing="ecmp",
                    placement=placement,
                    rail_optimized=rail,
                ),
            )
        )
        for placement in ("packed", "scattered")
    ]
    assert times[0] <= times[1] * (1 + 1e-9)


def test_issue_example_packed_under_one_leaf() -> None:
    """`bandwall collective --ranks 32 --fabric roce-400 --no-rail-optimized --placement
    packed --routing ecmp --sizes 4G`: 4 nodes of 8 NICs fit one Tomahawk 4 leaf of 32 host
    ports (4 nodes), so nothing crosses and packed equals scattered."""
    topos = [
        build_topology(
            gpus_per_node=8,
            scale_out="roce-400",
            load_balancing="ecmp",
            placement=placement,
            rail_optimized=False,
        )
        for placement in ("packed", "scattered")
    ]
    t = [float(collective_time_s(Op.ALL_REDUCE, Algo.AUTO, 4 * 2**30, 32, x)) for x in topos]
    assert t[0] == pytest.approx(t[1])
    ordered = congestion.layout_collisions(topos[0], nodes=4.0, flows_per_nic=2.0)
    assert float(ordered.crossing) == 0.0 and float(ordered.factor) == 1.0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fabric=st.sampled_from(["roce-100", "roce-200", "roce-400"]),
    gbps=st.lists(st.floats(0.5, 800.0), min_size=2, max_size=6),
    ranks=st.sampled_from([64, 512, 4096, 32768]),
    placement=st.sampled_from(["packed", "scattered"]),
    qps=st.sampled_from([None, 4]),
)
def test_more_nic_bandwidth_never_less_scale_out_capacity(
    fabric: str, gbps: list[float], ranks: int, placement: str, qps: int | None
) -> None:
    """A what-if NIC rate (the `--bandwidth` of `plan`) scales what the NICs sustain
    after collisions (nccl.Shape.net_cap_GBps) without ever lowering it: the flows hashed
    are the channels NCCL opens for the NIC as cabled, whatever the what-if rate."""
    base = build_topology(
        gpus_per_node=8,
        scale_out=fabric,
        load_balancing="ecmp",
        placement=placement,
        qps_per_connection=qps,
    )
    assert base.scale_out is not None
    rates = np.sort(np.asarray(gbps)) * 1e9 / 8
    caps = [
        float(
            nccl.shape_of(
                np.asarray(float(ranks)),
                replace(base, scale_out=base.scale_out.with_overrides(bandwidth_Bps=r)),
            ).net_cap_GBps
        )
        for r in rates
    ]
    assert all(b >= a * (1 - 1e-12) for a, b in itertools.pairwise(caps)), caps


def test_training_step_never_slower_with_more_bandwidth() -> None:
    """Issue 22's example: Llama 3 8B, 512 GPUs, ai-factory-roce, tp = 1, ZeRO-3 at NIC
    rates from 7 to 25 Gb/s: each step no slower than at the rate before (the collision
    factor no longer drops from 0.60 to 0.37 between 7 and 11 Gb/s)."""
    steps = []
    for gbps in (7, 9, 11, 15, 25):
        plan = plan_of(
            model="llama3-8b", gpus=512, preset="ai-factory-roce", tp=1, zero=3, bandwidth_Gbps=gbps
        )
        steps.append(sum(plan.to_json()["breakdown"].values()))
    assert all(b <= a * (1 + 1e-9) for a, b in itertools.pairwise(steps)), steps
