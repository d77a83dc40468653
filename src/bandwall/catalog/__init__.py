"""Hardware catalog: GPUs, fabrics and providers as sourced, validated data."""

from bandwall.catalog.loader import Catalog, load_catalog
from bandwall.catalog.models import (
    FabricSpec,
    FailureSpec,
    GpuSpec,
    Precision,
    PriceRange,
    ProviderKind,
    ProviderSpec,
    Tier,
    Transport,
)

__all__ = [
    "Catalog",
    "FabricSpec",
    "FailureSpec",
    "GpuSpec",
    "Precision",
    "PriceRange",
    "ProviderKind",
    "ProviderSpec",
    "Tier",
    "Transport",
    "load_catalog",
]
