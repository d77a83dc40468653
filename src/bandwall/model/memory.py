"""Bytes per GPU on the first pipeline stage (the fullest), by kind, and whether they fit.

Mixed-precision Adam (Rajbhandari et al. 2020, ZeRO §3): bf16 weights (2 B/param), gradients in
the reduction dtype, fp32 master weights and two moments (12 B/param). ZeRO-1 shards the
optimizer state, ZeRO-2 also the gradients, ZeRO-3 (FSDP) also the weights, over the
data-parallel ranks (routed experts over dp/ep).

Activations per token per layer (Korthikanti et al. 2022, eqs. 2-5, with sequence parallelism
and FlashAttention): 34·h with selective recomputation, 2·h with full (only the layer input is
kept), 34·h + 5·heads·seq with none. The first 1F1B stage holds min(pp, micro-batches)
micro-batches in flight, × (1 + (pp-1)/(pp·v)) when interleaved (Narayanan et al. 2021).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bandwall.model.layout import Recompute
from bandwall.workloads import Transformer

#: fp32 master weights, Adam m and v (Rajbhandari et al. 2020).
ADAM_BYTES_PER_PARAM = 12
#: bf16 weights and activations.
WEIGHT_BYTES = 2
ACT_BYTES = 2
#: fp32 logits of the LM head, kept for the loss.
LOGIT_BYTES = 4
#: Device memory the framework cannot allocate: the CUDA context (~0.5 GiB on Hopper with
#: lazy module loading; PyTorch "CUDA semantics" notes) and NCCL's buffers (NCCL_BUFFSIZE
#: 4 MiB per channel per peer and protocol, ~1 GiB for a node's rings and trees; NCCL env
#: docs). An estimate: torchtitan reports its peaks against 95.0 of an H100-96GB's 95.6 GiB.
RESERVED_BYTES = 1.5 * 2**30
#: PyTorch's caching allocator holds more than the tensors alive at the peak (block rounding,
#: fragmentation between differently sized activations); frameworks report the reserved
#: peak. Applied to the activations and transients, which churn; the static state does not.
ALLOCATOR_OVERHEAD = 1.10
#: Logits at the peak of the loss, bytes per element: the bf16 logits, the fp32 copy the
#: cross-entropy works on and its fp32 gradient (Megatron's vocab-parallel cross-entropy and
#: torchtitan's loss both upcast; `LOGIT_BYTES` is what stays between forward and backward).
LOGIT_PEAK_BYTES = 2 + 4 + 4
#: DiLoCo keeps the outer optimizer state and the last synchronised weights in fp32.
DILOCO_EXTRA_BYTES_PER_PARAM = 8
#: Attention score bytes per token per head per sequence position without recomputation.
ATTN_SCORES_PER_HEAD_SEQ = 5


@dataclass(frozen=True)
class MemoryBytes:
    """Bytes per GPU by kind (arrays broadcast with the layouts)."""

    weights: Any
    grads: Any
    optimizer: Any
    activations: Any
    recompute_share: Any

    @property
    def total(self) -> Any:
        return self.weights + self.grads + self.optimizer + self.activations


def usable_memory_bytes(device_memory_bytes: float) -> float:
    """What the framework can allocate of a device's memory (nvidia-smi's total)."""
    return device_memory_bytes - RESERVED_BYTES


def _mlp_widths(w: Transformer, moe_layer: bool) -> tuple[float, float]:
    """(MLP width per token, parallel experts per token) of a dense or MoE layer."""
    if moe_layer:
        return float(w.moe_ffn or w.ffn or 4 * w.hidden), float(w.top_k + w.shared_experts)
    return float(w.ffn or 4 * w.hidden), 1.0


def op_sac_elements_per_token_layer(w: Transformer, moe_layer: bool) -> tuple[float, float]:
    """Activation bytes per token per layer under op-level selective checkpointing
    (torchtitan's "selective op" policy, torchtitan/models/llama3/infra/parallelize.py: the
    block input, the attention kernel's output and every other matmul's output are kept;
    element-wise results and the other matmuls are recomputed): the block input (h), the Q
    and V projections (every other of q, k, v, o), the attention output, the MLP's first and
    last matmul outputs. Returns (replicated without SP, TP-sharded) bytes like
    `activation_elements_per_token_layer`."""
    h, hq, kv = float(w.hidden), float(w.q_dim), float(w.kv_dim)
    width, paths = _mlp_widths(w, moe_layer)
    ffn = width * paths
    return ACT_BYTES * (h + h), ACT_BYTES * (hq + kv + hq + ffn)


#: The matmul outputs MaxText's remat policies keep between forward and backward, by the
#: checkpoint names of MaxText layers/decoders.py get_remat_policy (`save_only_these_names`):
#: qkv = query_proj/key_proj/value_proj, context = the attention output, out = out_proj,
#: mlp_in = mlpwi (gate and up), mlp_out = mlpwo. `minimal` is JAX's
#: checkpoint_dots_with_no_batch_dims (every projection, not the attention's batched dots);
#: `minimal_with_context` (formerly minimal_flash) adds the context.
REMAT_POLICY_SAVES: dict[Recompute, frozenset[str]] = {
    Recompute.MINIMAL: frozenset({"qkv", "out", "mlp_in", "mlp_out"}),
    Recompute.MINIMAL_WITH_CONTEXT: frozenset({"qkv", "context", "out", "mlp_in", "mlp_out"}),
    Recompute.SAVE_DOT_WITH_CONTEXT_EXCEPT_MLP: frozenset({"qkv", "context", "out"}),
    Recompute.SAVE_DOT_EXCEPT_MLPWI: frozenset({"qkv", "out", "mlp_out"}),
    Recompute.SAVE_DOT_EXCEPT_MLP: frozenset({"qkv", "out"}),
    Recompute.SAVE_QKV_PROJ: frozenset({"qkv"}),
    Recompute.SAVE_OUT_PROJ: frozenset({"out"}),
}


def policy_elements_per_token_layer(
    w: Transformer, moe_layer: bool, saved: frozenset[str]
) -> tuple[float, float]:
    """Activation bytes per token per layer under a remat policy that keeps `saved` (and the
    block input, the scanned layer's carry), as (replicated without SP, TP-sharded) like
    `activation_elements_per_token_layer`."""
    h, hq, kv = float(w.hidden), float(w.q_dim), float(w.kv_dim)
    ffn, paths = _mlp_widths(w, moe_layer)
    gate = 2.0 if w.gated_mlp else 1.0
    rep = h + h * ("out" in saved) + h * paths * ("mlp_out" in saved)
    shard = (hq + 2 * kv) * ("qkv" in saved) + hq * ("context" in saved)
    shard += gate * ffn * paths * ("mlp_in" in saved)
    return ACT_BYTES * rep, ACT_BYTES * shard


def module_elements_per_token_layer(
    w: Transformer, moe_layer: bool, modules: frozenset[str], fp8_inputs: bool = False
) -> tuple[float, float]:
    """Activation bytes per token per layer under Megatron's selective recomputation of
    `modules`: the selective set of `activation_elements_per_token_layer` less what each
    recomputed submodule would have kept (a checkpointed MLP or MoE layer keeps only its input,
    the norm's output counted outside it). Returns (replicated without SP, TP-sharded) bytes."""
    h, hq, kv = float(w.hidden), float(w.heads * w.head_dim), float(w.kv_dim)
    gate = 2.0 if w.gated_mlp else 1.0
    width, paths = _mlp_widths(w, moe_layer)
    gemm_in = 0.5 if fp8_inputs else 1.0
    norm_out = 0.0 if "layernorm" in modules else gemm_in * (h + h)
    replicated = 2 * h + norm_out + 0.5 * h + 0.5 * h
    qkv = 0.0 if "mla_up_proj" in modules else hq + 2 * kv
    if moe_layer:
        shared = float(w.shared_experts)
        routed = paths - shared
        if "moe" in modules:
            routed = shared = 0.0
        if "shared_experts" in modules:
            shared = 0.0
        act_out = 0.0 if "moe_act" in modules else gemm_in
        mlp = width * (routed * (gate + act_out) + shared * (gate + gemm_in))
    else:
        mlp = 0.0 if "mlp" in modules else width * (gate + gemm_in)
    sharded = qkv + gemm_in * hq + mlp
    return ACT_BYTES * replicated, ACT_BYTES * sharded


def module_rerun(w: Transformer, moe_layer: bool, modules: frozenset[str]) -> tuple[float, float]:
    """(share of the layer's forward GEMM FLOPs, share of its forward element-wise work) that
    Megatron's selective recomputation of `modules` reruns in backward. GEMMs by their output
    widths (q, k, v, o and the MLP or experts' up/gate and down projections); element-wise work
    in proportion to the activation bytes the modules drop, which their kernels recreate. The
    MoE layer's rerun token dispatch is not priced again."""
    hq, kv = float(w.heads * w.head_dim), float(w.kv_dim)
    gate = 2.0 if w.gated_mlp else 1.0
    width, paths = _mlp_widths(w, moe_layer)
    mlp_total = paths * (gate + 1) * width
    total = hq + 2 * kv + hq + mlp_total
    rerun = (hq + 2 * kv) * ("mla_up_proj" in modules)
    if moe_layer:
        shared = float(w.shared_experts)
        if "moe" in modules:
            rerun += mlp_total
        elif "shared_experts" in modules:
            rerun += shared * (gate + 1) * width
    elif "mlp" in modules:
        rerun += mlp_total
    kept = sum(module_elements_per_token_layer(w, moe_layer, modules))
    full = sum(module_elements_per_token_layer(w, moe_layer, frozenset()))
    return rerun / total, 1.0 - kept / full


def policy_rerun(w: Transformer, saved: frozenset[str]) -> tuple[float, bool]:
    """(share of the layer's projection FLOPs rerun in backward, whether the attention core
    reruns) under a remat policy keeping `saved`. Backward needs every projection's input
    (for its weight gradient) and every nonlinearity's input: the context (out_proj's input)
    unless kept, by rerunning attention, which needs q, k and v; the out_proj output (the
    second norm's input after the residual); the MLP's first matmuls (the activation's input
    and the last matmul's). The last matmul's output only feeds the residual into the next
    layer's carry, which is kept: it never reruns. The element-wise kernels always rerun."""
    hq, kv = float(w.q_dim), float(w.kv_dim)
    ffn = float(w.ffn or 4 * w.hidden)
    gate = 2.0 if w.gated_mlp else 1.0
    total = hq + 2 * kv + hq + (gate + 1) * ffn
    attention = "context" not in saved
    rerun = (hq + 2 * kv) * (attention and "qkv" not in saved)
    rerun += hq * ("out" not in saved) + gate * ffn * ("mlp_in" not in saved)
    return rerun / total, attention


def op_sac_recomputed_gemm_share(w: Transformer) -> float:
    """Share of a layer's linear-layer forward FLOPs op-level SAC reruns in backward: the k,
    o and MLP up (w3) matmuls of q, k, v, o, w1, w3, w2."""
    hq, kv = float(w.q_dim), float(w.kv_dim)
    ffn = float(w.ffn or 4 * w.hidden)
    gate = 2.0 if w.gated_mlp else 1.0
    total = hq + 2 * kv + hq + (gate + 1) * ffn
    rerun = kv + hq + (ffn if w.gated_mlp else 0.0)
    return rerun / total


def state_bytes(
    dense_params_local: Any,
    expert_params_local: Any,
    dp: Any,
    dp_expert: Any,
    zero: Any,
    grad_bytes_per_param: float,
    local_sgd_steps: int,
    *,
    trainable_fraction: float = 1.0,
    offload_optimizer: bool = False,
    outer_state_on_gpu: bool = True,
    weight_bytes: float = WEIGHT_BYTES,
) -> tuple[Any, Any, Any]:
    """Weights, gradients and optimizer state per GPU under ZeRO stage `zero` (sharded over
    `dp`, the data × context-parallel ranks). Frozen weights (LoRA) keep no gradient and no
    optimizer state; an offloaded optimizer keeps its state in host memory (ZeRO-Offload,
    Ren et al. 2021). fp8 weights (`weight_bytes` 1) halve the weight copy."""

    def sharded(on: Any) -> Any:
        return np.where(
            on,
            dense_params_local / dp + expert_params_local / dp_expert,
            dense_params_local + expert_params_local,
        )

    weights = weight_bytes * sharded(zero >= 3)
    grads = grad_bytes_per_param * trainable_fraction * sharded(zero >= 2)
    optimizer = ADAM_BYTES_PER_PARAM * trainable_fraction * sharded(zero >= 1)
    if offload_optimizer:
        optimizer = optimizer * 0.0
    if local_sgd_steps > 1 and outer_state_on_gpu:
        # DiLoCo's outer Nesterov momentum and the last synchronised weights, fp32, sharded
        # like the inner optimizer state (Douillard et al. 2023, Algorithm 1)
        optimizer = optimizer + DILOCO_EXTRA_BYTES_PER_PARAM * trainable_fraction * sharded(
            zero >= 1
        )
    return weights, grads, optimizer


#: HBM bytes a fused Adam step moves per parameter in mixed precision: reads fp32 master
#: weight, gradient, m and v (16), writes master, m and v (12) and the bf16 weight (2)
#: (apex/TransformerEngine FusedAdam), plus a read of the gradients for the norm/clip and a
#: write to zero them (8).
ADAM_STEP_BYTES_PER_PARAM = 38
#: With the optimizer offloaded (ZeRO-Offload): gradients go to the host (4 B) and bf16
#: weights come back (2 B) over PCIe, and the host runs Adam over its memory.
OFFLOAD_PCIE_BYTES_PER_PARAM = 6
#: PCIe Gen4 x16: 32 GB/s per direction raw, ~25 GB/s achieved (PCI-SIG PCIe 4.0 spec).
PCIE_Bps = 25e9
#: Host DRAM a CPU Adam streams through: 8 channels of DDR4-3200 give 204.8 GB/s peak per
#: socket (JEDEC); about half is reached by a multi-threaded Adam shared by 8 GPUs' shards.
HOST_MEMORY_Bps = 100e9


def optimizer_step_s(
    trainable_params_local: Any, shards: Any, hbm_Bps: float, offload: bool
) -> Any:
    """Seconds of the optimizer step on one GPU's shard of the trainable parameters."""
    params = trainable_params_local / shards
    if offload:
        host = params * ADAM_STEP_BYTES_PER_PARAM / HOST_MEMORY_Bps
        return params * OFFLOAD_PCIE_BYTES_PER_PARAM / PCIE_Bps + host
    return params * ADAM_STEP_BYTES_PER_PARAM / hbm_Bps


def activation_elements_per_token_layer(
    w: Transformer, moe_layer: bool, fp8_inputs: bool = False
) -> tuple[float, float]:
    """Activation elements one layer stores per token for its backward, split into the part
    sequence parallelism shards over TP ranks and the part only TP shards (Korthikanti et al.
    2022, §4.1: 10·h + 24·h/t per token for a classic layer, 34·h/t with SP), generalised to
    GQA, gated MLPs and MoE (top-k experts plus shared ones per token).

    `fp8_inputs`: the linears keep their inputs for the weight-gradient GEMM in fp8, one byte
    per element, as TransformerEngine does whenever the wgrad GEMM runs in fp8 (its
    `_Linear.forward` saves the fp8 transposed input, `inputmat_t`, in 1.x and only the
    column-wise quantized input in 2.x; LayerNormLinear and LayerNormMLP likewise) and as
    DeepSeek-V3's framework does ("we cache the activations of the Linear operator in FP8",
    arXiv 2412.19437 §3.3.2): the QKV, projection, FC1 and FC2 inputs halve; the norms' inputs,
    Q/K/V for the attention kernel and the FC1 output the activation's backward reads stay 16-bit.

    Returns (replicated without SP, always TP-sharded), in bytes.
    """
    h, hq, kv = float(w.hidden), float(w.heads * w.head_dim), float(w.kv_dim)
    gate = 2.0 if w.gated_mlp else 1.0
    width, paths = _mlp_widths(w, moe_layer)
    ffn = width * paths
    # outside the TP regions: 2 norms (input 2h each... counted in elements: h each ×2 bytes
    # below), the inputs of the QKV and FC1 GEMMs, and the two 1-byte dropout masks
    gemm_in = 0.5 if fp8_inputs else 1.0  # a GEMM input kept for wgrad, in 2-byte elements
    replicated = 2 * h + gemm_in * (h + h) + 0.5 * h + 0.5 * h
    # inside: Q, K, V, the attention output (input of the projection), the MLP's first GEMM
    # outputs and the activation's output (input of the second GEMM)
    sharded = hq + 2 * kv + gemm_in * hq + gate * ffn + gemm_in * ffn
    return ACT_BYTES * replicated, ACT_BYTES * sharded


def transformer_activation_bytes(
    w: Transformer,
    recompute: Recompute,
    tp: Any,
    pp: Any,
    cp: Any,
    micro_batch: Any,
    micro_batches: Any,
    virtual_stages: Any,
    static_bytes: Any,
    capacity_bytes: float,
    *,
    sequence_parallel: bool,
    flash_attention: bool,
    stage_layers: Any = None,
    in_flight: Any = None,
    with_logits: bool = True,
    full_share: Any = None,
    selective_op: bool = False,
    fp8_inputs: bool = False,
    modules: frozenset[str] = frozenset(),
) -> tuple[Any, Any]:
    """Activation bytes on one pipeline stage and the share of its layers fully recomputed.

    The stage holds `stage_layers` layers (default ceil(layers/pp), the first stage of an even
    split) and `in_flight` micro-batches (default min(pp, micro-batches): the first 1F1B
    stage; the last holds 1), and the fp32 logits when it is the last stage (`with_logits`).

    Per token per layer: the selective set (everything but the attention scores; Korthikanti
    et al. 2022 eq. 5), the full-recompute set (only the layer input), or with no
    recomputation the selective set plus 5·heads·seq bytes of scores unless FlashAttention
    never stores them. AUTO recomputes just enough layers fully to fit (Megatron's
    --recompute-num-layers); that share costs one extra forward pass in the compute term.
    `modules`: with SELECTIVE, Megatron's recomputed submodules (`vocab.RECOMPUTE_MODULES`; empty:
    core attention only, the default).
    """
    seq = float(w.seq_len)
    moe_share = w.moe_layers / w.layers
    saved = REMAT_POLICY_SAVES.get(recompute)
    if saved is not None:
        rep_d, shard_d = policy_elements_per_token_layer(w, False, saved)
        rep_m, shard_m = policy_elements_per_token_layer(w, True, saved)
    elif selective_op:
        rep_d, shard_d = op_sac_elements_per_token_layer(w, moe_layer=False)
        rep_m, shard_m = op_sac_elements_per_token_layer(w, moe_layer=True)
    elif modules and recompute is Recompute.SELECTIVE:
        rep_d, shard_d = module_elements_per_token_layer(w, False, modules, fp8_inputs)
        rep_m, shard_m = module_elements_per_token_layer(w, True, modules, fp8_inputs)
    else:
        rep_d, shard_d = activation_elements_per_token_layer(w, False, fp8_inputs)
        rep_m, shard_m = activation_elements_per_token_layer(w, True, fp8_inputs)
    rep = (1 - moe_share) * rep_d + moe_share * rep_m
    shard = (1 - moe_share) * shard_d + moe_share * shard_m
    if sequence_parallel:
        selective = (rep + shard) / tp
        full = ACT_BYTES * w.hidden / tp
    else:
        selective = rep + shard / tp
        full = ACT_BYTES * float(w.hidden)
    scores = 0.0 if flash_attention else ATTN_SCORES_PER_HEAD_SEQ * w.heads * seq / tp
    # a module list without core_attn keeps the scores (unfused attention stores them)
    kept_scores = scores if modules and "core_attn" not in modules else 0.0
    per_tok = {
        Recompute.SELECTIVE: selective + kept_scores,
        Recompute.FULL: full,
        Recompute.NONE: selective + scores,
    }
    interleave = np.where(virtual_stages > 1, 1 + (pp - 1) / (pp * virtual_stages), 1.0)
    if in_flight is None:
        in_flight = np.minimum(pp, np.maximum(micro_batches, 1.0))
    if stage_layers is None:
        stage_layers = np.ceil(w.layers / pp)
    tokens_layers = micro_batch * seq / cp * in_flight * stage_layers * interleave
    logits = micro_batch * seq * w.vocab * LOGIT_BYTES / (tp * cp) if with_logits else 0.0
    if recompute is Recompute.FULL and full_share is not None:
        # only some layers recomputed (Megatron --recompute-num-layers): the others keep the
        # selective set
        sel = per_tok[Recompute.SELECTIVE] * tokens_layers
        low = per_tok[Recompute.FULL] * tokens_layers
        share = np.minimum(1.0, np.maximum(0.0, full_share)) + 0.0 * sel
        return sel - share * (sel - low) + logits, share
    if recompute is Recompute.AUTO:
        sel = per_tok[Recompute.SELECTIVE] * tokens_layers
        low = per_tok[Recompute.FULL] * tokens_layers
        over = static_bytes + sel + logits - capacity_bytes
        # clipped to [0, 1] (np.minimum/np.maximum: np.clip costs microseconds per call)
        share = np.minimum(1.0, np.maximum(0.0, over / np.maximum(sel - low, 1.0)))
        return sel - share * (sel - low) + logits, share
    if saved is not None:  # a named remat policy: what it keeps, no layer fully rerun
        acts = selective * tokens_layers + logits
        return acts, np.zeros(np.shape(acts))
    acts = per_tok[recompute] * tokens_layers + logits
    return acts, np.full(np.shape(acts), float(recompute is Recompute.FULL))


def working_set_bytes(
    w: Transformer,
    tp: Any,
    cp: Any,
    micro_batch: Any,
    *,
    sequence_parallel: bool,
    last_stage: Any,
    fp8_inputs: bool = False,
) -> Any:
    """Transient bytes at the backward peak beyond what is kept between passes: one layer's
    activations rebuilt (recomputation) and their gradients (2 × one layer's selective set for
    the current micro-batch), and on the last stage the logits at the loss
    (`LOGIT_PEAK_BYTES` per element instead of the `LOGIT_BYTES` kept)."""
    rep, shard = activation_elements_per_token_layer(w, w.is_moe, fp8_inputs)
    per_token = (rep + shard) / tp if sequence_parallel else rep + shard / tp
    tokens = micro_batch * float(w.seq_len) / cp
    logits = tokens * w.vocab * (LOGIT_PEAK_BYTES - LOGIT_BYTES) / tp
    return 2 * per_token * tokens + np.where(last_stage, logits, 0.0)


def fsdp_transient_bytes(
    layer_params_local: Any, zero: Any, weight_bytes: float, grad_bytes: float
) -> Any:
    """ZeRO-3 / FSDP: the gathered weights of the layer running and the one prefetched, and
    their unsharded gradients before the reduce-scatter (FSDP2 keeps two layers in flight;
    ZeRO-3's prefetch bucket likewise)."""
    return np.where(zero >= 3, 2 * layer_params_local * (weight_bytes + grad_bytes), 0.0)
