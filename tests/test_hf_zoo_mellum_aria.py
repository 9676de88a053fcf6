"""Mellum (`mellum`) and Aria's language model (`aria_text`) against transformers' own classes
(tests/zoo_check.py says what is measured)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from tests.zoo_check import (
    check_forward_matmul_flops,
    check_logits_and_tokens,
    real_total_equals_transformers,
)

pytest.importorskip("transformers")

# fmt: off
# JetBrains/Mellum2.1-12B-A2.5B-Thinking (and Mellum2-12B-A2.5B, the same sizes). Sources,
# found by exact-string search of public code ('"model_type": "mellum"'; repositories not
# named by the index): an MLX adapter that checks the checkpoint's config.json
# (SOURCE_REVISION 92ddae9f): hidden 2304, 28 layers, intermediate 7168, 32 heads, 4 kv
# heads, head_dim 128, 64 experts, top-8, moe_intermediate 896, vocab 98304, 131072
# positions, window 1024, norm_topk_prob, untied, rms_norm_eps 1e-6, no attention bias,
# layer_types full on every fourth layer (index % 4 == 3) else sliding, mlp_layer_types all
# sparse, rope_parameters full: yarn (theta 500000, factor 16, original 8192, beta_fast 32,
# beta_slow 1, attention_factor 1.2772588722239782), sliding: default theta 500000,
# use_sliding_window true; a Rust port's test quoting a Mellum2 config.json with the same
# sizes and RoPE (and max_window_layers 0, no layer_types).
MELLUM2_12B = {
    "architectures": ["MellumForCausalLM"], "model_type": "mellum", "attention_bias": False,
    "attention_dropout": 0.0, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2304,
    "initializer_range": 0.02, "intermediate_size": 7168, "max_position_embeddings": 131072,
    "max_window_layers": 0, "moe_intermediate_size": 896, "norm_topk_prob": True,
    "num_attention_heads": 32, "num_experts": 64, "num_experts_per_tok": 8,
    "num_hidden_layers": 28, "num_key_value_heads": 4, "output_router_logits": False,
    "rms_norm_eps": 1e-06, "router_aux_loss_coef": 0.001, "sliding_window": 1024,
    "tie_word_embeddings": False, "use_cache": True, "vocab_size": 98304,
    "use_sliding_window": True,
    "layer_types": ["full_attention" if i % 4 == 3 else "sliding_attention" for i in range(28)],
    "mlp_layer_types": ["sparse"] * 28,
    "rope_parameters": {
        "full_attention": {"rope_type": "yarn", "rope_theta": 500000.0, "factor": 16.0,
                           "original_max_position_embeddings": 8192, "beta_fast": 32.0,
                           "beta_slow": 1.0, "attention_factor": 1.2772588722239782},
        "sliding_attention": {"rope_type": "default", "rope_theta": 500000.0}},
}
REAL = {"mellum": MELLUM2_12B}

_TINY = dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, intermediate_size=96, max_position_embeddings=64,
             pad_token_id=0)
# name: (transformers class, config fields of a tiny model)
TINY: dict[str, tuple[str, dict[str, Any]]] = {
    # three windowed layers to a full one, as Mellum2's, each layer type rotating by its own
    # RoPE (YaRN on the full layers), a window shorter than the prompt, a dense first layer
    "mellum": ("MellumForCausalLM", dict(
        model_type="mellum", **_TINY, head_dim=16, num_experts=6, num_experts_per_tok=2,
        moe_intermediate_size=32, sliding_window=5,
        layer_types=["sliding_attention"] * 3 + ["full_attention"],
        mlp_layer_types=["dense", "sparse", "sparse", "sparse"],
        rope_parameters={
            "full_attention": {"rope_type": "yarn", "rope_theta": 500000.0, "factor": 4.0,
                               "original_max_position_embeddings": 16, "beta_fast": 32.0,
                               "beta_slow": 1.0, "attention_factor": 1.2},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})),
    # top-2 of 6 experts by a softmax over the two best logits, two shared experts' width,
    # fewer key/value heads, attention biases (weights drawn wider, so that the greedy
    # tokens vary)
    "aria_text": ("AriaTextForCausalLM", dict(
        model_type="aria_text", **_TINY, moe_num_experts=6, moe_topk=2,
        moe_num_shared_experts=2, attention_bias=True, initializer_range=0.1)),
}
LONG: dict[str, tuple[str, dict[str, Any]]] = {
    # AriaTextConfig's defaults: top-2 of 8, as many key/value heads as heads
    "aria_text-defaults": ("AriaTextForCausalLM", dict(
        model_type="aria_text", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=48, max_position_embeddings=64, initializer_range=0.1)),
    # one shared expert, top-3, a scaled RoPE
    "aria_text-linear-rope": ("AriaTextForCausalLM", dict(
        model_type="aria_text", **_TINY, moe_num_experts=5, moe_topk=3,
        moe_num_shared_experts=1, initializer_range=0.1,
        rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0})),
    # MellumConfig's defaults: every layer full, no dense layer, renormalised top-k
    "mellum-defaults": ("MellumForCausalLM", dict(
        model_type="mellum", **_TINY, head_dim=16, num_experts=6, num_experts_per_tok=2,
        moe_intermediate_size=32)),
    # top-k not renormalised; windowed layers alone (the full layers' settings unused)
    "mellum-windowed": ("MellumForCausalLM", dict(
        model_type="mellum", **_TINY, head_dim=16, num_experts=6, num_experts_per_tok=3,
        moe_intermediate_size=32, norm_topk_prob=False, sliding_window=4,
        layer_types=["sliding_attention"] * 4)),
}
# fmt: on


@pytest.mark.long
@pytest.mark.parametrize("name", list(REAL))
def test_real_size_total_equals_the_transformers_class(name: str) -> None:
    ours, theirs = real_total_equals_transformers(REAL[name])
    assert ours == theirs


@pytest.mark.parametrize("name", list(TINY))
def test_logits_and_greedy_tokens_equal_transformers(name: str, tmp_path: Path) -> None:
    check_logits_and_tokens(*TINY[name], tmp_path)


@pytest.mark.parametrize("name", list(TINY))
def test_forward_matmul_flops_equal_flop_counter(name: str) -> None:
    check_forward_matmul_flops(*TINY[name])


@pytest.mark.long
@pytest.mark.parametrize("name", list(LONG))
def test_variants_equal_transformers(name: str, tmp_path: Path) -> None:
    check_logits_and_tokens(*LONG[name], tmp_path)
    check_forward_matmul_flops(*LONG[name])


def test_mellum_imports_its_real_config() -> None:
    spec = import_config(MELLUM2_12B).spec
    assert spec.attention.window_pattern == "LLLG" and spec.attention.sliding_window == 1024
    assert spec.position.scaling.type == "yarn" and spec.local_position.theta == 500000.0
    assert spec.moe.n_experts == 64 and spec.moe.top_k == 8 and spec.moe.normalize


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"mlp_layer_types": ["sparse"] * 27 + ["dense"]}, "mlp_layer_types"),
        ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "rope_scaling"),
        (
            {
                "rope_parameters": {
                    **MELLUM2_12B["rope_parameters"],
                    "sliding_attention": {
                        "rope_type": "default",
                        "rope_theta": 1e4,
                        "partial_rotary_factor": 0.5,
                    },
                }
            },
            "partial_rotary_factor",
        ),
    ],
)
def test_mellum_refuses_what_transformers_does_not_compute(fields: dict, field: str) -> None:
    with pytest.raises(SpecError, match=field):
        import_config({**MELLUM2_12B, **fields})


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"hidden_act": "gelu"}, "hidden_act"),  # the experts' SiLU is fixed
        ({"mlp_bias": True}, "mlp_bias"),  # on the shared MLP alone
    ],
)
def test_aria_text_refuses_what_a_spec_cannot_say(fields: dict, field: str) -> None:
    config = {"architectures": ["AriaTextForCausalLM"], "model_type": "aria_text", **fields}
    with pytest.raises(SpecError, match=field):
        import_config(config)


def test_aria_text_routes_as_gpt_oss() -> None:
    spec = import_config({"architectures": ["AriaTextForCausalLM"], "model_type": "aria_text"})
    moe = spec.spec.moe
    assert moe.router == "topk_softmax" and not moe.router_bias
    assert moe.shared_d_ff == 2 * spec.spec.d_ff and not moe.shared_gate
