"""The kernel-level compute model (bandwall.model.compute): hand-computed cases on a made-up GPU
with round numbers, properties over random shapes, and the model against the published kernel
microbenchmarks of catalog/data/kernel_bench.csv (fixed sha256 split, held-out tolerances).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bandwall.catalog import load_catalog
from bandwall.catalog.perf import kernel_benchmarks
from bandwall.model import compute
from bandwall.model.compute import attention, gemm, rates, step, validation
from bandwall.workloads import Transformer, custom_transformer, get_workload

#: A made-up Hopper-like GPU: 100 TFLOP/s bf16 at efficiency 0.5 (50 TFLOP/s main loop),
#: 200 TFLOP/s fp8 at 0.5, 1 TB/s HBM, one SM (so waves = CTAs), no fixed kernel cost.
ONE_SM = compute.GpuRates(
    peak_flops=100e12,
    gemm_efficiency=0.5,
    attention_efficiency=0.5,
    hbm_Bps=1e12,
    sm_count=1,
    tile_m=128,
    tile_n=256,
    kernel_launch_s=5e-6,
    arch="hopper",
    fp8_peak_flops=200e12,
    kernel_gpu_s=0.0,
)
K0 = gemm.GEMM_K0


def h100() -> compute.GpuRates:
    cat = load_catalog()
    return compute.gpu_rates(cat.gpu_perf("H100-SXM"), cat.gpu("H100-SXM"), precision="bf16")


# --- GEMM ------------------------------------------------------------------------------------


def test_one_sm_best_kernel_is_the_largest_tile_without_split_k() -> None:
    """With one SM and a shape every tile divides, each CTA costs (k/split + K0)·2·tm·tn at
    the per-SM rate, so the total 2·m·n·(k + split·K0)/(rate·efficiency) is smallest for the
    largest tile (efficiency 1) and no split: 2·512·512·(1024 + K0) / 50e12."""
    got = float(gemm.gemm_compute_s(512, 512, 1024, ONE_SM, fp8=False))
    assert got == pytest.approx(2 * 512 * 512 * (1024 + K0) / 50e12, rel=1e-12)


def test_fp8_gemm_runs_at_the_fp8_rate_and_reads_one_byte_operands() -> None:
    """Compute-bound: fp8's 100 TFLOP/s main loop halves the time; memory-bound (a GEMV,
    m = 1): A and B are read in 1 byte instead of 2."""
    bf16 = float(gemm.gemm_compute_s(512, 512, 1024, ONE_SM, fp8=False))
    fp8 = float(gemm.gemm_compute_s(512, 512, 1024, ONE_SM, fp8=True))
    assert fp8 == pytest.approx(bf16 / 2, rel=1e-12)
    k = n = 8192.0
    gemv_bf16 = float(compute.gemv_time_s(1, n, k, ONE_SM, weights="bf16"))
    gemv_fp8 = float(compute.gemv_time_s(1, n, k, ONE_SM, weights="fp8"))
    assert gemv_bf16 == pytest.approx((2 * k * n + 2 * (k + n)) / 1e12, rel=1e-9)
    assert gemv_fp8 == pytest.approx((1 * k * n + 2 * (k + n)) / 1e12, rel=1e-9)


def test_wave_quantisation_a_tile_more_than_the_sms_costs_a_second_wave() -> None:
    """132 SMs: 12 × 11 tiles of 128×256 fill one wave; one more column of tiles forces a
    second (partly empty) wave whichever tile the model picks, so time jumps by far more than
    the 1/11 extra work (NVIDIA Matrix Multiplication Background §3.2)."""
    r = h100().with_(kernel_gpu_s=0.0)
    full = float(gemm.gemm_compute_s(12 * 128, 11 * 256, 8192, r, fp8=False))
    more = float(gemm.gemm_compute_s(12 * 128, 11 * 256 + 1, 8192, r, fp8=False))
    assert more > 1.3 * full


@given(
    m=st.integers(1, 20_000),
    n=st.integers(1, 20_000),
    k=st.integers(1, 20_000),
    dm=st.integers(0, 5_000),
    gpu=st.sampled_from(["A100-SXM-80GB", "H100-SXM", "B200", "MI300X"]),
    fp8=st.booleans(),
)
def test_gemm_time_never_falls_as_a_dimension_grows(
    m: int, n: int, k: int, dm: int, gpu: str, fp8: bool
) -> None:
    """Every kernel choice takes no less time on a larger problem, so the best one does not."""
    r = validation.rates_for(gpu)
    base = float(compute.gemm_time_s(m, n, k, r, fp8=fp8))
    for grown in ((m + dm, n, k), (m, n + dm, k), (m, n, k + dm)):
        assert float(compute.gemm_time_s(*grown, r, fp8=fp8)) >= base * (1 - 1e-12)
    assert compute.gemm_tflops(m, n, k, r, fp8=fp8) * 1e12 <= r.gemm_rate(fp8) * (1 + 1e-9)


def test_grouped_gemm_pads_each_groups_rows_not_the_mean_groups() -> None:
    """Expert GEMMs under real routing: each expert pads its own Binomial token count to whole
    tiles, so E[ceil(X/tile)] replaces ceil(mean/tile). Hand values (normal approximation):
    256.5 rows ± 13.9 on 256-row tiles straddle the edge, about half the experts take a second
    tile (1.5, where the mean group took 2); 128 rows far from an edge keep 1 tile; no spread
    is the exact ceiling."""
    assert gemm.expected_tiles(256.5, 256.0, 0.0) == 2.0
    assert float(gemm.expected_tiles(256.5, 256.0, 13.9)) == pytest.approx(1.5, abs=0.02)
    assert float(gemm.expected_tiles(128.0, 256.0, 13.9)) == pytest.approx(1.0, abs=1e-6)
    assert float(gemm.expected_tiles(300.0, 256.0, 15.0)) == pytest.approx(2.0, abs=0.01)
    # no step across the edge: 1 row more moves the expectation by under a tenth of a tile
    steps = np.diff(gemm.expected_tiles(np.arange(200.0, 320.0), 256.0, 13.9))
    assert steps.max() < 0.1 and steps.min() >= 0.0


def test_serving_throughput_has_no_cliff_where_the_mean_expert_crosses_a_tile() -> None:
    """Mixtral 8x7B fp8 on H100 at tp 2 lost 11% of its tokens/s from 870 to 880 slots (the
    mean expert's rows crossing a tile edge; fuzz note of 2026-12-07); with each expert's own
    padding priced, throughput moves by under 3% per 1% of slots."""
    from bandwall.planning.infer import infer
    from bandwall.planning.request import make_infer_request

    def tps(c: int) -> float:
        req = make_infer_request(
            model="mixtral-8x7b", gpu="H100-SXM", gpus=8, tp=2, precision="fp8", concurrency=c
        )
        return float(infer(req).metrics["tokens_per_s_replica"])

    a, b = tps(870), tps(880)
    assert b > 0.97 * a


def test_weight_only_int4_decode_streams_half_a_byte_per_weight() -> None:
    """Batch 1 against an 8192×8192 int4 weight: 32 MiB at 0.97 of 1 TB/s (Marlin), plus the
    bf16 activations in and out."""
    k = n = 8192.0
    got = float(compute.gemv_time_s(1, n, k, ONE_SM, weights="int4"))
    assert got == pytest.approx((0.5 * k * n + 2 * (k + n)) / (0.97e12), rel=1e-9)


# --- attention -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kernel", "pass_", "d", "causal", "published"),
    [
        # Shah et al. 2024 (FlashAttention-3) figs. 5-6, H100 SXM5, seq 16k, hidden 2048
        ("fa3", "fwd", 128, False, 648),
        ("fa3", "fwd", 128, True, 616),
        ("fa3", "bwd", 128, False, 561),
        ("fa2", "fwd", 64, True, 299),
    ],
)
def test_flash_attention_meets_the_papers_at_16k(
    kernel: str, pass_: str, d: int, causal: bool, published: float
) -> None:
    r = h100()
    b, h, s = 1, 2048 // d, 16384
    t = attention.flash_attention_s(b, h, s, s, d, r, causal=causal, pass_=pass_, kernel=kernel)
    flops = attention.flash_attention_flops(b, h, s, s, d, causal=causal)
    flops *= attention.BACKWARD_FLOPS_RATIO if pass_ == "bwd" else 1.0
    assert float(flops / t) / 1e12 == pytest.approx(published, rel=0.08)


def test_causal_attention_is_slower_per_flop_than_full_at_short_sequences() -> None:
    """A causal CTA iterates half the keys after the same prologue, and computes its diagonal
    block whole: efficiency falls further below the full mask at 512 than at 16k."""
    r = h100()
    kw = dict(pass_="fwd", kernel="fa3")
    short = attention.attention_efficiency(128, 512, r, causal=True, **kw) / (
        attention.attention_efficiency(128, 512, r, causal=False, **kw)
    )
    long = attention.attention_efficiency(128, 16384, r, causal=True, **kw) / (
        attention.attention_efficiency(128, 16384, r, causal=False, **kw)
    )
    assert short < long < 1.0


# --- layer -----------------------------------------------------------------------------------


def _layer(w, tokens=8192.0, tp=1.0, fp8=None, mode=None, moe=False, **kw):  # type: ignore[no-untyped-def]
    r = h100() if mode is None else h100().with_(launch_mode=mode)
    shape = compute.LayerShape(micro_batch=tokens / w.seq_len, tokens=tokens, tp=tp, **kw)
    return compute.transformer_layer(
        w, shape, r, moe_layer=moe, sequence_parallel=True, flash_attention=True, fp8=fp8
    )


def test_layer_flops_are_six_per_matmul_weight_per_token_plus_causal_attention() -> None:
    """Model FLOPs of a dense layer: 6 × matmul params × tokens + 7·b·a·s²·d/2·... (the
    FlashAttention fwd+bwd convention: 3.5 × 4·b·a·s²·d/2 with a causal mask)."""
    w = get_workload("llama3-8b")
    lc = _layer(w)
    s, a, d = 8192.0, w.heads, w.head_dim
    matmul = w.attention_params + w.dense_mlp_params
    assert float(lc.flops) == pytest.approx(6 * matmul * s + 3.5 * 4 * a * s * s * d / 2, rel=1e-9)


def test_fp8_runs_only_the_linear_layers_in_fp8_and_prices_the_casts() -> None:
    w = get_workload("llama3-70b")
    bf16, fp8 = _layer(w, tp=8.0), _layer(w, tp=8.0, fp8="delayed")
    assert fp8.fp8_ops == ("fc1", "fc2", "proj", "qkv")
    assert bf16.fp8_ops == ()
    assert float(bf16.fp8_cast_s) == 0.0 and float(fp8.fp8_cast_s) > 0.0
    assert float(fp8.fwd_attention_s) == float(bf16.fwd_attention_s)  # attention stays bf16
    gain = float(bf16.breakdown_s["gemm"]) / float(fp8.breakdown_s["gemm"])
    assert 1.3 < gain < 2.0  # fp8 peak is 2x, efficiency lower (0.717 vs 0.885)
    current = _layer(w, tp=8.0, fp8="current")
    assert float(current.fp8_cast_s) > float(fp8.fp8_cast_s)  # the amax pass


def test_torchao_rowwise_pays_its_extra_cast_traffic_and_rescales_the_backward_gemms() -> None:
    """torchao's rowwise against tensorwise ('current') on Llama 3 8B, one GPU, 8,192 tokens,
    by hand from torchao's roofline byte counts (roofline_utils.py L146-210): inputs and
    output gradients 8 B/element instead of 6, weights 10 instead of 8, 2 kernels per cast
    tensor instead of 3; the dgrad and wgrad outputs read and written once more in bf16 (4 B);
    the rowwise forward GEMM at 0.9 of tensorwise (pytorch/pytorch#147971)."""
    w = get_workload("llama3-8b")
    cur, row = _layer(w, fp8="current"), _layer(w, fp8="rowwise")
    T, h, hq, ffn = 8192.0, 4096.0, 4096.0, 14336.0
    qkv_out = hq + 2 * 1024.0
    separate = T * hq  # the attention output, cast on its own
    produced = T * (2 * h + ffn)  # two norm outputs and the activation (amax share only)
    grads = T * (qkv_out + h + 2 * ffn + h)  # output gradients of qkv, proj, fc1, fc2
    weights = h * qkv_out + hq * h + h * 2 * ffn + ffn * h
    extra_bytes = (
        (8 - 6) * separate
        + ((8 - 4) - (6 - 4)) * produced
        + (8 - 6) * grads
        + 4 * (separate + produced + weights)
        + (10 - 8) * weights
    )
    r = h100()
    # per cast tensor (the activations' and each linear's grads), and a rescale kernel after
    # each of the four linears' dgrad and wgrad
    kernels = (2 - 3) * (1 + 4) + 2 * 4
    expected = extra_bytes / r.stream_Bps + kernels * r.kernel_gpu_s
    got = float(row.fp8_cast_s + row.fp8_weight_cast_s) - float(
        cur.fp8_cast_s + cur.fp8_weight_cast_s
    )
    assert got == pytest.approx(expected, rel=1e-9)
    assert float(row.fwd_gemm_s) == pytest.approx(float(cur.fwd_gemm_s) / 0.9, rel=1e-12)
    assert float(row.bwd_dgrad_s) == float(cur.bwd_dgrad_s)  # tensorwise GEMMs, rescaled after


def _small_moe(**extra: object) -> Transformer:
    """64 experts of width 1,024, top-8, on a 4,096-wide 2-layer model."""
    return custom_transformer(
        layers=2,
        hidden=4096,
        heads=32,
        vocab=32000,
        seq_len=4096,
        experts=64,
        top_k=8,
        moe_ffn=1024,
        **extra,
    )


def test_moe_experts_run_as_one_grouped_gemm_per_projection() -> None:
    w = _small_moe()
    lc = _layer(w, tokens=4096.0, moe=True, ep=8.0)
    # router + 2 attention + 2 expert GEMMs forward; 3 kernels each with dgrad and wgrad
    assert lc.fp8_ops == ()
    matmul = (2 * 4096**2 + 2 * 4096 * 4096) + 4096 * 64 + 8 * 3 * 4096 * 1024
    attn = 3.5 * 4 * 32 * 4096 * 4096 * 128 / 2
    assert float(lc.flops) == pytest.approx(6 * matmul * 4096 + attn, rel=1e-9)


@pytest.mark.parametrize("fp8", [None, "delayed"])
def test_expert_efficiency_slows_only_the_routed_expert_path(fp8: str | None) -> None:
    """MOE_EXPERT_IN_STEP_EFFICIENCY's term: at efficiency 0.5 the router and routed-expert
    GEMMs (fprop, dgrad, wgrad) and the token permutes take twice as long, by exactly their
    own time; attention, the shared expert, fp8 casts, FLOPs and kernel counts do not move; a
    dense layer ignores it. Scalar and vector paths agree."""
    w = _small_moe(shared_experts=1)
    r = h100()
    T, ep = 4096.0, 8.0

    def layer(eff: float, tokens: object = T, moe: bool = True) -> compute.LayerCost:
        shape = compute.LayerShape(micro_batch=1.0, tokens=tokens, tp=1.0, ep=ep)
        return compute.transformer_layer(
            w,
            shape,
            r,
            moe_layer=moe,
            sequence_parallel=True,
            flash_attention=True,
            fp8=fp8,
            expert_efficiency=eff,
        )

    base, slow = layer(1.0), layer(0.5)
    # the expert path by hand: tokens per local expert T·k·ep/E, E/ep experts per GPU; the
    # router stays bf16 under an fp8 recipe
    m, cnt, h, fe = T * 8 * ep / 64, 64 / ep, 4096.0, 1024.0
    gate = 2.0 if w.gated_mlp else 1.0
    expert_gemms = 0.0
    for n, k, c in ((64.0, h, 1.0), (gate * fe, h, cnt), (h, fe, cnt)):  # router, fc1, fc2
        mk, f8 = (m, fp8 is not None) if c > 1 else (T, False)
        for mm, nn, kk, out in ((mk, n, k, 2.0), (mk, k, n, 2.0), (k, n, mk, 8.0)):
            t = gemm.gemm_time_s(mm, nn, kk, r, fp8=f8, count=c, out_bytes=out)
            expert_gemms += float(t)
    fwd_b, bwd_b = 8.0, 8.0  # elementwise "permute": bytes per routed element, fwd and bwd
    permute = (fwd_b + bwd_b) * T * 8 * h / r.stream_Bps
    gemm_delta = float(slow.breakdown_s["gemm"] - base.breakdown_s["gemm"])
    assert gemm_delta == pytest.approx(expert_gemms, rel=1e-9)
    memory_delta = float(slow.breakdown_s["memory"] - base.breakdown_s["memory"])
    assert memory_delta == pytest.approx(permute, rel=1e-9)
    for unchanged in ("attention", "fp8_cast"):
        assert float(slow.breakdown_s[unchanged]) == float(base.breakdown_s[unchanged])
    assert float(slow.flops) == float(base.flops)
    assert float(slow.kernels) == float(base.kernels)
    vector = layer(0.5, tokens=np.array([T, T]))
    assert np.asarray(vector.gpu_s) == pytest.approx([float(slow.gpu_s)] * 2, rel=1e-12)
    assert float(layer(0.5, moe=False).gpu_s) == float(layer(1.0, moe=False).gpu_s)


def test_eager_launches_more_kernels_and_moves_more_bytes_than_fused() -> None:
    w = get_workload("llama3-8b")
    fused, eager = _layer(w, mode="fused"), _layer(w, mode="eager")
    assert float(eager.kernels) > 2 * float(fused.kernels)
    assert float(eager.fwd_memory_s) > 3 * float(fused.fwd_memory_s)


def test_a_small_model_in_eager_mode_waits_on_the_cpu() -> None:
    """125M-class layer, 128 tokens: each of its ~80 eager kernels does ~2 µs of GPU work, less
    than the 4 µs the CPU takes to launch it; CUDA graphs remove the CPU bound."""
    w = custom_transformer(layers=12, hidden=768, heads=12, vocab=50257, seq_len=128)
    lc = _layer(w, tokens=128.0, mode="eager")
    r = h100().with_(launch_mode="eager")
    bound = float(step.host_bound_s(lc.gpu_s, lc.kernels, r))
    assert bound == pytest.approx(float(lc.kernels) * 4e-6)
    graphs = h100().with_(launch_mode="graphs")
    assert float(step.host_bound_s(lc.gpu_s, lc.kernels, graphs)) == float(lc.gpu_s)


def test_a_large_batch_prices_each_distinct_shape_as_its_own_call() -> None:
    """Above gemm.DEDUPE_ABOVE elements the layout search's repeated shapes are priced once
    each; every element must still get exactly its own shape's price (fp8 flags included)."""
    rng = np.random.default_rng(3)
    size = gemm.DEDUPE_ABOVE * 3
    m = rng.choice([1.0, 16.0, 1000.0, 8192.0], size)
    n = rng.choice([128.0, 4096.0, 14336.0], size)
    k = rng.choice([64.0, 4096.0, 3e4], size)
    count = rng.choice([1.0, 8.0], size)
    fp8 = rng.choice([False, True], size)
    r = h100()
    batch = gemm.gemm_compute_s(m, n, k, r, fp8=fp8, count=count)
    assert batch.shape == (size,)
    for i in rng.choice(size, 64, replace=False):
        one = gemm.gemm_compute_s(m[i], n[i], k[i], r, fp8=fp8[i], count=count[i])
        assert float(batch[i]) == float(one)


@pytest.mark.parametrize("model", ["llama3-8b", "mixtral-8x7b"])
def test_a_layout_search_sized_batch_prices_each_layout_as_its_own_call(model: str) -> None:
    """Above compute.layer.DISTINCT_ABOVE layouts the distinct per-GPU shapes are priced once
    each; every layout must still get its own shape's cost, in every field."""
    from bandwall.model.compute import layer

    w = get_workload(model)
    r = h100()
    rng = np.random.default_rng(5)
    size = layer.DISTINCT_ABOVE * 2
    mb = rng.choice([1.0, 2.0, 4.0], size)
    cp = rng.choice([1.0, 2.0], size)
    tp = rng.choice([1.0, 2.0, 8.0], size)
    ep = rng.choice([1.0, 8.0], size)
    moe = w.experts > 1
    kw = dict(moe_layer=moe, sequence_parallel=True, flash_attention=True, fp8="delayed")
    batch = compute.transformer_layer(
        w,
        compute.LayerShape(mb, mb * w.seq_len / cp, tp, cp, ep),
        r,
        **kw,  # type: ignore[arg-type]
    )
    for i in rng.choice(size, 24, replace=False):
        shape = compute.LayerShape(mb[i], mb[i] * w.seq_len / cp[i], tp[i], cp[i], ep[i])
        one = compute.transformer_layer(w, shape, r, **kw)  # type: ignore[arg-type]
        assert float(np.asarray(batch.gpu_s)[i]) == pytest.approx(float(one.gpu_s), rel=1e-12)
        assert float(np.asarray(batch.flops)[i]) == pytest.approx(float(one.flops), rel=1e-12)
        for k, v in one.breakdown_s.items():
            assert float(np.asarray(batch.breakdown_s[k])[i]) == pytest.approx(float(v), rel=1e-12)


@given(
    tokens=st.lists(st.sampled_from([512.0, 2048.0, 8192.0, 16384.0]), min_size=1, max_size=6),
    tp=st.sampled_from([1.0, 2.0, 4.0, 8.0]),
)
def test_a_batch_of_layouts_prices_each_as_its_own_single_call(
    tokens: list[float], tp: float
) -> None:
    w = get_workload("llama3-8b")
    r = h100()
    arr = compute.LayerShape(
        micro_batch=np.array(tokens) / w.seq_len,
        tokens=np.array(tokens),
        tp=np.full(len(tokens), tp),
    )
    kw = dict(moe_layer=False, sequence_parallel=True, flash_attention=True, fp8="delayed")
    batch = compute.transformer_layer(w, arr, r, **kw)  # type: ignore[arg-type]
    for i, t in enumerate(tokens):
        one = compute.transformer_layer(w, compute.LayerShape(t / w.seq_len, t, tp), r, **kw)  # type: ignore[arg-type]
        assert float(np.asarray(batch.gpu_s)[i]) == pytest.approx(float(one.gpu_s), rel=1e-12)
        assert float(np.asarray(batch.kernels)[i]) == pytest.approx(float(one.kernels))


def test_single_layer_mfu_on_h100_stays_below_the_large_gemm_efficiency() -> None:
    """No communication, no pipeline: the kernels alone. Llama 3 70B at tp 8: GEMMs at most
    ~88% of peak, attention and memory-bound kernels below them."""
    w = get_workload("llama3-70b")
    lc = _layer(w, tp=8.0)
    head = compute.lm_head(w, 8192.0, 8.0, h100())
    t = float(lc.gpu_s) + float(head.total_s) / w.layers
    mfu = compute.model_flops_per_token(w, causal=True) * 8192 / w.layers / 8 / t / 989.4e12
    assert 0.55 < mfu < h100().gemm_large_efficiency


# --- step terms -----------------------------------------------------------------------------


def test_fused_adam_streams_thirty_bytes_per_parameter() -> None:
    """fp32 master, grad, m, v read (16 B); master, m, v and the bf16 weight written (14 B)."""
    r = ONE_SM.with_(kernel_gpu_s=0.0)
    assert float(step.optimizer_step_s(1e9, r)) == pytest.approx(30e9 / 1e12)
    assert float(step.grad_clip_s(1e9, r)) == pytest.approx(16e9 / 1e12)


def test_fused_cross_entropy_moves_fewer_bytes_than_megatrons_fp32_loss() -> None:
    w = get_workload("llama3-8b")
    r = h100()
    fused = step.lm_head(w, 8192.0, 1.0, r, fused_loss=True)
    unfused = step.lm_head(w, 8192.0, 1.0, r)
    logits = 8192.0 * w.vocab
    assert float(unfused.loss_s - fused.loss_s) == pytest.approx(
        logits * (52 - 6) / r.stream_Bps + 7 * r.kernel_gpu_s, rel=1e-9
    )


@given(c=st.floats(0.0, 10.0), m=st.floats(0.0, 10.0))
def test_overlap_slowdown_is_bounded_by_the_window_and_the_compute(c: float, m: float) -> None:
    """Compute beside NCCL runs at 1/1.189 of its rate (Lee et al. 2025): the extra time never
    exceeds the communication window's share nor the compute's own stretch."""
    extra = float(compute.overlap_slowdown(c, m))
    r = 1 / (1 + step.OVERLAP_COMPUTE_SLOWDOWN)
    assert 0.0 <= extra <= min(m * (1 - r), c * (1 / r - 1)) + 1e-12


# --- power ----------------------------------------------------------------------------------


def test_power_cap_lowers_the_clock_monotonically_and_never_to_zero() -> None:
    caps = np.linspace(0.0, 700.0, 71)
    f = rates.sustained_clock_factor(caps, 700.0)
    assert float(f[-1]) == 1.0
    assert np.all(np.diff(f) >= 0)
    assert float(f.min()) == rates.MIN_CLOCK_FACTOR


def test_gpu_rates_reads_both_peaks_and_applies_the_cap() -> None:
    cat = load_catalog()
    r = compute.gpu_rates(
        cat.gpu_perf("H100-SXM"), cat.gpu("H100-SXM"), precision="fp8", power_cap_W=500.0
    )
    assert r.peak_flops == pytest.approx(1978.9e12)
    assert r.bf16_flops == pytest.approx(989.4e12)
    assert r.clock_factor == pytest.approx(float(rates.sustained_clock_factor(500.0, 700.0)))
    assert 0.8 < r.clock_factor < 1.0


# --- against the published kernel microbenchmarks ----------------------------------------------


def test_the_benchmark_table_is_sourced_and_split_by_the_hash_of_the_id() -> None:
    rows = kernel_benchmarks()
    assert len({r.id for r in rows}) == len(rows)
    gpus = load_catalog().gpus
    for r in rows:
        assert len(r.source) > 20 and r.as_of.year >= 2023
        assert r.kind == "power" or r.gpu in gpus
    bench = [r for r in rows if r.role == "bench" and r.kind != "power"]
    fit = [r for r in bench if validation.in_fit_set(r.id)]
    assert all(int(hashlib.sha256(r.id.encode()).hexdigest(), 16) % 3 == 0 for r in fit)
    assert len(fit) <= math.ceil(len(bench) / 3) + 5  # "about a third"


@pytest.mark.parametrize(
    ("kind", "median_max", "bias_max"),
    [("attention", 0.06, 0.04), ("gemm", 0.12, 0.08), ("hbm", 0.05, 0.03), ("all", 0.06, 0.03)],
)
def test_held_out_errors_stay_within_tolerance(
    kind: str, median_max: float, bias_max: float
) -> None:
    """Rows never used to set a constant (benchmarks/kernel_model.py prints the full table)."""
    found = {(s.kind, s.split): s for s in validation.summarise(validation.residuals())}
    held = found[(kind, "held_out")]
    assert held.rows >= 10
    assert held.median_abs <= median_max
    assert abs(held.mean_signed) <= bias_max
