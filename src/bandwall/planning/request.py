"""The one request schema.

`PlanRequest` is the input of plan, sweep, compare and scale. The CLI options, the web API,
the dashboard form, the JSON output's ``request`` and the options table in the docs are all
generated from it; nothing copies its fields by hand. Each field has units in its name and one
docstring (its help text). Metadata in ``json_schema_extra``:

- ``group``: the section a field belongs to (workload, cluster, network, layout, strategy,
  budget, faults), for forms and docs;
- ``flag``: the CLI option name when it differs from the field name (unit-bearing fields take
  the unit in the value: ``--bandwidth 15Gbps`` fills ``bandwidth_Gbps``);
- ``vector``: the engine evaluates many values of this field in one vectorised pass (sweep axes
  that are not vector fields are looped over);
- ``choices``: the catalog list its value is checked against (shown in help and forms).

A layout field left unset (None) is searched: the engine picks the fastest feasible value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from bandwall.docfields import DocumentedModel
from bandwall.errors import ConfigError
from bandwall.model.vocab import Mitigation, Recompute, Schedule, recompute_module_names
from bandwall.units import parse_count, parse_duration_s, parse_number, parse_rate_Gbps

#: Upper bounds shared by the CLI and the web API, so no input can ask for an absurd amount of
#: work or memory.
MAX_GPUS = 1 << 21
MAX_DEGREE = 1 << 16


def _with_unit(parse: Callable[[str, str], float], scale: float, example: str) -> Any:
    """A number in the field's unit, or a string with a unit (`15Gbps`, `50us`, `1T`)."""

    def convert(value: Any) -> Any:
        if isinstance(value, bool):
            # JSON true read as 1 Gb/s at HTTP 200, where pue or gpus refused it (fuzz 20, C5)
            raise ValueError(f"{value} is not a number")
        if isinstance(value, str):
            text = value.strip()
            try:
                # ASCII only, as every parser in units.py: float() also reads '١٢' as 12
                return parse_number(text, "value")
            except ConfigError:
                pass
            try:
                return parse(text, "value") * scale
            except ConfigError as exc:
                raise ValueError(exc.reason) from None
        return value

    return (
        BeforeValidator(convert),
        WithJsonSchema(
            {
                "anyOf": [{"type": "number"}, {"type": "string", "examples": [example]}],
                "default": None,
            }
        ),
    )


RateGbps = Annotated[float, *_with_unit(parse_rate_Gbps, 1.0, "15Gbps")]
DurationUs = Annotated[float, *_with_unit(parse_duration_s, 1e6, "200us")]
Count = Annotated[float, *_with_unit(parse_count, 1.0, "1T")]


def _meta(group: str, **extra: Any) -> dict[str, Any]:
    return {"group": group, **extra}


def choices_for(kind: str) -> list[str]:
    """The values a catalog-backed field accepts (for help text, forms and errors). Read from
    the raw TOML keys, without validating every entry, so `--help` stays fast."""
    from bandwall.rawdata import raw_rows

    if kind == "model":
        rows = [
            *raw_rows("workloads", "models.toml", "transformer"),
            *raw_rows("workloads", "models.toml", "cnn"),
        ]
        return [*_keys(rows, "key"), "custom"]
    if kind == "preset":
        return _keys(raw_rows("planning", "presets.toml", "preset"), "key")
    if kind == "gpu":
        return _keys(raw_rows("catalog", "gpus.toml", "gpu"), "name")
    if kind == "provider":
        return _keys(raw_rows("catalog", "providers.toml", "provider"), "key")
    tier = {"scale_up": "scale_up", "fabric": "scale_out", "wan": "wan"}[kind]
    fabrics = raw_rows("catalog", "fabrics.toml", "fabric")
    keys = _keys([r for r in fabrics if r.get("tier") == tier], "key")
    return keys + (["measured:NAME"] if kind == "fabric" else [])


def _keys(rows: list[dict[str, Any]], key: str) -> list[str]:
    """The key of every row that has one (an overlay row without it is the catalog's error to
    report, when a command loads the catalog; a list of choices just leaves it out)."""
    return [str(r[key]) for r in rows if isinstance(r.get(key), str)]


def _wrong_tier(name: str, value: str) -> None:
    """A fabric given at the wrong level gets an error that says where it belongs."""
    from bandwall.catalog import load_catalog

    spec = load_catalog().fabrics.get(value)
    if spec is None:
        return
    where = {"scale_up": "--scale-up", "scale_out": "--fabric", "wan": "--wan"}[spec.tier.value]
    wanted = {
        "fabric": "a scale-out fabric such as ib-ndr",
        "scale_up": "a scale-up fabric such as nvlink4",
        "wan": "a WAN fabric such as internet-10g",
    }[name]
    tier = spec.tier.value.replace("_", "-")
    raise ValueError(f"{value!r} is a {tier} fabric (give it as {where}); give {wanted}")


#: Former `--routing` spellings, as model.topology.ROUTING_ALIASES (a test keeps them equal).
ROUTING_ALIASES = {"static": "ecmp"}

CHOICE_FIELDS = ("model", "preset", "gpu", "provider", "scale_up", "fabric", "wan")


#: The lowest `--gemm-efficiency` a request takes, and so the floor of every fit of it
#: (`calibrate --from-log`, `--from-trace`).
MIN_GEMM_EFFICIENCY = 0.01


class PlanRequest(DocumentedModel):
    """A training job on an infrastructure, and how to run it."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        allow_inf_nan=False,
        str_max_length=256,
        # validators are built on first use, not at import: `bandwall --help` only needs the
        # field list
        defer_build=True,
    )

    # --- workload ------------------------------------------------------------------------
    model: str = Field(default="llama3-8b", json_schema_extra=_meta("workload", choices="model"))
    """Model key (see `bandwall models`) or 'custom' with the dimensions below."""
    layers: int | None = Field(default=None, ge=1, le=100_000, json_schema_extra=_meta("workload"))
    """custom: transformer layers."""
    hidden: int | None = Field(default=None, ge=1, le=1 << 20, json_schema_extra=_meta("workload"))
    """custom: hidden size."""
    heads: int | None = Field(default=None, ge=1, le=1 << 16, json_schema_extra=_meta("workload"))
    """custom: attention heads."""
    kv_heads: int | None = Field(
        default=None, ge=1, le=1 << 16, json_schema_extra=_meta("workload")
    )
    """custom: key-value heads (GQA; default: heads)."""
    ffn: int | None = Field(default=None, ge=1, le=1 << 22, json_schema_extra=_meta("workload"))
    """custom: MLP width (default 4 × hidden)."""
    vocab: int | None = Field(default=None, ge=1, le=1 << 24, json_schema_extra=_meta("workload"))
    """custom: vocabulary size."""
    seq_len: int | None = Field(default=None, ge=1, le=1 << 24, json_schema_extra=_meta("workload"))
    """Sequence length in tokens (overrides the model's)."""
    experts: int | None = Field(default=None, ge=1, le=1 << 16, json_schema_extra=_meta("workload"))
    """custom: routed experts per MoE layer."""
    top_k: int | None = Field(default=None, ge=1, le=1 << 16, json_schema_extra=_meta("workload"))
    """custom: experts per token."""
    gated_mlp: bool = Field(default=False, json_schema_extra=_meta("workload"))
    """custom: SwiGLU MLP (3 matrices) instead of the classic 2-matrix GELU MLP."""
    head_dim: int | None = Field(
        default=None, ge=1, le=1 << 14, json_schema_extra=_meta("workload")
    )
    """custom: attention head dimension (default hidden / heads; e.g. Gemma and Qwen3 differ)."""
    moe_ffn: int | None = Field(default=None, ge=1, le=1 << 22, json_schema_extra=_meta("workload"))
    """custom: MLP width of one routed expert (default: ffn)."""
    shared_experts: int | None = Field(
        default=None, ge=0, le=1 << 10, json_schema_extra=_meta("workload")
    )
    """custom: shared experts every token goes through (DeepSeek-style MoE)."""
    dense_layers: int | None = Field(
        default=None, ge=0, le=100_000, json_schema_extra=_meta("workload")
    )
    """custom: leading layers with a dense MLP in an MoE model."""

    # --- cluster -------------------------------------------------------------------------
    gpus: int = Field(default=8, ge=1, le=MAX_GPUS, json_schema_extra=_meta("cluster", vector=True))
    """Total GPUs."""
    preset: str = Field(
        default="ai-factory-ib", json_schema_extra=_meta("cluster", choices="preset")
    )
    """Infrastructure preset (see `bandwall presets`); the fields below override it."""
    gpu: str | None = Field(default=None, json_schema_extra=_meta("cluster", choices="gpu"))
    """GPU from the catalog (default: the preset's)."""
    # at most 576: the largest NVLink domain announced (NVIDIA Vera Rubin Ultra NVL576,
    # GTC 2025 keynote, 2025-03); a 1,024-GPU NVLink-4 node was priced without complaint
    gpus_per_node: int | None = Field(
        default=None, ge=1, le=576, json_schema_extra=_meta("cluster")
    )
    """GPUs per node (default: the preset's, or the GPU's scale-up domain)."""
    scale_up: str | None = Field(
        default=None, json_schema_extra=_meta("cluster", choices="scale_up")
    )
    """Scale-up fabric inside a node (default: the GPU's)."""
    provider: str | None = Field(
        default=None, json_schema_extra=_meta("cluster", choices="provider")
    )
    """Provider whose prices, storage and failure rates apply (default: the preset's)."""
    price_per_gpu_hour_usd: float | None = Field(
        default=None,
        ge=1e-4,
        le=1e4,
        json_schema_extra=_meta("cluster", flag="price-per-gpu-hour", vector=True),
    )
    """Price in USD per GPU-hour (default: the provider's typical price)."""
    precision: Literal["bf16", "fp8", "fp4"] = Field(
        default="bf16", json_schema_extra=_meta("cluster")
    )
    """Number format of the matmuls: bf16, fp8 (the GEMMs the recipe runs in fp8) or fp4
    (NVFP4 on Blackwell: the linears in 4-bit, TransformerEngine's NVFP4 recipe; serving: W4A4
    weights)."""
    power_cap_W: float | None = Field(
        default=None,
        gt=0,
        le=5000,
        json_schema_extra=_meta("cluster", flag="power-cap-w"),
    )
    """Power limit per GPU in watts (nvidia-smi -pl; MLPerf MaxQ); default: the GPU's TDP."""

    # --- network -------------------------------------------------------------------------
    fabric: str | None = Field(default=None, json_schema_extra=_meta("network", choices="fabric"))
    """Scale-out fabric key, or measured:NAME from `bandwall calibrate` (default: preset's)."""
    nics_per_node: float | None = Field(
        default=None, ge=0.125, le=64, json_schema_extra=_meta("network")
    )
    """Scale-out NICs per node (a fraction: one NIC shared by up to 8 nodes)."""
    oversubscription: float | None = Field(
        default=None, ge=1, le=1024, json_schema_extra=_meta("network", vector=True)
    )
    """Scale-out oversubscription ratio (1 = non-blocking)."""
    sites: int | None = Field(default=None, ge=1, le=1024, json_schema_extra=_meta("network"))
    """Sites the cluster is split over (needs a WAN fabric)."""
    wan: str | None = Field(default=None, json_schema_extra=_meta("network", choices="wan"))
    """WAN fabric between sites."""
    bandwidth_Gbps: RateGbps | None = Field(
        default=None,
        ge=0.001,  # 1 Mb/s: below it a step takes years and every figure is noise
        le=1e6,
        json_schema_extra=_meta("network", flag="bandwidth", vector=True),
    )
    """Scale-out bandwidth per NIC, e.g. 15Gbps (a number is Gb/s)."""
    latency_us: DurationUs | None = Field(
        default=None, ge=0, le=1e7, json_schema_extra=_meta("network", flag="latency")
    )
    """Scale-out one-way latency, e.g. 50us (a number is µs)."""
    jitter_us: DurationUs | None = Field(
        default=None, ge=0, le=1e7, json_schema_extra=_meta("network", flag="jitter")
    )
    """Scale-out jitter per message (mean = std), e.g. 200us (a number is µs)."""
    loss_rate: float | None = Field(
        default=None, ge=0, lt=1, json_schema_extra=_meta("network", flag="loss")
    )
    """Scale-out packet loss rate (TCP links)."""
    tcp_streams: int | None = Field(default=None, ge=1, le=1024, json_schema_extra=_meta("network"))
    """TCP connections per peer on TCP links (default: what the library opens: NCCL 2
    channels × the NIC's sockets, Gloo 1)."""
    congestion_control: Literal["cubic", "bbr", "reno"] = Field(
        default="cubic", json_schema_extra=_meta("network")
    )
    """TCP congestion control on TCP links (Linux default: CUBIC)."""
    tcp_window_bytes: float | None = Field(
        default=None, ge=1, le=1 << 34, json_schema_extra=_meta("network")
    )
    """Bytes in flight per TCP stream (default: autotuned 6 MiB; Gloo's fixed send buffer)."""
    in_network: bool | None = Field(default=None, json_schema_extra=_meta("network"))
    """Reduce in the switch where the hardware can (NVLS on NVSwitch, SHARP on InfiniBand);
    unset: each fabric's default (NVLS on, SHARP off)."""
    qps_per_connection: int | None = Field(
        default=None, ge=1, le=128, json_schema_extra=_meta("network", vector=True)
    )
    """RDMA queue pairs per NCCL connection (NCCL_IB_QPS_PER_CONNECTION; default NCCL's 1):
    each is a separately hashed flow under static ECMP (docs/congestion.md)."""
    placement: Literal["scattered", "packed"] = Field(
        default="scattered", json_schema_extra=_meta("network")
    )
    """Where ring neighbours sit: scattered (rank order unrelated to the leaf switches, as
    in a shared cluster) or packed (topology-aware: rank order follows the leaves)."""
    rail_optimized: bool = Field(default=True, json_schema_extra=_meta("network"))
    """NIC i of every node on rail leaf i (NVIDIA's reference design); off: top-of-rack
    leaves holding all NICs of a few nodes."""
    ecmp_paths: int | None = Field(default=None, ge=1, le=4096, json_schema_extra=_meta("network"))
    """Equal-cost spine paths (uplinks) per leaf (default: the fabric's switch split by the
    oversubscription)."""
    rdma_cc: Literal["auto", "dcqcn", "pfc"] = Field(
        default="auto", json_schema_extra=_meta("network", flag="rdma-cc")
    )
    """RoCE congestion control: dcqcn (PFC + ECN), pfc (PFC only: head-of-line blocking in
    all-to-all phases) or auto (the fabric's own)."""
    routing: Literal["auto", "adaptive", "ecmp", "flowlet"] = Field(
        default="auto", json_schema_extra=_meta("network")
    )
    """Load balancing over spine paths: adaptive (per packet), ecmp (static hashing: flow
    collisions, and rehashing after failures; `static`, its former name, is accepted),
    flowlet, or auto (the fabric's own)."""

    # --- layout (unset: searched) -----------------------------------------------------------
    tp: int | None = Field(
        default=None, ge=1, le=MAX_DEGREE, json_schema_extra=_meta("layout", vector=True)
    )
    """Tensor-parallel degree (unset: searched)."""
    pp: int | None = Field(
        default=None, ge=1, le=MAX_DEGREE, json_schema_extra=_meta("layout", vector=True)
    )
    """Pipeline-parallel degree (unset: searched)."""
    cp: int | None = Field(
        default=None, ge=1, le=MAX_DEGREE, json_schema_extra=_meta("layout", vector=True)
    )
    """Context-parallel degree (unset: searched)."""
    ep: int | None = Field(
        default=None, ge=1, le=MAX_DEGREE, json_schema_extra=_meta("layout", vector=True)
    )
    """Expert-parallel degree, within data parallelism (unset: searched)."""
    zero: int | None = Field(
        default=None, ge=0, le=3, json_schema_extra=_meta("layout", vector=True)
    )
    """ZeRO stage: 0 DDP, 1/2 sharded optimizer (and gradients), 3 FSDP (unset: searched)."""
    micro_batch: int | None = Field(
        default=None, ge=1, le=1 << 20, json_schema_extra=_meta("layout", vector=True)
    )
    """Sequences (or images) per micro-batch (unset: searched)."""
    virtual_stages: int | None = Field(
        default=None, ge=1, le=1024, json_schema_extra=_meta("layout", vector=True)
    )
    """Model chunks per pipeline stage, interleaved schedule (unset: searched)."""
    etp: int | None = Field(default=None, ge=1, le=MAX_DEGREE, json_schema_extra=_meta("layout"))
    """Expert tensor-parallel degree (Megatron MoE parallel folding: the expert layers fold
    ep x etp over the tp x cp x dp ranks of the dense layers; unset: 1)."""
    pp_first_stage_layers: int | None = Field(
        default=None, ge=0, le=100_000, json_schema_extra=_meta("layout")
    )
    """Layers on the first pipeline stage when stages are uneven (Megatron
    --decoder-first-pipeline-num-layers); the rest split evenly."""
    pp_last_stage_layers: int | None = Field(
        default=None, ge=0, le=100_000, json_schema_extra=_meta("layout")
    )
    """Layers on the last pipeline stage (Megatron --decoder-last-pipeline-num-layers)."""
    auto: bool = Field(default=False, json_schema_extra=_meta("layout"))
    """Search every layout axis, ignoring the ones given (unset axes are always searched)."""

    # --- strategy --------------------------------------------------------------------------
    stack: Literal["megatron", "fsdp2", "deepspeed", "maxtext"] = Field(
        default="megatron", json_schema_extra=_meta("strategy")
    )
    """Training framework whose overlap behaviour applies (docs/model.md lists each one's
    defaults): megatron (Megatron-Core/NeMo), fsdp2 (torchtitan), deepspeed (ZeRO) or
    maxtext (JAX/XLA)."""
    overlap_grad_reduce: bool | None = Field(default=None, json_schema_extra=_meta("strategy"))
    """Reduce gradients during backward (Megatron --overlap-grad-reduce; unset: the stack's
    default)."""
    overlap_param_gather: bool | None = Field(default=None, json_schema_extra=_meta("strategy"))
    """Gather sharded parameters during the next forward (Megatron --overlap-param-gather,
    FSDP prefetch; unset: the stack's default)."""
    reshard_after_forward: bool | None = Field(default=None, json_schema_extra=_meta("strategy"))
    """FSDP: free gathered weights after forward and gather them again for backward (unset:
    the stack's default, on)."""
    fp8_recipe: Literal["delayed", "current", "blockwise", "mxfp8", "rowwise"] | None = Field(
        default=None, json_schema_extra=_meta("strategy")
    )
    """fp8 scaling recipe: delayed or current tensor scaling (TransformerEngine; current is
    torchao's tensorwise), blockwise (DeepSeek-V3), mxfp8 (Blackwell), rowwise (torchao's
    per-row scales); unset: delayed on Hopper, mxfp8 on Blackwell."""
    attention_kernel: Literal["fa2", "fa3", "fa4"] | None = Field(
        default=None, json_schema_extra=_meta("strategy")
    )
    """FlashAttention generation the attention runs on; unset: the stack's (fsdp2: PyTorch
    SDPA's FlashAttention-2 on Hopper) or else the GPU's best (FA3 on Hopper, FA4 on
    Blackwell, FA2 before)."""
    fp8_weights: bool = Field(default=False, json_schema_extra=_meta("strategy"))
    """Keep the (frozen or primary) weights in fp8 (1 B/param), e.g. LoRA on an fp8 base."""
    recompute_layers: int | None = Field(
        default=None, ge=0, le=100_000, json_schema_extra=_meta("strategy")
    )
    """With --recompute full: layers fully recomputed per model chunk (Megatron
    --recompute-method block --recompute-num-layers); unset: all."""
    recompute_modules: str | None = Field(
        default=None, max_length=200, json_schema_extra=_meta("strategy")
    )
    """With --recompute selective: the submodules rerun in backward, comma-separated
    (Megatron --recompute-modules): core_attn, layernorm, mla_up_proj, mlp, moe, moe_act,
    shared_experts; unset: core_attn."""
    cuda_graphs: bool = Field(default=False, json_schema_extra=_meta("strategy"))
    """Capture the step in CUDA graphs (or torch.compile with reduce-overhead): kernel launches
    no longer wait on the CPU."""
    compile: bool = Field(default=False, json_schema_extra=_meta("strategy"))
    """torch.compile: element-wise kernels fused (fewer HBM passes and launches)."""
    schedule: Schedule = Field(default=Schedule.INTERLEAVED, json_schema_extra=_meta("strategy"))
    """Pipeline schedule: 1f1b, or interleaved (virtual stages searched or given)."""
    recompute: Recompute = Field(default=Recompute.AUTO, json_schema_extra=_meta("strategy"))
    """Activation recomputation: auto (just enough to fit), selective, full or none; or a
    MaxText remat policy by name (minimal, save_qkv_proj, ...: the projections it keeps)."""
    reduce_dtype: Literal["fp32", "bf16"] = Field(
        default="fp32", json_schema_extra=_meta("strategy")
    )
    """Gradient reduction dtype: fp32 (Megatron-LM with bf16, PyTorch DDP under autocast and
    torchtitan FSDP reduce in fp32) or bf16."""
    compression: str = Field(default="none", json_schema_extra=_meta("strategy"))
    """Gradient compression: none, int8 or topk:RATIO (e.g. topk:0.01)."""
    local_sgd_steps: int = Field(default=1, ge=1, le=1_000_000, json_schema_extra=_meta("strategy"))
    """DiLoCo / local SGD: outer synchronisation every H steps (1: synchronous)."""
    diloco_workers: int | None = Field(
        default=None, ge=1, le=MAX_GPUS, json_schema_extra=_meta("strategy")
    )
    """DiLoCo workers, each running the inner layout on gpus/workers GPUs (default: one per
    site on a multi-site cluster, else every data-parallel replica)."""
    outer_compression: Literal["none", "fp16", "int8", "int4"] = Field(
        default="none", json_schema_extra=_meta("strategy")
    )
    """DiLoCo pseudo-gradients on the wire: none (fp32), fp16, int8 or int4."""
    outer_overlap: bool = Field(default=False, json_schema_extra=_meta("strategy"))
    """Streaming DiLoCo: overlap the outer sync with the next H inner steps."""
    outer_state_on_cpu: bool = Field(default=False, json_schema_extra=_meta("strategy"))
    """Keep DiLoCo's outer momentum and weight copy in host memory."""
    overlap: bool = Field(default=True, json_schema_extra=_meta("strategy"))
    """Overlap the data-parallel reduction with backward."""
    sequence_parallel: bool = Field(default=True, json_schema_extra=_meta("strategy"))
    """Sequence parallelism with TP (norms and dropout split over TP ranks; all-gather +
    reduce-scatter instead of all-reduce). On in NeMo/Megatron recipes when tp > 1."""
    tp_comm_overlap: bool = Field(default=False, json_schema_extra=_meta("strategy"))
    """Overlap TP collectives with GEMMs (Megatron's --tp-comm-overlap; needs sequence
    parallelism)."""
    pp_comm_overlap: bool = Field(default=True, json_schema_extra=_meta("strategy"))
    """Overlap pipeline sends with compute (Megatron-Core's overlap_p2p_comm); off, every send
    between stages is exposed (Megatron-LM 2022)."""
    flash_attention: bool = Field(default=True, json_schema_extra=_meta("strategy"))
    """FlashAttention kernels: causal attention computes half the scores and stores none."""
    lora_rank: int | None = Field(default=None, ge=1, le=65536, json_schema_extra=_meta("strategy"))
    """LoRA fine-tuning at this rank on every linear layer: frozen base weights keep no
    gradients or optimizer state (unset: train every weight)."""
    offload_optimizer: bool = Field(default=False, json_schema_extra=_meta("strategy"))
    """Keep the optimizer state in host memory and step it on the CPU (ZeRO-Offload)."""
    ep_overlap: float = Field(default=0.0, ge=0, le=1, json_schema_extra=_meta("strategy"))
    """Share of expert-parallel all-to-all hidden by compute."""
    moe_dispatcher: Literal["alltoall", "deepep"] = Field(
        default="alltoall", json_schema_extra=_meta("strategy")
    )
    """How tokens reach their experts: alltoall (one NCCL all-to-all, a copy per chosen expert)
    or deepep (DeepEP / Megatron's HybridEP: one copy per destination node over the network,
    forwarded to that node's experts over NVLink)."""
    bucket_MiB: float | None = Field(
        default=None, ge=0.001, le=1 << 20, json_schema_extra=_meta("strategy", flag="bucket-MiB")
    )
    """Gradient bucket size in MiB (default: the stack's: Megatron-Core max(40M, 1M x dp)
    elements, DeepSpeed 5e8 elements, PyTorch DDP 25 MiB)."""
    straggler_mitigation: Mitigation = Field(
        default=Mitigation.NONE, json_schema_extra=_meta("strategy")
    )
    """Stragglers: none, backup (spare workers, Chen et al. 2016) or async (local SGD)."""
    gemm_efficiency: float | None = Field(
        default=None, ge=MIN_GEMM_EFFICIENCY, le=1, json_schema_extra=_meta("strategy")
    )
    """Share of dense peak large GEMMs reach (default: the GPU's, `bandwall catalog perf`)."""

    profile: str | None = Field(default=None, max_length=64, json_schema_extra=_meta("strategy"))
    """Compute profile fitted from a run (`bandwall calibrate --from-log`): its compute
    efficiency replaces the catalog's."""

    # --- budget ------------------------------------------------------------------------------
    global_batch: int | None = Field(
        default=None, ge=1, le=1 << 40, json_schema_extra=_meta("budget")
    )
    """Global batch in sequences (or images) per step (default: 4 Mi tokens, 1 Ki per GPU above
    4,096 GPUs; 1,024 images)."""
    eval_interval_steps: int | None = Field(
        default=None, ge=1, le=1 << 40, json_schema_extra=_meta("budget")
    )
    """Evaluate every N training steps (the time counts toward time to train, as in MLPerf)."""
    eval_samples: int = Field(default=0, ge=0, le=1 << 40, json_schema_extra=_meta("budget"))
    """Sequences (or images) per evaluation."""
    tokens: Count | None = Field(default=None, ge=1, le=1e18, json_schema_extra=_meta("budget"))
    """Token budget, e.g. 1T or 300B (default: 20 tokens per parameter; 1B for a LoRA
    fine-tune, which has no compute-optimal size)."""
    epochs: float | None = Field(default=None, ge=1e-6, le=1e6, json_schema_extra=_meta("budget"))
    """Epochs for CNNs (default 90)."""

    # --- energy ----------------------------------------------------------------------------------
    pue: float | None = Field(default=None, ge=1, le=5, json_schema_extra=_meta("energy"))
    """Facility power usage effectiveness (default: the provider kind's, catalog power)."""
    grid_region: str | None = Field(default=None, json_schema_extra=_meta("energy"))
    """Region whose grid carbon intensity applies (default: the provider kind's)."""
    grid_gco2_per_kWh: float | None = Field(
        default=None, ge=0, le=5000, json_schema_extra=_meta("energy", flag="grid-gco2-per-kwh")
    )
    """Grid carbon intensity, gCO2/kWh (overrides grid_region)."""
    price_per_kWh_usd: float | None = Field(
        default=None, ge=0, le=100, json_schema_extra=_meta("energy", flag="price-per-kwh")
    )
    """Electricity price in USD/kWh for owned clusters (default: the provider kind's)."""
    co_packaged_optics: bool = Field(default=False, json_schema_extra=_meta("energy"))
    """Switches with co-packaged optics instead of pluggable transceivers."""

    # --- faults ------------------------------------------------------------------------------
    failures: bool = Field(default=True, json_schema_extra=_meta("faults"))
    """Model failures, checkpoints and restarts."""
    straggler_fraction: float = Field(default=0.0, ge=0, lt=1, json_schema_extra=_meta("faults"))
    """Share of GPUs that are stragglers."""
    straggler_slowdown: float = Field(default=0.0, ge=0, le=1e3, json_schema_extra=_meta("faults"))
    """How much slower a straggler is (0.2 = 20%)."""
    failed_links: int | None = Field(
        default=None, ge=0, le=1 << 24, json_schema_extra=_meta("faults")
    )
    """Failed scale-out links."""
    failed_link_fraction: float | None = Field(
        default=None, ge=0, lt=1, json_schema_extra=_meta("faults")
    )
    """Failed share of scale-out links."""
    slow_link_fraction: float = Field(default=0.0, ge=0, lt=1, json_schema_extra=_meta("faults"))
    """Share of scale-out links running slow."""
    slow_link_speed: float = Field(default=0.25, ge=0.001, le=1, json_schema_extra=_meta("faults"))
    """Speed of a slow link relative to its rate."""
    checkpoint_GBps: float | None = Field(
        default=None, ge=0.001, le=1e6, json_schema_extra=_meta("faults", flag="checkpoint-GBps")
    )
    """Aggregate checkpoint write bandwidth, GB/s (default: the provider's storage)."""
    restart_s: float | None = Field(default=None, ge=0, le=1e7, json_schema_extra=_meta("faults"))
    """Seconds to detect a failure, restart and reload (default: the provider's)."""

    @field_validator(*CHOICE_FIELDS)
    @classmethod
    def _known(cls, value: str | None, info: Any) -> str | None:
        if value is None:
            return value
        name = info.field_name
        if name == "fabric" and value.startswith("measured:"):
            profile = value.split(":", 1)[1]
            if not profile or not all(c.isalnum() or c in "-_" for c in profile):
                raise ValueError(f"profile name {profile!r} must be letters, digits, '-' or '_'")
            return value
        allowed = choices_for(name)
        folded = {c.lower(): c for c in allowed}
        if value.lower() not in folded or value == "measured:NAME":
            if name in ("fabric", "scale_up", "wan"):
                _wrong_tier(name, value)
            raise ValueError(f"unknown value {value!r}; choose one of: {', '.join(allowed)}")
        return folded[value.lower()] if name not in ("model",) else value

    @field_validator("routing", mode="before")
    @classmethod
    def _routing_alias(cls, value: Any) -> Any:
        """The former spelling of ecmp (model.topology.ROUTING_ALIASES; not imported here,
        which would load numpy for `--help`)."""
        if isinstance(value, str) and value.strip().lower() in ROUTING_ALIASES:
            return ROUTING_ALIASES[value.strip().lower()]
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _input_layer(cls, data: Any, handler: Any, info: Any) -> Any:
        """Number strings through `bandwall.units`, then the cross-field rules
        (`bandwall.planning.rules`: what applies to which workload, cluster and mode); with
        context `{"fields_only": True}` the fields alone (one value read from a file)."""
        from bandwall.planning import rules

        fields_only = bool(info.context and info.context.get("fields_only"))
        return rules.apply(cls, data, handler, check_rules=not fields_only)

    @field_validator("recompute_modules")
    @classmethod
    def _recompute_modules(cls, value: str | None) -> str | None:
        """One spelling per set: the names sorted and comma-joined (commas or spaces in)."""
        return None if value is None else recompute_module_names(value.replace(",", " ").split())

    @field_validator("compression")
    @classmethod
    def _compression(cls, value: str) -> str:
        if value in ("none", "int8"):
            return value
        if value.startswith("topk:"):
            try:
                ratio = float(value.split(":", 1)[1])
            except ValueError:
                ratio = -1.0
            if 0 < ratio < 1:
                return value
            raise ValueError(f"topk ratio must be in (0, 1), got {value!r}")
        raise ValueError(f"must be none, int8 or topk:RATIO, got {value!r}")


def field_info(name: str) -> Any:
    """A plan or serving request field (`InferRequest` adds fields to `PlanRequest`)."""
    info = PlanRequest.model_fields.get(name)
    return info if info is not None else InferRequest.model_fields.get(name)


def field_flag(name: str) -> str:
    """The CLI option of a request field, without the leading dashes."""
    info = field_info(name)
    extra = info.json_schema_extra if info is not None else None
    if isinstance(extra, dict) and isinstance(extra.get("flag"), str):
        return str(extra["flag"])
    return name.replace("_", "-")


def field_meta(name: str) -> dict[str, Any]:
    extra = field_info(name).json_schema_extra
    return dict(extra) if isinstance(extra, dict) else {}


VECTOR_FIELDS = tuple(n for n in PlanRequest.model_fields if field_meta(n).get("vector"))
LAYOUT_FIELDS = ("tp", "pp", "cp", "ep", "etp", "zero", "micro_batch", "virtual_stages")


def _shown(value: Any) -> str:
    """The offending value for a one-line error: its repr, cut at 40 characters (a 400-digit
    option would otherwise fill the terminal)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)  # a sweep's grid value: 0, as `plan` says it, not 0.0
    try:
        text = repr(value)
    except ValueError:  # an int past Python's 4,300-digit str limit
        return "a number of over 4,300 digits"
    return text if len(text) <= 40 else text[:37] + "..."


#: The unit a field's name says it is held in, for its bounds in an error.
_BOUND_UNITS = {"_Gbps": "Gb/s", "_GBps": "GB/s", "_us": "µs", "_W": "W", "_MiB": "MiB"}


def config_error(exc: ValidationError) -> ConfigError:
    """The first pydantic error as a ConfigError naming its field and the offending value."""
    err = exc.errors()[0]
    loc = [str(p) for p in err.get("loc", ())]
    field = loc[0] if loc else None
    msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    value = err.get("input")
    unit = next((u for suffix, u in _BOUND_UNITS.items() if (field or "").endswith(suffix)), "")
    if unit and err.get("type") in (
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
    ):
        msg = f"{msg} {unit}"  # the bound in the unit the field is held in
    if err.get("type") not in ("value_error", "missing", "extra_forbidden") and not isinstance(
        value, dict
    ):
        msg = f"{msg} (got {_shown(value)})"
    if err.get("type") == "extra_forbidden":
        allowed = ", ".join(PlanRequest.model_fields)
        msg = f"unknown field; the request takes: {allowed}"
    return ConfigError(msg, field=field)


def check_fields(**fields: Any) -> None:
    """Values of some request fields against their declared bounds and choices alone, without
    the cross-field rules: for a command that takes a few of the request's options without
    being a plan (`bandwall collective`), so its bounds are the schema's, not typed again."""
    try:
        PlanRequest.model_validate(
            {k: v for k, v in fields.items() if v is not None}, context={"fields_only": True}
        )
    except ValidationError as exc:
        raise config_error(exc) from None


def make_request(**fields: Any) -> PlanRequest:
    """A validated request from field values (None means unset); errors name the field."""
    try:
        return PlanRequest.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        raise config_error(exc) from None


#: Per-replica scheduler cap on sequences in flight when the request gives none, by runtime:
#: TensorRT-LLM's default max_batch_size 2048 (docs/source/performance/tuning-max-batch-size-
#: and-max-num-tokens.md), vLLM's default max_num_seqs 256 (EngineArgs), SGLang sizes it from
#: the KV cache (taken as TensorRT-LLM's).
DEFAULT_MAX_CONCURRENCY = {"trtllm": 2048, "vllm": 256, "sglang": 2048, "hf": 256, "petals": 256}


class InferRequest(PlanRequest):
    """Serving a model on an infrastructure: the plan request's model and cluster fields, the
    request shape, and the energy settings. Training-only fields (batch, budget, strategy,
    faults) are accepted and ignored."""

    # --- serving ---------------------------------------------------------------------------
    dataset: (
        Literal["fixed", "openorca", "sharegpt", "cnn_dailymail", "mlperf-mixtral", "mlperf-405b"]
        | None
    ) = Field(default=None, json_schema_extra=_meta("serving"))
    """Request lengths: a published distribution (openorca: MLPerf's Llama 2 70B set,
    sharegpt: vLLM's chat set, cnn_dailymail, mlperf-mixtral, mlperf-405b) or fixed
    (--prompt-tokens/--output-tokens). Unset: fixed when a length is given, else openorca."""
    prompt_tokens: int | None = Field(
        default=None, ge=1, le=1 << 21, json_schema_extra=_meta("serving")
    )
    """Input tokens per request with --dataset fixed (default 1,024)."""
    output_tokens: int | None = Field(
        default=None, ge=1, le=1 << 21, json_schema_extra=_meta("serving")
    )
    """Generated tokens per request with --dataset fixed (default 256)."""
    scenario: Literal["offline", "server"] | None = Field(
        default=None, json_schema_extra=_meta("serving")
    )
    """MLPerf-style scenario: offline (all requests queued: maximum throughput) or server
    (Poisson arrivals at --request-rate). Unset: server when a rate is given."""
    request_rate_per_s: float | None = Field(
        default=None, ge=1e-4, le=1e7, json_schema_extra=_meta("serving", flag="request-rate")
    )
    """Requests per second arriving at the whole deployment (server scenario)."""
    concurrency: int | None = Field(
        default=None, ge=1, le=1 << 20, json_schema_extra=_meta("serving")
    )
    """Sequences in flight per replica (unset: the cheapest per token up to max_concurrency)."""
    max_concurrency: int | None = Field(
        default=None, ge=1, le=1 << 20, json_schema_extra=_meta("serving")
    )
    """Scheduler cap on sequences in flight per replica (TensorRT-LLM max_batch_size, vLLM
    max_num_seqs; unset: the runtime's default, 2,048 for trtllm/sglang, 256 for vllm)."""
    max_itl_ms: float | None = Field(
        default=None, ge=0.001, le=1e7, json_schema_extra=_meta("serving", flag="max-itl-ms")
    )
    """p99 inter-token latency (TPOT) target the search must meet, ms (unset: none)."""
    max_ttft_ms: float | None = Field(
        default=None, ge=0.001, le=1e7, json_schema_extra=_meta("serving", flag="max-ttft-ms")
    )
    """p99 time-to-first-token target the search must meet, ms (unset: none)."""
    static_batch: bool = Field(default=False, json_schema_extra=_meta("serving"))
    """Static batching (all sequences start and end together) instead of continuous; offline
    only (arrivals waiting for a running batch to end are not modelled)."""
    spread_sites: bool = Field(default=False, json_schema_extra=_meta("serving"))
    """Put consecutive pipeline stages in different sites (Petals-style serving)."""
    remote_client: bool = Field(default=False, json_schema_extra=_meta("serving"))
    """The client runs the embeddings and LM head across the network (Petals): a token makes
    pp + 1 hops (client to first server ... last server to client)."""
    weight_format: Literal["auto", "bf16", "fp8", "fp4", "int8", "int4"] = Field(
        default="auto", json_schema_extra=_meta("serving")
    )
    """Weight format: auto (as --precision), fp4 (NVFP4 W4A4 on Blackwell), or weight-only
    int8/int4 (W8A16/W4A16 kernels)."""
    kv_cache_dtype: Literal["auto", "bf16", "fp8"] = Field(
        default="auto", json_schema_extra=_meta("serving")
    )
    """KV-cache number format (auto: fp8 with fp8 or fp4 weights, else bf16)."""
    kv_admission: Literal["auto", "reserve", "on_demand"] = Field(
        default="auto", json_schema_extra=_meta("serving")
    )
    """How the engine admits requests into the KV cache: reserve blocks for the prompt and the
    declared output (TensorRT-LLM's default GUARANTEED_NO_EVICT), or on demand with
    preemption (MAX_UTILIZATION, vLLM, SGLang). auto: the runtime's default."""
    beam_width: int = Field(default=1, ge=1, le=64, json_schema_extra=_meta("serving"))
    """Beams per request (beam search; MLPerf's GPT-J runs 4); output counts one beam."""
    runtime: Literal["trtllm", "vllm", "sglang", "hf", "petals"] = Field(
        default="trtllm", json_schema_extra=_meta("serving")
    )
    """Serving engine: trtllm, vllm, sglang (fused kernels replayed from CUDA graphs), hf
    (eager PyTorch) or petals (eager, bitsandbytes int8, RPC per hop)."""


INFER_FIELDS = tuple(n for n in InferRequest.model_fields if n not in PlanRequest.model_fields)


def make_infer_request(**fields: Any) -> InferRequest:
    """A validated serving request from field values (None means unset)."""
    try:
        return InferRequest.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        raise config_error(exc) from None
