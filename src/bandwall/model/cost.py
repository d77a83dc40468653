"""Money: GPU-hours at the provider's price, and egress for bytes that leave a site."""

from __future__ import annotations

from typing import Any

import numpy as np

SECONDS_PER_HOUR = 3600.0


def gpu_hours(gpus: Any, wall_time_s: Any) -> Any:
    return gpus * wall_time_s / SECONDS_PER_HOUR


def egress_bytes_per_step(
    sites: int,
    pp: Any,
    is_transformer: bool,
    activation_bytes_per_step: Any,
    gradient_bytes: float,
    local_sgd_steps: int,
) -> Any:
    """Bytes crossing between sites per step (what egress is billed on).

    With pipeline stages split across sites (pp a multiple of the site count), activations go
    forward and gradients back across each of the sites-1 boundaries; otherwise the
    data-parallel gradients cross every boundary twice (reduce-scatter + all-gather),
    amortised over the local-SGD period.
    """
    if sites <= 1:
        return np.zeros(np.shape(pp))
    pp_across = (pp >= sites) & (np.mod(pp, sites) == 0) & is_transformer
    return np.where(
        pp_across,
        (sites - 1) * 2 * activation_bytes_per_step,
        2 * (sites - 1) * gradient_bytes / local_sgd_steps,
    )
