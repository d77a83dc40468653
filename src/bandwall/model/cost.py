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
    virtual_stages: Any,
    is_transformer: bool,
    activation_bytes_per_step: Any,
    sync_bytes: float,
    local_sgd_steps: int,
    workers: Any = 1.0,
) -> Any:
    """Bytes leaving the sites per step, summed over sites (what egress is billed on).

    Pipeline stages split across sites (pp a multiple of the site count): each micro-batch's
    activations cross forward, and their gradients back, v·sites − 1 times per direction (an
    interleaved schedule of v chunks crosses every boundary v times and wraps from the last
    site to the first v − 1 times). Otherwise the data-parallel (or DiLoCo pseudo-)gradients
    leave every site 2·(sites−1)/sites times (ring reduce-scatter + all-gather): 2·(sites−1)
    model copies in all, once every local-SGD period. DiLoCo `workers` are placed site by site
    (the engine prices their pipelines that way): a pipeline crosses sites only where a worker
    spans several, and then only its own sites/workers of them.
    """
    if sites <= 1:
        return np.zeros(np.shape(pp))
    workers = np.asarray(workers, dtype=np.float64)
    sites_per_worker = sites / np.maximum(workers, 1.0)
    pp_across = (
        (pp >= sites_per_worker)
        & (np.mod(pp, sites_per_worker) == 0)
        & (sites_per_worker > 1)
        & is_transformer
    )
    crossings = virtual_stages * sites_per_worker - 1
    return np.where(
        pp_across,
        crossings * 2 * activation_bytes_per_step,
        2 * (sites - 1) * sync_bytes / local_sgd_steps,
    )
