"""te_activations.py: what a Megatron-Core block of Transformer Engine's layers keeps, against
what those layers' autograd functions save, read from their source (the module docstring cites
each), tensor by tensor, for a Llama block (RMSNorm, SwiGLU, flash attention)."""

from __future__ import annotations

import sympy as sp

from archspec.backends.count.activations import activation_parts
from archspec.backends.count.passes import B, whole_sequences
from archspec.backends.count.te_activations import transformer_engine_counter
from archspec.cli.common import resolve_spec
from archspec.ir.build import build_ir

TOKENS = 1000
H, FFN = 4096, 11008  # llama-2-7b's width and MLP width
BF16 = 2


def _kept(counter_class, compute=BF16) -> tuple[float, float]:
    """(one block's bytes, what comes after the blocks) at B=1, S=TOKENS."""
    ir = build_ir(resolve_spec("llama-2-7b", []))
    values = {**ir.env, **whole_sequences(TOKENS), B: 1}
    parts = activation_parts(ir, compute, "flash", "none", counter_class=counter_class)
    ((_, each),) = parts.layers
    return float(sp.sympify(each).xreplace(values)), float(sp.sympify(parts.after).xreplace(values))


def test_fused_norms_and_swiglu_keep_less_than_pytorch_by_the_copies_they_do_not_save() -> None:
    """Per token: two norms' normalised inputs (LayerNormLinear saves its input, ln_out,
    which the projections keep anyway, and the statistics) and SwiGLU's activation output
    (the fused kernel saves only its input), each in bf16; the final norm's normalised input."""
    pytorch, pytorch_after = _kept(None)
    te, te_after = _kept(transformer_engine_counter(fp8=False))
    assert pytorch - te == TOKENS * (2 * H * BF16 + FFN * BF16)
    assert pytorch_after - te_after == TOKENS * H * BF16


def test_fp8_projections_keep_their_inputs_in_one_byte() -> None:
    """Under fp8: q, k, v share one fp8 copy of the norm's output (in place of its bf16 one);
    the output projection keeps an fp8 copy beside the attention output the fused kernel keeps;
    gate and up share one fp8 copy of the second norm's output; down keeps an fp8 copy of the
    product in place of the bf16 product. The head (outside fp8) is unchanged."""
    bf16, bf16_after = _kept(transformer_engine_counter(fp8=False))
    fp8, fp8_after = _kept(transformer_engine_counter(fp8=True))
    qkv = H * (BF16 - 1)  # the bf16 ln_out not kept, its fp8 copy kept
    o_proj = -H * 1  # an fp8 copy beside the attention output
    gate_up = H * (BF16 - 1)
    down = FFN * (BF16 - 1)
    assert bf16 - fp8 == TOKENS * (qkv + o_proj + gate_up + down)
    assert bf16_after == fp8_after


def test_the_nemo_engine_counts_transformer_engine_layers() -> None:
    from archspec.plan.engines import ENGINES

    assert ENGINES["nemo"].kernels == "transformer_engine"
    assert {e.kernels for name, e in ENGINES.items() if name != "nemo"} == {"pytorch"}


def test_a_routed_row_keeps_its_experts_inputs_not_their_output() -> None:
    """Per routed row of a Qwen3 MoE layer (two top_k apart), as Megatron-Core's experts
    keep them: the first projection's input (the dispatched token), the fused weighted
    SwiGLU's input (gate and up) and the second projection's input, the row's place in the
    dispatch and in the unpermute (int64 each) and its routing weight (fp32), which the fused
    activation applies; the router's index and value of the choice (kinds/routers.py). The
    unpermute scatters the expert output back without its weight, so that output (d in bf16)
    is not kept (experts.py and token_dispatcher.py, te_activations.py's docstring)."""
    d, ff = 2048, 768  # Qwen3-30B-A3B's width and expert width

    def kept(top_k: int) -> float:
        ir = build_ir(resolve_spec("qwen3-30b-a3b", [f"moe.top_k={top_k}"]))
        values = {**ir.env, **whole_sequences(TOKENS), B: 1}
        parts = activation_parts(ir, BF16, "flash", "none",
                                 counter_class=transformer_engine_counter(fp8=False))  # fmt: skip
        ((_, each),) = parts.layers
        return float(sp.sympify(each).xreplace(values))

    per_row = (kept(8) - kept(4)) / (TOKENS * 4)
    experts = d * BF16 + 2 * ff * BF16 + ff * BF16
    assert per_row == experts + 8 + 8 + 4 + (8 + 4)
