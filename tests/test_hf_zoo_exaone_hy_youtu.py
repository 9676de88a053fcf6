"""EXAONE-MoE (`exaone_moe`), against transformers' own classes (tests/zoo_check.py says
what the zoo checks measure): tiny random models' logits, greedy tokens, printed module tree
and forward matmul FLOPs.

No full-size config.json of these types was found in a public source with every size field
the count needs (test fixtures quote K-EXAONE's widths but truncate its layers), so no
real-size count is checked here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from tests.hf_reference import FAMILY_CONFIGS
from tests.zoo_check import check_forward_matmul_flops, check_logits_and_tokens

pytest.importorskip("transformers")

# fmt: off
_EXAONE = dict(
    model_type="exaone_moe", hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, intermediate_size=96, max_position_embeddings=64,
    num_experts=8, num_experts_per_tok=2, moe_intermediate_size=24, num_shared_experts=2,
    pad_token_id=0, tie_word_embeddings=False,
)
# name: (transformers class, config fields of a tiny model)
TINY: dict[str, tuple[str, dict[str, Any]]] = {
    # windows of 6 keys (past which the 16 greedy tokens go) on layers 0 and 2, which rotate;
    # layers 1 and 3 attend without positions; 4 groups of 2 experts (2 compete)
    "exaone_moe": ("ExaoneMoeForCausalLM", dict(
        _EXAONE, sliding_window=6, sliding_window_pattern=2, first_k_dense_replace=1,
        n_group=4, topk_group=2, norm_topk_prob=True, routed_scaling_factor=2.5)),
    # K-EXAONE's shape: layer_types LLLG and mlp_layer_types (two dense layers here), one
    # group, not renormalised
    "exaone_moe-k": ("ExaoneMoeForCausalLM", dict(
        _EXAONE, sliding_window=6,
        layer_types=["sliding_attention"] * 3 + ["full_attention"],
        mlp_layer_types=["dense", "dense", "sparse", "sparse"], norm_topk_prob=False,
        routed_scaling_factor=1.0)),
}
# fmt: on


@pytest.mark.long  # a generated model, two transformers models and 16 steps each: seconds
@pytest.mark.parametrize("name", list(TINY))
def test_logits_and_greedy_tokens_equal_transformers(name: str, tmp_path: Path) -> None:
    check_logits_and_tokens(*TINY[name], tmp_path)


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[pytest.mark.long] if i else []) for i, n in enumerate(TINY)]
)
def test_forward_matmul_flops_equal_flop_counter(name: str) -> None:
    check_forward_matmul_flops(*TINY[name])


# --- EXAONE-MoE's refusals --------------------------------------------------------------


def _exaone(**fields: Any) -> dict[str, Any]:
    return {"model_type": "exaone_moe", **FAMILY_CONFIGS["exaone_moe"], **fields}


@pytest.mark.parametrize(
    "field, value",
    [
        # a dense layer after an expert layer: the spec's dense layers come first
        ("mlp_layer_types", ["dense", "sparse", "dense"]),
        ("mlp_layer_types", ["dense", "moe", "sparse"]),
        # ExaoneMoeConfig refuses it (its field is an int)
        ("sliding_window", None),
        # no layer slides: none would have positions
        ("layer_types", ["full_attention"] * 3),
        # transformers' __post_init__ fails on a string pattern without layer_types
        ("sliding_window_pattern", "LLLG"),
    ],
)
def test_exaone_moe_refuses_what_the_spec_cannot_say(field: str, value: Any) -> None:
    with pytest.raises(SpecError) as err:
        import_config(_exaone(**{field: value}))
    assert err.value.path == field


def test_exaone_moe_layer_types_override_the_pattern() -> None:
    """With layer_types, sliding_window_pattern is read by nothing (a string one is fine)."""
    types = ["sliding_attention", "full_attention", "sliding_attention"]
    spec = import_config(_exaone(layer_types=types, sliding_window_pattern="LLLG")).spec
    assert (spec.attention.window_pattern, spec.position_pattern) == ("LG", "PN")
