"""Published serving and energy measurements against the model, split fit / held out.

The rows live in ``planning/data/serving_validation.toml`` (throughput, TTFT and ITL of
TensorRT-LLM, NIM, MLPerf Inference and Petals runs) and ``energy_validation.toml`` (MLPerf
Inference and Training power, and energy as model cards account it). Each row is mapped to
the one request schema (`InferRequest`, or `PlanRequest` for training rows) with every
default it takes written down here, priced, and compared: error = predicted / measured − 1
(positive: the model is too fast, or draws too much).

The split is fixed before any evaluation: a row is in the fit third when
sha256(id) % 3 == 0, held out otherwise. Constants are fitted on the fit third only
(`benchmarks/fit_serving.py`); `bandwall validate --published` prints both parts and the
signed bias apart.
"""

from __future__ import annotations

import hashlib
import statistics
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from bandwall.measure.calibrate.runs import NOMINAL_PRICE_USD
from bandwall.model.serving import ServingCalibration
from bandwall.planning.request import InferRequest, make_infer_request

SERVING_FILE = "serving_validation.toml"
ENERGY_FILE = "energy_validation.toml"
#: Row fields that are request fields under the same name.
_REQUEST_FIELDS = (
    "model",
    "layers",
    "hidden",
    "heads",
    "kv_heads",
    "ffn",
    "vocab",
    "gated_mlp",
    "gpu",
    "gpus",
    "gpus_per_node",
    "precision",
    "tp",
    "pp",
    "dataset",
    "prompt_tokens",
    "output_tokens",
    "request_rate_per_s",
    "max_concurrency",
    "static_batch",
    "power_cap_W",
    "runtime",
    "weight_format",
    "remote_client",
    "beam_width",
    "kv_admission",
    "fabric",
    "bandwidth_Gbps",
    "latency_us",
)
#: What each metric reads from `infer`'s metrics, in the row's unit.
METRICS: dict[str, Callable[[dict[str, Any]], float]] = {
    "tokens_per_s_per_gpu": lambda m: float(m["tokens_per_s_per_gpu"]),
    "ttft_ms": lambda m: 1e3 * float(m["ttft_s"]),
    "itl_ms": lambda m: 1e3 * float(m["itl_s"]),
    "ttft_p50_ms": lambda m: 1e3 * float(m["ttft_p50_s"]),
    "ttft_p99_ms": lambda m: 1e3 * float(m["ttft_p99_s"]),
    "itl_p99_ms": lambda m: 1e3 * float(m["itl_p99_s"]),
    "requests_per_s_per_gpu": lambda m: float(m["tokens_per_s_per_gpu"] / m["output_tokens"]),
}


def split_of(row_id: str) -> str:
    """'fit' for the third of rows whose sha256(id) % 3 == 0, else 'heldout'."""
    digest = int(hashlib.sha256(row_id.encode("utf-8")).hexdigest(), 16)
    return "fit" if digest % 3 == 0 else "heldout"


@cache
def _rows(file: str, table: str) -> tuple[dict[str, Any], ...]:
    text = resources.files("bandwall.planning").joinpath("data", file).read_text("utf-8")
    return tuple(dict(r) for r in tomllib.loads(text)[table])


def serving_rows() -> list[dict[str, Any]]:
    return [dict(r) for r in _rows(SERVING_FILE, "serving")]


def energy_rows() -> list[dict[str, Any]]:
    return [dict(r) for r in _rows(ENERGY_FILE, "energy")]


def family(row: dict[str, Any]) -> str:
    """The source family of a row (for the per-source table)."""
    rid = str(row["id"])
    for prefix, name in (
        ("trtllm10", "TensorRT-LLM 1.0"),
        ("trtllm013", "TensorRT-LLM 0.13"),
        ("trtllm09", "TensorRT-LLM 0.9"),
        ("trtllm", "TensorRT-LLM 0.5-0.6"),
        ("nim", "NIM"),
        ("mlperf", "MLPerf"),
        ("petals", "Petals"),
        ("bloom", "model card"),
        ("llama", "model card"),
    ):
        if rid.startswith(prefix):
            return name
    return "other"


def infer_request(row: dict[str, Any]) -> InferRequest:
    """The serving request a row states: its model, GPUs, layout and requests; an unstated
    concurrency is searched (trtllm-bench and MLPerf offline run at their best)."""
    fields: dict[str, Any] = {k: row[k] for k in _REQUEST_FIELDS if k in row}
    tp, pp = int(row.get("tp", 1)), int(row.get("pp", 1))
    fields |= {"tp": tp, "pp": pp}
    fields.setdefault("model", "custom")
    fields.setdefault("gpus", tp * pp)
    if fields["model"] == "custom":
        fields.setdefault("seq_len", 4096)
        fields.setdefault("gated_mlp", True)
    if "batch" in row:  # one static batch
        fields["concurrency"] = int(row["batch"])
    if "concurrency" in row:  # what a client keeps in flight
        fields["concurrency"] = int(row["concurrency"])
    if "max_batch" in row:  # the engine's cap per replica
        fields["max_concurrency"] = int(row["max_batch"])
    if "concurrency" in fields:
        fields.setdefault("max_concurrency", fields["concurrency"])
    # a row checks speed, latency or power, never cost: a GPU its provider lists no price
    # for (MI300X at 'ai-factory') is priced at a nominal 1 USD/GPU-h instead of refused
    fields.setdefault("price_per_gpu_hour_usd", NOMINAL_PRICE_USD)
    return make_infer_request(**fields)


@dataclass(frozen=True)
class Check:
    """One published figure against the model."""

    id: str
    metric: str
    measured: float
    predicted: float
    split: str
    family: str
    source: str

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1.0


def _served(req: InferRequest, calibration: ServingCalibration | None) -> dict[str, Any]:
    """The request's metrics; a server row whose rate the model cannot carry is priced at
    saturation (the offline operating point), where its latencies stay finite."""
    from bandwall.errors import ConfigError
    from bandwall.planning.infer import infer

    try:
        return infer(req, calibration=calibration).metrics
    except ConfigError as exc:
        if exc.field != "request_rate_per_s":
            raise
        offline = req.model_copy(update={"scenario": "offline", "request_rate_per_s": None})
        return infer(offline, calibration=calibration).metrics


def validate_serving(calibration: ServingCalibration | None = None) -> list[Check]:
    """Every serving row priced: throughput, TTFT or ITL against the published figure."""
    out = []
    for row in serving_rows():
        m = _served(infer_request(row), calibration)
        out.append(
            Check(
                id=str(row["id"]),
                metric=str(row["metric"]),
                measured=float(row["measured"]),
                predicted=METRICS[str(row["metric"])](m),
                split=split_of(str(row["id"])),
                family=family(row),
                source=str(row["source"]),
            )
        )
    return out


def _serving_power(row: dict[str, Any], calibration: ServingCalibration | None) -> float:
    """AC watts per GPU of an 8-GPU server: the board at the served load plus the host share,
    at PUE 1, without a scale-out network (MLPerf Power meters the server)."""
    from bandwall.model import energy
    from bandwall.planning.infer import evaluate_inference
    from bandwall.planning.resolve import energy_profile

    req = infer_request(row)
    chosen = _served(req, calibration)
    priced = evaluate_inference(req.model_copy(update={"concurrency": 1}), calibration)
    prof = energy_profile(priced.cluster, pue=1.0, network=False)
    gpu = energy.serving_power_W(
        prof, chosen["flop_util"], chosen["hbm_util"], chosen["busy_share"]
    )
    return float(prof.it_W(gpu))


def _training_power(row: dict[str, Any]) -> float:
    from bandwall.model import energy
    from bandwall.planning.api import plan
    from bandwall.planning.request import make_request
    from bandwall.planning.resolve import energy_profile

    fields = _training_fields(row)
    p = plan(make_request(**fields))
    mt = p.metrics
    prof = energy_profile(p.cluster, pue=1.0)
    power = energy.training_power_W(
        prof,
        step_s=mt["step_time_s"],
        compute_s=mt["compute_s"],
        flops_per_gpu_step=mt["tflops_per_gpu"] * 1e12 * mt["step_time_s"],
        peak_flops=p.cluster.peak_flops,
    )
    return float(power)


def _training_fields(row: dict[str, Any]) -> dict[str, Any]:
    keys = ("model", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "gated_mlp")
    fields: dict[str, Any] = {k: row[k] for k in keys if k in row}
    fields.setdefault("model", "custom")
    fields |= {
        "gpu": row["gpu"],
        "gpus": int(row["gpus"]),
        "preset": "ai-factory-ib",
        "tp": int(row["tp"]),
        "pp": int(row["pp"]),
        "global_batch": int(row["global_batch"]),
        "failures": row.get("kind") == "nameplate",
    }
    for key in ("seq_len", "lora_rank"):
        if key in row:
            fields[key] = int(row[key])
    if "tokens" in row:
        fields["tokens"] = float(row["tokens"])
    if row.get("kind") == "nameplate":
        # energy needs no price, and the preset's provider lists none for some GPUs
        # (A100-SXM-40GB): any price lets the plan run; its cost is not read
        fields["price_per_gpu_hour_usd"] = 1.0
    return fields


def _nameplate_kWh(row: dict[str, Any]) -> float:
    """GPU-hours of the published run as planned, × the GPU's TDP (the source's accounting)."""
    from bandwall.model import energy
    from bandwall.planning.api import plan
    from bandwall.planning.request import make_request

    p = plan(make_request(**_training_fields(row)))
    return float(energy.nameplate_energy_kWh(p.metrics["gpu_hours"], p.cluster.gpu.tdp_W))


def validate_energy(calibration: ServingCalibration | None = None) -> list[Check]:
    """Every energy row priced: W per GPU (serving, training) or kWh (nameplate rows)."""
    out = []
    for row in energy_rows():
        kind = str(row["kind"])
        if kind == "serving":
            pred, meas, metric = (
                _serving_power(row, calibration),
                row["measured_W_per_gpu"],
                "W/GPU",
            )
        elif kind == "training":
            pred, meas, metric = _training_power(row), row["measured_W_per_gpu"], "W/GPU"
        else:
            pred, meas, metric = _nameplate_kWh(row), row["measured_kWh"], "kWh"
        out.append(
            Check(
                id=str(row["id"]),
                metric=metric,
                measured=float(meas),
                predicted=pred,
                split=split_of(str(row["id"])),
                family=kind,
                source=str(row["source"]),
            )
        )
    return out


def summarize(checks: list[Check]) -> dict[str, float]:
    """Rows, median and mean |error|, signed bias (median signed error), max |error|."""
    if not checks:
        return {"rows": 0.0}
    errs = [c.error for c in checks]
    absolute = [abs(e) for e in errs]
    return {
        "rows": float(len(errs)),
        "median_abs_error": statistics.median(absolute),
        "mean_abs_error": statistics.fmean(absolute),
        "bias": statistics.median(errs),
        "max_abs_error": max(absolute),
        "within_10pct": sum(a <= 0.10 for a in absolute) / len(absolute),
    }


def by_split(checks: list[Check]) -> dict[str, dict[str, float]]:
    return {s: summarize([c for c in checks if c.split == s]) for s in ("fit", "heldout")}
