"""Training plans: step time, efficiency, MFU, time to train and cost on an infrastructure."""

from bandwall.plan.api import (
    Plan,
    PlanRequest,
    auto_layout,
    compare_plans,
    make_plan,
    request_from_fields,
    scale_plans,
)
from bandwall.plan.cluster import Cluster, ClusterSpec, get_preset, presets, resolve_cluster
from bandwall.plan.layout import Strategy
from bandwall.plan.step import ASSUMPTIONS, evaluate_step

__all__ = [
    "ASSUMPTIONS",
    "Cluster",
    "ClusterSpec",
    "Plan",
    "PlanRequest",
    "Strategy",
    "auto_layout",
    "compare_plans",
    "evaluate_step",
    "get_preset",
    "make_plan",
    "presets",
    "request_from_fields",
    "resolve_cluster",
    "scale_plans",
]
