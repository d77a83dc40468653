"""Memory-bound kernels: bytes each moves per element, and their kernel counts.

Each kernel is priced bytes / achieved HBM bandwidth (STREAM triad, catalog `hbm_efficiency`)
+ the fixed GPU cost of a kernel. One table per launch mode, keyed like the kernels a layer runs;
bytes per element of the tensor named in the comment (bf16 = 2 B unless stated).

Fused (Megatron-LM core + TransformerEngine, torch.compile):
- RMSNorm/LayerNorm (TE `transformer_engine/common/normalization`): forward reads x, writes y
  (4 B); backward reads dy and x, writes dx (6 B); per-row statistics and the γ gradient are
  negligible at hidden ≥ 1k.
- RoPE (TE fused_rope / Megatron `apply_rotary_pos_emb` fused): reads and writes Q and K (4 B),
  same in backward.
- SwiGLU (Megatron `fusions/fused_bias_swiglu.py`): forward reads gate and up (4 B per output
  element), writes the output (2 B); backward reads gate, up and dy (6 B), writes both grads
  (4 B). GeLU (`fused_bias_gelu.py`): 4 B forward, 6 B backward.
- residual add (`fused_bias_dropout.py`, dropout 0 as in current LLMs): reads x and the residual,
  writes the sum (6 B); backward passes the gradient on and adds the branch's (6 B).
- MoE token permute/unpermute (Megatron `moe_utils.permute`): read and write each routed token
  once each way (4 B per routed element, forward and backward).

Eager PyTorch (e.g. torchtitan without compile; Liger-Kernel's motivation): RMSNorm as
x.float(), pow, mean, rsqrt, mul, type_as, mul weight: 36 B per element forward in fp32 passes
and about twice that in autograd's backward; RoPE as complex multiplication in fp32 (view,
float, mul, view, type_as for Q and K: 20 B); SwiGLU as silu then mul (10 B forward, 16 B
backward); each op one kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

#: (forward bytes per element, backward bytes per element, kernels forward, kernels backward)
KernelBytes = tuple[float, float, int, int]

FUSED: dict[str, KernelBytes] = {
    "norm": (4.0, 6.0, 1, 1),
    "rope": (4.0, 4.0, 1, 1),
    "swiglu": (6.0, 10.0, 1, 1),
    "gelu": (4.0, 6.0, 1, 1),
    "residual": (6.0, 6.0, 1, 1),
    "permute": (8.0, 8.0, 2, 2),
}
EAGER: dict[str, KernelBytes] = {
    "norm": (36.0, 72.0, 7, 12),
    "rope": (20.0, 20.0, 10, 10),
    "swiglu": (10.0, 16.0, 2, 4),
    "gelu": (4.0, 6.0, 1, 1),
    "residual": (6.0, 6.0, 1, 1),
    "permute": (8.0, 8.0, 2, 2),
}


def kernel_table(launch_mode: str) -> dict[str, KernelBytes]:
    return EAGER if launch_mode == "eager" else FUSED


@dataclass(frozen=True)
class Fp8CastBytes:
    """Bytes per element of casting one GEMM operand to fp8, by recipe (TransformerEngine
    recipes; byte counts as pytorch/ao torchao/testing/training/roofline_utils.py models them)."""

    activation: float
    """A bf16 activation or output gradient cast for fprop/dgrad and transposed for wgrad."""
    weight: float
    """A weight cast (once per micro-batch unless the framework caches it)."""
    kernels: int
    """Kernels per cast tensor."""
    rescale: float = 0.0
    """Bytes per element of each backward GEMM's output that a separate pass rescales (read
    and write bf16): torchao's rowwise runs dgrad and wgrad as tensorwise GEMMs and scales
    their outputs afterwards (torchao/float8/float8_ops.py: "the rowwise CUTLASS-based kernel
    is so slow without fast-accum")."""
    fprop_efficiency: float = 1.0
    """Forward GEMM speed relative to the format's tensorwise GEMM: the rowwise-scaled CUTLASS
    kernel runs "within 90-100% of tensor-wise efficiency, but there's a long tail going down
    to 50%" (pytorch/pytorch#147971): the band's floor."""


#: delayed (TE DelayedScaling, Megatron's default on Hopper): amax comes from history, so one
#: cast-transpose kernel reads 2 B and writes 1 B twice (row- and column-major) → 4 B.
#: current (TE Float8CurrentScaling, torchao tensorwise): an amax pass first reads 2 B → 6 B,
#: weights 2 + 3 + 3 = 8 B (fwd and bwd casts). blockwise (TE Float8BlockScaling, DeepSeek-V3
#: 1x128/128x128): scales per block inside the cast, both orientations → 4 B. mxfp8 (Blackwell
#: MXFP8BlockScaling): two kernels (dim0, dim1) each read 2 B and write 1 B → 6 B.
#: rowwise (torchao Float8 rowwise, torchao/testing/training/roofline_utils.py at 36027d82d
#: L176-210): one kernel reads 2 B and writes the fp8 dim0 copy (1 B) and a bf16 transposed
#: copy (2 B), a second casts that (2 + 1): 8 B ("can't fuse 1 and 2 because that would
#: require loading the entire tensor to shared memory"); weights 10 B (a bf16 transpose in
#: between); then the backward GEMMs' outputs rescaled (`rescale`).
#: nvfp4 (TE NVFP4BlockScaling): a per-tensor amax pass reads 2 B (NVFP4's second-level fp32
#: scale is per tensor), then one kernel reads 2 B and writes both orientations at 0.5 B plus
#: an e4m3 scale per 16 elements (the column-wise copy for wgrad through the random Hadamard
#: transform, fused into it) → 2 + 2 + 2 × 0.5625 = 5.125 B; weights the same (2-D 16×16
#: scales).
FP8_CAST: dict[str, Fp8CastBytes] = {
    "delayed": Fp8CastBytes(activation=4.0, weight=4.0, kernels=1),
    "current": Fp8CastBytes(activation=6.0, weight=8.0, kernels=3),
    "blockwise": Fp8CastBytes(activation=4.0, weight=4.0, kernels=1),
    "mxfp8": Fp8CastBytes(activation=6.0, weight=6.0, kernels=2),
    "rowwise": Fp8CastBytes(
        activation=8.0, weight=10.0, kernels=2, rescale=4.0, fprop_efficiency=0.9
    ),
    "nvfp4": Fp8CastBytes(activation=5.125, weight=5.125, kernels=2),
}
#: The fp8 recipes a request may name (nvfp4 is --precision fp4's own).
FP8_RECIPES = tuple(r for r in FP8_CAST if r != "nvfp4")
