"""Sarvam-105B (`sarvam_mla`, built as DeepseekV3ForCausalLM) and Sarvam-30B (`sarvam_moe`,
built as Glm4MoeForCausalLM, its checkpoints' fused query_key_value split), against
transformers' own classes (tests/zoo_check.py says what the zoo checks measure)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from tests.zoo_check import (
    check_forward_matmul_flops,
    check_logits_and_tokens,
)

transformers = pytest.importorskip("transformers")

# fmt: off
_MLA = dict(
    model_type="sarvam_mla", hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
    intermediate_size=96, max_position_embeddings=64, kv_lora_rank=32, qk_rope_head_dim=8,
    qk_nope_head_dim=16, v_head_dim=12, n_routed_experts=8, num_experts_per_tok=2,
    moe_intermediate_size=24, pad_token_id=0,
)
_MOE = dict(
    model_type="sarvam_moe", hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, intermediate_size=96, max_position_embeddings=64,
    n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=24, pad_token_id=0,
)
# name: (transformers class, config fields of a tiny model)
TINY: dict[str, tuple[str, dict[str, Any]]] = {
    # the class's defaults: no query latent, one dense layer, one group, scaled 2.5,
    # interleaved rotation
    "sarvam_mla": ("DeepseekV3ForCausalLM", _MLA),
    # the original file's deepseek_yarn (YaRN with mscale_all_dim scaling the scores), a
    # query latent, 4 groups of 2 (2 compete), rotate_half's halves
    "sarvam_mla-yarn": ("DeepseekV3ForCausalLM", dict(
        _MLA, q_lora_rank=48, n_group=4, topk_group=2, rope_interleave=False,
        rope_scaling={"type": "deepseek_yarn", "factor": 4.0,
                      "original_max_position_embeddings": 16, "mscale": 1.0,
                      "mscale_all_dim": 0.707})),
    # q/k norms and the whole head rotated (the class's defaults); biases on q, k and v,
    # split from the checkpoint's fused query_key_value with its weight
    "sarvam_moe": ("Glm4MoeForCausalLM", dict(_MOE, attention_bias=True)),
    # GLM-4-MoE's half-rotated heads, no q/k norms, 2 groups of 4 (1 competes), two shared
    "sarvam_moe-partial": ("Glm4MoeForCausalLM", dict(
        _MOE, use_qk_norm=False, partial_rotary_factor=0.5, n_group=2, topk_group=1,
        n_shared_experts=2, routed_scaling_factor=1.5)),
}
# fmt: on
DEFAULT = {"sarvam_mla", "sarvam_moe"}


# A generated model, two transformers models and 16 steps each: seconds; the variants run
# with the long tests.
@pytest.mark.parametrize(
    "name", [n if n in DEFAULT else pytest.param(n, marks=pytest.mark.long) for n in TINY]
)
def test_logits_and_greedy_tokens_equal_transformers(name: str, tmp_path: Path) -> None:
    check_logits_and_tokens(*TINY[name], tmp_path)


@pytest.mark.parametrize(
    "name", [n if n in DEFAULT else pytest.param(n, marks=pytest.mark.long) for n in TINY]
)
def test_forward_matmul_flops_equal_flop_counter(name: str) -> None:
    check_forward_matmul_flops(*TINY[name])


# --- What the config classes drop, and the refusals -----------------------------------------


def test_sarvam_mla_reads_the_original_file_as_sarvam_mla_config_translates_it() -> None:
    """num_experts / num_shared_experts, deepseek_yarn, head_dim and q_head_dim (dropped)."""
    original = {
        **_MLA, "architectures": ["SarvamMLAForCausalLM"], "num_experts": 8,
        "num_shared_experts": 2, "head_dim": 576, "q_head_dim": 192,
        "rope_scaling": {"type": "deepseek_yarn", "factor": 4.0,
                         "original_max_position_embeddings": 16, "mscale": 1.0,
                         "mscale_all_dim": 0.707},
        "topk_method": "noaux_tc", "scoring_func": "softmax",
    }  # fmt: skip
    del original["n_routed_experts"]
    imported = import_config(original)
    spec = imported.spec
    assert spec.moe is not None and spec.moe.n_experts == 8 and spec.moe.shared_d_ff == 48
    assert spec.position.scaling.type == "yarn"
    assert spec.attention.latent is not None and spec.attention.latent.yarn_mscale == 0.707
    # no DeepseekV3 class reads them: reported, not checked
    assert sum("topk_method" in n or "scoring_func" in n for n in imported.notes) == 2


@pytest.mark.parametrize(
    "model_type, field, value",
    [("sarvam_mla", "num_key_value_heads", 2), ("sarvam_mla", "attention_bias", True),
     ("sarvam_mla", "moe_layer_freq", 2),
     ("sarvam_moe", "head_dim", None), ("sarvam_moe", "partial_rotary_factor", 0.1)],
)  # fmt: skip
def test_refuses_what_a_spec_cannot_say(model_type: str, field: str, value: Any) -> None:
    fields = {"sarvam_mla": _MLA, "sarvam_moe": _MOE}[model_type]
    with pytest.raises(SpecError) as err:
        import_config({**fields, field: value})
    assert err.value.path == field
