"""bandwall and llm-analysis (a peer analytical tool on PyPI) on the same published rows.

Prints, per row, the published value, each tool's prediction and error, and the time each tool
takes per plan. Calculon's figure on Korthikanti Table 5 is its published fit (Isaev et al. 2023,
re-run from calculon-ai/calculon's `llm-validation`): mean 3.65%, max 8.9% error.

llm-analysis runs at its default FLOP efficiency (1.0, i.e. peak) and at 0.5, the value its
docs warn not to exceed much ("Megatron-LM reported up to 0.6"); it has no context parallelism,
so the CP row runs with CP folded into data parallelism (said in the table).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from _peers import INSTALL, available
from bandwall.measure.calibrate.published import SOURCES, load_rows, request_for
from bandwall.planning.api import plan

CALCULON = "Calculon (published fit on Table 5): mean 3.65%, max 8.9%"


FAILURES: dict[str, str] = {}


def _llm_analysis(row: dict[str, str], efficiency: float | None, tmp: Path) -> float | None:
    """Step time (s) llm-analysis predicts for a row, or None if it cannot run (the reason
    goes to FAILURES)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from llm_analysis.analysis import train
    except Exception:
        FAILURES[row["id"]] = f"llm-analysis is not installed ({INSTALL})"
        return None
    seq = int(row["seq_len"])
    heads = int(row["heads"])
    cfg = {
        "name": row["id"],
        "num_layers": int(row["layers"]),
        "n_head": heads,
        "hidden_dim": int(row["hidden"]),
        "vocab_size": int(row["vocab"]),
        "max_seq_len": seq,
        "num_key_value_heads": int(row.get("kv_heads") or heads),
    }
    if row.get("ffn"):
        cfg["ffn_embed_dim"] = int(row["ffn"])
    path = tmp / f"{row['id']}.json"
    path.write_text(json.dumps(cfg))
    gpus = int(row["gpus"])
    tp, pp = int(row["tp"]), int(row["pp"])
    dp = gpus // (tp * pp)
    gb = (
        int(row["global_batch"])
        if row.get("global_batch")
        else (int(float(row["global_batch_tokens"])) // seq)
    )
    mb = int(row.get("micro_batch") or 1)
    a100 = row["gpu"].startswith("A100")
    recompute = {"full": 2, "selective": 1}.get(row.get("recompute", ""), 0)
    kwargs: dict[str, Any] = dict(
        model_name=str(path),
        gpu_name="a100-sxm-80gb" if a100 else "h100-sxm-80gb",
        dtype_name="w16a16e16",
        log_level="ERROR",
        batch_size_per_gpu=mb,
        global_batch_size=gb,
        seq_len=seq,
        activation_recomputation=recompute,
        tp_size=tp,
        pp_size=pp,
        dp_size=dp,
        total_num_gpus=gpus,
        flash_attn=not a100,
        softmax_dropout=a100,
        mlp_gated_linear_units=not a100,
    )
    if efficiency is not None:
        kwargs["flops_efficiency"] = efficiency
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = train(**kwargs)
    except Exception as exc:
        FAILURES[row["id"]] = f"llm-analysis refuses it: {exc}"
        return None
    return float(out["latency_per_iter"])


def main() -> None:
    available()
    rows_by_file = load_rows(None)
    print(CALCULON)
    header = (
        f"{'row':22s} {'published':>10s} {'bandwall':>10s} {'err':>7s} {'ms/plan':>8s} "
        f"{'llm-a 1.0':>10s} {'err':>7s} {'llm-a 0.5':>10s} {'err':>7s} {'ms/plan':>8s}"
    )
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for name, rows in rows_by_file.items():
            stack = SOURCES[name]
            print(f"\n{name} (published {stack.metric})")
            print(header)
            errs: dict[str, list[float]] = {"bandwall": [], "llm1": [], "llm05": []}
            for row in rows:
                t0 = time.perf_counter()
                p = plan(request_for(row, stack))
                ours_ms = (time.perf_counter() - t0) * 1e3
                tokens = float(p.metrics["global_batch"]) * int(row["seq_len"])
                if stack.metric == "step_s":
                    published = float(row["measured_step_s"])
                    ours = float(p.metrics["step_time_s"])
                else:
                    published = float(row["measured_tflops_per_gpu"])
                    ours = published * float(_ours_tflops(p, stack) / published)
                t0 = time.perf_counter()
                peers = [_llm_analysis(row, eff, tmp) for eff in (None, 0.5)]
                peer_ms = (time.perf_counter() - t0) * 1e3 / 2
                if stack.metric != "step_s":
                    # llm-analysis gives step time: convert with the row's own FLOP count
                    flops = (
                        float(p.metrics["tflops_per_gpu"]) * 1e12 * float(p.metrics["step_time_s"])
                    )
                    peers = [None if t is None else flops / t / 1e12 for t in peers]
                del tokens
                cells = [f"{row['id']:22s}", f"{published:10.2f}", f"{ours:10.2f}"]
                e = ours / published - 1
                errs["bandwall"].append(abs(e))
                cells += [f"{e:+7.1%}", f"{ours_ms:8.1f}"]
                for key, value in zip(("llm1", "llm05"), peers, strict=True):
                    if value is None:
                        cells += [f"{'n/a':>10s}", f"{'':>7s}"]
                        continue
                    pe = value / published - 1
                    errs[key].append(abs(pe))
                    cells += [f"{value:10.2f}", f"{pe:+7.1%}"]
                cells.append(f"{peer_ms:8.1f}")
                print(" ".join(cells))
            for key, label in (
                ("bandwall", "bandwall"),
                ("llm1", "llm-analysis (default efficiency 1.0)"),
                ("llm05", "llm-analysis (efficiency 0.5)"),
            ):
                if errs[key]:
                    print(
                        f"  {label}: mean |error| {statistics.fmean(errs[key]):.1%}, "
                        f"max {max(errs[key]):.1%}"
                    )
                else:
                    print(f"  {label}: no row ran")
            for rid, why in sorted(FAILURES.items()):
                if any(r["id"] == rid for r in rows):
                    print(f"  n/a on {rid}: {why}")


def _ours_tflops(p: Any, stack: Any) -> float:
    from bandwall.measure.calibrate.published import _convention_tflops

    return _convention_tflops(p, stack)


if __name__ == "__main__":
    main()
