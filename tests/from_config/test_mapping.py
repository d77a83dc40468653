"""The mapping rules, one case each, on small files written here (the real public files are
in test_real_configs.py): contradictions, overrides, unknown values, shell evaluation,
Megatron/HF/torchtitan/DeepSpeed/NeMo rules, and the report's width."""

from __future__ import annotations

from pathlib import Path

import pytest

from bandwall.errors import ConfigError
from bandwall.planning.from_config import read_configs
from bandwall.planning.from_config.megatron import dense_layers
from bandwall.planning.from_config.report import render
from bandwall.planning.from_config.shell import parse_script

MEGATRON = """#!/bin/bash
torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py \\
    --num-layers 32 --hidden-size 4096 --num-attention-heads 32 \\
    --seq-length 4096 --vocab-size 32000 --micro-batch-size 1 --global-batch-size 256 \\
    --tensor-model-parallel-size 2 --bf16 {extra}
"""


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _fields(*paths: str, **given: object) -> dict[str, object]:
    return read_configs(paths, given).merged(given)


def test_a_flag_given_twice_with_two_values_names_both_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, "job.sh", MEGATRON.format(extra="\\\n  --tensor-model-parallel-size 4"))
    with pytest.raises(ConfigError) as exc:
        read_configs([path])
    reason = exc.value.reason
    assert "job.sh:6 --tensor-model-parallel-size=4 contradicts" in reason
    assert "job.sh:5 --tensor-model-parallel-size=2" in reason


def test_two_files_that_disagree_name_both(tmp_path: Path) -> None:
    script = _write(tmp_path, "job.sh", MEGATRON.format(extra=""))
    hf = _write(tmp_path, "config.json", '{"model_type": "llama", "num_hidden_layers": 40}')
    with pytest.raises(ConfigError) as exc:
        read_configs([script, hf])
    reason = exc.value.reason
    assert "config.json:1 num_hidden_layers=40" in reason and "job.sh:3 --num-layers=32" in reason


def test_files_that_agree_list_both_sources(tmp_path: Path) -> None:
    script = _write(tmp_path, "job.sh", MEGATRON.format(extra=""))
    hf = _write(tmp_path, "config.json", '{"model_type": "llama", "num_hidden_layers": 32}')
    result = read_configs([script, hf])
    layers = next(a for a in result.read if a.field == "layers")
    assert {s.file.rsplit("/", 1)[-1] for s in layers.sources} == {"job.sh", "config.json"}


def test_the_command_line_overrides_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "job.sh", MEGATRON.format(extra=""))
    result = read_configs([path], {"tp": "8"})
    assert result.merged({"tp": "8"})["tp"] == "8" and "tp" in result.overridden
    assert any("the command line overrides: --tp" in ln for ln in render(result))


def test_megatron_recompute_modules(tmp_path: Path) -> None:
    """--recompute-modules (nargs) maps to the request's comma-joined names under selective
    recomputation; a name Megatron-Core does not have names the file line."""
    extra = "--recompute-granularity selective --recompute-modules mlp layernorm"
    f = _fields(_write(tmp_path, "job.sh", MEGATRON.format(extra=extra)))
    assert (f["recompute"], f["recompute_modules"]) == ("selective", "layernorm,mlp")
    bad = "--recompute-granularity selective --recompute-modules attn"
    with pytest.raises(
        ConfigError, match=r"job.sh:\d+: --recompute-modules: unknown module 'attn'"
    ):
        _fields(_write(tmp_path, "job.sh", MEGATRON.format(extra=bad)))


def test_megatron_fields_and_defaults(tmp_path: Path) -> None:
    extra = (
        "--recompute-granularity full --recompute-method block --recompute-num-layers 4 "
        "--group-query-attention --num-query-groups 8 --swiglu --use-distributed-optimizer "
        "--overlap-grad-reduce"
    )
    f = _fields(_write(tmp_path, "job.sh", MEGATRON.format(extra=extra)))
    assert (f["gpus"], f["gpus_per_node"], f["tp"], f["pp"], f["cp"]) == (16, 8, 2, 1, 1)
    assert (f["recompute"], f["recompute_layers"], f["kv_heads"], f["zero"]) == ("full", 4, 8, 1)
    assert f["gated_mlp"] is True and f["overlap_grad_reduce"] is True
    assert f["overlap_param_gather"] is False and f["sequence_parallel"] is False  # defaults
    # vocab padded to a multiple of 128 × tp (Megatron's _vocab_size_with_padding)
    assert f["vocab"] == 32000 and f["model"] == "custom" and f["precision"] == "bf16"


def test_megatron_fsdp2_and_fp8_recipe(tmp_path: Path) -> None:
    extra = "--use-torch-fsdp2 --fp8-format e4m3 --fp8-recipe tensorwise"
    f = _fields(_write(tmp_path, "job.sh", MEGATRON.format(extra=extra)))
    assert (f["zero"], f["stack"], f["precision"], f["fp8_recipe"]) == (
        3,
        "fsdp2",
        "fp8",
        "current",
    )


def test_megatron_fp4_format_is_nvfp4(tmp_path: Path) -> None:
    """--fp4-format e2m1 (Megatron-LM's dest fp4) with its one recipe, nvfp4, prices the run at
    --precision fp4; an fp4 format Megatron does not offer names the line."""
    extra = "--fp4-format e2m1 --fp4-recipe nvfp4"
    f = _fields(_write(tmp_path, "job.sh", MEGATRON.format(extra=extra)))
    assert f["precision"] == "fp4" and "fp8_recipe" not in f
    bad = _write(tmp_path, "job.sh", MEGATRON.format(extra="--fp4-format e3m0"))
    with pytest.raises(ConfigError, match=r"job.sh:5: --fp4-format: unknown value 'e3m0'"):
        read_configs([bad])


def test_unknown_value_names_file_line_and_choices(tmp_path: Path) -> None:
    path = _write(tmp_path, "job.sh", MEGATRON.format(extra="--fp8-format e5m2"))
    with pytest.raises(ConfigError) as exc:
        read_configs([path])
    assert "job.sh:5: --fp8-format: unknown value 'e5m2'; allowed: e4m3, hybrid" in str(exc.value)


def test_fp32_is_refused_unless_the_command_line_prices_it(tmp_path: Path) -> None:
    path = _write(tmp_path, "job.sh", MEGATRON.format(extra="").replace("--bf16", ""))
    with pytest.raises(ConfigError, match="trains in fp32"):
        read_configs([path])
    assert _fields(path, precision="bf16")["precision"] == "bf16"


def test_unresolved_variable_asks_for_the_option(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "job.sh", MEGATRON.format(extra="").replace("--nnodes 2", "--nnodes $N")
    )
    with pytest.raises(ConfigError, match=r"job.sh:2: --nnodes: .*\$N.*give --gpus"):
        read_configs([path])
    assert _fields(path, gpus="16")["gpus"] == "16"


def test_shell_branches_arithmetic_and_defaults() -> None:
    script = parse_script(
        [
            "NODES=${NODES:-3}",
            "PER=$((2*4))",
            'DTYPE="bf16"',
            'if [[ "$DTYPE" == "fp8" ]]; then',
            '  EXTRA="--fp8-format hybrid"',
            "  echo --fp8-format hybrid",
            "else",
            "  X=1",
            "fi",
            "if [ -f /nowhere ]; then",
            "  --bf16",
            "fi",
            "torchrun --nnodes $NODES --nproc_per_node $PER train.py",
            "case $1 in",
            "  --num-layers) shift ;;",
            "esac",
            "cat <<EOT > ds.json",
            '{"train_batch_size": 8}',
            "EOT",
        ]
    )
    flags = {f.name: f for f in script.flags}
    assert flags["nnodes"].values == ["3"] and flags["nproc_per_node"].values == ["8"]
    assert flags["nnodes"].program == "torchrun"
    assert "fp8_format" not in flags  # the branch not taken
    assert flags["bf16"].conditional  # a test bandwall cannot evaluate: read, and said so
    assert "num_layers" not in flags and "train_batch_size" not in flags
    assert [n for _, n in script.notes] == [
        "case block not read (argument parsing)",
        "heredoc <<EOT not read",
    ]


def test_huggingface_moe_shapes(tmp_path: Path) -> None:
    """Mixtral's keys (num_local_experts, num_experts_per_tok) and DeepSeek-V3's (MLA widths,
    n_shared_experts, first_k_dense_replace, moe_intermediate_size)."""
    mixtral = _write(
        tmp_path,
        "mixtral.json",
        '{"model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 32, '
        '"num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, '
        '"vocab_size": 32000, "num_local_experts": 8, "num_experts_per_tok": 2}',
    )
    f = _fields(mixtral, seq_len="4096")
    assert (f["experts"], f["top_k"], f["kv_heads"], f["gated_mlp"], f["ffn"]) == (
        8,
        2,
        8,
        True,
        14336,
    )
    deepseek = _write(
        tmp_path,
        "ds.json",
        '{"model_type": "deepseek_v3", "hidden_size": 7168, "num_hidden_layers": 61, '
        '"num_attention_heads": 128, "intermediate_size": 18432, "moe_intermediate_size": 2048, '
        '"n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8, '
        '"first_k_dense_replace": 3, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, '
        '"v_head_dim": 128, "kv_lora_rank": 512, "vocab_size": 129280}',
    )
    f = _fields(deepseek)
    assert (f["experts"], f["moe_ffn"], f["shared_experts"], f["dense_layers"]) == (256, 2048, 1, 3)
    assert f["head_dim"] == 192 and f["gated_mlp"] is True


def test_qwen_shared_expert_width_becomes_a_count(tmp_path: Path) -> None:
    qwen = _write(
        tmp_path,
        "qwen.json",
        '{"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24, '
        '"num_attention_heads": 16, "intermediate_size": 5632, "moe_intermediate_size": 1408, '
        '"shared_expert_intermediate_size": 5632, "num_experts": 60, "num_experts_per_tok": 4, '
        '"vocab_size": 151936}',
    )
    assert _fields(qwen)["shared_experts"] == 4


def test_unknown_model_family_asks_about_the_mlp(tmp_path: Path) -> None:
    odd = _write(
        tmp_path,
        "odd.json",
        '{"model_type": "mystery", "hidden_act": "silu", "hidden_size": 64, '
        '"num_hidden_layers": 2, "num_attention_heads": 2}',
    )
    with pytest.raises(ConfigError, match="--gated-mlp or --no-gated-mlp"):
        read_configs([odd])


@pytest.mark.parametrize(
    ("freq", "layers", "dense"),
    [("1", 61, 0), ("([0]*3+[1]*58)", 61, 3), ("[0,1,1,1]", 4, 1), ("[1, 1]", 2, 0)],
)
def test_moe_layer_freq(freq: str, layers: int, dense: int) -> None:
    assert dense_layers(freq, layers) == dense


@pytest.mark.parametrize("freq", ["2", "[1,0,1]", "[0,1,x]", "[0]*" + "9" * 30])
def test_moe_layer_freq_not_expressible(freq: str) -> None:
    with pytest.raises(ValueError):
        dense_layers(freq, None)


def test_torchtitan_old_keys_and_degrees_give_the_gpus(tmp_path: Path) -> None:
    toml = _write(
        tmp_path,
        "job.toml",
        '[model]\nname = "llama3"\nflavor = "70B"\n[training]\nbatch_size = 2\nseq_len = 4096\n'
        "tensor_parallel_degree = 8\ndata_parallel_shard_degree = 4\n"
        '[activation_checkpoint]\nmode = "full"\n[float8]\nenable_float8_linear = true\n',
    )
    f = _fields(toml)
    assert (f["gpus"], f["tp"], f["zero"], f["micro_batch"], f["global_batch"]) == (32, 8, 3, 2, 8)
    assert (f["model"], f["recompute"], f["precision"]) == ("llama3-70b", "full", "fp8")


def test_torchtitan_unknown_flavour_points_to_a_config_json(tmp_path: Path) -> None:
    toml = _write(tmp_path, "job.toml", '[model]\nname = "llama3"\nflavor = "debugmodel"\n')
    with pytest.raises(ConfigError, match=r"config\.json"):
        read_configs([toml])


def test_deepspeed_auto_values_and_the_batch_rule(tmp_path: Path) -> None:
    auto = _write(
        tmp_path,
        "ds.json",
        '{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", '
        '"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 3}}',
    )
    f = _fields(auto)
    assert f["zero"] == 3 and "global_batch" not in f and f["overlap_grad_reduce"] is True
    bad = _write(
        tmp_path,
        "bad.json",
        '{"train_batch_size": 30, "train_micro_batch_size_per_gpu": 4, '
        '"gradient_accumulation_steps": 2, "bf16": {"enabled": true}}',
    )
    with pytest.raises(ConfigError, match=r"bad\.json:1: train_batch_size: .*DeepSpeed asserts"):
        read_configs([bad])
    stage = _write(
        tmp_path, "stage.json", '{"zero_optimization": {"stage": 5}, "bf16": {"enabled": true}}'
    )
    with pytest.raises(ConfigError, match=r"stage\.json:1: zero_optimization\.stage: ZeRO stage"):
        read_configs([stage])


def test_megatron_arguments_dump_in_a_log(tmp_path: Path) -> None:
    log = _write(
        tmp_path,
        "train.log",
        "using world size: 16, data-parallel size: 8\n"
        "------------------------ arguments ------------------------\n"
        "  bf16 ............................................ True\n"
        "  fp8 ............................................. None\n"
        "  global_batch_size ............................... 512\n"
        "  hidden_size ..................................... 2048\n"
        "  micro_batch_size ................................ 2\n"
        "  num_attention_heads ............................. 16\n"
        "  num_layers ...................................... 24\n"
        "  padded_vocab_size ............................... 50304\n"
        "  seq_length ...................................... 2048\n"
        "  sequence_parallel ............................... False\n"
        "  tensor_model_parallel_size ...................... 2\n"
        "  world_size ...................................... 16\n"
        "-------------------- end of arguments ---------------------\n"
        " iteration 10/ 100 | elapsed time per iteration (ms): 812.3 |\n",
    )
    f = _fields(log)
    assert (f["gpus"], f["tp"], f["micro_batch"], f["global_batch"], f["vocab"]) == (
        16,
        2,
        2,
        512,
        50304,
    )
    assert f["precision"] == "bf16" and f["sequence_parallel"] is False


def test_nemo_fp8_hybrid_and_fp32(tmp_path: Path) -> None:
    base = "trainer:\n  num_nodes: 1\n  devices: 8\n  precision: {p}\nmodel:\n  num_layers: 2\n"
    base += "  hidden_size: 64\n  num_attention_heads: 4\n  encoder_seq_length: 128\n"
    base += "  micro_batch_size: 1\n  global_batch_size: 8\n  tokenizer:\n    type: gpt2\n"
    yaml = _write(
        tmp_path, "a.yaml", base.format(p="bf16-mixed") + "  fp8: true\n  fp8_hybrid: true\n"
    )
    f = _fields(yaml)
    assert (f["precision"], f["fp8_recipe"], f["vocab"], f["gpus"]) == ("fp8", "delayed", 50304, 8)
    fp32 = _write(tmp_path, "b.yaml", base.format(p=32))
    with pytest.raises(ConfigError, match="fp32"):
        read_configs([fp32])


def test_report_fits_80_columns() -> None:
    configs = Path(__file__).resolve().parents[1] / "data" / "configs"
    for files, given in (
        ([configs / "nemo" / "llama3_1_70b.yaml"], {}),
        ([configs / "megatron" / "tr11-176B-ml.slurm"], {}),
    ):
        lines = render(read_configs([str(f) for f in files], given))
        assert lines and max(len(ln) for ln in lines) <= 80
