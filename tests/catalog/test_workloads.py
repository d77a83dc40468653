"""Parameter and FLOP counts against published values and hand-computed cases."""

from __future__ import annotations

import pytest

from bandwall.errors import ConfigError
from bandwall.workloads import custom_transformer, get_workload


@pytest.mark.parametrize(
    ("key", "total_b", "active_b", "tol"),
    [
        ("llama3-8b", 8.0, None, 0.01),  # Llama 3 Herd of Models, Table 3
        ("llama3-70b", 70.6, None, 0.01),
        ("llama3-405b", 405.0, None, 0.01),
        ("gpt3-175b", 175.0, None, 0.01),  # Brown et al. 2020, Table 2.1
        ("bert-large", 0.340, None, 0.03),  # Devlin et al. 2019
        ("mixtral-8x7b", 46.7, 12.9, 0.01),  # Jiang et al. 2024
        ("deepseek-v3", 671.0, 37.0, 0.02),  # DeepSeek-V3 report
        ("resnet50", 0.0256, None, 0.01),  # torchvision
    ],
)
def test_parameter_counts_match_published(
    key: str, total_b: float, active_b: float | None, tol: float
) -> None:
    w = get_workload(key)
    assert w.params / 1e9 == pytest.approx(total_b, rel=tol)
    if active_b is not None:
        assert w.active_params / 1e9 == pytest.approx(active_b, rel=tol)


def test_flops_per_token_hand_computed() -> None:
    # 2 layers, h=64, 4 heads (head_dim 16), plain MLP 256 wide, vocab 100 untied, seq 16
    w = custom_transformer(
        layers=2, hidden=64, heads=4, ffn=256, vocab=100, seq_len=16, gated_mlp=False
    )
    attn = 4 * 64 * 64  # Q, K, V, O
    mlp = 2 * 64 * 256
    norms = 4 * 64
    per_layer = attn + mlp + norms
    assert w.params == 2 * per_layer + 2 * 100 * 64
    matmul = 2 * per_layer + 100 * 64  # the input embedding is a lookup
    attention = 12 * 2 * 4 * 16 * 16
    assert w.flops_per_token == pytest.approx(6 * matmul + attention)


def test_gqa_shrinks_kv_projections_only() -> None:
    mha = custom_transformer(layers=1, hidden=4096, heads=32, vocab=10, seq_len=8)
    gqa = custom_transformer(layers=1, hidden=4096, heads=32, kv_heads=8, vocab=10, seq_len=8)
    assert mha.attention_params - gqa.attention_params == 2 * 4096 * (4096 - 1024)


def test_gpt3_flops_are_dominated_by_6n() -> None:
    w = get_workload("gpt3-175b")
    six_n = 6 * w.params
    assert w.flops_per_token == pytest.approx(six_n, rel=0.05)
    assert w.flops_per_token > six_n * 0.99  # attention adds on top


def test_custom_model_errors_name_the_field() -> None:
    with pytest.raises(ConfigError, match="missing --hidden"):
        custom_transformer(layers=2)
    with pytest.raises(ConfigError, match="not divisible by --heads 3") as exc:
        custom_transformer(layers=2, hidden=100, heads=3, vocab=10, seq_len=8)
    assert exc.value.field == "hidden"  # printed `model: Value error, hidden 100 ...`
    assert "Value error" not in str(exc.value)
    with pytest.raises(ConfigError, match="does not divide --heads 3") as kv:
        custom_transformer(layers=2, hidden=96, heads=3, kv_heads=2, vocab=10, seq_len=8)
    assert kv.value.field == "kv_heads"
    with pytest.raises(ConfigError, match="model: unknown value 'gpt5'"):
        get_workload("gpt5")
