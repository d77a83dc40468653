"""bandwall: measure, model and price the bandwidth wall of distributed training.

The public API is what ``__all__`` lists; everything else is private and may change. Names are
imported on first use (SPEC 1 lazy loading), so ``import bandwall`` is instant.

>>> import bandwall
>>> req = bandwall.PlanRequest(model="llama3-8b", gpus=64, tp=8, pp=1, cp=1, zero=1)
>>> p = bandwall.plan(req)
>>> p.layout["dp"], round(p.metrics["step_time_s"], 1) > 0
(8, True)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

#: public name → module that defines it
_EXPORTS = {
    "plan": "bandwall.planning.api",
    "sweep": "bandwall.planning.api",
    "compare": "bandwall.planning.api",
    "scale": "bandwall.planning.api",
    "Plan": "bandwall.planning.api",
    "PlanRequest": "bandwall.planning.request",
    "make_request": "bandwall.planning.request",
    "Metrics": "bandwall.model.engine",
    "evaluate_collective": "bandwall.model.collectives",
    "CollectiveResult": "bandwall.model.collectives",
    "Op": "bandwall.model.collectives",
    "Algo": "bandwall.model.collectives",
    "Link": "bandwall.model.topology",
    "Topology": "bandwall.model.topology",
    "build_topology": "bandwall.model.topology",
    "Catalog": "bandwall.catalog",
    "load_catalog": "bandwall.catalog",
    "BandwallError": "bandwall.errors",
    "ConfigError": "bandwall.errors",
    "LayoutError": "bandwall.errors",
    "CatalogError": "bandwall.errors",
    "BenchmarkError": "bandwall.errors",
    "LabError": "bandwall.errors",
}

__all__ = [
    "Algo",
    "BandwallError",
    "BenchmarkError",
    "Catalog",
    "CatalogError",
    "CollectiveResult",
    "ConfigError",
    "LabError",
    "LayoutError",
    "Link",
    "Metrics",
    "Op",
    "Plan",
    "PlanRequest",
    "Topology",
    "__version__",
    "build_topology",
    "compare",
    "evaluate_collective",
    "load_catalog",
    "make_request",
    "plan",
    "scale",
    "sweep",
]

if TYPE_CHECKING:
    from bandwall.catalog import Catalog, load_catalog
    from bandwall.errors import (
        BandwallError,
        BenchmarkError,
        CatalogError,
        ConfigError,
        LabError,
        LayoutError,
    )
    from bandwall.model.collectives import Algo, CollectiveResult, Op, evaluate_collective
    from bandwall.model.engine import Metrics
    from bandwall.model.topology import Link, Topology, build_topology
    from bandwall.planning.api import Plan, compare, plan, scale, sweep
    from bandwall.planning.request import PlanRequest, make_request


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bandwall' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
