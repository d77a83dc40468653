"""NVFP4 (`--precision fp4`): the GEMM format code, its rate and bytes, TransformerEngine's
NVFP4 recipe in a layer, the catalog's Blackwell peaks, the request rules and the plans and
serving answers that follow. Hand-computed cases on the made-up one-SM GPU of test_kernels.
"""

from __future__ import annotations

import pytest

from bandwall.catalog import load_catalog
from bandwall.catalog.models import Precision
from bandwall.catalog.perf import kernel_benchmarks
from bandwall.errors import ConfigError
from bandwall.model import compute
from bandwall.model.compute import elementwise, gemm, validation
from bandwall.planning.api import plan
from bandwall.planning.infer import infer
from bandwall.planning.request import InferRequest, PlanRequest
from bandwall.workloads import get_workload

from .test_kernels import K0, ONE_SM

#: ONE_SM with 400 TFLOP/s of NVFP4 at the same 0.5 efficiency: a 200 TFLOP/s main loop.
ONE_SM_FP4 = ONE_SM.with_(fp4_peak_flops=400e12)


def test_fp4_gemm_runs_at_the_fp4_rate_and_reads_nvfp4_operands() -> None:
    """Compute-bound: the fp4 main loop (200 TFLOP/s) is 4x bf16's 50; the fixed K0 steps
    scale with it. Memory-bound (m = 1): a weight element costs 0.5 B plus an e4m3 scale per
    16 elements, 0.5625 B (NVIDIA's NVFP4 layout)."""
    want = 2 * 512 * 512 * (1024 + K0) / 200e12
    assert float(gemm.gemm_compute_s(512, 512, 1024, ONE_SM_FP4, fp8=2)) == pytest.approx(
        want, rel=1e-12
    )
    k = n = 8192.0
    gemv = float(compute.gemv_time_s(1, n, k, ONE_SM_FP4, weights="fp4"))
    stream = gemm.WEIGHT_STREAM_SHARE["fp4"] * 1e12
    assert gemv == pytest.approx((0.5625 * k * n + 2 * (k + n)) / stream, rel=1e-9)
    assert gemm.WEIGHT_BYTES["fp4"] == 0.5625


def test_fp4_on_a_gpu_without_fp4_units_runs_and_reads_as_fp8() -> None:
    """No fp4 peak (Hopper): code 2 falls back to the fp8 rate and fp8's 1-byte operands."""
    fp8 = float(gemm.gemm_time_s(512, 512, 1024, ONE_SM, fp8=1))
    assert float(gemm.gemm_time_s(512, 512, 1024, ONE_SM, fp8=2)) == pytest.approx(fp8)
    assert float(gemm.operand_bytes(2.0, ONE_SM)) == 1.0
    assert float(gemm.operand_bytes(2.0, ONE_SM_FP4)) == 0.5625


def _b200() -> compute.GpuRates:
    cat = load_catalog()
    return compute.gpu_rates(cat.gpu_perf("B200"), cat.gpu("B200"), precision="fp4")


def test_each_unset_large_gemm_efficiency_takes_the_next_wider_formats() -> None:
    """GpuPerf.large_gemm_efficiency, which the kernel model's rates and plan's assumptions
    block both read: fp4 unset takes fp8's, fp8 unset bf16's; a --gemm-efficiency override
    replaces bf16's and what falls back to it."""
    b200 = load_catalog().gpu_perf("B200")
    bare = b200.model_copy(update={"fp4_gemm_large_efficiency": None})
    assert bare.large_gemm_efficiency("fp4") == b200.fp8_gemm_large_efficiency
    none = bare.model_copy(update={"fp8_gemm_large_efficiency": None})
    assert none.large_gemm_efficiency("fp4") == b200.gemm_large_efficiency
    assert none.large_gemm_efficiency("fp8", 0.5) == 0.5
    assert b200.large_gemm_efficiency("fp4", 0.5) == b200.fp4_gemm_large_efficiency


def test_nvfp4_recipe_runs_the_linears_in_fp4_and_prices_its_quantisation() -> None:
    """TransformerEngine's NVFP4 recipe: fprop, dgrad and wgrad of every linear in 4-bit
    (attention and the router stay bf16); its GEMMs beat fp8's (twice the peak on B200 at
    0.651 vs 0.799 of it: 1.63x on large shapes) and its casts cost more than MXFP8's bytes
    minus the smaller writes."""
    w = get_workload("llama3-70b")
    shape = compute.LayerShape(micro_batch=1.0, tokens=8192.0, tp=8.0)

    def layer(recipe: str | None) -> compute.LayerCost:
        return compute.transformer_layer(
            w,
            shape,
            _b200(),
            moe_layer=False,
            sequence_parallel=True,
            flash_attention=True,
            fp8=recipe,
        )

    fp4, fp8 = layer("nvfp4"), layer("mxfp8")
    assert fp4.fp8_ops == ("fc1", "fc2", "proj", "qkv")
    assert float(fp4.fwd_attention_s) == float(fp8.fwd_attention_s)
    gain = float(fp8.breakdown_s["gemm"]) / float(fp4.breakdown_s["gemm"])
    assert 1.2 < gain < 2.0 * 0.651 / 0.799 + 1e-9
    assert float(fp4.fp8_cast_s) > 0.0
    assert elementwise.FP8_CAST["nvfp4"].activation == pytest.approx(2 + 2 + 2 * 0.5625)
    assert "nvfp4" not in elementwise.FP8_RECIPES  # --precision fp4's own, not an fp8 recipe


def test_blackwell_fp4_peaks_follow_nvidias_ratios() -> None:
    """FP4 is 2x fp8 on Blackwell (B200, GB200) and 3x on Blackwell Ultra (B300, GB300)
    (NVIDIA, MLPerf Training v5.1 post, 2025-11-12); no Hopper, Ampere or AMD part lists it."""
    cat = load_catalog()
    for name, ratio in (("B200", 2), ("GB200", 2), ("B300", 3), ("GB300", 3)):
        p = cat.gpu(name).peak_TFLOPS
        assert p[Precision.FP4] == pytest.approx(ratio * p[Precision.FP8])
    for name in ("H100-SXM", "H200", "A100-SXM-80GB", "MI300X", "MI355X"):
        assert Precision.FP4 not in cat.gpu(name).peak_TFLOPS


def test_fp4_kernel_benchmarks_meet_their_anchor_and_checks() -> None:
    """The B200 NVFP4 rows of kernel_bench.csv: the 8192^3 anchor within 1%, the others (a
    different shape each, not fitted) within 10%."""
    rows = [r for r in kernel_benchmarks() if r.dtype == "fp4"]
    assert len(rows) == 4
    for r in rows:
        err = validation.predict(r) / r.measured - 1
        assert abs(err) < (0.01 if r.role == "anchor" else 0.10), (r.id, err)


def test_fp4_on_hopper_is_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError) as e:
        PlanRequest(model="llama3-8b", gpus=8, gpu="H100-SXM", precision="fp4")
    assert e.value.field == "precision" and "Blackwell" in str(e.value)
    with pytest.raises(ConfigError) as e:
        InferRequest(model="llama3-8b", gpus=1, gpu="H100-SXM", weight_format="fp4")
    assert e.value.field == "weight_format"


def test_fp4_plan_is_faster_than_fp8_and_bf16_on_the_same_layout() -> None:
    """Llama 3 70B on 64 B200 at one fixed layout: NVFP4 < fp8 < bf16 step time, and fp4's
    speed-up over fp8 stays under the peaks' 2x (casts, attention, communication)."""
    times = {}
    for p in ("bf16", "fp8", "fp4"):
        req = PlanRequest(
            model="llama3-70b",
            gpus=64,
            gpu="B200",
            price_per_gpu_hour_usd=5.0,
            precision=p,
            tp=4,
            pp=2,
            micro_batch=1,
        )
        times[p] = float(plan(req).metrics["step_time_s"])
    assert times["fp4"] < times["fp8"] < times["bf16"]
    assert times["fp8"] / times["fp4"] < 2.0


def test_fp4_serving_stores_nvfp4_weights_and_an_fp8_kv_cache() -> None:
    """Llama 3 8B on one B200 at fp4: the linears' weights at NVFP4's 0.5625 B, the embedding
    and LM head at 2 B (ModelOpt quantises the linears only), and the KV cache at 1 B per
    element (auto: fp8 with fp4 weights, as TensorRT-LLM's NVFP4 checkpoints run it)."""
    base = {"model": "llama3-8b", "gpus": 1, "gpu": "B200", "price_per_gpu_hour_usd": 5.0}
    fp4 = infer(InferRequest(**base, precision="fp4")).metrics
    fp8 = infer(InferRequest(**base, precision="fp8")).metrics
    assert fp4["weight_format"] == "fp4"
    w = get_workload("llama3-8b")
    head = 2.0 * 2.0 * w.vocab * w.hidden  # untied embedding + LM head, bf16
    layers_fp8 = fp8["weights_bytes"] - head
    assert fp4["weights_bytes"] == pytest.approx(head + 0.5625 * layers_fp8, rel=1e-9)
    assert fp4["kv_bytes_per_sequence"] == pytest.approx(fp8["kv_bytes_per_sequence"])
    assert fp4["tokens_per_s_per_gpu"] > fp8["tokens_per_s_per_gpu"]


def test_one_gpu_nodes_print_no_scale_up_fabric(run_cli) -> None:  # type: ignore[no-untyped-def]
    """GH200 x1 nodes (scale-up domain 1) have no NVLink domain to name: the plan printed
    'None ×1/node'."""
    r = run_cli("plan", "--model", "llama3-8b", "--gpus", "8", "--gpu", "GH200",
                "--price-per-gpu-hour", "3")  # fmt: skip
    assert r.code == 0, r.err
    assert "1 GPU/node + ib-ndr" in r.out and "None" not in r.out
