"""Calibrated fabric profiles (`bandwall calibrate`): per-op factors on the bandwidth term and
a separate small-message regime, applied to whatever model prices the collective."""

from __future__ import annotations

from dataclasses import replace

from bandwall.model.collectives.vocab import Op
from bandwall.model.topology import Link, Topology


def _links(topo: Topology) -> tuple[Link | None, Link | None, Link | None]:
    return topo.scale_up, topo.scale_out, topo.wan


def _scaled(link: Link | None, op: Op) -> Link | None:
    if link is None or not link.op_time_factors:
        return link
    return replace(link, efficiency=link.efficiency / link.op_factor(op.value))


def per_op(op: Op, topo: Topology) -> Topology:
    """Per-op factors of calibrated links, applied as a slower (or faster) link for `op`."""
    if not any(link is not None and link.op_time_factors for link in _links(topo)):
        return topo
    return replace(
        topo,
        scale_up=_scaled(topo.scale_up, op),
        scale_out=_scaled(topo.scale_out, op),
        wan=_scaled(topo.wan, op),
    )


def small_regime(topo: Topology) -> tuple[float, Topology] | None:
    """The size below which calibrated small-message parameters apply, and that topology."""
    cut = [link.small_message_bytes for link in _links(topo) if link is not None]
    cut = [c for c in cut if c > 0]
    if not cut:
        return None

    def small(link: Link | None) -> Link | None:
        return link.small_variant() if link is not None and link.small_message_bytes else link

    return min(cut), replace(
        topo, scale_up=small(topo.scale_up), scale_out=small(topo.scale_out), wan=small(topo.wan)
    )
