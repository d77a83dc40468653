"""Training workloads: transformers from their dimensions, CNNs from measured figures."""

from bandwall.workloads.model import (
    Cnn,
    Transformer,
    Workload,
    builtin_workloads,
    custom_transformer,
    get_workload,
)

__all__ = [
    "Cnn",
    "Transformer",
    "Workload",
    "builtin_workloads",
    "custom_transformer",
    "get_workload",
]
