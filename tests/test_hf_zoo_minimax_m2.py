"""MiniMax-M2 (`minimax_m2`) against transformers' own classes (tests/zoo_check.py says what
the zoo checks measure): q/k RMSNorms over all heads at once, RoPE on part of each head (the
released files' legacy `rotary_dim`), and in every layer experts chosen by the sigmoid router
with the bias correction on the MoE block (`block_sparse_moe.e_score_correction_bias`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from tests.zoo_check import (
    check_forward_matmul_flops,
    check_logits_and_tokens,
    real_total_equals_transformers,
)

pytest.importorskip("transformers")

# fmt: off
# MiniMaxAI/MiniMax-M2 (huggingface.co/MiniMaxAI/MiniMax-M2/blob/main/config.json), its FP8
# quantization_config, auto_map and tokenizer fields left out (archspec refuses quantized
# checkpoints). Sources, found by exact-string search of public code (repositories not named
# by the index): a Go test fixture quoting it as `miniMaxM2FixtureConfig` (vocab 200064,
# hidden 3072, intermediate 1536, 62 layers, 48 heads, 8 kv heads, head_dim 128, max
# positions 196608, 256 local experts, top-8, sigmoid scoring, routing bias, 3 MTP modules of
# 1 layer, qk norm, rotary_dim 64, rope_theta 5000000); a deployment guide quoting the whole
# config.json of the same architecture (MiniMax-M2.5, which MiniMax-AI/MiniMax-M2.5's
# docs/transformers_deploy_guide_cn.md deploys alike with MiniMax-M2): the sizes above plus
# attn_type_list of 62 1s, qk_norm_type per_layer, rms_norm_eps 1e-06,
# shared_intermediate_size 0, untied, silu; a vLLM plugin's test config for MiniMax-M2.7
# with the same sizes. huggingface/transformers docs/source/en/model_doc/minimax_m2.md:
# "230 billion total parameters with 10 billion active parameters" -- the count below is
# 228,689,748,992 (the MTP modules apart: no transformers class builds them).
MINIMAX_M2 = {
    "architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2",
    "attn_type_list": [1] * 62, "head_dim": 128, "hidden_act": "silu", "hidden_size": 3072,
    "intermediate_size": 1536, "max_position_embeddings": 196608,
    "mtp_transformer_layers": 1, "num_attention_heads": 48, "num_experts_per_tok": 8,
    "num_hidden_layers": 62, "num_key_value_heads": 8, "num_local_experts": 256,
    "num_mtp_modules": 3, "qk_norm_type": "per_layer", "rms_norm_eps": 1e-06,
    "rope_theta": 5000000, "rotary_dim": 64, "scoring_func": "sigmoid",
    "shared_intermediate_size": 0, "tie_word_embeddings": False, "use_cache": True,
    "use_mtp": True, "use_qk_norm": True, "use_routing_bias": True, "vocab_size": 200064,
}
PUBLISHED = 228_689_748_992

_TINY = dict(
    model_type="minimax_m2", hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, intermediate_size=24, max_position_embeddings=64,
    num_local_experts=8, num_experts_per_tok=2, pad_token_id=0, tie_word_embeddings=False,
)
# name: (transformers class, config fields of a tiny model)
TINY: dict[str, tuple[str, dict[str, Any]]] = {
    # the released files' shape: rotary_dim rotating half of each head, GQA
    "minimax_m2": ("MiniMaxM2ForCausalLM", dict(_TINY, rotary_dim=8)),
    # a partial_rotary_factor outranks rotary_dim (a quarter rotated); 3 of 6 experts, MHA
    "minimax_m2-factor": ("MiniMaxM2ForCausalLM", dict(
        _TINY, num_key_value_heads=4, rotary_dim=8, num_local_experts=6,
        num_experts_per_tok=3, rope_parameters={"rope_type": "default", "rope_theta": 1e4,
                                                "partial_rotary_factor": 0.25})),
    # MiniMaxM2Config's own default: no rotary_dim, the whole head rotated
    "minimax_m2-full": ("MiniMaxM2ForCausalLM", _TINY),
}
# fmt: on


@pytest.mark.long  # transformers' full-size model on the meta device: seconds
def test_real_size_total_equals_the_transformers_class() -> None:
    ours, theirs = real_total_equals_transformers(MINIMAX_M2)
    assert ours == theirs == PUBLISHED


def test_the_real_file_imports_what_transformers_builds() -> None:
    imported = import_config(MINIMAX_M2)
    spec = imported.spec
    assert spec.position.rotary_dim == 64 and spec.position.theta == 5e6
    assert (spec.attention.qk_norm, spec.attention.qk_norm_scope) == (True, "all")
    moe = spec.moe
    assert moe is not None and (moe.router, moe.n_experts, moe.top_k) == ("sigmoid", 256, 8)
    assert (moe.normalize, moe.routed_scale, moe.groups, moe.shared_d_ff) == (True, 1.0, 1, 0)
    ignored = {"use_mtp", "num_mtp_modules", "mtp_transformer_layers"}
    assert {k for k in ignored if any(f"'{k}'" in n for n in imported.notes)} == ignored


@pytest.mark.long  # a generated model, two transformers models and 16 steps each: seconds
@pytest.mark.parametrize("name", list(TINY))
def test_logits_and_greedy_tokens_equal_transformers(name: str, tmp_path: Path) -> None:
    check_logits_and_tokens(*TINY[name], tmp_path)


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[pytest.mark.long] if i else []) for i, n in enumerate(TINY)]
)
def test_forward_matmul_flops_equal_flop_counter(name: str) -> None:
    check_forward_matmul_flops(*TINY[name])


@pytest.mark.long  # a generated model and a transformers model: seconds
def test_loads_from_transformers_memory_layout(tmp_path: Path) -> None:
    """transformers 5's state dict in memory (experts stacked in mlp.experts.gate_up_proj and
    down_proj, the bias correction at mlp.e_score_correction_bias) loads too."""
    from archspec.backends.torchgen import generate_source, load_generated
    from archspec.hf.weights import load_weights
    from archspec.ir.build import build_ir
    from tests.zoo_check import tiny_model

    cls, fields = TINY["minimax_m2"]
    hf = tiny_model(cls, fields)
    state = hf.state_dict()
    assert any(k.endswith("mlp.experts.gate_up_proj") for k in state)
    spec = import_config({**hf.config.to_dict(), "architectures": [cls]}).spec
    model = load_weights(
        load_generated(generate_source(build_ir(spec)), tmp_path).Model().eval(), state, spec=spec
    )
    theirs = state["model.layers.1.mlp.e_score_correction_bias"]
    router = model.decoder.blocks[1].moe.router
    assert torch.equal(router.e_score_correction_bias, theirs) and theirs.abs().sum() > 0
    ids = torch.randint(3, 99, (2, 7))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf(input_ids=ids).logits, rtol=0, atol=1e-4)


# --- The family's refusals ----------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [("scoring_func", "softmax"), ("use_routing_bias", False), ("use_qk_norm", False),
     ("qk_norm_type", "per_head"), ("shared_intermediate_size", 512),
     ("attn_type_list", [0] * 7 + [1] + [1] * 54), ("sliding_window", 4096),
     ("rotary_dim", 63), ("rotary_dim", 256), ("head_dim", None)],
)  # fmt: skip
def test_refuses_what_transformers_does_not_compute(field: str, value: Any) -> None:
    with pytest.raises(SpecError) as err:
        import_config({**MINIMAX_M2, field: value})
    assert err.value.path == field


def test_a_factor_outranks_rotary_dim_as_in_transformers() -> None:
    """MiniMaxM2Config sets partial_rotary_factor from rotary_dim only by setdefault: a
    factor (here beside an odd rotary_dim it makes irrelevant) or an explicit null wins."""
    spec = import_config({**MINIMAX_M2, "rotary_dim": 63, "partial_rotary_factor": 0.25}).spec
    assert spec.position.rotary_dim == 32
    spec = import_config({**MINIMAX_M2, "partial_rotary_factor": None}).spec
    assert spec.position.rotary_dim is None  # the whole head
    plain = import_config(MINIMAX_M2).spec
    assert import_config({**MINIMAX_M2, "sliding_window": None}).spec == plain
