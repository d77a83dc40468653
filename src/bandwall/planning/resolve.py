"""From a request to the model's inputs: the workload, and the cluster with any vector axes
(GPU counts, bandwidths, oversubscription, latencies, prices) as numpy arrays."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from bandwall.catalog import Precision, Tier, load_catalog
from bandwall.catalog.models import GpuSpec
from bandwall.errors import CatalogError, ConfigError
from bandwall.model import energy
from bandwall.model.cluster import Cluster
from bandwall.model.congestion import prices_failures
from bandwall.model.faults import (
    Routing,
    degraded_bandwidth_factor,
    parse_routing,
    slow_link_factor,
)
from bandwall.model.topology import Link
from bandwall.planning.presets import get_preset
from bandwall.planning.request import PlanRequest
from bandwall.units import GB, US
from bandwall.workloads import Transformer, Workload, custom_transformer, get_workload


def resolve_workload(req: PlanRequest) -> Workload:
    """The built-in model (with the request's sequence length) or the custom dimensions."""
    if req.model == "custom":
        dims = {
            k: getattr(req, k)
            for k in (
                "layers",
                "hidden",
                "heads",
                "kv_heads",
                "ffn",
                "vocab",
                "seq_len",
                "experts",
                "top_k",
                "gated_mlp",
                "moe_ffn",
                "shared_experts",
                "dense_layers",
            )
        }
        dims["head_size"] = req.head_dim
        return custom_transformer(**dims)
    w = get_workload(req.model)
    if req.seq_len and isinstance(w, Transformer):
        w = w.model_copy(update={"seq_len": req.seq_len})
    return w


def _vec(vec: dict[str, Any], name: str, scalar: Any) -> Any:
    """The vector axis `name` if the sweep gives one, else the request's scalar."""
    return vec.get(name, scalar)


#: Clusters of scalar requests, by request: (the data they were read from, the cluster).
_CLUSTERS: dict[PlanRequest, tuple[tuple[object, ...], Cluster]] = {}
_CLUSTERS_MAX = 256


def resolve_cluster(req: PlanRequest, vec: dict[str, Any] | None = None) -> Cluster:
    """The request's infrastructure. `vec` holds arrays for vector fields (sweeps).

    Pure in the (frozen) request and the catalog, so a scalar request's cluster is kept: a
    plan resolves it twice (the search, then the result) and compare/scale/the dashboard
    repeat requests. An entry is used only while the catalog, power table and presets it was
    read from are still the ones their loaders return (tests and overlays reload them)."""
    if vec:
        return _resolve_cluster(req, vec)
    from bandwall.catalog.power import load_power
    from bandwall.planning.presets import presets

    data = (load_catalog(), load_power(), presets())
    try:
        hit = _CLUSTERS.get(req)
    except TypeError:  # a field value that cannot be hashed: resolve every time
        return _resolve_cluster(req, None)
    if hit is not None and all(a is b for a, b in zip(hit[0], data, strict=True)):
        return hit[1]
    cluster = _resolve_cluster(req, None)
    if len(_CLUSTERS) >= _CLUSTERS_MAX:
        _CLUSTERS.clear()
    _CLUSTERS[req] = (data, cluster)
    return cluster


def _resolve_cluster(req: PlanRequest, vec: dict[str, Any] | None) -> Cluster:
    vec = vec or {}
    cat = load_catalog()
    preset = get_preset(req.preset)
    gpu = cat.gpu(req.gpu or preset.gpu)
    if req.power_cap_W is not None:
        _check_power_cap(req.power_cap_W, gpu)
    provider = cat.provider(req.provider or preset.provider)
    n_gpus = _vec(vec, "gpus", req.gpus)
    # Node size does not depend on the GPU count, so a sweep row prices exactly what a plan of
    # that count does; a job smaller than a node uses part of one.
    gpn = req.gpus_per_node or (gpu.scale_up_domain if req.gpu else preset.gpus_per_node)
    up_spec = cat.fabric(req.scale_up or gpu.scale_up_fabric)
    if up_spec.tier is not Tier.SCALE_UP:
        raise ConfigError(
            f"{up_spec.key!r} is a {up_spec.tier.value} fabric, not a scale-up fabric "
            "(nvlink4, pcie5, ...)",
            field="scale_up",
        )
    if req.scale_up is not None:
        from bandwall.model.topology import check_board_fabric

        check_board_fabric(gpu.name, gpu.scale_up_fabric, up_spec.key)
    out_spec = cat.fabric(req.fabric or preset.scale_out)
    if out_spec.tier is Tier.SCALE_UP:
        raise ConfigError(
            f"{out_spec.key!r} is a scale-up fabric; give a scale-out fabric such as ib-ndr, "
            "or --scale-up for the node",
            field="fabric",
        )
    bw = _vec(vec, "bandwidth_Gbps", req.bandwidth_Gbps)
    latency = _vec(vec, "latency_us", req.latency_us)
    jitter = _vec(vec, "jitter_us", req.jitter_us)
    out = Link.from_fabric(out_spec).with_overrides(
        bandwidth_Bps=None if bw is None else np.asarray(bw, dtype=np.float64) * GB / 8,
        latency_s=None if latency is None else np.asarray(latency, dtype=np.float64) * US,
        jitter_mean_s=None if jitter is None else np.asarray(jitter, dtype=np.float64) * US,
        jitter_std_s=None if jitter is None else np.asarray(jitter, dtype=np.float64) * US,
        loss_rate=req.loss_rate,
    )
    sites = req.sites or preset.sites
    wan_key = req.wan or preset.wan
    if sites > 1 and wan_key is None:
        raise ConfigError(f"{sites} sites need a --wan fabric between them", field="sites")
    wan = Link.from_fabric(cat.fabric(wan_key)) if (wan_key and sites > 1) else None
    price = _vec(vec, "price_per_gpu_hour_usd", req.price_per_gpu_hour_usd)
    if price is None:
        listed = provider.price(gpu.name)
        if listed is None:
            raise ConfigError(
                f"provider {provider.key!r} lists no price for {gpu.name}; it lists "
                f"{', '.join(p.gpu for p in provider.prices)}; pass --price-per-gpu-hour",
                field="price_per_gpu_hour_usd",
            )
        price = listed.typical
    nics = req.nics_per_node or (
        preset.nics_per_node if not req.fabric else out_spec.default_nics(gpn)
    )
    nics = float(min(nics, gpn))
    routing = parse_routing(req.routing)
    if routing is Routing.AUTO:
        routing = Routing.ADAPTIVE if out_spec.adaptive_routing else Routing.ECMP
    # hashed routing on a fabric with the collision model: failed links are spine paths
    # lost there (congestion.collisions), not a fabric-wide health factor on top of it
    by_collisions = prices_failures(out, routing.value)
    health, failed = _fabric_health(req, n_gpus, gpn, nics, routing, by_collisions)
    oversub = _vec(vec, "oversubscription", req.oversubscription)
    cluster = Cluster(
        preset=preset.key,
        provider=provider.key,
        gpu=gpu,
        perf=cat.gpu_perf(gpu.name),
        precision=Precision(req.precision),
        num_gpus=n_gpus,
        gpus_per_node=gpn,
        sites=sites,
        scale_up=Link.from_fabric(up_spec) if gpn > 1 else None,
        scale_out=out,
        wan=wan,
        nics_per_node=nics,
        oversubscription=oversub if oversub is not None else preset.oversubscription,
        tcp_streams=req.tcp_streams,
        price_per_gpu_hour_usd=price,
        virtualization_overhead=provider.virtualization_overhead,
        power_cap_W=req.power_cap_W or gpu.power_limit_W,
        egress_usd_per_GB=provider.egress_usd_per_GB,
        straggler_fraction=req.straggler_fraction,
        straggler_slowdown=req.straggler_slowdown,
        failures=cat.failure_profile(provider.failure_profile) if req.failures else None,
        checkpoint_write_GBps_per_node=(
            math.inf if req.checkpoint_GBps else provider.checkpoint_write_GBps_per_node
        ),
        checkpoint_write_cap_GBps=req.checkpoint_GBps or provider.checkpoint_write_cap_GBps,
        restart_s=provider.restart_s if req.restart_s is None else req.restart_s,
        fabric_health=health,
        failed_links=failed,
        routing=routing.value,
        congestion_control=req.congestion_control,
        tcp_window_bytes=req.tcp_window_bytes,
        in_network=req.in_network,
        qps_per_connection=_vec(vec, "qps_per_connection", req.qps_per_connection),
        placement=req.placement,
        rail_optimized=req.rail_optimized,
        ecmp_paths=req.ecmp_paths,
        rdma_cc=None if req.rdma_cc == "auto" else req.rdma_cc,
    )
    profile = energy_profile(
        cluster,
        pue=req.pue,
        grid_region=req.grid_region,
        grid_gco2_per_kWh=req.grid_gco2_per_kWh,
        price_per_kWh_usd=req.price_per_kWh_usd,
        co_packaged_optics=req.co_packaged_optics,
    )
    return dataclasses.replace(cluster, energy=profile)


def _fabric_health(
    req: PlanRequest,
    gpus: Any,
    gpn: int,
    nics: float,
    routing: Routing,
    by_collisions: bool = False,
) -> tuple[Any, Any]:
    """Scale-out bandwidth share left by failed links (rerouted or rehashed) and slow links.

    The scale-out tier is taken as a non-blocking fat tree or rail-optimized tree with one
    uplink per NIC: L = nodes × NICs links. With `by_collisions` the failed links are left
    to the collision model (the health keeps only the slow links).
    """
    if req.failed_links is not None and req.failed_link_fraction is not None:
        raise ConfigError(
            "give --failed-links or --failed-link-fraction, not both", field="failed_links"
        )
    nodes = np.ceil(np.asarray(gpus, dtype=np.float64) / gpn)
    links = np.maximum(np.round(nodes * nics), 1.0)
    uniq, inverse = np.unique(links, return_inverse=True)
    factors, fails = [], []
    for n_links in uniq:
        k = (
            req.failed_links
            if req.failed_links is not None
            else round((req.failed_link_fraction or 0.0) * n_links)
        )
        if not 0 <= k < n_links:
            if req.failed_links is None:
                raise ConfigError(
                    f"{req.failed_link_fraction} of {int(n_links)} scale-out links rounds to "
                    f"{k} failed; give a fraction under {(n_links - 0.5) / n_links:g} (at "
                    "least one link must stay up)",
                    field="failed_link_fraction",
                )
            raise ConfigError(
                f"{k} must be in [0, {int(n_links)}) for {int(n_links)} scale-out links",
                field="failed_links",
            )
        factors.append(
            1.0 if by_collisions else degraded_bandwidth_factor(int(n_links), int(k), routing)
        )
        fails.append(float(k))
    factor = np.asarray(factors)[inverse].reshape(np.shape(links))
    failed = np.asarray(fails)[inverse].reshape(np.shape(links))
    slow = slow_link_factor(links, req.slow_link_fraction, req.slow_link_speed)
    health = factor * slow
    if np.ndim(health) == 0:
        return float(health), float(failed)
    return health, failed


def describe_cluster(cl: Cluster) -> dict[str, Any]:
    """What a plan's output says about the infrastructure."""
    out = cl.scale_out
    return {
        "preset": cl.preset,
        "provider": cl.provider,
        "gpu": cl.gpu.name,
        "precision": cl.precision.value,
        "gpus_per_node": cl.gpus_per_node,
        "sites": cl.sites,
        "scale_up": cl.scale_up.name if cl.scale_up else None,
        "scale_out": out.name if out else None,
        "scale_out_Gbps_per_nic": (float(np.max(out.bandwidth_Bps)) * 8 / GB) if out else None,
        "scale_out_transport": _transport_word(out) if out else None,
        "nics_per_node": cl.nics_per_node,
        "oversubscription": float(np.max(cl.oversubscription)),
        "wan": cl.wan.name if cl.wan else None,
        "virtualization_overhead": cl.virtualization_overhead,
        "egress_usd_per_GB": cl.egress_usd_per_GB,
        "peak_TFLOPS": cl.peak_flops / 1e12,
        "jitter_mean_us": float(np.max(out.jitter_mean_s)) / US if out else None,
        "routing": cl.routing,
        "failed_links": float(np.max(cl.failed_links)),
        "fabric_health": float(np.min(cl.fabric_health)),
        "qps_per_connection": (
            float(np.max(cl.qps_per_connection)) if cl.qps_per_connection is not None else 1.0
        ),
        "placement": cl.placement,
        "rail_optimized": cl.rail_optimized,
    }


def energy_profile(
    cl: Cluster,
    *,
    pue: float | None = None,
    grid_region: str | None = None,
    grid_gco2_per_kWh: float | None = None,
    price_per_kWh_usd: float | None = None,
    co_packaged_optics: bool = False,
    network: bool = True,
) -> energy.EnergyProfile:
    """The cluster's power and grid figures from catalog/data/power.toml, with overrides. The
    scale-out network's share per GPU follows from the NIC ports of the whole cluster."""
    from bandwall.catalog import load_catalog
    from bandwall.catalog.power import load_power

    pw = load_power()
    kind = load_catalog().provider(cl.provider).kind.value
    site = pw.site(kind)
    gpu = pw.gpu(cl.gpu.name)
    grid = grid_gco2_per_kWh
    if grid is None:
        grid = pw.grid(grid_region or site.grid_region).g_co2_per_kWh
    net_W: Any = 0.0
    port = pw.network(cl.scale_out.transport) if (network and cl.scale_out) else None
    if port is not None:
        nodes = np.asarray(cl.nodes(), dtype=np.float64)
        endpoints = np.where(nodes > 1, nodes * cl.nics_per_node, 0.0)
        per_port = energy.network_W_per_port(
            port.nic_W,
            port.optics_W,
            port.switch_W_per_port,
            energy.fat_tree_tiers(endpoints),
            cpo_optics_W=port.cpo_optics_W if co_packaged_optics else None,
        )
        net_W = per_port * cl.nics_per_node / cl.gpus_per_node
    return energy.EnergyProfile(
        idle_W=gpu.idle_W,
        tdp_W=cl.gpu.tdp_W,
        host_W_per_gpu=gpu.host_W_per_gpu,
        network_W_per_gpu=net_W,
        pue=site.pue if pue is None else pue,
        g_co2_per_kWh=float(grid),
        price_per_kWh_usd=site.price_per_kWh_usd
        if price_per_kWh_usd is None
        else price_per_kWh_usd,
        power_cap_W=cl.power_cap_W,
        curve=pw.curve(gpu.curve),
    )


#: Lowest power limit a board accepts, as a share of its TDP: nvidia-smi -q prints "Min Power
#: Limit" 200 W for an H100 SXM (700 W), 100 W for an A100 SXM (400 W) and 100 W for an RTX
#: 3090 (350 W): 25-29%. Below it the clock model had every cap priced at its clock floor, so
#: the lowest cap always looked cheapest (fuzz round 16, D3).
MIN_POWER_LIMIT_SHARE = 0.25


def _check_power_cap(cap_W: float, gpu: GpuSpec) -> None:
    """A board cannot be held below what it draws idle (power.toml's idle_W, nvidia-smi in P0
    with nothing running): a lower cap describes no real GPU, and the clock model would price
    it as a GPU running at a few per cent of its speed while drawing more than the cap."""
    from bandwall.catalog.power import load_power

    if cap_W > gpu.tdp_W:
        # nvidia-smi -pl refuses a limit above the board's maximum; the energy model would
        # clamp it silently and print the cap as given
        raise ConfigError(
            f"{cap_W:g} W is above the {gpu.name}'s {gpu.tdp_W:g} W limit (its TDP); give at "
            f"most {gpu.tdp_W:g} W, or leave --power-cap-w out",
            field="power_cap_W",
        )
    floor = MIN_POWER_LIMIT_SHARE * gpu.tdp_W
    try:
        idle = load_power().gpu(gpu.name).idle_W
    except CatalogError:
        idle = 0.0  # no power data for this GPU: the energy model says so where it needs it
    lowest = max(idle, floor)
    if cap_W < lowest:
        why = (
            f"what a {gpu.name} draws idle ({idle:g} W)"
            if idle >= floor
            else f"the lowest limit boards accept (~{MIN_POWER_LIMIT_SHARE:.0%} of the TDP)"
        )
        raise ConfigError(
            f"{cap_W:g} W is below {why}; give {lowest:g}-{gpu.tdp_W:g} W (the TDP)",
            field="power_cap_W",
        )


def _transport_word(out: Link) -> str:
    """How a plan names a scale-out NIC: tcp (sockets), gpudirect-tcp (Google's TCPX/TCPXO:
    TCP into GPU memory, priced as a GPUDirect device) or rdma."""
    if out.tcp:
        return "tcp"
    return "gpudirect-tcp" if out.gpudirect_tcp else "rdma"
