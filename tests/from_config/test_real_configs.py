"""`bandwall plan --from` on real public configs (tests/data/configs/README.md gives each
file's source and date): the plan reproduces the layout, batch, precision and parallel
settings the file states, and the report accounts for every key of every file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bandwall.planning.from_config import read_configs, read_file

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"


def _files(*names: str) -> list[str]:
    return [str(CONFIGS / n) for n in names]


def _plan(run_cli, files: list[str], *options: str) -> tuple[dict, str]:  # type: ignore[no-untyped-def]
    args = ["plan", *(a for f in files for a in ("--from", f)), *options, "--json"]
    r = run_cli(*args)
    assert r.code == 0, r.err
    return json.loads(r.out), r.err


def test_megatron_llama3_8b_fp8_script(run_cli) -> None:  # type: ignore[no-untyped-def]
    """examples/llama/train_llama3_8b_h100_fp8.sh: TP_SIZE=1 CP_SIZE=1 (pp commented out),
    MICRO_BATCH_SIZE=1 GLOBAL_BATCH_SIZE=128, 1 node × 8 (torchrun), --fp8-format hybrid,
    --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather, no
    recomputation."""
    files = _files("megatron/train_llama3_8b_h100_fp8.sh")
    d, err = _plan(run_cli, files, "--gpu", "H100-SXM")
    lay = d["layout"]
    assert (lay["tp"], lay["pp"], lay["cp"], lay["dp"]) == (1, 1, 1, 8)
    assert (lay["micro_batch"], lay["global_batch"], lay["zero"]) == (1, 128, 1)
    req = d["request"]
    assert req["precision"] == "fp8" and req["fp8_recipe"] == "delayed"
    assert req["overlap_grad_reduce"] is True and req["overlap_param_gather"] is True
    assert req["model"] == "custom" and req["layers"] == 32 and req["kv_heads"] == 8
    assert req["head_dim"] == 128 and req["vocab"] == 128256 and req["seq_len"] == 8192
    assert req["reduce_dtype"] == "bf16" and req["gated_mlp"] is True
    assert lay["recompute"] == "none"
    assert "--fp8-recipe delayed (Megatron-LM's --fp8-recipe default)" in err
    # every ignored key is named with its line
    ignored = read_configs(files, {"gpu": "H100-SXM"}).ignored
    assert f"ignored ({len(ignored)} settings" in err and len(ignored) > 40
    for key in (":86 --lr", ":138 --tokenizer-type", ":50 --node_rank", ":65"):
        assert key in err.replace("\n    ", " ")


def test_bloom_176b_megatron_deepspeed_slurm(run_cli) -> None:  # type: ignore[no-untyped-def]
    """tr11-176B-ml.slurm: #SBATCH --nodes=48, GPUS_PER_NODE=8, TP_SIZE=4 PP_SIZE=12,
    MICRO_BATCH_SIZE=2 GLOBAL_BATCH_SIZE=2048, --bf16, --checkpoint-activations, ZeRO stage
    0 with bf16 (the script: "bf16 must use z0! it implements its own zero stage 1
    equivalent"), --pad-vocab-size-to 250880, 70 layers × 14336 × 112 heads, seq 2048."""
    d, err = _plan(run_cli, _files("megatron/tr11-176B-ml.slurm"), "--gpu", "A100-SXM-80GB")
    lay = d["layout"]
    assert (lay["tp"], lay["pp"], lay["dp"], lay["zero"]) == (4, 12, 8, 1)
    assert (lay["micro_batch"], lay["global_batch"], lay["recompute"]) == (2, 2048, "full")
    req = d["request"]
    assert req["gpus"] == 384 and req["stack"] == "deepspeed"
    assert (req["layers"], req["hidden"], req["heads"], req["vocab"]) == (70, 14336, 112, 250880)
    assert "precision" not in req  # bf16 is the default: exclude_defaults leaves it out
    flat = " ".join(err.split())  # the report wraps at the terminal width
    assert "note: " in err and "heredoc <<EOT not read" in flat


def test_nemo_llama3_1_70b_recipe(run_cli) -> None:  # type: ignore[no-untyped-def]
    """llama3_1_70b.yaml: 128 nodes × 8 devices, tp 4 pp 4 vp 10 cp 2, mbs 1 gbs 2048, seq
    8192, bf16, mcore_distributed_optim with overlap_grad_sync / overlap_param_sync,
    sequence_parallel, ub_tp_comm_overlap, no activation checkpointing, 80 layers, hidden
    8192, ffn 28672, 64 heads, 8 query groups, fast-swiglu."""
    d, err = _plan(run_cli, _files("nemo/llama3_1_70b.yaml"), "--gpu", "H100-SXM")
    lay = d["layout"]
    assert (lay["tp"], lay["pp"], lay["cp"], lay["dp"], lay["virtual_stages"]) == (4, 4, 2, 32, 10)
    assert (lay["micro_batch"], lay["global_batch"], lay["zero"]) == (1, 2048, 1)
    assert lay["recompute"] == "none" and lay["schedule"] == "interleaved"
    req = d["request"]
    # sequence parallelism on is bandwall's default too, so the JSON request omits it
    assert req["gpus"] == 1024 and req.get("sequence_parallel", True) is True
    assert req["tp_comm_overlap"] is True and req["overlap_param_gather"] is True
    assert (req["layers"], req["hidden"], req["ffn"], req["heads"], req["kv_heads"]) == (
        80,
        8192,
        28672,
        64,
        8,
    )
    # the tokenizer names Llama 3 (128,256 tokens), padded as Megatron does for tp 4
    assert req["vocab"] == 128512
    assert "llama3_1_70b.yaml:60 model.tensor_model_parallel_size" in err


def test_torchtitan_toml_with_its_slurm_script(run_cli) -> None:  # type: ignore[no-untyped-def]
    """llama3_8b.toml (2025-03-04) + 1.llama_3_8b_torchtitan.sh: #SBATCH --nodes=4,
    GPUS_PER_NODE=8; batch_size 1, seq 8192, data_parallel_shard_degree -1 (FSDP over all
    32), tp 1, cp 1, pp 1, selective AC (op), compile false, bf16 (torchtitan's default)."""
    files = _files("torchtitan/llama3_8b.toml", "torchtitan/1.llama_3_8b_torchtitan.sh")
    d, err = _plan(run_cli, files, "--gpu", "H100-SXM")
    lay = d["layout"]
    assert (lay["tp"], lay["pp"], lay["cp"], lay["dp"], lay["zero"]) == (1, 1, 1, 32, 3)
    assert (lay["micro_batch"], lay["global_batch"], lay["recompute"]) == (1, 32, "selective")
    req = d["request"]
    assert d["model"] == "llama3-8b" and req["stack"] == "fsdp2" and req["gpus"] == 32
    assert "--nnodes" in err and "experimental.context_parallel_degree" in err


def test_torchtitan_overrides_on_the_torchrun_line(run_cli) -> None:  # type: ignore[no-untyped-def]
    """The June 2025 TOML under the benchmark's torchrun line: --training.local_batch_size=2,
    --training.compile, --model.converters=float8 override the file; $NUM_NODES (4 in the
    benchmark) comes from the command line."""
    files = _files("torchtitan/llama3_8b_2025-06.toml", "torchtitan/trainy_h200_torchrun.sh")
    d, err = _plan(run_cli, files, "--gpus", "32", "--gpu", "H200")
    lay = d["layout"]
    assert (lay["dp"], lay["micro_batch"], lay["global_batch"]) == (32, 2, 64)
    req = d["request"]
    assert req["precision"] == "fp8" and req["compile"] is True and req["fp8_recipe"] == "current"
    assert "overridden by trainy_h200_torchrun.sh" not in err  # report names the file basename
    assert "training.local_batch_size=1" not in err or "overridden by" in err


def test_huggingface_config_deepspeed_json_and_launch(run_cli) -> None:  # type: ignore[no-untyped-def]
    """BERT-large config.json + deepspeed_bsz24_config.json (train_batch_size 24, micro 3,
    fp16) + run_squad_deepspeed.sh (--num_gpus $1: given here as 8, --max_seq_length 384)."""
    files = _files(
        "hf/bert-large-uncased-whole-word-masking-config.json",
        "deepspeed/deepspeed_bsz24_config.json",
        "deepspeed/run_squad_deepspeed.sh",
    )
    d, err = _plan(run_cli, files, "--gpus", "8")
    lay = d["layout"]
    assert (lay["dp"], lay["micro_batch"], lay["global_batch"], lay["zero"]) == (8, 3, 24, 0)
    req = d["request"]
    assert (req["layers"], req["hidden"], req["heads"], req["ffn"], req["vocab"]) == (
        24,
        1024,
        16,
        4096,
        30522,
    )
    assert req["seq_len"] == 384 and req["stack"] == "deepspeed"
    assert "gated_mlp" not in req  # BERT's MLP is not gated (the default)
    assert "fp16 priced as bf16" in err
    assert "the command line gives --gpus" in err  # $1 settled by --gpus, and listed


def test_deepspeed_zero2_offload(run_cli) -> None:  # type: ignore[no-untyped-def]
    """zf_config.json: ZeRO stage 2, offload_optimizer cpu, train_batch_size 8, bf16."""
    files = _files(
        "deepspeed/zf_config.json", "hf/bert-large-uncased-whole-word-masking-config.json"
    )
    d, _ = _plan(run_cli, files, "--gpus", "8", "--seq-len", "512")
    lay = d["layout"]
    assert (lay["zero"], lay["global_batch"], lay["micro_batch"]) == (2, 8, 1)
    assert d["request"]["offload_optimizer"] is True


SETS = [
    (["megatron/train_llama3_8b_h100_fp8.sh"], {}),
    (["megatron/tr11-176B-ml.slurm"], {}),
    (["nemo/llama3_1_70b.yaml"], {}),
    (["torchtitan/llama3_8b.toml", "torchtitan/1.llama_3_8b_torchtitan.sh"], {}),
    (["torchtitan/llama3_8b_2025-06.toml", "torchtitan/trainy_h200_torchrun.sh"], {"gpus": "32"}),
    (
        [
            "hf/bert-large-uncased-whole-word-masking-config.json",
            "deepspeed/deepspeed_bsz24_config.json",
            "deepspeed/run_squad_deepspeed.sh",
        ],
        {"gpus": "8"},
    ),
    (["deepspeed/bf16_full.json"], {"gpus": "8"}),
    (["deepspeed/zf_config.json"], {}),
]


@pytest.mark.parametrize(("names", "given"), SETS, ids=[s[0][0] for s in SETS])
def test_every_key_is_read_defaulted_or_ignored(names: list[str], given: dict) -> None:
    """Nothing silently dropped: each entry of each file is a source of a field the plan uses
    or is in the ignored list with a reason."""
    files = _files(*names)
    result = read_configs(files, given)
    entries = [e for f in files for e in read_file(f)[1]]
    accounted = {s for a in result.read for s in a.sources} | {i.src for i in result.ignored}
    missing = [e.src.describe() for e in entries if e.src not in accounted]
    assert entries and not missing
    assert all(i.reason for i in result.ignored)
