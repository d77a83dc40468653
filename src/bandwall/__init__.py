"""bandwall: measure, model and price the bandwidth wall of distributed training.

The public API is what ``__all__`` lists; everything else is private and may change.
"""

from bandwall.catalog import Catalog, load_catalog
from bandwall.collectives import Algo, Link, Op, Topology, build_topology, evaluate
from bandwall.errors import BandwallError, CatalogError, ConfigError, LayoutError

__version__ = "0.1.0"

__all__ = [
    "Algo",
    "BandwallError",
    "Catalog",
    "CatalogError",
    "ConfigError",
    "LayoutError",
    "Link",
    "Op",
    "Topology",
    "__version__",
    "build_topology",
    "evaluate",
    "load_catalog",
]
