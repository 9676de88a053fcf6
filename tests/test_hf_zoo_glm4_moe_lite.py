"""GLM-4-MoE-Lite (`glm4_moe_lite`, GLM-4.7-Flash): DeepSeek-V3's latent attention and
experts, its dense layers said by `mlp_layer_types`, against transformers' own classes
(tests/zoo_check.py says what the zoo checks measure)."""

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

transformers = pytest.importorskip("transformers")

# fmt: off
# zai-org/GLM-4.7-Flash. Source: vLLM's test of its Glm4MoeLiteConfig shim
# (`_glm4_moe_lite_min_config`, found by exact-string search of public code), whose sizes
# are GLM-4.7-Flash's config.json's (and Glm4MoeLiteConfig's defaults): 47 layers, hidden
# 2048, 20 heads, q_lora_rank 768, kv_lora_rank 512, qk 192 + 64, v 256, 64 experts of 1536,
# top-4, one shared, scaling 1.8, vocabulary 154,880, untied. No published total was found:
# the count is checked against transformers' class alone.
GLM_47_FLASH = {
    "architectures": ["Glm4MoeLiteForCausalLM"], "model_type": "glm4_moe_lite",
    "vocab_size": 154880, "hidden_size": 2048, "intermediate_size": 10240,
    "moe_intermediate_size": 1536, "num_hidden_layers": 47, "num_attention_heads": 20,
    "num_key_value_heads": 20, "hidden_act": "silu", "rms_norm_eps": 1e-5,
    "attention_bias": False, "max_position_embeddings": 202752, "rope_theta": 1_000_000.0,
    "rope_scaling": None, "partial_rotary_factor": 1.0, "q_lora_rank": 768,
    "kv_lora_rank": 512, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "v_head_dim": 256,
    "n_routed_experts": 64, "n_shared_experts": 1, "num_experts_per_tok": 4,
    "norm_topk_prob": True, "routed_scaling_factor": 1.8, "n_group": 1, "topk_group": 1,
    "topk_method": "noaux_tc", "first_k_dense_replace": 1, "tie_word_embeddings": False,
}
REAL = {
    "glm4_moe_lite": GLM_47_FLASH,
}

_LITE = dict(
    model_type="glm4_moe_lite", hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
    num_key_value_heads=4, intermediate_size=96, max_position_embeddings=64,
    kv_lora_rank=32, q_lora_rank=48, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=12,
    n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=24, n_shared_experts=1,
    pad_token_id=0, tie_word_embeddings=False,
    # GLM-4.7-Flash's: the latents' norms keep 1e-6 whatever rms_norm_eps says, so the
    # generated code has norms of two epsilons (Config's norm_eps and a literal 1e-06).
    rms_norm_eps=1e-5,
)
# name: (transformers class, config fields of a tiny model)
TINY: dict[str, tuple[str, dict[str, Any]]] = {
    # the class's defaults: the first layer dense, interleaved rotation, one group, scaled 1.8
    "glm4_moe_lite": ("Glm4MoeLiteForCausalLM", _LITE),
    # two dense layers by mlp_layer_types, 4 groups of 2 (2 compete), rotate_half's halves,
    # queries without a latent, YaRN with mscale_all_dim scaling the scores
    "glm4_moe_lite-yarn": ("Glm4MoeLiteForCausalLM", dict(
        _LITE, mlp_layer_types=["dense", "dense", "sparse"], n_group=4, topk_group=2,
        rope_interleave=False, q_lora_rank=None,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 16, "mscale": 1.0,
                         "mscale_all_dim": 0.707})),
}
# fmt: on


@pytest.mark.long  # transformers' full-size model on the meta device: seconds
@pytest.mark.parametrize("name", list(REAL))
def test_real_size_total_equals_the_transformers_class(name: str) -> None:
    ours, theirs = real_total_equals_transformers(REAL[name])
    assert ours == theirs


# A generated model, two transformers models and 16 steps each: seconds; the YaRN variant
# runs with the long tests.
@pytest.mark.parametrize(
    "name", [n if n == "glm4_moe_lite" else pytest.param(n, marks=pytest.mark.long) for n in TINY]
)
def test_logits_and_greedy_tokens_equal_transformers(name: str, tmp_path: Path) -> None:
    check_logits_and_tokens(*TINY[name], tmp_path)


@pytest.mark.parametrize("name", list(TINY))
def test_forward_matmul_flops_equal_flop_counter(name: str) -> None:
    check_forward_matmul_flops(*TINY[name])


# --- The refusals ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [("mlp_layer_types", ["dense", "sparse", "dense"]), ("mlp_layer_types", ["dense"]),
     ("mlp_layer_types", ["dense", "moe", "sparse"]), ("attention_bias", True),
     ("head_dim", 32)],
)  # fmt: skip
def test_glm4_moe_lite_refuses_what_a_spec_cannot_say(field: str, value: Any) -> None:
    config = {**_LITE, "architectures": ["Glm4MoeLiteForCausalLM"], field: value}
    with pytest.raises(SpecError) as err:
        import_config(config)
    assert err.value.path == field


def test_glm4_moe_lite_left_out_key_value_heads_are_the_class_s_20() -> None:
    config = {**_LITE, "architectures": ["Glm4MoeLiteForCausalLM"]}
    del config["num_key_value_heads"]
    with pytest.raises(SpecError) as err:
        import_config(config)
    assert err.value.path == "num_key_value_heads"


def test_glm4_moe_lite_reads_dense_layers_from_mlp_layer_types_alone() -> None:
    """first_k_dense_replace, which no Glm4MoeLite class reads, is reported as ignored."""
    imported = import_config(GLM_47_FLASH | {"first_k_dense_replace": 5})
    assert imported.spec.moe is not None and imported.spec.moe.dense_layers == 1
    assert any("first_k_dense_replace" in note for note in imported.notes)
