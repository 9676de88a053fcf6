"""ModernBERT's decoder (`modernbert-decoder`, ModernBertDecoderForCausalLM: the Ettin
decoders) against transformers' own classes (tests/zoo_check.py says what is measured): its
windowed layers' causal window of local_attention // 2 keys, the query's own included, past
which the 16 greedy tokens run; the full and windowed layers' rotary bases; the prediction
head before the tied decoder with its bias."""

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

# ModernBertDecoderConfig's defaults (transformers 5.24,
# models/modernbert_decoder/configuration_modernbert_decoder.py; its docstring names
# blab-jhu/test-32m-dec, whose sizes the defaults need not be), counted on the meta device.
REAL = {"architectures": ["ModernBertDecoderForCausalLM"], "model_type": "modernbert-decoder"}

# fmt: off
_TINY = dict(model_type="modernbert-decoder", hidden_size=64, num_hidden_layers=3,
             num_attention_heads=4, intermediate_size=96, max_position_embeddings=64,
             pad_token_id=0, bos_token_id=1, eos_token_id=2, initializer_range=0.2)
CLS = "ModernBertDecoderForCausalLM"
# name: (transformers class, config fields of a tiny model)
TINY: dict[str, tuple[str, dict[str, Any]]] = {
    # full, windowed, windowed (global_attn_every_n_layers' default 3); a window of 4 keys
    "modernbert-decoder": (CLS, dict(**_TINY, local_attention=8)),
}
LONG: dict[str, tuple[str, dict[str, Any]]] = {
    # an odd local_attention (window 3), layer_types, biases everywhere, other bases
    "biases": (CLS, dict(**{**_TINY, "num_hidden_layers": 4}, local_attention=7,
                         layer_types=["full_attention", "sliding_attention",
                                      "full_attention", "sliding_attention"],
                         attention_bias=True, mlp_bias=True, norm_bias=True,
                         classifier_bias=True, classifier_activation="silu",
                         global_rope_theta=5000.0, local_rope_theta=300.0)),
    # linear RoPE scaling on both layer types (as ModernBertDecoderConfig applies it)
    "rope_scaling": (CLS, dict(**_TINY, local_attention=8,
                               rope_scaling={"rope_type": "linear", "factor": 2.0})),
    # every layer global (no window), an untied decoder without bias
    "global": (CLS, dict(**_TINY, global_attn_every_n_layers=1, tie_word_embeddings=False,
                         decoder_bias=False)),
}
# fmt: on


@pytest.mark.long
def test_real_size_total_equals_the_transformers_class() -> None:
    ours, theirs = real_total_equals_transformers(REAL)
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


def test_imported_structure() -> None:
    spec = import_config(REAL).spec
    assert spec.layout == "decoder" and not spec.norm.first_attention
    assert (spec.attention.sliding_window, spec.attention.window_pattern) == (64, "GLL")
    assert (spec.position.theta, spec.local_position.theta) == (160000.0, 10000.0)
    assert spec.position_pattern == "PLL"
    assert spec.head.transform and spec.head.tied and spec.head.bias
    tiny = import_config({**TINY["modernbert-decoder"][1], "architectures": [CLS]}).spec
    assert tiny.attention.sliding_window == 4  # local_attention // 2, the query's own included
    odd = import_config({**LONG["biases"][1], "architectures": [CLS]}).spec
    assert (odd.attention.sliding_window, odd.attention.window_pattern) == (3, "GL")
    scaled = import_config({**LONG["rope_scaling"][1], "architectures": [CLS]}).spec
    assert scaled.position.scaling == scaled.local_position.scaling
    assert (scaled.position.scaling.type, scaled.position.scaling.factor) == ("linear", 2.0)


@pytest.mark.parametrize("local_attention", [None, 0, 1])
def test_a_window_that_hides_every_key_is_refused(local_attention: int | None) -> None:
    with pytest.raises(SpecError, match="hides every key") as err:
        import_config({**REAL, "local_attention": local_attention})
    assert err.value.path == "local_attention"


def test_a_saved_sliding_window_wins_over_local_attention() -> None:
    """transformers sets sliding_window from local_attention, then from the file's own."""
    spec = import_config({**REAL, "local_attention": 8, "sliding_window": 6}).spec
    assert spec.attention.sliding_window == 6
    with pytest.raises(SpecError, match="hides every key") as err:
        import_config({**REAL, "sliding_window": None})
    assert err.value.path == "sliding_window"


def test_without_windowed_layers_local_attention_changes_nothing() -> None:
    config = {**REAL, "global_attn_every_n_layers": 1}
    spec = import_config({**config, "local_attention": None}).spec
    assert spec.attention.sliding_window is None
    assert spec == import_config(config).spec


def test_the_sequence_classifier_is_refused_naming_the_base_class() -> None:
    config = {**REAL, "architectures": ["ModernBertDecoderForSequenceClassification"]}
    with pytest.raises(SpecError, match="ModernBertDecoderModel"):
        import_config(config)


def test_attention_dropout_is_refused() -> None:
    with pytest.raises(SpecError, match="out") as err:
        import_config({**REAL, "attention_dropout": 0.1})
    assert err.value.path == "attention_dropout"
