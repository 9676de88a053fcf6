"""Values of the wrong type or out of range that a fuzz of every family's config (about
225,000 mutated configs, 2026-11-29) found crashing import-hf with a Python exception: each is
now one SpecError naming the field. The shapes are the fuzz's repros over FAMILY_CONFIGS."""

from __future__ import annotations

import copy

import pytest

from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from tests.hf_reference import FAMILY_CONFIGS

LONG = [1.0] * 8  # one factor a rotated pair of a 16-wide head
DEFAULT = {"rope_type": "default", "rope_theta": 10000.0}


def _config(model_type: str, **changes) -> dict:
    return {"model_type": model_type, **copy.deepcopy(FAMILY_CONFIGS[model_type]), **changes}


@pytest.mark.parametrize(
    ("model_type", "changes", "path", "words"),
    [
        ("llama", {"rope_parameters": {**DEFAULT, "rope_type": ["default"]}},
         "rope_parameters", "expected a rope_type name, got ['default']"),
        ("qwen2_vl_text", {"rope_parameters": {**DEFAULT, "rope_type": ["default"],
                                               "mrope_section": [2, 3, 3]}},
         "rope_parameters", "expected a rope_type name"),
        ("llama", {"rope_parameters": {1: 2}}, "rope_parameters", "named by strings"),
        ("gemma3_text", {"rope_parameters": {"full_attention": 1, "sliding_attention": DEFAULT}},
         "rope_parameters.full_attention", "expected a mapping of RoPE settings, got 1"),
        ("olmo3", {"rope_parameters": {"full_attention": "abc", "sliding_attention": DEFAULT}},
         "rope_parameters.full_attention", "expected a mapping of RoPE settings"),
        ("phi", {"rope_parameters": {**DEFAULT, "partial_rotary_factor": None}},
         "rope_parameters.partial_rotary_factor", "expected a positive finite number, got None"),
        ("gpt_neox", {"rope_parameters": {**DEFAULT, "partial_rotary_factor": "abc"}},
         "rope_parameters.partial_rotary_factor", "expected a positive finite number"),
        ("exaone", {"rope_parameters": 1}, "rope_parameters", "expected a mapping"),
        ("flex_olmo", {"rope_parameters": 1}, "rope_parameters", "expected a mapping"),
        ("hyperclovax", {"attention_multiplier": "abc"}, "attention_multiplier",
         "expected a positive finite number, got 'abc'"),
        ("mpt", {"attn_config": {"softmax_scale": "abc"}}, "attn_config.softmax_scale",
         "expected a positive finite number"),
        ("mpt", {"attn_config": {1: 2}}, "attn_config", "not understood: 1"),
        ("dbrx", {"attn_config": {"kv_n_heads": 2, "rope_theta": "abc"}},
         "attn_config.rope_theta", "expected a finite number"),
        ("cwm", {"rope_parameters": {"rope_type": "llama3", "rope_theta": 1e6, "factor": 16.0,
                                     "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                     "original_max_position_embeddings": None}},
         "rope_parameters", "rope_type 'llama3' needs original_max_position_embeddings, got null"),
        ("mistral", {"rope_parameters": {**DEFAULT, "rope_type": "yarn", "factor": 4.0,
                                         "original_max_position_embeddings": None}},
         "rope_parameters", "needs original_max_position_embeddings, got null"),
        ("mistral", {"rope_parameters": {**DEFAULT, "rope_type": "yarn", "factor": 4.0,
                                         "original_max_position_embeddings": {"a": 1}}},
         "rope_parameters.original_max_position_embeddings", "expected a positive integer"),
        ("mistral", {"rope_parameters": {**DEFAULT, "rope_type": "longrope",
                                         "short_factor": LONG, "long_factor": LONG,
                                         "original_max_position_embeddings": 0}},
         "rope_parameters.original_max_position_embeddings", "got 0"),
        ("xglm", {"attention_heads": 0}, "attention_heads", "expected a positive integer, got 0"),
    ],
)  # fmt: skip
def test_a_value_of_the_wrong_kind_is_refused_naming_it(model_type, changes, path, words) -> None:
    with pytest.raises(SpecError) as caught:
        import_config(_config(model_type, **changes))
    assert caught.value.path == path, str(caught.value)
    assert words in str(caught.value)
