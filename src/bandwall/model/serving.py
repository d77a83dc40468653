"""Serving a transformer decoder: time to first token, inter-token latency, throughput.

One replica is `tp × pp` GPUs: tensor parallelism inside a node, pipeline stages across GPUs,
nodes or sites. Per stage and per decoding iteration (Pope et al. 2022, "Efficiently Scaling
Transformer Inference"; vLLM/TensorRT-LLM continuous batching):

- **decode**: every iteration streams the stage's weights once and each sequence's KV cache,
  and runs 2 FLOPs per weight per sequence — a roofline max(bytes / HBM rate, GEMM time) —
  plus a launch gap per kernel (CUDA graphs) and two latency-bound TP all-reduces of
  batch × hidden activations per layer, priced by NCCL's own tuning model;
- **prefill**: the prompt's forward pass at the training compute model's GEMM and
  FlashAttention rates (`bandwall.model.compute.layer_times`), never faster than one weight
  read, with its TP all-reduces of prompt × hidden activations;
- **continuous batching**: each sequence's prompt is prefilled once per `output_tokens`
  generated, in chunks that ride along with decode iterations, so an iteration of b sequences
  carries b / output_tokens prefills on average;
- **pipeline**: pp micro-batches in flight (vLLM's virtual engines); a token needs pp stage
  iterations and a hop per stage boundary plus one back to the first stage (the sampled token),
  each hop a point-to-point send of batch × hidden activations on the link it crosses — over
  the internet for Petals-style serving (Borzunov et al. 2023).

Memory: weights per GPU plus the KV cache of every in-flight sequence (2 × layers × KV width ×
bytes per token) must fit the usable device memory; the batch is capped there.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from bandwall.model import compute, memory
from bandwall.model.cluster import Cluster
from bandwall.model.collectives import Algo, Op, collective_time_s
from bandwall.workloads import Transformer

FloatArray = npt.NDArray[np.float64]

#: Bytes per activation element on the wire (bf16/fp16).
ACT_BYTES = 2.0
#: GPU time between two kernels replayed from a CUDA graph (vLLM and TensorRT-LLM capture the
#: decode step): ~0.5 µs (NVIDIA, "Getting Started with CUDA Graphs"; /work notes
#: gpu-efficiency §0).
GRAPH_LAUNCH_S = 0.5e-6
#: Kernels per layer of a decode step: norms, fused QKV, attention, output projection, MLP
#: GEMMs, activation, residual adds and the two TP all-reduces.
DECODE_KERNELS_PER_LAYER = compute.KERNELS_PER_LAYER_FWD
#: Bytes a sampled token id costs on the hop back to the first stage.
TOKEN_ID_BYTES = 4.0
#: Share of the STREAM-measured HBM bandwidth (catalog `hbm_efficiency`) that decode kernels
#: sustain: GEMV-shaped weight reads, paged KV-cache gathers and dequantisation do not stream
#: like a triad. Fitted with FP8_GEMM_FACTOR on two thirds of the published serving rows in
#: planning/data/serving_validation.toml, the rest held out
#: (`python benchmarks/serving_vs_llm_analysis.py --fit` refits and prints both errors).
DECODE_HBM_FACTOR = 0.9
#: Share of the catalog GEMM efficiency that FP8 GEMMs and attention reach against the FP8
#: dense peak (per-tensor scaling, casts and smaller tiles: FP8 kernels gain less than 2x over
#: BF16). Fitted with DECODE_HBM_FACTOR (see there).
FP8_GEMM_FACTOR = 0.575


@dataclass(frozen=True)
class ServeOptions:
    """The request shape and number formats one evaluation shares."""

    prompt_tokens: float
    output_tokens: float
    weight_bytes: float = 2.0
    """Bytes per weight (2 bf16/fp16, 1 fp8/int8)."""
    kv_bytes: float = 2.0
    """Bytes per KV-cache element."""
    static_batch: bool = False
    """Static batching (all sequences start and end together: TensorRT-LLM's gptSessionBenchmark)
    instead of continuous batching."""
    spread_sites: bool = False
    """Place consecutive pipeline stages in different sites (Petals-style)."""
    hbm_factor: float = DECODE_HBM_FACTOR
    fp8_gemm_factor: float = FP8_GEMM_FACTOR


@dataclass(frozen=True)
class ServingMetrics:
    """One element per (tp, pp, batch) candidate; units in every name."""

    tp: FloatArray
    pp: FloatArray
    batch: FloatArray
    """Sequences per micro-batch; pp micro-batches are in flight."""
    concurrency: FloatArray
    """Sequences in flight per replica (pp × batch)."""
    max_concurrency: FloatArray
    """Most sequences the KV cache holds per replica."""
    fits: npt.NDArray[np.bool_]
    weights_bytes: FloatArray
    """Weights per GPU (the fullest stage)."""
    kv_bytes_per_sequence: FloatArray
    """KV cache per sequence per GPU at full length."""
    memory_bytes: FloatArray
    memory_capacity_bytes: FloatArray
    ttft_s: FloatArray
    itl_s: FloatArray
    """Inter-token latency a sequence sees."""
    decode_step_s: FloatArray
    """One stage's decode iteration (memory/compute roofline + launches + TP)."""
    prefill_s: FloatArray
    """One prompt's prefill on one stage."""
    tp_comm_s: FloatArray
    """TP all-reduces inside one decode iteration."""
    hop_s: FloatArray
    """Pipeline hops per generated token."""
    request_s: FloatArray
    """TTFT + (output_tokens − 1) × ITL."""
    tokens_per_s_replica: FloatArray
    """Output tokens per second of one replica."""
    tokens_per_s_per_gpu: FloatArray
    gpus_per_replica: FloatArray
    busy_share: FloatArray
    """Share of the time a GPU computes (the rest waits on hops)."""
    flop_util: FloatArray
    """Achieved / dense peak FLOP/s while busy."""
    hbm_util: FloatArray
    """Achieved / peak HBM bandwidth while busy."""

    def row(self, i: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            out[f.name] = np.asarray(getattr(self, f.name)).reshape(-1)[i].item()
        return out

    def __len__(self) -> int:
        return int(np.size(self.itl_s))


def kv_bytes_per_token_layer(w: Transformer, tp: Any, kv_bytes: float) -> Any:
    """K and V of one token in one layer on one TP rank: KV heads split over TP ranks, and
    replicated once tp exceeds them (GQA; vLLM and TensorRT-LLM do the same).

    >>> float(kv_bytes_per_token_layer(_llama8b(), 1, 2.0))
    4096.0
    """
    kv_heads = float(w.kv_heads or w.heads)
    heads_per_rank = np.ceil(kv_heads / np.asarray(tp, dtype=np.float64))
    return 2.0 * heads_per_rank * w.head_dim * kv_bytes


def layer_weight_params(w: Transformer, batch: Any = 1.0) -> tuple[Any, Any]:
    """(dense layer, MoE layer) parameters a decode iteration of `batch` sequences reads: a MoE
    layer reads only the experts some sequence routes to, E·(1 − (1 − k/E)^b) of them."""
    norms = 4.0 * w.hidden
    dense = float(w.attention_params) + float(w.dense_mlp_params) + norms
    if not w.is_moe:
        return dense, dense
    e, k = float(w.experts), float(w.top_k)
    touched = e * (1.0 - (1.0 - k / e) ** np.asarray(batch, dtype=np.float64))
    moe = (
        float(w.attention_params)
        + norms
        + (touched + w.shared_experts) * float(w.expert_params)
        + w.hidden * e
    )
    return dense, moe


def stage_layers(w: Transformer, pp: Any) -> tuple[Any, Any]:
    """(dense, MoE) layers on the fullest pipeline stage."""
    per_stage = np.ceil(w.layers / np.asarray(pp, dtype=np.float64))
    moe = per_stage * (w.moe_layers / w.layers)
    return per_stage - moe, moe


def stage_weight_bytes(w: Transformer, tp: Any, pp: Any, weight_bytes: float, batch: Any) -> Any:
    """Weights one decode iteration streams on the last stage (its layers and the LM head)."""
    dense_l, moe_l = stage_layers(w, pp)
    dense_p, moe_p = layer_weight_params(w, batch)
    head = float(w.vocab * w.hidden)
    return (dense_l * dense_p + moe_l * moe_p + head) * weight_bytes / np.asarray(tp)


def resident_weight_bytes(w: Transformer, tp: Any, pp: Any, weight_bytes: float) -> Any:
    """Weights held per GPU on the fullest stage (every expert, plus the embedding table when
    one stage holds the whole model)."""
    dense_l, moe_l = stage_layers(w, pp)
    dense_p, _ = layer_weight_params(w)
    norms = 4.0 * w.hidden
    moe_p = (
        float(w.attention_params)
        + norms
        + (w.experts + w.shared_experts) * float(w.expert_params)
        + w.hidden * float(w.experts)
    )
    head = float(w.vocab * w.hidden)
    embed = np.where(np.asarray(pp) <= 1, 0.0 if w.tied_embeddings else head, 0.0)
    return (dense_l * dense_p + moe_l * moe_p + head + embed) * weight_bytes / np.asarray(tp)


def decode_flops_stage(w: Transformer, tp: Any, pp: Any, batch: Any, context: Any) -> Any:
    """FLOPs of one decode iteration on the last stage per TP rank: 2 per weight per sequence
    plus attention over the cached context (QKᵀ and AV: 4 × heads × head_dim per token)."""
    dense_l, moe_l = stage_layers(w, pp)
    dense_p, _ = layer_weight_params(w)
    active_moe = (
        float(w.attention_params)
        + 4.0 * w.hidden
        + (w.top_k + w.shared_experts) * float(w.expert_params)
    )
    layers = dense_l + moe_l
    attn = 4.0 * w.heads * w.head_dim * np.asarray(context)
    per_seq = dense_l * dense_p + moe_l * active_moe + float(w.vocab * w.hidden)
    return np.asarray(batch) * (2.0 * per_seq + layers * attn) / np.asarray(tp)


def _coll(op: Op, size: Any, ranks: Any, cl: Cluster, stride: Any) -> Any:
    t = collective_time_s(op, Algo.AUTO, size, ranks, cl.group_topology(stride))
    return np.where((np.asarray(size) > 0) & (np.asarray(ranks) > 1), t, 0.0)


def _serving_rates(cl: Cluster, opt: ServeOptions) -> compute.GpuRates:
    """Inference kernels at the microbenchmark GEMM rate (no training-step discount), FP8
    kernels at FP8_GEMM_FACTOR of it, decode memory traffic at DECODE_HBM_FACTOR of STREAM."""
    perf = cl.perf
    fp8 = opt.fp8_gemm_factor if cl.precision.value == "fp8" else 1.0
    return compute.GpuRates(
        peak_flops=cl.peak_flops,
        gemm_efficiency=perf.gemm_efficiency * fp8,
        attention_efficiency=perf.attention_efficiency * fp8,
        hbm_Bps=cl.gpu.memory_bandwidth_TBps * 1e12 * perf.hbm_efficiency * opt.hbm_factor,
        sm_count=perf.sm_count,
        tile_m=perf.gemm_tile[0],
        tile_n=perf.gemm_tile[1],
        kernel_launch_s=GRAPH_LAUNCH_S,
        virtualization_overhead=cl.virtualization_overhead,
    )


def _gemms_s(w: Transformer, tokens: Any, tp: Any, rates: compute.GpuRates) -> Any:
    """GEMM time of one dense layer for `tokens` rows per TP rank (QKV, output, MLP)."""
    h = float(w.hidden)
    hq = float(w.heads * w.head_dim)
    kv = float(w.kv_dim)
    gate = 2.0 if w.gated_mlp else 1.0
    width = float(w.ffn or 4 * w.hidden)
    if w.is_moe:
        width = float(w.moe_ffn or width) * (w.top_k + w.shared_experts)
    return (
        compute.gemm_s(tokens, (hq + 2 * kv) / tp, h, rates)
        + compute.gemm_s(tokens, h, hq / tp, rates)
        + compute.gemm_s(tokens, gate * width / tp, h, rates)
        + compute.gemm_s(tokens, h, width / tp, rates)
    )


def prefill_stage_s(
    w: Transformer,
    prompt_tokens: float,
    batch: Any,
    tp: Any,
    pp: Any,
    rates: compute.GpuRates,
    weight_bytes: float,
) -> tuple[Any, Any, Any]:
    """(seconds, FLOPs, bytes) of prefilling `batch` prompts on the last stage, TP excluded:
    the training model's forward pass of each layer (GEMMs, FlashAttention on the causal half,
    element-wise traffic), the LM head on the last token only, never faster than reading the
    stage's weights once."""
    wp = w.model_copy(update={"seq_len": max(1, round(prompt_tokens))})
    b = np.asarray(batch, dtype=np.float64)
    tokens = b * prompt_tokens
    dense_l, moe_l = stage_layers(w, pp)
    kw: dict[str, Any] = dict(sequence_parallel=False, flash_attention=True)
    dense = compute.layer_times(wp, tokens, tp, 1.0, b, rates, moe_layer=False, **kw)
    moe = (
        compute.layer_times(wp, tokens, tp, 1.0, b, rates, moe_layer=True, **kw)
        if w.is_moe
        else dense
    )
    work = dense_l * dense.forward_s + moe_l * moe.forward_s
    work = work + compute.gemm_s(b, w.vocab / np.asarray(tp), float(w.hidden), rates)
    wbytes = stage_weight_bytes(w, tp, pp, weight_bytes, tokens)
    floor = compute.memory_s(wbytes, rates)
    launch = (dense_l + moe_l) * DECODE_KERNELS_PER_LAYER * rates.kernel_launch_s
    flops = decode_flops_stage(w, tp, pp, tokens, 0.0) + (dense_l + moe_l) * (
        2.0 * w.heads * w.head_dim * tokens * prompt_tokens / np.asarray(tp)
    )
    return np.maximum(work, floor) + launch, flops, wbytes


def evaluate_serving(
    w: Transformer, cl: Cluster, tp: Any, pp: Any, batch: Any, opt: ServeOptions
) -> ServingMetrics:
    """Price serving `w` on `cl` for every (tp, pp, batch) candidate (arrays broadcast)."""
    with np.errstate(all="ignore"):
        return _evaluate(w, cl, tp, pp, batch, opt)


def _evaluate(
    w: Transformer, cl: Cluster, tp: Any, pp: Any, batch: Any, opt: ServeOptions
) -> ServingMetrics:
    tp, pp, b = np.broadcast_arrays(
        np.asarray(tp, dtype=np.float64),
        np.asarray(pp, dtype=np.float64),
        np.asarray(batch, dtype=np.float64),
    )
    rates = _serving_rates(cl, opt)
    hbm_peak = cl.gpu.memory_bandwidth_TBps * 1e12
    prompt, out = float(opt.prompt_tokens), float(opt.output_tokens)
    context = prompt + out / 2.0  # mean context length over the generation
    h = float(w.hidden)
    dense_l, moe_l = stage_layers(w, pp)
    layers = dense_l + moe_l

    # --- memory -------------------------------------------------------------------------
    resident = resident_weight_bytes(w, tp, pp, opt.weight_bytes)
    kv_layer = kv_bytes_per_token_layer(w, tp, opt.kv_bytes)
    kv_seq = layers * kv_layer * (prompt + out)
    capacity = memory.usable_memory_bytes(cl.memory_bytes) + 0.0 * tp
    chunk = b if opt.static_batch else 1.0  # prompts prefilled together
    workspace = ACT_BYTES * chunk * prompt * (h + float(w.ffn or 4 * w.hidden)) * 2.0 / tp
    free = capacity - resident - workspace
    max_conc = np.where(free > 0, np.floor(free / kv_seq), 0.0) * 1.0
    micro = 1.0 if opt.static_batch else pp  # micro-batches in flight
    concurrency = micro * b
    used = resident + workspace + concurrency * kv_seq
    fits = (used <= capacity) & (max_conc >= concurrency)

    # --- decode iteration on one stage ----------------------------------------------------
    streamed = stage_weight_bytes(w, tp, pp, opt.weight_bytes, b)
    kv_read = b * context * layers * kv_layer
    t_mem = compute.memory_s(streamed + kv_read, rates)
    dense_tok = _gemms_s(w, b, tp, rates) * layers
    head = compute.gemm_s(b, w.vocab / tp, h, rates)
    t_flop = dense_tok + head
    launch = layers * DECODE_KERNELS_PER_LAYER * rates.kernel_launch_s
    ar = _coll(Op.ALL_REDUCE, b * h * ACT_BYTES, tp, cl, 1.0)
    tp_comm = 2.0 * layers * ar
    decode = np.maximum(t_mem, t_flop) + launch + tp_comm
    dec_flops = decode_flops_stage(w, tp, pp, b, context)

    # --- prefill --------------------------------------------------------------------------
    pf_b = chunk
    pf_s, pf_flops, pf_bytes = prefill_stage_s(w, prompt, pf_b, tp, pp, rates, opt.weight_bytes)
    pf_ar = _coll(Op.ALL_REDUCE, pf_b * prompt * h * ACT_BYTES, tp, cl, 1.0)
    prefill = pf_s + 2.0 * layers * pf_ar

    # --- pipeline hops --------------------------------------------------------------------
    if opt.spread_sites and cl.sites > 1:
        stride = cl.gpus_per_node * np.asarray(cl.nodes_per_site(), dtype=np.float64)
        stride = np.maximum(stride, tp)
    else:
        stride = tp
    hop_dec = _coll(Op.SEND_RECV, b * h * ACT_BYTES, 2.0, cl, stride)
    hop_back = _coll(Op.SEND_RECV, b * TOKEN_ID_BYTES, 2.0, cl, stride)
    hop_pf = _coll(Op.SEND_RECV, pf_b * prompt * h * ACT_BYTES, 2.0, cl, stride)
    multi = pp > 1
    hops_token = np.where(multi, (pp - 1) * hop_dec + hop_back, 0.0)
    hops_prefill = np.where(multi, (pp - 1) * hop_pf, 0.0)

    # --- steady state ---------------------------------------------------------------------
    if opt.static_batch:
        iteration = decode
        itl = pp * iteration + hops_token
        first = pp * prefill + hops_prefill
        total = first + out * itl
        rate = b * out / total
        ttft = first
        busy_time = pp * (prefill + out * iteration)
        busy = np.clip(busy_time / (pp * total), 0.0, 1.0)
        work_flops = (pf_flops + out * dec_flops) / total / np.maximum(busy, 1e-30)
        work_bytes = (pf_bytes + out * (streamed + kv_read)) / total / np.maximum(busy, 1e-30)
    else:
        share = b / out  # prompts prefilled per iteration, on average
        iteration = decode + share * prefill
        itl = pp * iteration + hops_token
        rate = pp * b / itl
        ttft = pp * prefill + hops_prefill + np.where(b > 1, 0.5 * iteration, 0.0)
        busy = np.clip(pp * iteration / itl, 0.0, 1.0)
        work_flops = (dec_flops + share * pf_flops) / iteration
        work_bytes = (streamed + kv_read + share * pf_bytes) / iteration
    gpus = tp * pp
    flop_util = work_flops / cl.peak_flops
    hbm_util = np.clip(work_bytes / hbm_peak, 0.0, 1.0)
    return ServingMetrics(
        tp=tp,
        pp=pp,
        batch=b,
        concurrency=concurrency,
        max_concurrency=max_conc,
        fits=np.asarray(fits),
        weights_bytes=resident,
        kv_bytes_per_sequence=kv_seq,
        memory_bytes=used,
        memory_capacity_bytes=capacity,
        ttft_s=ttft,
        itl_s=itl,
        decode_step_s=decode,
        prefill_s=prefill,
        tp_comm_s=tp_comm,
        hop_s=hops_token,
        request_s=ttft + (out - 1.0) * itl,
        tokens_per_s_replica=rate,
        tokens_per_s_per_gpu=rate / gpus,
        gpus_per_replica=gpus,
        busy_share=busy,
        flop_util=flop_util,
        hbm_util=hbm_util,
    )


def _llama8b() -> Transformer:
    """Llama 3 8B's shape, for doctests."""
    return Transformer(
        layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256, seq_len=8192
    )
