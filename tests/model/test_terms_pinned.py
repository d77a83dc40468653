"""Cost terms pinned against hand-computed cases, one branch at a time.

Written against the survivors of a mutation run (docs/testing.md, "Mutation testing"): each test
pins a branch or constant the other tests left free. Every expected value is arithmetic in the
comment beside it, with the formula's source as the module under test cites it. The made-up
GPU has round numbers (100 TFLOP/s peak, half of it in GEMMs, 1 TB/s HBM, 16 SMs, 128×128
tiles) so the arithmetic can be redone on paper.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math

import numpy as np
import pytest

from bandwall.catalog import FailureSpec
from bandwall.errors import ConfigError
from bandwall.model import compute, cost, data_parallel, faults, memory, parallel, pipeline
from bandwall.model.faults import Routing
from bandwall.model.layout import Recompute
from bandwall.workloads import Cnn, Transformer, custom_transformer, get_workload

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
#: The same GPU behind a hypervisor that takes a fifth of it.
VIRTUAL = dataclasses.replace(RATES, virtualization_overhead=0.2)
K0 = compute.GEMM_K_OVERHEAD  # 256: the CUTLASS pipeline fill, in K elements
EXACT = 1e-12  # relative tolerance of a closed form evaluated twice in float64


def hand_gemm(m: float, n: float, k: float, fill: float = 1.0, gemm_flops: float = 50e12) -> float:
    """2mnk FLOPs at 50 TFLOP/s × wave fill × K/(K+256) (compute.gemm_s's docstring)."""
    return 2 * m * n * k / (gemm_flops * fill * k / (k + K0))


def classic(**extra: object) -> Transformer:
    """h = 1024, 16 heads of 64, MLP 4h, no GQA, 1,024-token sequences."""
    dims: dict[str, object] = dict(
        layers=8, hidden=1024, heads=16, vocab=1000, seq_len=1024, gated_mlp=False
    )
    return custom_transformer(**{**dims, **extra})


# --- compute: GEMMs and the roofline (NVIDIA "Matrix Multiplication Background", §3.2) -------


def test_unbatched_gemms_each_pay_their_own_waves() -> None:
    """16 separate 128×128 GEMMs have 1 tile each: every one runs a wave on 1 of 16 SMs
    (fill 1/16); batched into one kernel they share a single full wave (fill 1)."""
    apart = float(compute.gemm_s(128, 128, 1024, RATES, 16))
    assert apart == pytest.approx(16 * hand_gemm(128, 128, 1024, 1 / 16), rel=EXACT)
    together = float(compute.gemm_s(128, 128, 1024, RATES, 16, batched=True))
    assert together == pytest.approx(16 * hand_gemm(128, 128, 1024, 1.0), rel=EXACT)
    assert apart == pytest.approx(16 * together, rel=EXACT)


def test_one_sm_gpu_runs_every_tile_as_a_full_wave() -> None:
    # 1 SM: 1 tile = 1 wave of 1 SM, fill 1/1
    one_sm = dataclasses.replace(RATES, sm_count=1)
    got = float(compute.gemm_s(128, 128, 1024, one_sm))
    assert got == pytest.approx(hand_gemm(128, 128, 1024, 1.0), rel=EXACT)


def test_memory_time_loses_the_hypervisor_share() -> None:
    # 1 GB at 1 TB/s × (1 − 0.2) = 0.8 TB/s: 1.25 ms
    assert float(compute.memory_s(1e9, VIRTUAL)) == pytest.approx(1.25e-3, rel=EXACT)


def test_gated_mlp_layer_by_hand() -> None:
    """SwiGLU (3 matrices): the first MLP GEMM is 2·ffn wide and the activation reads both
    halves; T = 2,048 tokens, tp = 2, ffn = 4h = 4,096."""
    w = classic(gated_mlp=True)
    T, h, tp = 2048.0, 1024.0, 2.0
    lt = compute.layer_times(
        w, T, tp, 1.0, 2.0, RATES, moe_layer=False, sequence_parallel=False, flash_attention=False
    )
    # QKV 2048×1536 (192 tiles = 12 waves), proj 2048×1024 over k = 512, MLP up+gate
    # 2048×4096 (512 tiles = 32 waves), down 2048×1024 over k = 2048: all full waves
    gemm = (
        hand_gemm(T, 3 * h / tp, h)
        + hand_gemm(T, h, h / tp)
        + hand_gemm(T, 2 * 4 * h / tp, h)
        + hand_gemm(T, h, 4 * h / tp)
    )
    assert lt.gemm_s == pytest.approx(gemm, rel=EXACT)
    assert lt.wgrad_s == pytest.approx(gemm, rel=EXACT)  # one weight-gradient GEMM per GEMM
    # 11 hidden passes × 2 B × T·h, plus 2 passes × 2 B × T × (2·4h)/tp of the gated MLP
    elementwise = (11 * 2 * T * h + 2 * 2 * T * 2 * 4 * h / tp) / 1e12
    assert lt.elementwise_s == pytest.approx(elementwise, rel=EXACT)


def moe(**extra: object) -> Transformer:
    """4 routed experts, top-2, one shared expert, no gated MLP."""
    return classic(experts=4, top_k=2, shared_experts=1, **extra)


def test_moe_layer_with_expert_width_from_ffn() -> None:
    """Each token runs top_k + shared = 3 expert MLPs of width ffn = 2,048 (no moe_ffn), as 3
    separate GEMMs per matrix, plus the router (T × experts × h)."""
    w = moe(ffn=2048)
    T, h, tp = 2048.0, 1024.0, 2.0
    lt = compute.layer_times(
        w, T, tp, 1.0, 2.0, RATES, moe_layer=True, sequence_parallel=False, flash_attention=False
    )
    attn = hand_gemm(T, 3 * h / tp, h) + hand_gemm(T, h, h / tp)
    # up: 2048×1024 (128 tiles = 8 waves); down: 2048×1024 over k = 1024; ×3 experts each
    experts = 3 * hand_gemm(T, 2048 / tp, h) + 3 * hand_gemm(T, h, 2048 / tp)
    # router: 2048×4 is 16 tiles of 128×128 = one full wave, but only 4 columns of FLOPs
    router = hand_gemm(T, 4, h)
    assert lt.gemm_s == pytest.approx(attn + experts + router, rel=EXACT)
    assert lt.wgrad_s == pytest.approx(attn + experts + router, rel=EXACT)
    # the activation pass covers the 3 experts' 2,048-wide intermediates, split over tp
    elementwise = (11 * 2 * T * h + 2 * 2 * T * 3 * 2048 / tp) / 1e12
    assert lt.elementwise_s == pytest.approx(elementwise, rel=EXACT)


def test_moe_layer_expert_width_defaults_to_4h() -> None:
    # no moe_ffn, no ffn: each expert is 4h = 4,096 wide; up 2048×2048 = 256 tiles = 16 waves
    w = moe()
    T, h, tp = 2048.0, 1024.0, 2.0
    lt = compute.layer_times(
        w, T, tp, 1.0, 2.0, RATES, moe_layer=True, sequence_parallel=False, flash_attention=False
    )
    attn = hand_gemm(T, 3 * h / tp, h) + hand_gemm(T, h, h / tp)
    experts = 3 * hand_gemm(T, 4 * h / tp, h) + 3 * hand_gemm(T, h, 4 * h / tp)
    assert lt.gemm_s == pytest.approx(attn + experts + hand_gemm(T, 4, h), rel=EXACT)


def test_flash_attention_under_context_parallelism_and_a_hypervisor() -> None:
    """Dao 2023 §3.1: causal FlashAttention computes half of QKᵀ and AV. With cp = 2 each rank
    holds 512 of the 1,024 queries against all 1,024 keys; 2 sequences per micro-batch; the
    hypervisor takes 0.2 of the attention rate too. No score bytes touch HBM."""
    w = classic()
    lt = compute.layer_times(
        w,
        1024.0,
        1.0,
        2.0,
        2.0,
        VIRTUAL,
        moe_layer=False,
        sequence_parallel=True,
        flash_attention=True,
    )
    flops = 2 * 2 * 2 * 16 * 512 * 1024 * 64  # QKᵀ + AV, b = 2, 16 heads, 512 × 1024, d = 64
    core = 0.5 * flops / (100e12 * 0.25 * (1 - 0.2))
    assert lt.attention_s == pytest.approx(core, rel=EXACT)
    assert lt.attention_core_s == pytest.approx(core, rel=EXACT)


def test_model_flops_count_the_full_square_unless_causal() -> None:
    """PaLM appendix B: attention is 12·L·a·d·s per token; the causal convention halves it."""
    w = classic()
    attention = 12 * 8 * 16 * 64 * 1024  # 100,663,296
    full = compute.model_flops_per_token(w, causal=False)
    assert full == w.flops_per_token  # the Megatron/PaLM convention: nothing taken off
    assert w.flops_per_token - compute.model_flops_per_token(w, causal=True) == attention / 2
    cnn = get_workload("resnet50")
    assert isinstance(cnn, Cnn)  # a CNN counts FLOPs per image, not per token
    assert compute.model_flops_per_token(cnn, causal=True) == cnn.flops_per_sample


# --- tensor and pipeline parallelism ----------------------------------------------------------


def test_overlapped_tp_repeats_the_forward_under_recomputation() -> None:
    """--tp-comm-overlap (Megatron, TransformerEngine userbuffers): each AG/RS of 0.5 s hides
    behind a quarter of the 0.6 s GEMMs but one chunk of 8: max(0.5 − 0.15, 0.5/8) = 0.35.
    Forward 4 × 0.35 = 1.4 s, backward 6 × 0.35 = 2.1 s; full recomputation repeats the
    forward: 2 × 1.4 + 2.1 = 4.9 s; half the layers recomputed: 1.5 × 1.4 + 2.1 = 4.2 s."""

    def tp(recompute: float) -> float:
        return float(
            parallel.tp_layer_s(
                1.0,
                0.5,
                0.5,
                0.6,
                sequence_parallel=True,
                comm_overlap=True,
                tp_ranks=8,
                recompute_forward=recompute,
            )
        )

    assert tp(1.0) == pytest.approx(4.9)
    assert tp(0.5) == pytest.approx(4.2)


def test_p2p_sends_are_split_over_tp_and_cp() -> None:
    # one 2,048-token sequence of h = 4,096 in bf16, split over tp·cp = 4·2 = 8 ranks
    got = float(pipeline.p2p_bytes(1, 2048.0, 4096.0, 4, 2))
    assert got == 2048 * 4096 * 2 / 8


def test_one_stage_pipeline_sends_nothing() -> None:
    """pp = 1 has no stage boundary: no bubble and no exposed send, even without overlap."""
    bubble, exposed = pipeline.pipeline_s(1.0, 0.01, 1, 1, 8, overlap=False)
    assert float(bubble) == 0.0
    assert float(exposed) == 0.0


# --- data parallelism -------------------------------------------------------------------------


def test_gradients_smaller_than_a_bucket_are_one_collective() -> None:
    """PyTorch DDP (Li et al. 2020): 10 MiB of gradients fit in one 25 MiB bucket."""
    sizes: list[float] = []

    def price(size: float) -> float:
        sizes.append(float(size))
        return 0.001 + size / 1e10

    t = float(data_parallel.bucketed_all_reduce_s(10 * 2**20, 25, price))
    assert sizes == [10 * 2**20]
    assert t == pytest.approx(0.001 + 10 * 2**20 / 1e10)
    assert float(data_parallel.last_bucket_share(25, 10 * 2**20)) == 1.0  # all in that bucket


@pytest.mark.parametrize(
    ("pp", "v", "window"),
    [
        # no interleaving: only the last micro-batch's backward, ⅔ of 3 s = 2 s, whatever pp
        (4, 1, 2.0),
        # v = 2 chunks, pp = 4: the cooldown adds (4 − 1)/2 = 1.5 slots: 2 × 2.5 = 5 s
        (4, 2, 5.0),
        # v = 4, pp = 5: (5 − 1)/4 = 1 slot: 2 × 2 = 4 s
        (5, 4, 4.0),
    ],
)
def test_overlap_window_by_hand(pp: int, v: int, window: float) -> None:
    """Megatron-Core overlap_grad_reduce (NeMo performance guide): with v chunks the earlier
    chunks' gradients reduce during the (pp − 1)/v-slot cooldown."""
    assert float(data_parallel.overlap_window_s(3.0, pp, v)) == pytest.approx(window)


def test_fsdp_exposes_at_least_one_layer() -> None:
    """PyTorch FSDP (Zhao et al. 2023): a one-layer stage cannot prefetch, so 4 micro-batches
    expose their whole 1 s of gathers although 0.9 s of compute could hide them: 4 × 1 s.
    Eight layers expose max(1 − 0.9, 1/8) = 0.125 s each."""
    assert float(data_parallel.fsdp_exposed_s(1.0, 0.9, 1, 4)) == pytest.approx(4.0)
    assert float(data_parallel.fsdp_exposed_s(1.0, 0.9, 8, 4)) == pytest.approx(0.5)


def test_streaming_diloco_exposes_only_what_exceeds_h_steps() -> None:
    """Douillard et al. 2025: a 10 s outer sync behind H = 4 inner steps of 2 s exposes
    (10 − 8)/4 = 0.5 s per inner step; a 5 s one is fully hidden; blocking DiLoCo exposes
    10/4 = 2.5 s."""
    assert float(data_parallel.outer_sync_exposed_s(10.0, 4, 2.0, True)) == pytest.approx(0.5)
    assert float(data_parallel.outer_sync_exposed_s(5.0, 4, 2.0, True)) == 0.0
    assert float(data_parallel.outer_sync_exposed_s(10.0, 4, 2.0, False)) == pytest.approx(2.5)


# --- egress (cost.egress_bytes_per_step's docstring) ------------------------------------------

ACT = 1e6  # activation bytes per step crossing one site boundary one way
SYNC = 1e9  # gradient (or pseudo-gradient) bytes of one model copy


@pytest.mark.parametrize(
    ("sites", "pp", "v", "transformer", "local_sgd", "expected"),
    [
        # one site: nothing leaves it, even an interleaved pipeline
        (1, 4, 2, True, 1, 0.0),
        # 2 sites, pp = 2 and 4: stages split across them, v·sites − 1 = 1 crossing each way
        (2, 2, 1, True, 1, 1 * 2 * ACT),
        (2, 4, 1, True, 1, 1 * 2 * ACT),
        # interleaved v = 2: 2·2 − 1 = 3 crossings each way
        (2, 4, 2, True, 1, 3 * 2 * ACT),
        # 3 sites, v = 2: 2·3 − 1 = 5 crossings each way
        (3, 6, 2, True, 1, 5 * 2 * ACT),
        # pp = 3 is no multiple of 2 sites: data-parallel ring, 2·(2 − 1) copies
        (2, 3, 1, True, 1, 2 * 1 * SYNC),
        # pp = 2 < 4 sites: ring over 4 sites, 2·3 copies, once every 2 local-SGD steps
        (4, 2, 1, True, 2, 2 * 3 * SYNC / 2),
        # a CNN never splits its stages across sites: 3 sites, 2·2 copies
        (3, 3, 1, False, 1, 2 * 2 * SYNC),
    ],
)
def test_egress_by_hand(
    sites: int, pp: int, v: int, transformer: bool, local_sgd: int, expected: float
) -> None:
    got = float(cost.egress_bytes_per_step(sites, pp, v, transformer, ACT, SYNC, local_sgd))
    assert got == pytest.approx(expected, rel=EXACT)


# --- memory: ZeRO state (Rajbhandari et al. 2020, §3) -----------------------------------------

DENSE, EXPERT = 1e9, 2e9  # parameters on this GPU: dense, and routed experts
DP, DP_EXPERT = 8, 2  # data-parallel ranks, and ranks per expert (dp / ep)
SHARD = DENSE / DP + EXPERT / DP_EXPERT  # 1.125e9 parameters per rank when sharded
WHOLE = DENSE + EXPERT  # 3e9


@pytest.mark.parametrize(
    ("zero", "weights", "grads", "optimizer"),
    [
        # bf16 weights 2 B, fp32 gradients 4 B, Adam master + m + v 12 B, nothing sharded
        (0, 2 * WHOLE, 4 * WHOLE, 12 * WHOLE),
        # ZeRO-1 shards the optimizer state: 12 × 1.125e9 = 13.5e9
        (1, 2 * WHOLE, 4 * WHOLE, 12 * SHARD),
        # ZeRO-2 also the gradients: 4 × 1.125e9 = 4.5e9
        (2, 2 * WHOLE, 4 * SHARD, 12 * SHARD),
        # ZeRO-3 also the weights: 2 × 1.125e9 = 2.25e9
        (3, 2 * SHARD, 4 * SHARD, 12 * SHARD),
    ],
)
def test_zero_stages_by_hand(zero: int, weights: float, grads: float, optimizer: float) -> None:
    got = memory.state_bytes(DENSE, EXPERT, DP, DP_EXPERT, zero, 4.0, 1)
    assert [float(x) for x in got] == pytest.approx([weights, grads, optimizer], rel=EXACT)


def test_frozen_offloaded_and_diloco_state_by_hand() -> None:
    """LoRA trains a fraction: its gradients and Adam state scale with it. ZeRO-Offload keeps
    Adam on the host. DiLoCo (Douillard et al. 2023, Alg. 1) adds 8 B/param of fp32 outer
    momentum and last-synced weights on the GPU, sharded like the optimizer."""
    w, g, o = memory.state_bytes(DENSE, EXPERT, DP, DP_EXPERT, 1, 4.0, 1, trainable_fraction=0.5)
    assert (float(w), float(g), float(o)) == pytest.approx((2 * WHOLE, 2 * WHOLE, 6 * SHARD))
    _, _, off = memory.state_bytes(DENSE, EXPERT, DP, DP_EXPERT, 1, 4.0, 1, offload_optimizer=True)
    assert float(off) == 0.0
    # H = 2 local steps, ZeRO-1, half trainable: (12 + 8) × 0.5 × 1.125e9 = 11.25e9
    _, _, diloco = memory.state_bytes(
        DENSE, EXPERT, DP, DP_EXPERT, 1, 4.0, 2, trainable_fraction=0.5
    )
    assert float(diloco) == pytest.approx(11.25e9, rel=EXACT)
    # ZeRO-0 does not shard it: (12 + 8) × 3e9
    _, _, plain = memory.state_bytes(DENSE, EXPERT, DP, DP_EXPERT, 0, 4.0, 2)
    assert float(plain) == pytest.approx(60e9, rel=EXACT)
    # the outer state kept on the CPU leaves only Adam's 12 B/param
    _, _, cpu = memory.state_bytes(
        DENSE, EXPERT, DP, DP_EXPERT, 1, 4.0, 2, outer_state_on_gpu=False
    )
    assert float(cpu) == pytest.approx(12 * SHARD, rel=EXACT)


# --- memory: activations (Korthikanti et al. 2022, eqs. 2-5; Narayanan et al. 2021) -----------


def test_moe_activation_elements_by_hand() -> None:
    """No ffn given: each of top_k + shared = 3 experts is 4h wide. Sharded inputs per token:
    Q + K + V + attention output (4h) and 3 × (4h + 4h) MLP inputs (24h): 28h elements,
    56h bytes; outside the TP region 5h elements, 10h bytes (§4.1)."""
    h = 1024
    rep, shard = memory.activation_elements_per_token_layer(moe(), moe_layer=True)
    assert (rep, shard) == (10 * h, 56 * h)


def acts(
    w: Transformer,
    recompute: Recompute,
    *,
    tp: float = 1.0,
    pp: float = 1.0,
    cp: float = 1.0,
    micro_batches: float = 8.0,
    v: float = 1.0,
    static: float = 0.0,
    capacity: float = 1e15,
    sp: bool = True,
    flash: bool = True,
) -> tuple[float, float]:
    a, share = memory.transformer_activation_bytes(
        w,
        recompute,
        tp,
        pp,
        cp,
        1.0,
        micro_batches,
        v,
        static,
        capacity,
        sequence_parallel=sp,
        flash_attention=flash,
    )
    return float(a), float(share)


H = 1024.0
SEQ = 1024.0
LOGITS = SEQ * 1000 * 4  # fp32 logits of one 1,024-token sequence over a 1,000-token vocabulary


def test_moe_activations_mix_dense_and_moe_layers() -> None:
    """4 layers, the first dense (34h bytes/token with SP, §4.1), 3 MoE (10h + 56h = 66h):
    rep = 10h, shard = ¼·24h + ¾·56h = 48h. tp = 2 with SP: (10h + 48h)/2 = 29h per
    token-layer, × 1,024 tokens × 4 layers, plus logits over tp = 2."""
    w = moe(layers=4, dense_layers=1)
    got, _ = acts(w, Recompute.SELECTIVE, tp=2.0)
    assert got == pytest.approx(29 * H * SEQ * 4 + LOGITS / 2, rel=EXACT)
    # without SP the replicated 10h stays whole: 10h + 48h/2 = 34h
    got, _ = acts(w, Recompute.SELECTIVE, tp=2.0, sp=False)
    assert got == pytest.approx(34 * H * SEQ * 4 + LOGITS / 2, rel=EXACT)


def test_full_recomputation_keeps_only_the_layer_input() -> None:
    """§5: 2h bytes per token-layer, sharded over tp only with SP. 8 layers, tp = 2."""
    w = classic()
    sp, share = acts(w, Recompute.FULL, tp=2.0)
    assert sp == pytest.approx(2 * H / 2 * SEQ * 8 + LOGITS / 2, rel=EXACT)
    assert share == 1.0
    no_sp, _ = acts(w, Recompute.FULL, tp=2.0, sp=False)
    assert no_sp == pytest.approx(2 * H * SEQ * 8 + LOGITS / 2, rel=EXACT)


def test_no_recomputation_keeps_the_scores_unless_flash() -> None:
    """Eq. 2: without recomputation the layer also keeps 5·a·s/t bytes per token of attention
    scores (a = 16 heads, s = 1,024, t = 2); FlashAttention never stores them."""
    w = classic()
    per_token = 34 * H / 2 + 5 * 16 * SEQ / 2  # 17,408 + 40,960
    got, share = acts(w, Recompute.NONE, tp=2.0, flash=False)
    assert got == pytest.approx(per_token * SEQ * 8 + LOGITS / 2, rel=EXACT)
    assert share == 0.0
    flash, _ = acts(w, Recompute.NONE, tp=2.0, flash=True)
    assert flash == pytest.approx(34 * H / 2 * SEQ * 8 + LOGITS / 2, rel=EXACT)


def test_interleaving_and_micro_batches_in_flight() -> None:
    """The first 1F1B stage holds min(pp, m) micro-batches of its ⌈L/pp⌉ = 2 layers (pp = 4);
    interleaving with v = 2 adds (pp − 1)/(pp·v) = 3/8 (Narayanan et al. 2021). The LM head's
    logits are counted once (tp = 1)."""
    w = classic()
    per_layer_token = 34 * H  # SP, selective, tp = 1

    def stage(micro_batches: float, v: float) -> float:
        return acts(w, Recompute.SELECTIVE, pp=4.0, micro_batches=micro_batches, v=v)[0]

    # m = 8 ≥ pp: 4 in flight × 2 layers
    assert stage(8, 1) == pytest.approx(per_layer_token * SEQ * 4 * 2 + LOGITS, rel=EXACT)
    assert stage(8, 2) == pytest.approx(
        per_layer_token * SEQ * 4 * 2 * (1 + 3 / 8) + LOGITS, rel=EXACT
    )
    # m = 1 < pp: one micro-batch in flight
    assert stage(1, 1) == pytest.approx(per_layer_token * SEQ * 1 * 2 + LOGITS, rel=EXACT)


def test_context_parallelism_splits_tokens_and_logits() -> None:
    """cp = 2 ranks hold 512 tokens each; logits split over tp·cp = 2·2."""
    w = classic()
    got, _ = acts(w, Recompute.SELECTIVE, tp=2.0, cp=2.0)
    assert got == pytest.approx(34 * H / 2 * SEQ / 2 * 8 + LOGITS / 4, rel=EXACT)


def test_auto_recomputes_just_enough_layers() -> None:
    """Megatron's --recompute-num-layers: 8 layers × 1,024 tokens = 8,192 token-layers (tp = 1,
    SP). Selective keeps 34h = 34,816 B each: sel = 285,212,672; full keeps 2h = 2,048 B:
    low = 16,777,216; sel − low = 2^28. With 1e9 B of state and capacity 2^27 short of
    1e9 + sel + logits, half the layers are recomputed fully."""
    w = classic()
    sel, low = 34 * H * 8192, 2 * H * 8192
    assert sel - low == 2**28
    static = 1e9
    capacity = static + sel + LOGITS - 2**27
    got, share = acts(w, Recompute.AUTO, static=static, capacity=capacity)
    assert share == pytest.approx(0.5, rel=EXACT)
    assert got == pytest.approx((sel + low) / 2 + LOGITS, rel=EXACT)
    # room to spare: nothing recomputed fully; no room at all: everything
    roomy, none = acts(w, Recompute.AUTO, static=static, capacity=1e12)
    assert (roomy, none) == pytest.approx((sel + LOGITS, 0.0), rel=EXACT)
    tight, every = acts(w, Recompute.AUTO, static=static, capacity=0.0)
    assert (tight, every) == pytest.approx((low + LOGITS, 1.0), rel=EXACT)


@pytest.mark.parametrize(
    ("policy", "kept_h", "rerun_h", "attention"),
    [
        # kept per token-layer besides the block input (h): q, k, v are 3h, the context h,
        # out_proj h, the MLP's first matmul 4h, its last h. Projection FLOPs per token ∝
        # qkv 3h + out h + up 4h + down 4h = 12h; down never reruns (its output only feeds
        # the next layer's kept carry)
        (Recompute.SAVE_QKV_PROJ, 3, 1 + 4, True),  # reruns out and up, and attention
        (Recompute.SAVE_OUT_PROJ, 1, 3 + 4, True),  # qkv again to rerun attention
        (Recompute.SAVE_DOT_EXCEPT_MLP, 3 + 1, 4, True),
        (Recompute.SAVE_DOT_EXCEPT_MLPWI, 3 + 1 + 1, 4, True),
        (Recompute.SAVE_DOT_WITH_CONTEXT_EXCEPT_MLP, 3 + 1 + 1, 4, False),
        (Recompute.MINIMAL, 3 + 1 + 4 + 1, 0, True),  # attention reruns for out's input
        (Recompute.MINIMAL_WITH_CONTEXT, 3 + 1 + 1 + 4 + 1, 0, False),
    ],
)
def test_maxtext_remat_policies_by_hand(
    policy: Recompute, kept_h: int, rerun_h: int, attention: bool
) -> None:
    """MaxText's named policies (layers/decoders.py get_remat_policy) on the classic layer
    (no GQA, 2-matrix MLP of 4h): 2 B per kept element plus the block input, over 8 layers ×
    1,024 tokens, no layer fully recomputed."""
    w = classic()
    saved = memory.REMAT_POLICY_SAVES[policy]
    share, reruns_attention = memory.policy_rerun(w, saved)
    assert share == pytest.approx(rerun_h / 12, rel=EXACT)
    assert reruns_attention is attention
    got, full = acts(w, policy)
    assert got == pytest.approx(2 * (1 + kept_h) * H * 8192 + LOGITS, rel=EXACT)
    assert full == 0.0


# --- faults -----------------------------------------------------------------------------------


def failure_spec(gpu_per_hour: float) -> FailureSpec:
    return FailureSpec(
        key="test",
        name="test fleet",
        gpu_per_hour=gpu_per_hour,
        node_per_hour=0.0,
        nic_per_hour=0.0,
        link_per_hour=0.0,
        source="hand-made for tests",
        as_of=dt.date(2025, 1, 1),
    )


def test_job_mtbf_by_hand_and_without_failures() -> None:
    """Poisson rates add: 1,000 GPUs at 0.001 failures per GPU-hour fail once an hour."""
    counts = np.asarray([1000.0])
    got = faults.job_mtbf_s(failure_spec(0.001), counts, counts / 8, counts, counts)
    assert float(got[0]) == pytest.approx(3600.0, rel=EXACT)
    # a fleet that never fails: an infinite MTBF, quietly (warnings are errors here)
    never = faults.job_mtbf_s(failure_spec(0.0), counts, counts / 8, counts, counts)
    assert float(never[0]) == math.inf


def test_daly_switches_to_m_at_two_m() -> None:
    """Daly 2006 eq. 37 holds for δ < 2M; at δ = 2M the formula would give
    sqrt(4M²)·(1 + 1/3 + 1/9) − 2M = 8M/9, but the interval is M; likewise at δ = 2.5M."""
    m = 3600.0
    assert float(faults.daly_interval_s(2 * m, m)) == m
    assert float(faults.daly_interval_s(2.5 * m, m)) == m
    # just below 2M the closed form applies: δ = 1.9M, r = 0.95
    d, r = 1.9 * m, 0.95
    tau = math.sqrt(2 * d * m) * (1 + math.sqrt(r) / 3 + r / 9) - d
    assert float(faults.daly_interval_s(d, m)) == pytest.approx(tau, rel=EXACT)


def test_daly_with_failures_all_the_time_is_quiet() -> None:
    # M = 0: δ < 2M fails, so τ = M = 0, with no division warning from the unused branch
    assert float(faults.daly_interval_s(60.0, 0.0)) == 0.0


def test_goodput_limits() -> None:
    """Daly 2006 eq. 13 at its limits: failures every second (M = 1 s) against a 3,600 s
    interval leave no useful work (e^3660 overflows to ∞: goodput 0); checkpointing
    continuously (τ = 0) makes no progress either. Both without floating-point warnings."""
    assert float(faults.goodput(3600.0, 60.0, 600.0, 1.0)) == 0.0
    assert float(faults.goodput(0.0, 60.0, 600.0, 3600.0)) == 0.0


def test_max_bin_load_edges() -> None:
    """No balls or no bins: nothing to load. One bin takes every ball."""
    assert faults.max_bin_load(0, 5) == 0
    assert faults.max_bin_load(5, 0) == 0
    assert faults.max_bin_load(1000, 1) == 1000


def test_static_rehash_of_several_flows_per_link() -> None:
    """1 of 3 links fails carrying q = 8 flows; they land on the 2 survivors, λ = 4 per link.
    Poisson(4): P(X ≤ 4) = e⁻⁴·(1 + 4 + 8 + 32/3 + 32/3) = 0.6288, so 2·P(X ≥ 5) = 0.74 ≥ ½;
    P(X ≤ 5) = 0.6288 + e⁻⁴·4⁵/120 = 0.7851, 2·P(X ≥ 6) = 0.43 < ½: the fullest survivor gets
    5 extra flows (the exact binomial median of the max is 5 too), and runs at 8/(8 + 5)."""
    got = faults.degraded_bandwidth_factor(3, 1, Routing.STATIC, flows_per_link=8)
    assert got == pytest.approx(8 / 13)


def test_failed_link_count_error_names_its_field() -> None:
    with pytest.raises(ConfigError) as err:
        faults.degraded_bandwidth_factor(64, 64, Routing.ADAPTIVE)
    assert err.value.field == "failed_links"
    assert err.value.reason == "64 must be in [0, 64) for 64 scale-out links"


def test_slow_link_bounds() -> None:
    """The fraction of slow links is in [0, 1), their speed in (0, 1]; a value outside says
    which field and which range (the one-line error the CLI and web print)."""
    assert float(faults.slow_link_factor(8, 0.1, 1.0)) == pytest.approx(1.0)  # full speed
    for fraction in (1.0, 1.5):
        with pytest.raises(ConfigError) as err:
            faults.slow_link_factor(8, fraction, 0.5)
        assert err.value.field == "slow_link_fraction"
        assert err.value.reason == f"must be in [0, 1), got {fraction}"
    for speed in (0.0, 1.5):
        with pytest.raises(ConfigError) as err:
            faults.slow_link_factor(8, 0.1, speed)
        assert err.value.field == "slow_link_speed"
        assert err.value.reason == f"must be in (0, 1], got {speed}"


def test_checkpoint_write_time_exactly() -> None:
    # 6.3 s fixed + 14 B × 7e9 params at 1 GB/s = 6.3 + 98 s
    assert float(faults.checkpoint_write_s(7e9, 1.0)) == pytest.approx(104.3, rel=EXACT)
