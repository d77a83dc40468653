"""The published training runs (`data/published_runs.csv`) as plan requests, and the model's
error on them, split as the file says.

Each row states a run as its source published it: the model's shape, the GPUs, the layout,
the batch, the precision and the stack's settings where the source gives them, and the
measured seconds per optimizer step (converted from tokens/s or TFLOP/s by the formula in the
row's `conversion` column). `request_for_run` maps a row to the one request schema with every
default it takes written down here; `validate_runs` prices every row and reports the fit and
held-out parts apart (the split is `sha256(id) % 3 == 0` → fit, fixed before any evaluation:
`benchmarks/split_published_runs.py`). The error is (predicted − measured) / measured step
time: negative means the model is too fast.
"""

from __future__ import annotations

import csv
import re
import statistics
from dataclasses import dataclass
from importlib import resources
from typing import Any

from bandwall.catalog.models import LOW_PRECISIONS
from bandwall.errors import ConfigError
from bandwall.model.vocab import RECOMPUTE_MODULES
from bandwall.planning.api import evaluate_points
from bandwall.planning.request import PlanRequest, make_request

RUNS_FILE = "published_runs.csv"

#: Source stack → the request's stack and the settings the stack implies when a row is silent.
#: Megatron-LM and NeMo/Megatron-Bridge use the distributed optimizer (ZeRO-1) by default in
#: their recipes; torchtitan, llm-foundry (FSDP) and MaxText shard everything (ZeRO-3);
#: DeepSpeed rows without a stage ran ZeRO-1 (MT-NLG, BLOOM).
STACKS: dict[str, tuple[str, int]] = {
    "megatron": ("megatron", 1),
    "nemo": ("megatron", 1),
    "megascale": ("megatron", 1),
    "other": ("megatron", 1),
    "torchtitan": ("fsdp2", 3),
    "fsdp": ("fsdp2", 3),
    "maxtext": ("maxtext", 3),
    "deepspeed": ("deepspeed", 1),
}


#: Source stacks whose published recipes overlap TP communication with the GEMMs whenever
#: tp > 1, so a row that leaves `tp_comm_overlap` blank ran with it: the NeMo launcher's GPT-3
#: configs (`sequence_parallel: True`, `ub_tp_comm_overlap: True`,
#: launcher_scripts/conf/training/gpt3/175b.yaml), NeMo 2's Llama 3 performance recipes
#: (MegatronCommOverlapCallback(tp_comm_overlap=True)) and Megatron-Bridge's performance
#: configs (CommOverlapConfig(tp_comm_overlap=True)).
TP_OVERLAP_STACKS = frozenset({"nemo"})


def request_stack(source_stack: str) -> tuple[str, int]:
    """(request stack, default ZeRO stage) a row's stack is priced with: `STACKS`, and
    Megatron's ZeRO-1 for a stack it does not name."""
    return STACKS.get(source_stack, ("megatron", 1))


def load_runs(text: str | None = None) -> list[dict[str, str]]:
    """The shipped rows (or those of `text`, a CSV of the same columns)."""
    if text is None:
        data = resources.files("bandwall.measure.calibrate").joinpath("data", RUNS_FILE)
        text = data.read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


def _cell(row: dict[str, str], key: str) -> str:
    return (row.get(key) or "").strip()


def _int(row: dict[str, str], key: str) -> int | None:
    value = _cell(row, key)
    return int(float(value)) if value else None


def _bool(row: dict[str, str], key: str) -> bool | None:
    value = _cell(row, key).lower()
    return None if not value else value in ("true", "1", "yes")


def fabric_for(scale_out: str, gpu: str) -> tuple[str, float | None]:
    """The catalog fabric (and NICs per node, when the text says) a row's scale-out text
    describes. A row that names only the system gets that system's fabric: DGX A100 8 × 200 Gb/s
    HDR, DGX H100/B200 and GB200 NVL72 trays 8 × 400 Gb/s NDR (ConnectX-7)."""
    t = re.sub(r"(?<=\d),(?=\d{3}\b)", "", scale_out.lower())  # 1,600 -> 1600
    # a negated transport ('no RDMA NIC', 'TCP, not RDMA') names what the link is not
    pos = re.sub(_NEGATED, " ", t)
    # Google Cloud's GPUDirect over TCP: A3 Mega (TCPXO, 8 data NICs), A3 High (TCPX, 4);
    # A3 Ultra and A4 are RoCE (below)
    if "tcpxo" in t or "a3 mega" in t or "a3-megagpu" in t:
        return "gcp-tcpxo", 8.0
    if "tcpx" in t or (re.search(r"\ba3\b", t) and "gcp" in t and not _RDMA_WORDS.search(pos)):
        return "gcp-tcpx", 4.0
    # a node's total as one figure, where no NIC count ('8x 200G', '8x ConnectX-7') says how
    # it is made up
    per_node = None if _NIC_COUNT.search(t) else _PER_NODE_GBPS.search(t)
    if "efa" in pos:
        efa = re.search(r"(\d+)\s*x\s*100\s*(?:gb(?:it)?(?:/s|ps)?|g)\b", t)
        total = float(per_node.group(1)) if per_node else None
        if "p5" in t or (total or 0) >= 1600 or (efa and int(efa.group(1)) > 4):
            # AWS p5: 32 x 100 Gb/s EFAv2 = 400 Gb/s per GPU
            return "efa-p5", (total / 400.0 if total else 8.0)
        if efa or total:  # AWS p4d/p4de: 4 x 100 Gb/s EFA per instance
            return "efa-p4d", float(efa.group(1)) if efa else (total or 400.0) / 100.0
    tcp = _tcp_fabric(pos)
    if tcp is not None:
        return tcp
    if per_node and not any(w in pos for w in ("roce", "rdma", "hdr", "ndr", "opa", "omni")):
        # a node total with no NIC count: NDR (400 Gb/s) or HDR (200 Gb/s) ports filling it
        total = float(per_node.group(1))
        port = 400.0 if total >= 400 and not gpu.startswith("A100") else 200.0
        return ("ib-ndr" if port == 400 else "ib-hdr"), max(1.0, total / port)
    if "omni-path" in t or "opa" in t:
        return "roce-100", 4.0
    if "roce" in t and "1600" in t:
        return "roce-200", 8.0
    if "roce" in t or "rdma" in t:
        return "roce-400", None
    if "hdr" in t:
        return "ib-hdr", None
    if "ndr" in t or "400" in t:
        return "ib-ndr", None
    return ("ib-hdr" if gpu.startswith("A100") else "ib-ndr"), None


_RATE = r"\d+(?:\.\d+)?\s*(?:gb(?:it)?/s|gbps|gbe|gbit|g)\b"
#: A node's scale-out total stated as one figure ('400 Gb/s per 8-GPU node').
_PER_NODE_GBPS = re.compile(
    r"(\d+(?:\.\d+)?)\s*gb(?:it)?(?:/s|ps)\s+(?:inter-node\s+)?per\s+(?:\d+-gpu\s+)?node"
)
_ETH_RATE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:gb(?:it)?/s|gbps|gbe|gbit|g\b)")
#: A NIC count: 'N x RATE' or 'N x <NIC name>' (not 'N x <GPU>' nor 'N x 24GB').
_NIC_COUNT = re.compile(
    rf"(\d+)\s*x\s*(?:{_RATE}|(?:bf3\s+)?connectx|cx-?\d|bluefield|nics?\b|hcas?\b|ib\b"
    r"|infiniband|ndr|hdr|xdr|efa|roce|ethernet)"
)
_NEGATED = re.compile(r"\b(?:no|not|without)\s+(?:an?\s+)?(?:rdma|roce|infiniband|efa)\b")
_RDMA_WORDS = re.compile(
    r"roce|rdma|efa|infiniband|\bib\b|\bndr\b|\bhdr\b|\bxdr\b|connectx|bf3|bluefield"
    r"|spectrum|gpudirect"
)


def _tcp_fabric(t: str) -> tuple[str, float | None] | None:
    """Plain Ethernet without RDMA (sockets): the catalog TCP tier nearest the stated rate (a
    cloud VPC tier when the text names a cloud or the rate is above 25 Gb/s, else co-located
    bare metal); None when the text names RDMA or no Ethernet."""
    if not any(w in t for w in ("ethernet", "gbe", "tcp")) or _RDMA_WORDS.search(t):
        return None
    rate = _ETH_RATE.search(t)
    if rate is None:
        return None
    gbps = float(rate.group(1))
    nics = re.search(rf"(\d+)\s*x\s*{_RATE}", t)
    count = float(nics.group(1)) if nics else 1.0
    if gbps > 25 or any(w in t for w in ("aws", "gcp", "azure", "vpc", "cloud")):
        return ("vpc-25g" if gbps <= 25 else "vpc-50g" if gbps <= 50 else "vpc-100g"), count
    return ("eth-10g-tcp" if gbps <= 10 else "eth-25g-tcp"), count


def _recompute(text: str) -> tuple[str | None, int | None]:
    """(recompute mode, layers) from the row's recompute text; '' lets the model choose
    (auto: just enough to fit)."""
    t = text.lower()
    if not t:
        return None, None
    if t.startswith("full:"):
        return "full", int(t.split(":", 1)[1].split()[0])
    if t.startswith("full"):
        return "full", None
    if t.startswith("none"):
        return "none", None
    if t.startswith("maxtext:"):  # MaxText's remat policy by name (minimal_flash: renamed)
        name = t.split(":", 1)[1].split()[0].replace("minimal_flash", "minimal_with_context")
        return name, None
    return "selective", None  # torchtitan op-level AC, Megatron selective


def _recompute_modules(text: str) -> str | None:
    """Megatron's recomputed submodules a selective row names ('selective (recompute_modules:
    mla_up_proj, mlp)', 'RecomputeModule mla_up_proj,mlp,moe'); None where it names none (core
    attention, the default)."""
    t = text.lower()
    if not t.startswith("selective") or "module" not in t:
        return None
    names = [m for m in RECOMPUTE_MODULES if re.search(rf"(?<![a-z_]){m}(?![a-z_])", t)]
    return ",".join(names) or None


def _fp8_recipe(text: str) -> str | None:
    t = text.lower()
    if not t:
        return None
    if "mxfp8" in t:
        return "mxfp8"
    if "rowwise" in t:  # torchao's rowwise; rowwise_with_gw_hp is priced as rowwise
        return "rowwise"
    if "1x128" in t or "block" in t or "fine-grained" in t:
        return "blockwise"
    if "current" in t or "dynamic" in t or "tensorwise" in t:
        return "current"
    return "delayed"


def _attention_kernel(row: dict[str, str]) -> str | None:
    """The attention kernel a row's stack text names, when it differs from its stack's
    default: MaxText on GPU runs cuDNN flash attention through TransformerEngine (FA3-class on
    Hopper), not PyTorch SDPA's FA2 like the other FSDP-style stacks."""
    text = (_cell(row, "stack_version") + " " + _cell(row, "notes")).lower()
    cudnn = "cudnn flash" in text or "cudnn_flash" in text  # MaxText's attention=cudnn_flash_te
    if cudnn and _cell(row, "gpu").startswith(("H100", "H200", "H800")):
        return "fa3"
    return None


def _model_fields(row: dict[str, str]) -> dict[str, Any]:
    """The model: the built-in DeepSeek-V3 for MLA rows (its attention is not a plain GQA
    shape), else a custom transformer of the row's dimensions."""
    seq = _int(row, "seq_len")
    if seq is None:
        raise ConfigError(f"run {row.get('id')!r} has no seq_len", field="reference")
    if _cell(row, "attention") == "mla":
        return {"model": "deepseek-v3", "seq_len": seq}
    layers, hidden, heads = _int(row, "layers"), _int(row, "hidden"), _int(row, "heads")
    head_dim = _int(row, "head_dim")
    fields: dict[str, Any] = {
        "model": "custom",
        "layers": layers,
        "hidden": hidden,
        "heads": heads,
        "kv_heads": _int(row, "kv_heads"),
        "ffn": _int(row, "ffn"),
        "vocab": _int(row, "vocab"),
        "seq_len": seq,
        "gated_mlp": bool(_bool(row, "gated_mlp")),
    }
    if head_dim and hidden and heads and head_dim * heads != hidden:
        fields["head_dim"] = head_dim
    experts = _int(row, "experts")
    if experts and experts > 1:
        moe_layers = _int(row, "moe_layers") or layers or 0
        fields |= {
            "experts": experts,
            "top_k": _int(row, "top_k"),
            "moe_ffn": _int(row, "moe_ffn"),
            "shared_experts": _int(row, "shared_experts") or 0,
            "dense_layers": (layers or 0) - moe_layers,
        }
    return fields


def _micro_batch(row: dict[str, str], stack: str) -> int:
    """The row's micro-batch, or the stack's default when the source gives none: torchtitan
    pipelines micro-batches of 1 (pipeline_parallel_microbatch_size) and otherwise runs the
    whole local batch at once (no accumulation); Megatron-style launch scripts of the sources
    here use 1."""
    given = _int(row, "micro_batch")
    if given:
        return given
    pp, gb = _int(row, "pp") or 1, _int(row, "global_batch") or 1
    dp = _int(row, "dp") or 1
    if stack == "fsdp2" and pp == 1:
        return max(gb // dp, 1)
    return 1


def _expert_tp(row: dict[str, str], tp: int) -> int:
    """The expert tensor-parallel size: the row's, else Megatron-Bridge's recipes' 1 (experts
    folded over tp x dp, set in every recipe), else Megatron-Core's default, the TP size
    (arguments.py: expert_tensor_parallel_size defaults to tensor_model_parallel_size; before
    core 0.10 experts were always split over the TP group)."""
    given = _int(row, "etp")
    if given:
        return given
    if (_int(row, "experts") or 1) <= 1:
        return 1  # dense: no experts to split
    return 1 if "megatron-bridge" in _cell(row, "source").lower() else tp


#: How sources state an expert all-to-all overlap (lower case).
EP_OVERLAP_WORDS = (
    "dualpipe",
    "overlap_moe_expert_parallel_comm",
    "overlap-moe-expert-parallel-comm",
    "moe_a2a_overlap",
    "ep comm overlap",
)


#: How sources state a node-deduplicating token dispatcher (lower case): DeepEP, Megatron's
#: HybridEP, and the flex dispatcher that runs them (--moe-token-dispatcher-type flex).
NODE_DISPATCH_WORDS = ("deepep", "hybridep", "flex dispatcher", "dispatcher-type flex")


#: How the sources say the compute weights are kept and all-gathered in fp8 (Megatron
#: --fp8-param-gather, NeMo model.fp8_params, MLPerf's FP8_PARAMS / FP8_PARAM_GATHER).
FP8_WEIGHT_WORDS = (
    "fp8_params true",
    "fp8_params=true",
    "fp8_param_gather=true",
    "fp8 param gather",
    "fp8 params)",
    "(fp8 weights)",
    "weights stored in fp8",  # MLPerf LoRA rows: "fp8_params=FP8=True (frozen base ...)"
)


def _fp8_weights(row: dict[str, str]) -> bool:
    """The row states fp8 weight storage (and says nothing against it)."""
    cells = ("fp8_recipe", "notes")
    return _states(row, FP8_WEIGHT_WORDS, cells) and not _states(row, ("no fp8 param",), cells)


def _states(
    row: dict[str, str],
    words: tuple[str, ...],
    cells: tuple[str, ...] = ("notes", "stack_version", "source"),
) -> bool:
    """The row's `cells` (its notes, stack version or source) name one of `words` (lower
    case)."""
    text = " ".join(_cell(row, k) for k in cells).lower()
    return any(word in text for word in words)


#: The GPU-hour price a validation row is priced at: cost plays no part in what it checks.
NOMINAL_PRICE_USD = 1.0


def request_for_run(row: dict[str, str]) -> PlanRequest:
    """The plan request that reproduces one published run (layout fixed as published)."""
    stack, zero = request_stack(_cell(row, "stack"))
    gpu = _cell(row, "gpu")
    fabric, nics = fabric_for(_cell(row, "scale_out"), gpu)
    recompute, recompute_layers = _recompute(_cell(row, "recompute"))
    tp = _int(row, "tp") or 1
    precision = _cell(row, "precision")
    fp8 = precision == "fp8"
    flash = _bool(row, "flash_attention")
    fields: dict[str, Any] = {
        **_model_fields(row),
        "gpu": gpu,
        "gpus": _int(row, "gpus"),
        "gpus_per_node": _int(row, "gpus_per_node"),
        "fabric": fabric,
        "nics_per_node": nics,
        "tp": tp,
        "pp": _int(row, "pp") or 1,
        "cp": _int(row, "cp") or 1,
        "ep": _int(row, "ep") or 1,
        "etp": _expert_tp(row, tp),
        "virtual_stages": _int(row, "virtual_stages") or 1,
        "zero": _int(row, "zero") if _cell(row, "zero") else zero,
        "micro_batch": _micro_batch(row, stack),
        "global_batch": _int(row, "global_batch"),
        "precision": precision if precision in LOW_PRECISIONS else "bf16",
        "fp8_recipe": _fp8_recipe(_cell(row, "fp8_recipe")) if fp8 else None,
        "fp8_weights": fp8 and _fp8_weights(row),
        "recompute": recompute,
        "recompute_layers": recompute_layers,
        "recompute_modules": _recompute_modules(_cell(row, "recompute")),
        "sequence_parallel": _bool(row, "sequence_parallel"),
        "overlap_grad_reduce": _bool(row, "overlap_grad_reduce"),
        "overlap_param_gather": _bool(row, "overlap_param_gather"),
        "tp_comm_overlap": _bool(row, "tp_comm_overlap"),
        "compile": _bool(row, "compile"),
        "flash_attention": flash,
        "attention_kernel": _attention_kernel(row),
        "stack": stack,
        # DeepSeek's DualPipe ("near-zero all-to-all overhead", DeepSeek-V3 report §3.2.1) and
        # Megatron-Core's batch-level EP overlap (--overlap-moe-expert-parallel-comm, MCore
        # v0.14; Megatron-Bridge's moe_a2a_overlap) run one micro-batch's expert all-to-alls
        # under another's compute: where the source states either, the request does
        "ep_overlap": 1.0 if _states(row, EP_OVERLAP_WORDS) else None,
        "moe_dispatcher": "deepep" if _states(row, NODE_DISPATCH_WORDS) else "alltoall",
        # LoRA fine-tuning (frozen base, adapters of this rank): a column of its own, blank
        # for pre-training rows (and absent from files written before it)
        "lora_rank": _int(row, "lora_rank"),
        "failures": False,
        # every row prices the same hour: cost plays no part in the step time
        "price_per_gpu_hour_usd": NOMINAL_PRICE_USD,
    }
    if tp == 1 or fields["sequence_parallel"] is False:
        fields["sequence_parallel"] = tp > 1 and fields["sequence_parallel"] is not False
    if (
        fields["tp_comm_overlap"] is None
        and tp > 1
        and _cell(row, "stack") in TP_OVERLAP_STACKS
        and fields["sequence_parallel"] is not False
    ):
        fields["tp_comm_overlap"] = True
    # --tp-comm-overlap needs sequence parallelism (Megatron asserts it): a row that names the
    # overlap and leaves SP blank ran with SP, which is also the request's default
    if fields["tp_comm_overlap"] and fields["sequence_parallel"] is False:
        fields["tp_comm_overlap"] = None
    return make_request(**fields)


@dataclass(frozen=True)
class RunResult:
    """One published run against the model."""

    id: str
    split: str
    stack: str
    gpu: str
    gpus: int
    precision: str
    moe: bool
    measured_step_s: float
    predicted_step_s: float
    mfu: float
    memory_ratio: float
    """Predicted memory over usable memory (> 1 + MEMORY_TOLERANCE: `plan` would refuse)."""

    @property
    def error(self) -> float:
        """(predicted − measured) / measured step time; negative: the model is too fast."""
        return self.predicted_step_s / self.measured_step_s - 1.0


def validate_runs(rows: list[dict[str, str]] | None = None) -> list[RunResult]:
    """Every row with a measured step time, priced at its published layout."""
    out = []
    for row in rows if rows is not None else load_runs():
        measured = _cell(row, "measured_step_s")
        if not measured:
            continue  # no unambiguous step time (the source gives no FLOP formula)
        # the published layout ran: price it as given, whatever the memory model says (how
        # much memory the model predicts is reported beside, `memory_ratio`)
        _, m, _ = evaluate_points(request_for_run(row), {})
        metrics = m.row(0)
        if not metrics["valid"]:
            raise ConfigError(f"run {row['id']!r}: its layout breaks rule {metrics['rule']}")
        out.append(
            RunResult(
                id=row["id"],
                split=_cell(row, "split"),
                stack=_cell(row, "stack"),
                gpu=_cell(row, "gpu"),
                gpus=_int(row, "gpus") or 0,
                precision=_cell(row, "precision"),
                moe=(_int(row, "experts") or 1) > 1,
                measured_step_s=float(measured),
                predicted_step_s=float(metrics["step_time_s"]),
                mfu=float(metrics["mfu"]),
                memory_ratio=float(metrics["memory_bytes"] / metrics["memory_capacity_bytes"]),
            )
        )
    return out


def summarize(results: list[RunResult]) -> dict[str, float]:
    """Median and mean |error|, the signed bias (median signed error) and the share within
    10%, over `results`."""
    if not results:
        return {"rows": 0}
    errors = [r.error for r in results]
    absolute = [abs(e) for e in errors]
    return {
        "rows": len(errors),
        "median_abs_error": statistics.median(absolute),
        "mean_abs_error": statistics.fmean(absolute),
        "max_abs_error": max(absolute),
        "bias": statistics.median(errors),
        "within_10pct": sum(a <= 0.10 for a in absolute) / len(absolute),
    }
