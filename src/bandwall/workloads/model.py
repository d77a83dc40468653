"""Workloads: parameter counts, FLOPs per token and the bytes each parallel dimension moves.

Counts follow the standard accounting (Narayanan et al. 2021; Korthikanti et al. 2022; PaLM
appendix B): training FLOPs per token = 6 × (non-embedding parameters that a token uses + the LM
head) + 12 × layers × heads × head_dim × seq_len for attention scores and values.
"""

from __future__ import annotations

import datetime as dt
import tomllib
from functools import cache
from importlib import resources
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from bandwall.errors import CatalogError, ConfigError, unknown_choice

#: Activation bytes per token per layer with selective recomputation and sequence parallelism:
#: 34·h (Korthikanti et al. 2022, eq. 2 without the 5·a·s/h term that flash attention removes).
ACTIVATION_BYTES_PER_TOKEN_PER_HIDDEN = 34


class DimensionMismatchError(ValueError):
    """Two dimensions that do not fit together: `field` is the one a user changes, `reason`
    says why in the options' own words (`--hidden 100 is not divisible by --heads 3`)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"--{field.replace('_', '-')} {reason}")
        self.field, self.reason = field, reason


class Transformer(BaseModel):
    """A dense or MoE decoder/encoder transformer described by its dimensions."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["transformer"] = "transformer"
    key: str = "custom"
    name: str = "custom transformer"
    layers: int = Field(ge=1)
    hidden: int = Field(ge=1)
    heads: int = Field(ge=1)
    kv_heads: int | None = Field(default=None, ge=1, description="GQA/MQA key-value heads.")
    head_size: int | None = Field(
        default=None, ge=1, description="Attention head dimension when not hidden / heads."
    )
    ffn: int | None = Field(default=None, ge=1, description="MLP width (default 4·hidden).")
    moe_ffn: int | None = Field(default=None, ge=1, description="Expert MLP width (default ffn).")
    vocab: int = Field(ge=1)
    seq_len: int = Field(ge=1)
    experts: int = Field(default=1, ge=1, description="Routed experts per MoE layer (1 = dense).")
    shared_experts: int = Field(default=0, ge=0)
    top_k: int = Field(default=1, ge=1)
    dense_layers: int = Field(default=0, ge=0, description="Leading layers with a dense MLP.")
    gated_mlp: bool = Field(default=True, description="SwiGLU-style MLP with 3 matrices.")
    decoder: bool = Field(
        default=True, description="Generates tokens (causal); false for encoders like BERT."
    )
    tied_embeddings: bool = False
    attention_params_per_layer: int | None = Field(
        default=None, ge=1, description="Override for non-standard attention (e.g. MLA)."
    )
    published_params_b: float | None = None
    published_active_params_b: float | None = None
    source: str = "user input"
    as_of: dt.date | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Transformer:
        if self.head_size is None and self.hidden % self.heads:
            raise DimensionMismatchError(
                "hidden",
                f"{self.hidden} is not divisible by --heads {self.heads} (or give --head-dim)",
            )
        if self.kv_heads is not None and self.heads % self.kv_heads:
            raise DimensionMismatchError(
                "kv_heads", f"{self.kv_heads} does not divide --heads {self.heads}"
            )
        if self.top_k > self.experts:
            raise DimensionMismatchError("top_k", f"{self.top_k} exceeds --experts {self.experts}")
        if self.dense_layers > self.layers:
            raise DimensionMismatchError(
                "dense_layers", f"{self.dense_layers} exceeds --layers {self.layers}"
            )
        return self

    # --- dimensions -------------------------------------------------------------------------
    @property
    def head_dim(self) -> int:
        return self.head_size or self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        """Width of the queries (and of the attention output): heads × head_dim."""
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return (self.kv_heads or self.heads) * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.is_moe else 0

    def _mlp_params(self, width: int) -> int:
        return (3 if self.gated_mlp else 2) * self.hidden * width

    @property
    def attention_params(self) -> int:
        """Per layer: Q and O projections at the query width plus K and V at the key-value
        width."""
        if self.attention_params_per_layer is not None:
            return self.attention_params_per_layer
        return 2 * self.hidden * self.q_dim + 2 * self.hidden * self.kv_dim

    @property
    def dense_mlp_params(self) -> int:
        return self._mlp_params(self.ffn or 4 * self.hidden)

    @property
    def expert_params(self) -> int:
        """Parameters of one routed expert."""
        return self._mlp_params(self.moe_ffn or self.ffn or 4 * self.hidden)

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    # --- counts -----------------------------------------------------------------------------
    @property
    def routed_expert_params(self) -> int:
        """All routed-expert parameters: the part expert parallelism shards."""
        return self.moe_layers * self.experts * self.expert_params

    @property
    def params(self) -> int:
        """Total parameters (embeddings included)."""
        dense_layers = self.layers - self.moe_layers
        per_moe_layer = (
            self.shared_experts * self.expert_params + self.hidden * self.experts
        )  # router
        return (
            self.layers * (self.attention_params + 4 * self.hidden)  # + norms
            + dense_layers * self.dense_mlp_params
            + self.moe_layers * per_moe_layer
            + self.routed_expert_params
            + self.embedding_params
        )

    @property
    def active_params(self) -> int:
        """Parameters one token touches: the top-k routed experts only."""
        unused = self.moe_layers * (self.experts - self.top_k) * self.expert_params
        return self.params - unused

    @property
    def flops_per_token(self) -> float:
        """Training FLOPs per token: 6 × matmul parameters used + attention (PaLM, app. B).

        The input embedding is a lookup, not a matmul, so it is left out; the LM head stays.
        """
        matmul_params = self.active_params - self.vocab * self.hidden
        if self.tied_embeddings:
            matmul_params += self.vocab * self.hidden  # the tied matrix is the LM head too
        attention = 12 * self.layers * self.heads * self.head_dim * self.seq_len
        return 6.0 * matmul_params + attention

    @property
    def attention_flops_fraction(self) -> float:
        attention = 12 * self.layers * self.heads * self.head_dim * self.seq_len
        return attention / self.flops_per_token

    @property
    def samples_are_tokens(self) -> bool:
        return True

    def activation_bytes_per_token_per_layer(self) -> float:
        return ACTIVATION_BYTES_PER_TOKEN_PER_HIDDEN * self.hidden


class Cnn(BaseModel):
    """A convolutional network described by measured per-sample figures."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["cnn"] = "cnn"
    key: str
    name: str
    params: int = Field(ge=1)
    forward_gflops_per_sample: float = Field(gt=0)
    activation_bytes_per_sample: float = Field(gt=0, description="Activations kept per image.")
    traffic_bytes_per_sample: float = Field(
        gt=0, description="HBM traffic per image for forward + backward (memory-bound layers)."
    )
    kernels_per_step: float = Field(gt=0, description="Kernels launched per micro-batch step.")
    compute_efficiency: Annotated[float, Field(gt=0, le=1)] = Field(
        description="Share of the GPU's achieved GEMM rate the convolutions reach."
    )
    dataset_samples: int = Field(ge=1)
    published_params_b: float | None = None
    source: str
    as_of: dt.date

    @property
    def active_params(self) -> int:
        return self.params

    @property
    def flops_per_sample(self) -> float:
        """Training ≈ 3 × forward (backward costs twice the forward)."""
        return 3.0 * self.forward_gflops_per_sample * 1e9


Workload = Transformer | Cnn


@cache
def builtin_workloads() -> dict[str, Workload]:
    text = resources.files("bandwall.workloads").joinpath("data", "models.toml").read_text()
    data = tomllib.loads(text)
    out: dict[str, Workload] = {}
    try:
        for row in data.get("transformer", []):
            t = Transformer.model_validate(row)
            out[t.key] = t
        for row in data.get("cnn", []):
            c = Cnn.model_validate(row)
            out[c.key] = c
    except ValidationError as exc:
        err = exc.errors()[0]
        raise CatalogError(f"workloads/models.toml: {err['loc']}: {err['msg']}") from None
    return out


def get_workload(key: str) -> Workload:
    table = builtin_workloads()
    found = table.get(key) or table.get(key.lower())
    if found is None:
        raise unknown_choice("model", key, [*table, "custom"])
    return found


def custom_transformer(**dims: object) -> Transformer:
    """Build a transformer from CLI/API dimensions, with one-line errors naming the field."""
    clean = {k: v for k, v in dims.items() if v is not None}
    missing = [f for f in ("layers", "hidden", "heads", "vocab", "seq_len") if f not in clean]
    if missing:
        raise ConfigError(
            "model custom: missing " + ", ".join(f"--{m.replace('_', '-')}" for m in missing)
        )
    try:
        return Transformer.model_validate(clean)
    except ValidationError as exc:
        err = exc.errors()[0]
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, DimensionMismatchError):  # two fields that do not fit together
            raise ConfigError(cause.reason, field=cause.field) from None
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise ConfigError(msg, field=str(err["loc"][0]) if err["loc"] else "model") from None
