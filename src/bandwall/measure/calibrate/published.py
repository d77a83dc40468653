"""Validation against published training runs (shared/reference/training_throughput.csv).

One set of defaults for every row: the row gives the model's dimensions, the GPU, the layout,
the batch and the scale-out fabric; everything else is the plan model's default. No constant is
fitted to these rows.
"""

from __future__ import annotations

import csv
import os
import statistics
from pathlib import Path
from typing import Any

from bandwall.errors import ConfigError
from bandwall.planning.api import plan
from bandwall.planning.request import make_request
from bandwall.workloads import custom_transformer

REFERENCE_ENV = "BANDWALL_REFERENCE_DIR"
TRAINING_FILE = "training_throughput.csv"


def find_reference_dir(explicit: str | None = None) -> Path:
    """--reference, then $BANDWALL_REFERENCE_DIR, then ./shared/reference and
    ../shared/reference (the layout of a checkout beside shared/)."""
    if explicit:
        if not (Path(explicit) / TRAINING_FILE).is_file():
            raise ConfigError(f"{explicit!r} holds no {TRAINING_FILE}", field="reference")
        return Path(explicit)
    for c in (os.environ.get(REFERENCE_ENV), "shared/reference", "../shared/reference"):
        if c and (Path(c) / TRAINING_FILE).is_file():
            return Path(c)
    raise ConfigError(
        f"no {TRAINING_FILE} found; pass --reference DIR or set {REFERENCE_ENV}", field="reference"
    )


def _fabric_for(text: str) -> str:
    t = text.lower()
    if "spectrum" in t:
        return "spectrum-x-400"
    if "roce" in t:
        return "roce-400" if "400" in t else "roce-200" if "200" in t else "roce-100"
    if "efa" in t:
        return "efa-p5"
    if "xdr" in t or "800" in t:
        return "ib-xdr"
    if "hdr" in t:
        return "ib-hdr"
    return "ib-ndr"


def _int(row: dict[str, str], key: str, default: int | None = None) -> int | None:
    value = (row.get(key) or "").strip()
    return int(float(value)) if value else default


def _is_gated(dims: dict[str, Any], params_b: str | None) -> bool:
    """The CSV gives the MLP width but not its kind; the published parameter count tells."""
    if not params_b:
        return True
    target = float(params_b) * 1e9
    sizes = {g: custom_transformer(**dims, gated_mlp=g).params for g in (True, False)}
    return abs(sizes[True] - target) <= abs(sizes[False] - target)


def validate_published(reference_dir: Path) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Per-row predicted vs measured TFLOP/s per GPU, and the error summary."""
    with (reference_dir / TRAINING_FILE).open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    out: list[dict[str, Any]] = []
    for row in rows:
        seq = _int(row, "seq_len")
        if seq is None:
            raise ConfigError(f"row {row.get('id')!r} has no seq_len", field="reference")
        dims: dict[str, Any] = {
            k: _int(row, k)
            for k in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "experts", "top_k")
        }
        dims["seq_len"] = seq
        req = make_request(
            model="custom",
            **dims,
            gated_mlp=_is_gated(dims, row.get("params_b")),
            gpus=_int(row, "gpus"),
            gpu=row["gpu"],
            preset="ai-factory-ib",
            fabric=_fabric_for(row.get("scale_out", "")),
            precision=row.get("precision") or "bf16",
            tp=_int(row, "tp", 1),
            pp=_int(row, "pp", 1),
            cp=_int(row, "cp", 1),
            ep=1,
            zero=1,
            micro_batch=1,
            global_batch=int(float(row["global_batch_tokens"])) // seq,
        )
        p = plan(req)
        measured = float(row["measured_tflops_per_gpu"])
        predicted = p.metrics["tflops_per_gpu"]
        lay = p.layout
        out.append(
            {
                "id": row["id"],
                "model": row["model"],
                "source": row["source"],
                "gpus": int(float(row["gpus"])),
                "layout": f"tp{lay['tp']} cp{lay['cp']} pp{lay['pp']} dp{lay['dp']} seq{seq}",
                "measured_tflops_per_gpu": measured,
                "predicted_tflops_per_gpu": predicted,
                "error": predicted / measured - 1,
                "measured_mfu": float(row["measured_mfu"]) if row.get("measured_mfu") else None,
                "predicted_mfu": p.metrics["mfu"],
            }
        )
    errors = [abs(float(r["error"])) for r in out]
    summary = {
        "rows": len(out),
        "median_abs_error": statistics.median(errors),
        "max_abs_error": max(errors),
    }
    return out, summary
