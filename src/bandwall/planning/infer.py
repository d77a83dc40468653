"""`infer`: serve a model on an infrastructure — latency, throughput, cost and energy per token.

`InferRequest` (planning/request.py, beside the plan request it extends) is the plan request
(`PlanRequest`: model, preset, GPU, fabric, prices...) plus the serving fields (prompt and
output lengths, concurrency, latency target) and the energy fields (PUE, grid, electricity
price). Layout axes `tp` and `pp` left unset are searched, as is the concurrency: the cheapest
feasible candidate per token wins (ties: the lower ITL).
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from bandwall.errors import ConfigError, LayoutError
from bandwall.model import energy
from bandwall.model.cluster import Cluster
from bandwall.model.serving import ServeOptions, ServingMetrics, evaluate_serving
from bandwall.planning.request import (
    InferRequest,
    make_infer_request,
)
from bandwall.planning.resolve import (
    describe_cluster,
    energy_profile,
    resolve_cluster,
    resolve_workload,
)
from bandwall.workloads import Transformer


def request_energy_profile(req: InferRequest, cl: Cluster) -> energy.EnergyProfile:
    return energy_profile(
        cl,
        pue=req.pue,
        grid_region=req.grid_region,
        grid_gco2_per_kWh=req.grid_gco2_per_kWh,
        price_per_kWh_usd=req.price_per_kWh_usd,
        co_packaged_optics=req.co_packaged_optics,
    )


def serving_energy(
    profile: energy.EnergyProfile, m: ServingMetrics, price_per_gpu_hour_usd: Any
) -> dict[str, Any]:
    """Per-GPU facility power, J/token, tokens/kWh, cost and CO2 per million tokens."""
    u = energy.power_utilisation(m.flop_util, m.hbm_util)
    gpu_W = energy.busy_wait_power_W(profile.idle_W, profile.tdp_W, m.busy_share, u)
    facility = energy.facility_power_W(profile.it_W(gpu_W), profile.pue)
    jpt = energy.joules_per_token(facility * m.gpus_per_replica, m.tokens_per_s_replica)
    kwh_per_m = jpt * 1e6 / energy.J_PER_KWH
    gpu_usd_per_m = (
        np.asarray(price_per_gpu_hour_usd) * m.gpus_per_replica / 3600.0 / m.tokens_per_s_replica
    ) * 1e6
    return {
        "gpu_power_W": gpu_W,
        "facility_power_W_per_gpu": facility,
        "joules_per_token": jpt,
        "tokens_per_kwh": energy.tokens_per_kWh(jpt),
        "kwh_per_million_tokens": kwh_per_m,
        "cost_per_million_tokens_usd": gpu_usd_per_m,
        "energy_cost_per_million_tokens_usd": energy.energy_cost_usd(
            kwh_per_m, profile.price_per_kWh_usd
        ),
        "co2_g_per_million_tokens": energy.co2_kg(kwh_per_m, profile.g_co2_per_kWh) * 1000.0,
    }


# --- infer -------------------------------------------------------------------------------


def _pow2_upto(limit: float) -> list[int]:
    return [2**i for i in range(0, 31) if 2**i <= limit]


def serve_options(req: InferRequest) -> ServeOptions:
    wbytes = 1.0 if req.precision == "fp8" else 2.0
    kv = {"auto": wbytes, "bf16": 2.0, "fp8": 1.0}[req.kv_cache_dtype]
    return ServeOptions(
        prompt_tokens=float(req.prompt_tokens),
        output_tokens=float(req.output_tokens),
        weight_bytes=wbytes,
        kv_bytes=kv,
        static_batch=req.static_batch,
        spread_sites=req.spread_sites,
    )


def _candidates(req: InferRequest, w: Transformer, cl: Cluster) -> tuple[np.ndarray, ...]:
    gpn = cl.gpus_per_node
    tps = [req.tp] if req.tp else _pow2_upto(min(gpn, req.gpus))
    pps = [req.pp] if req.pp else _pow2_upto(min(w.layers, req.gpus))
    rows = []
    for tp in tps:
        for pp in pps:
            if tp * pp > req.gpus:
                continue
            if req.concurrency is not None:
                batches = [req.concurrency / pp] if req.concurrency >= pp else []
            else:
                cap = req.max_concurrency // (1 if req.static_batch else pp)
                batches = [float(b) for b in _pow2_upto(cap)]
                if cap >= 1 and cap not in batches:
                    batches.append(float(cap))
            rows += [(tp, pp, b) for b in batches]
    if not rows:
        raise LayoutError(
            f"no tp x pp fits in {req.gpus:,} GPUs with concurrency {req.concurrency}",
            field="concurrency" if req.concurrency else "gpus",
        )
    grid = np.array(rows, dtype=np.float64)
    return grid[:, 0], grid[:, 1], grid[:, 2]


@dataclass
class Inference:
    """A priced serving plan: one replica layout, its latency, throughput, cost and energy."""

    request: InferRequest
    workload: Transformer
    cluster: Cluster
    metrics: dict[str, float]
    searched: tuple[str, ...]
    tried: int
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.workload.key,
            "model_name": self.workload.name,
            **self.metrics,
            "search": {"searched": list(self.searched), "tried": self.tried},
            "cluster": describe_cluster(self.cluster),
            "request": self.request.model_dump(mode="json", exclude_defaults=True),
            "notes": self.notes,
        }


def evaluate_inference(
    req: InferRequest,
) -> tuple[Transformer, Cluster, ServingMetrics, dict[str, Any], energy.EnergyProfile]:
    """Every candidate (tp, pp, batch) of the request, priced (no choice made)."""
    w = resolve_workload(req)
    if not isinstance(w, Transformer):
        raise ConfigError(f"{w.key} is not a transformer decoder; infer serves LLMs", field="model")
    cl = resolve_cluster(req)
    tp, pp, batch = _candidates(req, w, cl)
    m = evaluate_serving(w, cl, tp, pp, batch, serve_options(req))
    profile = request_energy_profile(req, cl)
    e = serving_energy(profile, m, cl.price_per_gpu_hour_usd)
    return w, cl, m, e, profile


def infer(req: InferRequest) -> Inference:
    """Serve the request's model: TTFT, inter-token latency, tokens/s per GPU and per replica,
    cost and energy per million output tokens. Unset tp, pp and concurrency are searched."""
    w, cl, m, e, profile = evaluate_inference(req)
    ok = m.fits & (m.concurrency <= max(req.max_concurrency, req.concurrency or 0))
    if req.max_itl_ms is not None:
        meets = m.itl_s * 1e3 <= req.max_itl_ms
        if not np.any(ok & meets) and np.any(ok):
            best = float(np.min(np.where(ok, m.itl_s, np.inf))) * 1e3
            raise ConfigError(
                f"no layout meets {req.max_itl_ms:g} ms per token on {cl.gpu.name} ({cl.preset});"
                f" the fastest fitting one gives {best:,.1f} ms",
                field="max_itl_ms",
            )
        ok = ok & meets
    if not np.any(ok):
        need = float(np.min(m.weights_bytes)) / 1e9
        raise LayoutError(
            f"{w.key} does not fit on {req.gpus:,} x {cl.gpu.name}: weights alone need "
            f"{need:,.1f} GB per GPU at the widest layout against "
            f"{float(np.max(m.memory_capacity_bytes)) / 1e9:,.1f} GB usable; add GPUs, use "
            "--precision fp8 or a larger GPU",
            field="gpus",
        )
    cost = np.asarray(e["cost_per_million_tokens_usd"])
    key = np.where(ok, cost * (1 + 1e-9 * m.itl_s), np.inf)
    i = int(np.argmin(key))
    row = m.row(i)
    row.update({k: np.asarray(v).reshape(-1)[i].item() for k, v in e.items()})
    replicas = math.floor(req.gpus / row["gpus_per_replica"])
    row.update(
        {
            "replicas": replicas,
            "tokens_per_s": row["tokens_per_s_replica"] * replicas,
            "price_per_gpu_hour_usd": float(np.max(cl.price_per_gpu_hour_usd)),
            "pue": profile.pue,
            "g_co2_per_kWh": profile.g_co2_per_kWh,
            "price_per_kWh_usd": profile.price_per_kWh_usd,
            "prompt_tokens": req.prompt_tokens,
            "output_tokens": req.output_tokens,
        }
    )
    searched = tuple(
        a
        for a, given in (("tp", req.tp), ("pp", req.pp), ("concurrency", req.concurrency))
        if given is None
    )
    notes = _notes(req, cl, row)
    return Inference(req, w, cl, row, searched, len(m), notes)


def _notes(req: InferRequest, cl: Cluster, row: dict[str, Any]) -> list[str]:
    notes = [
        "cost per million output tokens at the GPU-hour price (input tokens are in the work, not "
        "in the count); energy cost is what an owner pays for the electricity "
        f"(${row['price_per_kWh_usd']:.3f}/kWh), already inside a rental price.",
        "queueing is not modelled: TTFT is the prefill plus half a decode iteration under load.",
    ]
    if row["pp"] > 1 and row["hop_s"] > 0.1 * row["itl_s"]:
        notes.append(
            f"pipeline hops take {row['hop_s'] / row['itl_s']:.0%} of each token's latency "
            f"({row['hop_s'] * 1e3:,.1f} ms): the stages sit on slow links."
        )
    if cl.sites > 1 and not req.spread_sites:
        notes.append(
            "replicas stay inside a site where they fit: serving needs no synchronisation "
            "between replicas, so the WAN only carries requests and responses."
        )
    return notes


def compare_infer(req: InferRequest, preset_keys: list[str]) -> list[Inference]:
    """The same serving job on several presets (each with its own best layout)."""
    return [infer(req.model_copy(update={"preset": key})) for key in preset_keys]


# --- validation against published measurements -------------------------------------------


@cache
def _validation_rows() -> dict[str, list[dict[str, Any]]]:
    text = resources.files("bandwall.planning").joinpath("data", "serving_validation.toml")
    data = tomllib.loads(text.read_text("utf-8"))
    return {"serving": list(data.get("serving", [])), "energy": list(data.get("energy", []))}


def validation_rows(kind: str) -> list[dict[str, Any]]:
    """The published rows shipped in planning/data/serving_validation.toml."""
    return [dict(r) for r in _validation_rows()[kind]]


_DIMS = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab")


def _row_request(row: dict[str, Any]) -> InferRequest:
    dims = {k: row[k] for k in _DIMS if k in row}
    model = row.get("model", "custom")
    extra = {"seq_len": 4096} if model == "custom" else {}
    tp, pp = int(row.get("tp", 1)), int(row.get("pp", 1))
    return make_infer_request(
        model=model,
        gated_mlp=True if model == "custom" else None,
        **dims,
        **extra,
        preset="ai-factory-ib",
        gpu=row["gpu"],
        gpus=int(row.get("gpus", tp * pp)),
        precision=row.get("precision", "bf16"),
        tp=tp,
        pp=pp,
        concurrency=int(row["batch"]) * (1 if row.get("static_batch") else pp),
        max_concurrency=1 << 20,
        prompt_tokens=int(row["prompt_tokens"]),
        output_tokens=int(row["output_tokens"]),
        static_batch=bool(row.get("static_batch", False)),
    )


def _metric(m: ServingMetrics, metric: str) -> float:
    value = {
        "tokens_per_s_per_gpu": m.tokens_per_s_per_gpu,
        "ttft_ms": m.ttft_s * 1e3,
        "itl_ms": m.itl_s * 1e3,
    }[metric]
    return float(np.asarray(value).reshape(-1)[0])


def validate_serving(
    *, hbm_factor: float | None = None, fp8_gemm_factor: float | None = None
) -> list[dict[str, Any]]:
    """Each published serving row against the model: measured, predicted, signed error.
    The two factors override ServeOptions' fitted constants (for refitting)."""
    out = []
    for row in validation_rows("serving"):
        req = _row_request(row)
        w = resolve_workload(req)
        assert isinstance(w, Transformer)
        cl = resolve_cluster(req)
        b = float(row["batch"])
        opt = serve_options(req)
        if hbm_factor is not None:
            opt = dataclasses.replace(opt, hbm_factor=hbm_factor)
        if fp8_gemm_factor is not None:
            opt = dataclasses.replace(opt, fp8_gemm_factor=fp8_gemm_factor)
        m = evaluate_serving(w, cl, float(req.tp or 1), float(req.pp or 1), b, opt)
        pred = _metric(m, row["metric"])
        out.append(
            {
                "id": row["id"],
                "metric": row["metric"],
                "measured": float(row["measured"]),
                "predicted": pred,
                "error": pred / float(row["measured"]) - 1.0,
                "source": row["source"],
            }
        )
    return out


def validate_energy() -> list[dict[str, Any]]:
    """Average power per GPU (server or system AC, PUE 1) against MLPerf Power measurements;
    for serving rows also J/token."""
    from bandwall.planning.api import plan
    from bandwall.planning.request import make_request

    out = []
    for row in validation_rows("energy"):
        measured = float(row["measured_W_per_gpu"])
        if row["kind"] == "serving":
            req = _row_request(row)
            w = resolve_workload(req)
            assert isinstance(w, Transformer)
            cl = resolve_cluster(req)
            tp, pp = float(req.tp or 1), float(req.pp or 1)
            m = evaluate_serving(w, cl, tp, pp, float(row["batch"]), serve_options(req))
            prof = energy_profile(cl, pue=1.0, network=False)
            e = serving_energy(prof, m, cl.price_per_gpu_hour_usd)
            pred = float(np.asarray(e["facility_power_W_per_gpu"]).reshape(-1)[0])
            rate = float(np.asarray(m.tokens_per_s_per_gpu).reshape(-1)[0])
            measured_rate = float(row["tokens_per_s"]) / float(row["gpus"])
            extra = {
                "measured_J_per_token": measured / measured_rate,
                "predicted_J_per_token": pred / rate,
            }
        else:
            fields_: dict[str, Any] = {
                "model": row["model"],
                "gpu": row["gpu"],
                "gpus": int(row["gpus"]),
                "preset": "ai-factory-ib",
                "tp": int(row["tp"]),
                "pp": int(row["pp"]),
                "seq_len": int(row["seq_len"]),
                "global_batch": int(row["global_batch"]),
                "failures": False,
            }
            if "lora_rank" in row:
                fields_["lora_rank"] = int(row["lora_rank"])
            p = plan(make_request(**fields_))
            mt = p.metrics
            prof = energy_profile(p.cluster, pue=1.0)
            pred = float(
                np.asarray(
                    energy.training_power_W(
                        prof,
                        step_s=mt["step_time_s"],
                        compute_s=mt["compute_s"],
                        flops_per_gpu_step=mt["tflops_per_gpu"] * 1e12 * mt["step_time_s"],
                        peak_flops=p.cluster.peak_flops,
                    )
                ).reshape(-1)[0]
            )
            extra = {}
        out.append(
            {
                "id": row["id"],
                "kind": row["kind"],
                "measured_W_per_gpu": measured,
                "predicted_W_per_gpu": pred,
                "error": pred / measured - 1.0,
                **extra,
                "source": row["source"],
            }
        )
    return out


def holdout(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(fit, held out): every third row (in file order) is held out of any fit."""
    return [r for i, r in enumerate(rows) if i % 3 != 2], [
        r for i, r in enumerate(rows) if i % 3 == 2
    ]


def error_summary(errors: list[float]) -> dict[str, float]:
    """Median, mean and max of |error| over a list of signed relative errors."""
    a = np.abs(np.asarray(errors, dtype=np.float64))
    return {
        "rows": float(a.size),
        "median_abs_error": float(np.median(a)),
        "mean_abs_error": float(np.mean(a)),
        "max_abs_error": float(np.max(a)),
    }
