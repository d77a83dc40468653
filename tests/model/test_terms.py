"""Each cost term against a hand-computed case, with the source of its formula.

Where a test needs a GPU it uses a made-up one with round numbers (100 TFLOP/s peak, 1 TB/s
HBM, 16 SMs, 128×128 tiles), so every expected value below is arithmetic you can redo on paper.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from bandwall.model import compute, data_parallel, faults, memory, parallel, pipeline
from bandwall.model.engine import lora_trainable_fraction
from bandwall.model.layout import Recompute
from bandwall.workloads import custom_transformer, get_workload
from tests.conftest import PINNED, plan_of

RATES = compute.GpuRates(
    peak_flops=100e12,
    gemm_efficiency=0.5,
    attention_efficiency=0.25,
    hbm_Bps=1e12,
    sm_count=16,
    tile_m=128,
    tile_n=128,
    kernel_launch_s=5e-6,
)
K0 = compute.GEMM_K_OVERHEAD  # 256: the CUTLASS pipeline fill, in K elements


def hand_gemm(m: float, n: float, k: float, waves_fill: float = 1.0) -> float:
    return 2 * m * n * k / (50e12 * waves_fill * k / (k + K0))


# --- compute ---------------------------------------------------------------------------------


def test_gemm_full_waves_and_shallow_k() -> None:
    """NVIDIA Matrix Multiplication Background guide §3.2 (wave quantisation): 2048×4096 has
    16·32 = 512 tiles = 32 full waves of 16 SMs; K=4096 runs at 4096/(4096+256)."""
    got = float(compute.gemm_s(2048, 4096, 4096, RATES))
    assert got == pytest.approx(2 * 2048 * 4096 * 4096 / (50e12 * 4096 / 4352), rel=1e-12)


def test_gemm_partial_last_wave_costs_a_whole_wave() -> None:
    # 128 × 17·128: 17 tiles on 16 SMs = 2 waves, so 17/32 of the GPU does useful work
    got = float(compute.gemm_s(128, 17 * 128, 1024, RATES))
    assert got == pytest.approx(hand_gemm(128, 17 * 128, 1024, 17 / 32), rel=1e-12)
    # a batched GEMM spreads its problems' tiles over the same waves: 16 × 1 tile = 1 wave
    batched = float(compute.gemm_s(128, 128, 1024, RATES, 16, batched=True))
    assert batched == pytest.approx(16 * hand_gemm(128, 128, 1024, 1.0), rel=1e-12)


def test_layer_times_by_hand() -> None:
    """A classic layer (h=1024, 16 heads, MLP 4h, no GQA), 2 sequences of 1,024 tokens, tp=2,
    no FlashAttention (Megatron 2022): QKV + projection + two MLP GEMMs, two batched score
    GEMMs, and element-wise passes over 2-byte activations (Korthikanti et al. 2022 §4)."""
    w = custom_transformer(
        layers=2, hidden=1024, heads=16, vocab=1000, seq_len=1024, gated_mlp=False
    )
    T, h, tp = 2048.0, 1024.0, 2.0
    lt = compute.layer_times(
        w, T, tp, 1.0, 2.0, RATES, moe_layer=False, sequence_parallel=False, flash_attention=False
    )
    # 2048×1536 output = 16·12 = 192 tiles = 12 full waves; 2048×512 = 64 tiles = 4 waves
    gemm = (
        hand_gemm(T, 3 * h / tp, h)
        + hand_gemm(T, h, h / tp)
        + hand_gemm(T, 4 * h / tp, h)
        + hand_gemm(T, h, 4 * h / tp)
    )
    assert lt.gemm_s == pytest.approx(gemm, rel=1e-12)
    # QKᵀ: 16 problems (2 sequences × 8 heads) of 1024×1024×64 (64 tiles each); AV: 1024×64
    # ×1024 (8 tiles each): both batched into whole waves of 16 SMs
    scores = 16 * hand_gemm(1024, 1024, 64) + 16 * hand_gemm(1024, 64, 1024)
    score_bytes = 4.5 * 2 * 2 * 8 * 1024 * 1024  # read/write scores, dropout and its mask
    assert lt.attention_s == pytest.approx(scores + score_bytes / 1e12, rel=1e-12)
    elementwise = (11 * 2 * T * h + 2 * 2 * T * 4 * h / tp) / 1e12
    assert lt.elementwise_s == pytest.approx(elementwise, rel=1e-12)
    sp = compute.layer_times(
        w, T, tp, 1.0, 2.0, RATES, moe_layer=False, sequence_parallel=True, flash_attention=False
    )
    # sequence parallelism: each TP rank normalises and drops out half the tokens
    assert sp.elementwise_s == pytest.approx((11 * 2 * T * h / tp + 2 * 2 * T * 4 * h / tp) / 1e12)


def test_flash_attention_computes_the_causal_half() -> None:
    """Fault 5: FlashAttention skips masked blocks (Dao 2023 §3.1): half of QKᵀ and AV."""
    w = custom_transformer(
        layers=2, hidden=1024, heads=16, vocab=1000, seq_len=1024, gated_mlp=False
    )
    lt = compute.layer_times(
        w,
        1024.0,
        1.0,
        1.0,
        1.0,
        RATES,
        moe_layer=False,
        sequence_parallel=True,
        flash_attention=True,
    )
    flops = 2 * 2 * 1 * 16 * 1024 * 1024 * 64  # QKᵀ + AV over the full square
    assert lt.attention_s == pytest.approx(0.5 * flops / (100e12 * 0.25), rel=1e-12)
    # at 131k tokens, full-square attention would be the 1.4× too much work the review found
    long = get_workload("llama3-405b").model_copy(update={"seq_len": 131072})
    full = long.flops_per_token
    causal = compute.model_flops_per_token(long, causal=True)
    assert full / causal == pytest.approx(1.40, abs=0.01)


def test_lm_head_and_launch_floor() -> None:
    w = custom_transformer(
        layers=2, hidden=1024, heads=16, vocab=32768, seq_len=1024, gated_mlp=False
    )
    head = float(compute.lm_head_s(w, 2048.0, 2.0, RATES))
    proj = hand_gemm(2048, 16384, 1024)  # vocabulary split over 2 TP ranks
    assert head == pytest.approx(3 * proj + 5 * 4 * 2048 * 16384 / 1e12, rel=1e-12)
    # 10 µs of work in 20 forward kernels: launching 60 kernels at 5 µs (300 µs) dominates
    assert float(compute.microbatch_s(10e-6, 20, RATES, 0.0)) == pytest.approx(300e-6)
    assert float(compute.microbatch_s(1.0, 20, RATES, 0.5)) == pytest.approx(3.5)


def test_cnn_microbatch_has_a_launch_floor() -> None:
    """Fault 6: ResNet-50 throughput collapses at small per-GPU batch (MLPerf v3.1 H100: 6,972
    img/s per GPU at 400/GPU, 2,502 at 16/GPU), because each step launches ~530 kernels."""
    one = float(compute.cnn_microbatch_s(24.6e9, 300e6, 530, 1, RATES, 0.7))
    assert one == pytest.approx(24.6e9 / (50e12 * 0.7) + 300e6 / 1e12 + 530 * 5e-6)
    r = plan_of(model="resnet50", gpus=8, global_batch=8 * 400, micro_batch=400, zero=1)
    s = plan_of(model="resnet50", gpus=8, global_batch=8 * 16, micro_batch=16, zero=1)
    per_gpu = {k: p.metrics["samples_per_s"] / 8 for k, p in (("big", r), ("small", s))}
    assert per_gpu["small"] < 0.6 * per_gpu["big"]


# --- tensor, context, expert and pipeline parallelism --------------------------------------------


def test_tp_layer_without_and_with_sequence_parallelism() -> None:
    """Megatron-LM 2022 (mpu/layers.py): no SP, forward 2 all-reduces exposed, backward 2
    hidden behind the weight-gradient GEMMs; SP: forward 2 AG + 2 RS, backward 2 AG exposed,
    2 AG and 2 RS hidden (Korthikanti et al. 2022 §4.2.2)."""
    ar, ag, rs, gemm = 1.0, 0.5, 0.5, 0.6
    plain = parallel.tp_layer_s(
        ar,
        ag,
        rs,
        gemm,
        sequence_parallel=False,
        comm_overlap=False,
        tp_ranks=8,
        recompute_forward=0.0,
    )
    assert plain == pytest.approx(2 * 1.0 + (2 * 1.0 - 0.6))
    sp = parallel.tp_layer_s(
        ar,
        ag,
        rs,
        gemm,
        sequence_parallel=True,
        comm_overlap=False,
        tp_ranks=8,
        recompute_forward=0.0,
    )
    assert sp == pytest.approx((2 * 0.5 + 2 * 0.5) + 2 * 0.5 + (1.0 - 0.6) + (1.0 - 0.6))
    full = parallel.tp_layer_s(
        ar,
        ag,
        rs,
        gemm,
        sequence_parallel=True,
        comm_overlap=False,
        tp_ranks=8,
        recompute_forward=1.0,
    )
    assert full == pytest.approx(sp + 2.0)  # recomputation repeats the forward collectives
    # userbuffers overlap: each collective hidden behind its GEMM (gemm/4 = 0.15 s) but one
    # chunk of eight: max(0.5 - 0.15, 0.5/8) = 0.35 each, ten collectives
    hidden = parallel.tp_layer_s(
        ar,
        ag,
        rs,
        gemm,
        sequence_parallel=True,
        comm_overlap=True,
        tp_ranks=8,
        recompute_forward=0.0,
    )
    assert hidden == pytest.approx(10 * 0.35)


def test_parallel_volumes() -> None:
    assert float(parallel.tp_bytes(2, 4096.0, 8192.0, 2)) == 2 * 4096 * 8192 * 2 / 2
    assert float(parallel.cp_kv_bytes(1, 8192.0, 1024.0)) == 8192 * 1024 * 2 * 2
    # top-2 routing: every token's hidden vector is dispatched twice, split over tp·cp ranks
    assert float(parallel.ep_bytes(1, 4096.0, 2, 1, 2.0, 4096.0)) == 4096 / 2 * 2 * 4096 * 2
    assert float(pipeline.p2p_bytes(1, 2048.0, 12288.0, 8, 1)) == 2048 * 12288 * 2 / 8
    # CP hides behind attention; EP all-to-alls are four per MoE layer
    assert float(parallel.cp_microbatch_s(4, 1.0, 1.0, 5.0)) == pytest.approx(3.0)
    assert float(parallel.ep_microbatch_s(2, 0.1, 0.25)) == pytest.approx(0.75 * 2 * 4 * 0.1)
    # DeepEP/HybridEP: a token crosses to each other node holding one of its experts once.
    # EP 64 over 8 nodes, top-8: 8 (1 - (7/8)^8) / 8 = 0.6564 of the all-to-all's copies; EP 16
    # over 2 nodes: 2 (1 - 0.5^8) / 8 = 0.2490; within one node nothing changes
    assert float(parallel.node_dispatch_share(64, 8, 8.0)) == pytest.approx(1 - 0.875**8)
    assert float(parallel.node_dispatch_share(16, 8, 8.0)) == pytest.approx(2 * (1 - 0.5**8) / 8)
    assert float(parallel.node_dispatch_share(8, 8, 8.0)) == 1.0
    # overlap hides at most the micro-batch's compute: 0.8 s of all-to-alls under 0.5 s
    assert float(parallel.ep_microbatch_s(2, 0.1, 1.0, 0.5)) == pytest.approx(0.3)
    assert float(parallel.ep_microbatch_s(2, 0.1, 1.0, 2.0)) == pytest.approx(0.0)


def test_pipeline_bubble_and_sends() -> None:
    """Narayanan et al. 2021 §2.2: bubble (p-1)/v slots; sends hidden except fill and drain,
    or all exposed without p2p overlap (Megatron 2022)."""
    bubble, sends = pipeline.pipeline_s(1.0, 0.01, 4, 2, 8)
    assert float(bubble) == pytest.approx(3 / 2 * 1.0)
    assert float(sends) == pytest.approx(2 * 3 * 0.01)
    bubble, sends = pipeline.pipeline_s(1.0, 0.01, 4, 2, 8, overlap=False)
    assert float(bubble) == pytest.approx(3 / 2 * 1.04)
    assert float(sends) == pytest.approx(8 * 0.04 + 2 * 3 * 0.01)


def test_deepspeed_pipeline_blocks_on_every_transfer() -> None:
    """DeepSpeed's PipelineEngine (runtime/pipe/engine.py): plain 1F1B whose p2p.send/recv
    block, so a stage's slot carries its four transfers (receive and send activations, receive
    and send gradients) and the three TP all-gathers of partitioned activations. Hand case:
    slot 1 s, transfer 10 ms, gather 2 ms, pp 4, 8 micro-batches: 46 ms more per slot."""
    bubble, exposed = pipeline.blocking_pipeline_s(1.0, 0.01, 0.002, 4, 8)
    assert float(bubble) == pytest.approx(3 * 1.046)
    assert float(exposed) == pytest.approx(8 * 0.046)
    bubble, exposed = pipeline.blocking_pipeline_s(1.0, 0.01, 0.002, 1, 8)
    assert (float(bubble), float(exposed)) == (0.0, 0.0)


def test_deepspeed_accumulates_gradients_in_separate_kernels() -> None:
    """DeepSpeed's bf16 optimizer adds every micro-batch's bf16 gradients into fp32 copies
    (bf16_optimizer.py update_hp_grads: `hp_grad.add_(lp.grad.to(fp32))`, 18 B per parameter),
    where Megatron fuses the accumulation into the wgrad GEMM. The same layout, kernels and
    overlap flags under the two stacks differ in compute by m x local params x 18 B at the
    GPU's achieved HBM rate (beside DeepSpeed's fitted in-step factor); ZeRO-3 (which
    reduce-scatters every micro-batch) does not pay it.
    Under a pipeline DeepSpeed all-reduces the gradients though the optimizer is sharded."""
    from bandwall.catalog.loader import load_catalog
    from bandwall.model import calibration

    job = dict(model="llama3-8b", gpus=32, gpu="A100-SXM-80GB", tp=2, pp=4, cp=1, ep=1)
    job |= dict(zero=1, micro_batch=1, global_batch=64, attention_kernel="fa2")
    job |= dict(overlap_grad_reduce=False, overlap_param_gather=False, sequence_parallel=True)
    ds, mega = plan_of(**job, stack="deepspeed"), plan_of(**job, stack="megatron")
    m = 64 / 4  # micro-batches per pipeline: global batch / (dp 4 x micro-batch 1)
    local = get_workload("llama3-8b").params / (2 * 4)
    cat = load_catalog()
    rates = compute.gpu_rates(
        cat.gpu_perf("A100-SXM-80GB"), cat.gpu("A100-SXM-80GB"), precision="bf16"
    )
    # DeepSpeed's fitted in-step factor scales the rest of its compute (and the optimizer)
    factor = calibration.IN_STEP_EFFICIENCY_BY_STACK.get("deepspeed", 1.0)
    extra = ds.metrics["compute_s"] - mega.metrics["compute_s"] / factor
    assert extra == pytest.approx(m * local * 18 / rates.hbm_Bps, rel=1e-6)
    # an all-reduce moves as much as reduce-scatter + all-gather: DeepSpeed's pipeline pays the
    # weights' all-gather on top
    assert ds.metrics["dp_s"] > 1.3 * mega.metrics["dp_s"] > 0
    z3 = dict(job, zero=3, pp=1, tp=1)
    assert plan_of(**z3, stack="deepspeed").metrics["compute_s"] == pytest.approx(
        plan_of(**z3, stack="megatron").metrics["compute_s"] / factor
    )


# --- data parallelism ----------------------------------------------------------------------------


def test_gradients_reduce_in_fp32_by_default() -> None:
    """Fault 2: Megatron-LM with bf16 all-reduces in fp32 (arguments.py), PyTorch DDP under
    autocast keeps fp32 grads, torchtitan's FSDP reduce_dtype is float32."""
    assert data_parallel.grad_bytes_per_param("fp32", "none") == 4.0
    assert data_parallel.grad_bytes_per_param("bf16", "none") == 2.0
    assert data_parallel.grad_bytes_per_param("fp32", "int8") == 1.0
    common = dict(
        model="resnet50",
        gpus=16,
        preset="decentralized-colocated",
        bandwidth_Gbps=15,
        overlap=False,
        zero=0,
        micro_batch=64,
    )
    fp32, bf16 = plan_of(**common), plan_of(**common, reduce_dtype="bf16")
    assert fp32.request.reduce_dtype == "fp32"
    # DDP all-reduces the gradients: the bytes on the wire double with fp32
    assert fp32.breakdown["dp"] / bf16.breakdown["dp"] == pytest.approx(2.0, rel=0.05)
    assert fp32.metrics["comm_efficiency"] < 0.75 * bf16.metrics["comm_efficiency"]
    # a sharded optimizer reduce-scatters the fp32 (or bf16) gradients but all-gathers the bf16
    # weights either way (Megatron-Core distributed optimizer): (4 + 2) / (2 + 2)
    sharded = {**common, "zero": 1}
    fp32, bf16 = plan_of(**sharded), plan_of(**sharded, reduce_dtype="bf16")
    assert fp32.breakdown["dp"] / bf16.breakdown["dp"] == pytest.approx(1.5, rel=0.05)


def test_buckets_are_reduced_one_by_one() -> None:
    """PyTorch DDP (Li et al. 2020): 100 MiB of gradients in 25 MiB buckets = 4 collectives."""
    sizes = []

    def price(size: float) -> float:
        sizes.append(float(size))
        return 0.001 + size / 1e10

    t = float(data_parallel.bucketed_all_reduce_s(100 * 2**20, 25, price))
    assert sizes == [25 * 2**20]
    assert t == pytest.approx(4 * (0.001 + 25 * 2**20 / 1e10))
    assert float(data_parallel.ddp_exposed_s(1.0, 0.7, 0.1)) == pytest.approx(0.3)
    assert float(data_parallel.ddp_exposed_s(1.0, 0.95, 0.1)) == pytest.approx(0.1)
    assert float(data_parallel.last_bucket_share(25, 100 * 2**20)) == pytest.approx(0.25)


def test_fsdp_gathers_the_stage_not_dp_times_it() -> None:
    """Fault 1: ZeRO-3 all-gathers the stage's weights (each GPU holds 1/(dp·cp)) twice and
    reduce-scatters its gradients once per micro-batch; the review found them priced dp×."""
    p = plan_of(
        model="llama3-405b",
        gpus=16384,
        tp=8,
        pp=16,
        zero=3,
        cp=1,
        micro_batch=1,
        virtual_stages=1,
        failures=False,
    )
    assert p.metrics["step_time_s"] < 30  # was 3.45 min, 98.7% of it data-parallel
    assert p.breakdown["dp"] / p.metrics["step_time_s"] < 0.5
    w = get_workload("llama3-405b")
    local = w.params / (8 * 16)
    dp = 16384 / 128
    m = p.metrics["micro_batches"]
    share = (dp - 1) / dp
    assert p.metrics["dp_bytes_per_gpu"] == pytest.approx(m * share * (2 * 2 * local + 4 * local))


def test_context_parallelism_shards_the_optimizer_with_data_parallelism() -> None:
    """Fault 3: Megatron's distributed optimizer shards over dp × cp and reduces gradients
    over that group (megatron/core/distributed: dp_cp_group)."""
    p = plan_of(model="llama3-8b", gpus=64, tp=8, pp=1, cp=2, zero=1, micro_batch=1)
    w = get_workload("llama3-8b")
    local = w.params / 8
    assert p.metrics["memory_optimizer_bytes"] == pytest.approx(12 * local / (4 * 2))
    assert p.metrics["memory_grads_bytes"] == pytest.approx(4 * local)  # ZeRO-1: not sharded


def test_sequence_parallel_activation_memory() -> None:
    """Fault 4: Korthikanti et al. 2022 eqs. 2-5: a classic layer keeps 10·h + 24·h/t bytes
    per token without SP and 34·h/t with it (selective recomputation)."""
    w = custom_transformer(
        layers=8, hidden=4096, heads=32, vocab=1000, seq_len=2048, gated_mlp=False
    )
    rep, shard = memory.activation_elements_per_token_layer(w, moe_layer=False)
    assert (rep, shard) == (10 * 4096, 24 * 4096)
    kwargs = dict(flash_attention=False)

    def acts(sp: bool) -> float:
        a, _ = memory.transformer_activation_bytes(
            w,
            Recompute.SELECTIVE,
            8.0,
            1.0,
            1.0,
            1.0,
            1.0,
            1.0,
            0.0,
            1e12,
            sequence_parallel=sp,
            **kwargs,
        )
        return float(a)

    logits = 2048 * 1000 * 4 / 8
    assert acts(False) == pytest.approx((10 + 24 / 8) * 4096 * 2048 * 8 + logits)
    assert acts(True) == pytest.approx(34 / 8 * 4096 * 2048 * 8 + logits)
    # and TP is priced as all-gather + reduce-scatter when SP is on (the default)
    assert plan_of(model="llama3-70b", gpus=64, tp=8).request.sequence_parallel


def test_fp8_linears_keep_their_inputs_in_one_byte() -> None:
    """TransformerEngine keeps each linear's input for the wgrad GEMM in fp8 (linear.py
    `_Linear.forward`: `saved_inputmat_t = inputmat_t`): for a classic layer (h = hq, ffn 4h)
    the QKV and FC1 inputs (h each, outside the TP region) and the projection and FC2 inputs
    (h and 4h, inside) halve; the norms' inputs, Q/K/V and the FC1 output do not. 34 → 27·h
    bytes per token with SP."""
    w = custom_transformer(
        layers=8, hidden=4096, heads=32, vocab=1000, seq_len=2048, gated_mlp=False
    )
    rep, shard = memory.activation_elements_per_token_layer(w, False, fp8_inputs=True)
    assert (rep, shard) == (8 * 4096, 19 * 4096)
    # the engine applies it to an fp8 Megatron run, not to torchao's float8 (fsdp2 stack)
    mem = {
        (prec, stack): plan_of(
            model="llama3-8b",
            gpus=8,
            precision=prec,
            stack=stack,
            recompute="selective",
            tp=1,
            pp=1,
            cp=2,
            zero=2,
            micro_batch=1,
        ).metrics["memory_activations_bytes"]
        for prec in ("bf16", "fp8")
        for stack in ("megatron", "fsdp2")
    }
    assert mem[("fp8", "megatron")] < 0.9 * mem[("bf16", "megatron")]
    assert mem[("fp8", "fsdp2")] == pytest.approx(mem[("bf16", "fsdp2")])


def test_megatron_recompute_modules_drop_what_they_rerun() -> None:
    """Megatron-Core --recompute-modules (transformer_config.py `recompute_modules`): a
    checkpointed MLP keeps only its input, so the classic layer's 34·h bytes per token
    (Korthikanti et al. 2022 eq. 5, selective, t = 1) lose the MLP's inside (FC1 output 8·h,
    FC2 input 8·h): 18·h with `mlp`; `layernorm` drops the two norm outputs the QKV and FC1
    GEMMs read (2·2h): 30·h. The rerun costs the MLP's GEMMs (8h of the 12h of projection
    widths q, k, v, o, up, down) and the element-wise work of the 16 of 34 bytes it drops."""
    w = custom_transformer(
        layers=8, hidden=4096, heads=32, vocab=1000, seq_len=2048, gated_mlp=False
    )
    h = 4096

    def per_token(mods: frozenset[str]) -> float:  # bytes
        return sum(memory.module_elements_per_token_layer(w, False, mods))

    assert per_token(frozenset()) == 34 * h  # the selective set itself
    assert per_token(frozenset({"mlp"})) == 18 * h
    assert per_token(frozenset({"layernorm"})) == 30 * h
    gemm, elementwise = memory.module_rerun(w, False, frozenset({"mlp"}))
    assert gemm == pytest.approx(8 / 12) and elementwise == pytest.approx(16 / 34)
    # an MoE layer's `moe` drops every expert path; `moe_act` only the activation outputs
    moe = get_workload("mixtral-8x7b")
    ffn = moe.moe_ffn or moe.ffn
    full = sum(memory.module_elements_per_token_layer(moe, True, frozenset()))
    act = sum(memory.module_elements_per_token_layer(moe, True, frozenset({"moe_act"})))
    assert full - act == 2 * moe.top_k * ffn  # one 2-byte element per expert path and width
    # the engine: less memory, more recompute than the default selective (core attention)
    common = dict(model="mixtral-8x7b", gpus=64, tp=2, pp=1, cp=1, ep=8, zero=1, micro_batch=1)
    sel = plan_of(**common, recompute="selective").metrics
    mods = plan_of(**common, recompute="selective", recompute_modules="moe").metrics
    assert mods["memory_activations_bytes"] < 0.6 * sel["memory_activations_bytes"]
    assert mods["compute_s"] > sel["compute_s"]


def test_moe_activations_scale_with_top_k() -> None:
    w = get_workload("mixtral-8x7b")
    top1 = w.model_copy(update={"top_k": 1})
    _, two = memory.activation_elements_per_token_layer(w, moe_layer=True)
    _, one = memory.activation_elements_per_token_layer(top1, moe_layer=True)
    ffn = w.ffn or 4 * w.hidden
    assert two - one == 2 * (2 * ffn + ffn)  # one more expert's gate/up and down inputs


# --- memory, checkpoints, LoRA, optimizer ------------------------------------------------------


def test_memory_is_what_nvidia_smi_reports() -> None:
    """Fault 8: an "80 GB" H100 has 81,559 MiB (nvidia-smi), less the CUDA context and NCCL's
    buffers (1.5 GiB)."""
    p = plan_of(model="llama3-8b", gpus=8, tp=8)
    assert p.metrics["memory_capacity_bytes"] == pytest.approx((81559 - 1536) * 2**20)


def test_checkpoints_have_a_fixed_cost() -> None:
    """Fault 7: PyTorch DCP measured a 6.3 s stall for a 7B checkpoint; bytes at the storage
    rate come on top (14 B/param)."""
    assert float(faults.checkpoint_write_s(7e9, 100.0)) == pytest.approx(6.3 + 14 * 7e9 / 1e11)
    small = plan_of(model="bert-large", gpus=8)
    assert small.metrics["checkpoint_interval_s"] > 60  # not every ~2 s any more


def test_lora_trains_a_sliver() -> None:
    """Hu et al. 2021: rank r on a d_in × d_out matrix trains r·(d_in + d_out) parameters."""
    w = get_workload("llama2-70b")
    h, kv, ffn = 8192, 1024, 28672
    per_layer = 16 * ((h + h) + 2 * (h + kv) + (h + h) + 3 * (h + ffn))
    assert lora_trainable_fraction(w, 16) == pytest.approx(80 * per_layer / w.params)
    layout = {**PINNED, "tp": 8, "pp": 2, "micro_batch": 1}
    full = plan_of(model="llama2-70b", gpus=64, **layout)
    lora = plan_of(model="llama2-70b", gpus=64, **layout, lora_rank=16)
    assert lora.metrics["memory_optimizer_bytes"] < 0.01 * full.metrics["memory_optimizer_bytes"]
    assert lora.metrics["compute_s"] < full.metrics["compute_s"]  # no weight gradients


def test_lora_counts_the_flops_it_runs_and_prices_a_billion_tokens() -> None:
    """A fine-tune's MFU leaves out the weight-gradient GEMMs of its frozen base (2 of the 6
    FLOPs per matmul parameter and token, Kaplan et al. 2020): counting them read 81% MFU for
    Llama 2 70B at rank 16. Its default budget is a pricing unit (1B tokens), not 20 tokens
    per frozen parameter (1.4T tokens, "2.58 y" to fine-tune)."""
    w = get_workload("llama2-70b")
    layout = {**PINNED, "tp": 8, "pp": 2, "micro_batch": 1}
    full = plan_of(model="llama2-70b", gpus=64, **layout).metrics
    lora = plan_of(model="llama2-70b", gpus=64, **layout, lora_rank=16).metrics
    share = lora_trainable_fraction(w, 16)
    attention = 12 * 80 * 64 * 128 * w.seq_len  # per token, PaLM appendix B: 12·L·a·d_head·s
    matmul = w.flops_per_token - attention  # 6 × the matmul parameters a token uses
    # hand count: causal model FLOPs less the frozen share of the weight gradient (matmul / 3)
    per_seq = (matmul + attention / 2 - (1 - share) * matmul / 3) * w.seq_len
    tflops = lora["global_batch"] * per_seq / lora["step_time_s"] / 64 / 1e12
    assert lora["tflops_per_gpu"] == pytest.approx(tflops, rel=1e-9)
    assert lora["tokens"] == 1e9
    assert full["tokens"] == 20 * w.params
    with_budget = plan_of(model="llama2-70b", gpus=64, **layout, lora_rank=16, tokens=5e9)
    assert with_budget.metrics["tokens"] == 5e9


def test_lora_under_a_sharded_optimizer_gathers_only_the_adapters() -> None:
    """ZeRO-1/2 all-gathers the parameters the optimizer updated; LoRA's frozen base weights
    stay replicated and never move. The gather was priced over the whole base (0.2-0.5 s a
    step for Llama 2 70B LoRA on 128-1,024 GPUs, MLPerf's layouts, blind batch 9): with
    ZeRO-1 the adapters' gather adds the trainable share of ZeRO-0's data-parallel bytes."""
    layout = {**PINNED, "tp": 4, "cp": 2, "micro_batch": 1, "global_batch": 128}
    common = dict(model="llama2-70b", gpus=1024, seq_len=8192, lora_rank=16, **layout)
    z0 = plan_of(**{**common, "zero": 0}).metrics
    z1 = plan_of(**{**common, "zero": 1}).metrics
    share = lora_trainable_fraction(get_workload("llama2-70b"), 16)
    # the adapters' reduce-scatter and gather send what ZeRO-0's all-reduce of them does
    assert z1["dp_bytes_per_gpu"] == pytest.approx(z0["dp_bytes_per_gpu"])
    assert z1["dp_s"] < 0.01  # was 0.22 s
    full = plan_of(**{**common, "zero": 1, "lora_rank": None}).metrics
    assert z1["dp_bytes_per_gpu"] == pytest.approx(full["dp_bytes_per_gpu"] * share, rel=0.05)


def test_optimizer_step_bytes() -> None:
    """Fused Adam with fp32 master weights (apex multi_tensor_adam) plus norm/clip/zeroing."""
    assert float(memory.optimizer_step_s(1e9, 4, 1e12, False)) == pytest.approx(1e9 / 4 * 38 / 1e12)
    off = float(memory.optimizer_step_s(1e9, 1, 1e12, True))
    assert off == pytest.approx(1e9 * 6 / 25e9 + 1e9 * 38 / 100e9)


# --- the plan's honesty about its inputs ------------------------------------------------------


def test_cnn_batch_is_honoured_and_small_batches_are_flagged() -> None:
    """Fault 9: the global batch no longer grows with the GPU count."""
    a, b = plan_of(model="resnet50", gpus=64), plan_of(model="resnet50", gpus=128)
    assert a.metrics["global_batch"] == b.metrics["global_batch"] == 1024
    tiny = plan_of(model="resnet50", gpus=1024)
    assert any("kernel launches take" in n for n in tiny.notes)


def test_bandwidth_override_keeps_the_transport_and_says_so() -> None:
    """Fault 10: --bandwidth on the default preset sets each of 8 RDMA NICs, and says so."""
    p = plan_of(model="resnet50", gpus=16, bandwidth_Gbps=15, jitter_us=200)
    cluster = p.to_json()["cluster"]
    assert cluster["nics_per_node"] == 8 and cluster["scale_out_transport"] == "rdma"
    assert any("8 RDMA NICs per node" in n and "120 Gb/s per node" in n for n in p.notes)
    tcp = plan_of(model="resnet50", gpus=16, bandwidth_Gbps=15, preset="decentralized-colocated")
    assert tcp.to_json()["cluster"]["scale_out_transport"] == "tcp"


def test_eval_time_counts_toward_time_to_train() -> None:
    base = dict(model="llama3-8b", gpus=64, tokens=1e10, **{**PINNED, "tp": 8}, micro_batch=1)
    plain = plan_of(**base)
    evald = plan_of(**base, eval_interval_steps=100, eval_samples=512)
    evals = math.floor(plain.metrics["steps"] / 100)
    assert evald.metrics["eval_time_s"] > 0
    assert evald.metrics["ideal_time_s"] == pytest.approx(
        plain.metrics["ideal_time_s"] + evald.metrics["eval_time_s"]
    )
    per_eval = evald.metrics["eval_time_s"] / evals
    assert per_eval < plain.metrics["step_time_s"]  # 512 sequences forward < a 512-seq step


def test_terms_are_vectorised() -> None:
    tp = np.array([1.0, 2.0, 4.0])
    out = compute.gemm_s(4096.0, 4096.0 / tp, 4096.0, RATES)
    assert out.shape == (3,) and np.all(np.diff(out) < 0)


def test_each_stack_has_its_own_gradient_bucket() -> None:
    """Megatron-Core: max(40M, 1M x dp) gradient elements, one bucket without overlap
    (megatron/core/distributed/distributed_data_parallel.py); DeepSpeed reduce_bucket_size
    5e8 elements; PyTorch DDP bucket_cap_mb 25. fp32 gradients: 4 B per element."""
    from bandwall.model.vocab import Stack

    mib = 2**20
    got = data_parallel.default_bucket_MiB(Stack.MEGATRON, np.array([8.0, 48.0]), 4.0, True)
    assert got.tolist() == pytest.approx([40e6 * 4 / mib, 48e6 * 4 / mib])  # 152.6, 183.1
    assert np.isinf(data_parallel.default_bucket_MiB(Stack.MEGATRON, 8.0, 4.0, False))
    assert float(data_parallel.default_bucket_MiB(Stack.DEEPSPEED, 8.0, 2.0, False)) == (
        pytest.approx(5e8 * 2 / mib)
    )
    assert float(data_parallel.default_bucket_MiB(Stack.FSDP2, 64.0, 4.0, True)) == 25.0
    # an infinite bucket is one collective over all the gradients
    sizes: list[float] = []
    data_parallel.bucketed_all_reduce_s(3e9, np.inf, lambda s: sizes.append(float(s)) or 1.0)
    assert sizes == [3e9]


def test_megatron_buckets_trade_latencies_for_the_last_bucket() -> None:
    """8B, ZeRO-1 over 64 H100 on 8 nodes. Without overlap Megatron reduces all gradients in
    one bucket, cheaper than 25 MiB buckets that each pay the collective's latency. With
    overlap its max(40M, 1M x 64) = 64M-element buckets (256 MB of fp32) leave a larger last
    bucket exposed than 25 MiB ones once the backward hides the rest. A bucket the request
    names replaces the stack's."""
    job = dict(model="llama3-8b", gpus=64, tp=1, pp=1, cp=1, ep=1, zero=1, micro_batch=1)
    job |= dict(global_batch=64)
    off = dict(overlap_grad_reduce=False, overlap_param_gather=False)
    assert (
        0
        < plan_of(**job, **off).breakdown["dp"]
        < plan_of(**job, **off, bucket_MiB=25).breakdown["dp"]
    )
    default = plan_of(**job)
    assert default.breakdown["dp"] > plan_of(**job, bucket_MiB=25).breakdown["dp"] > 0
    same = plan_of(**job, bucket_MiB=64e6 * 4 / 2**20)
    assert same.breakdown["dp"] == pytest.approx(default.breakdown["dp"], rel=1e-9)


def test_fsdp2_runs_sdpa_flash_attention_2_on_hopper() -> None:
    """torchtitan calls PyTorch SDPA, whose flash backend is FlashAttention-2: the same job is
    slower under fsdp2 than with --attention-kernel fa3; Megatron's default on Hopper is FA3;
    FA3 asked for on an A100 falls back to FA2 (FA3 needs Hopper)."""
    job = dict(model="llama3-8b", gpus=8, tp=1, pp=1, cp=1, ep=1, zero=3, micro_batch=1)
    job |= dict(global_batch=8, stack="fsdp2")
    fa2 = plan_of(**job)
    fa3 = plan_of(**job, attention_kernel="fa3")
    assert fa3.metrics["step_time_s"] < 0.95 * fa2.metrics["step_time_s"]
    assert plan_of(**job, attention_kernel="fa2").metrics["step_time_s"] == pytest.approx(
        fa2.metrics["step_time_s"]
    )
    mega = {**job, "stack": "megatron", "zero": 1}
    assert plan_of(**mega).metrics["step_time_s"] == pytest.approx(
        plan_of(**mega, attention_kernel="fa3").metrics["step_time_s"]
    )
    # FA3 off Hopper: the request is refused (it was priced as the GPU's best, labelled fa3);
    # the engine's own fallback stays for a kernel a stack picks
    from bandwall.errors import ConfigError
    from bandwall.model.engine import attention_kernel

    with pytest.raises(ConfigError, match="fa3 runs on Hopper GPUs only"):
        plan_of(**{**mega, "gpu": "A100-SXM-80GB"}, attention_kernel="fa3")
    assert attention_kernel("ampere", "fa2", "megatron", "fa3") == "fa2"
