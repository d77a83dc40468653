"""MFU by model size and GPU count: the model against the published runs it was checked on.

    python benchmarks/mfu_table.py            # markdown table for docs/model.md

MFU is counted one way for every row, whatever the source used, the way `plan` counts it: 6 ×
matmul parameters a token uses + 6 × layers × heads × head_dim × seq_len (causal attention
counted once, as Megatron-Bridge and Meta count; PaLM appendix B counts 12×) per token, less the
weight-gradient third of the matmul FLOPs for a LoRA run's frozen weights, over the
dense bf16 peak of the GPU (fp8 and NVFP4 runs too, so the columns compare: an NVFP4 run
can pass 100%). The published figure is
converted from the run's measured step time (`measured_step_s`, itself converted from the
source's tokens/s or TFLOP/s by the formula in the row's `conversion` column). Split: fit rows
set the model's fitted constants; held-out rows did not.
"""

from __future__ import annotations

import sys

from bandwall.catalog import Precision, load_catalog
from bandwall.measure.calibrate.runs import load_runs, request_for_run
from bandwall.model.compute import model_flops_per_sample
from bandwall.model.engine import lora_trainable_fraction
from bandwall.planning.api import evaluate_points


def rows() -> list[dict[str, object]]:
    out = []
    cat = load_catalog()
    for row in load_runs():
        if not row["measured_step_s"]:
            continue
        req = request_for_run(row)
        w, m, _ = evaluate_points(req, {})
        metrics = m.row(0)
        gpus = int(metrics["gpus"])
        # causal attention counted once, as `plan` counts MFU (compute.model_flops_per_sample),
        # less the weight gradients a LoRA run's frozen base never computes
        trainable = lora_trainable_fraction(w, req.lora_rank)
        flops = metrics["global_batch"] * model_flops_per_sample(w, trainable)
        peak = cat.gpu(str(req.gpu)).peak_flops(Precision.BF16) * gpus
        out.append(
            {
                "id": row["id"],
                "params_b": float(row["params_b"] or 0),
                "gpu": row["gpu"],
                "gpus": gpus,
                "precision": row["precision"],
                "split": row["split"],
                "published": flops / (float(row["measured_step_s"]) * peak),
                "model": flops / (metrics["step_time_s"] * peak),
                "p10": flops / (metrics["step_time_s_p90"] * peak),
                "p90": flops / (metrics["step_time_s_p10"] * peak),
            }
        )
    return sorted(out, key=lambda r: (float(str(r["params_b"])), int(str(r["gpus"]))))


def main() -> int:
    print("| run | params | GPU | GPUs | precision | split | published MFU | model MFU (p10-p90) |")
    print("|---|---:|---|---:|---|---|---:|---:|")
    for r in rows():
        print(
            f"| {r['id']} | {r['params_b']:g}B | {r['gpu']} | {r['gpus']:,} | {r['precision']} "
            f"| {r['split']} | {r['published']:.1%} | {r['model']:.1%} "
            f"({r['p10']:.1%}-{r['p90']:.1%}) |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
