"""Issue 28, the model types whose layers rotate differently (tests/zoo_check.py says what is
measured): Gemma 3 (`gemma3_text`: windowed layers by rope_local_base_freq, full ones by
rope_theta and its scaling), Cohere 2 (`cohere2`: RoPE on the windowed layers alone) and SmolLM3
(`smollm3`: every fourth layer without RoPE), and OLMo 3's windowed layers rotating by their
own settings, against transformers' own classes.

The tiny models (each about ten seconds of transformers) and the full sizes on the meta device
are long tests (`-m long`); the default suite reads the real files and both spellings of
Gemma 3's settings, and tests/test_properties.py draws position patterns among its specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from archspec.errors import SpecError
from archspec.hf.export_config import hf_config_dict
from archspec.hf.import_config import import_config
from tests.zoo_check import (
    check_forward_matmul_flops,
    check_logits_and_tokens,
    real_total_equals_transformers,
)

pytest.importorskip("transformers")

# fmt: off
# google/gemma-3-1b-it's config.json (https://huggingface.co/google/gemma-3-1b-it/blob/main/
# config.json, transformers 4.52.4), as github.com/Liwink/gemma-jax models/README.md reproduces it.
GEMMA3_1B = {
    "architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "attn_logit_softcapping": None, "bos_token_id": 2, "cache_implementation": "hybrid",
    "eos_token_id": [1, 106], "final_logit_softcapping": None, "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152, "initializer_range": 0.02,
    "intermediate_size": 6912, "max_position_embeddings": 32768, "model_type": "gemma3_text",
    "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
    "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
    "rope_local_base_freq": 10000, "rope_scaling": None, "rope_theta": 1000000,
    "sliding_window": 512, "sliding_window_pattern": 6, "torch_dtype": "bfloat16",
    "transformers_version": "4.52.4", "use_cache": True, "vocab_size": 262144,
}
# Three layers, windowed, full, windowed (a window of 4, passed while generating); the full
# layer's rotation scaled as the 4B and larger are (linear, factor 8).
GEMMA3_TINY = dict(model_type="gemma3_text", hidden_size=64, num_hidden_layers=3,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                   intermediate_size=96, max_position_embeddings=64, pad_token_id=0,
                   sliding_window=4, query_pre_attn_scalar=24, sliding_window_pattern=2,
                   rope_scaling={"rope_type": "linear", "factor": 8.0})
# Cohere2Config's defaults: a full-size stack (8192 wide, 40 layers; no public config.json of
# a Command R7B or Command A checkpoint was at hand to copy).
COHERE2_DEFAULTS = {"architectures": ["Cohere2ForCausalLM"], "model_type": "cohere2"}
# Four layers, the fourth full and without positions; a window of 4 passed while generating.
COHERE2_TINY = dict(model_type="cohere2", hidden_size=64, num_hidden_layers=4,
                    num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
                    max_position_embeddings=64, pad_token_id=0, sliding_window=4,
                    logit_scale=0.7, initializer_range=0.2)
# HuggingFaceTB/SmolLM3-3B's config.json (https://huggingface.co/HuggingFaceTB/SmolLM3-3B/blob/
# main/config.json), as github.com/fetchwiki/HuggingFaceTB-SmolLM3-3B mirrors it
# (config.json at 24f7882f).
SMOLLM3_3B = {
    "architectures": ["SmolLM3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128012, "hidden_act": "silu", "hidden_size": 2048,
    "initializer_range": 0.02, "intermediate_size": 11008,
    "layer_types": ["full_attention"] * 36, "max_position_embeddings": 65536,
    "max_window_layers": 28, "mlp_bias": False, "model_type": "smollm3",
    "no_rope_layer_interval": 4, "no_rope_layers": [1, 1, 1, 0] * 9,
    "num_attention_heads": 16, "num_hidden_layers": 36, "num_key_value_heads": 4,
    "pad_token_id": 128004, "pretraining_tp": 2, "rms_norm_eps": 1e-06, "rope_scaling": None,
    "rope_theta": 5000000.0, "sliding_window": None, "torch_dtype": "bfloat16",
    "transformers_version": "4.54.0.dev0", "use_cache": False, "use_sliding_window": False,
    "vocab_size": 128256,
}
# Every other layer without RoPE; with SLIDING, a window of 4 on those layers too.
SMOLLM3_TINY = dict(model_type="smollm3", hidden_size=64, num_hidden_layers=4,
                    num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
                    max_position_embeddings=64, pad_token_id=0, no_rope_layer_interval=2,
                    initializer_range=0.2)
SLIDING = {"use_sliding_window": True, "sliding_window": 4}
# OLMo 3's windowed layers at base 500,000, its full ones at 10,000 with linear scaling.
OLMO3_TINY = dict(model_type="olmo3", hidden_size=64, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
                  max_position_embeddings=64, pad_token_id=0, sliding_window=4,
                  rms_norm_eps=1e-6, rope_theta=1e4,
                  rope_scaling={"rope_type": "linear", "factor": 2.0})
# fmt: on


@pytest.mark.long
def test_gemma3_real_size_counts_like_transformers() -> None:
    ours, theirs = real_total_equals_transformers(GEMMA3_1B)
    assert ours == theirs
    spec = import_config(GEMMA3_1B).spec
    assert (spec.attention.sliding_window, spec.attention.window_pattern) == (512, "LLLLLG")
    assert spec.position_pattern == "LLLLLP"
    assert (spec.position.theta, spec.local_position.theta) == (1e6, 1e4)


@pytest.mark.long
def test_gemma3_logits_and_tokens_equal_transformers(tmp_path: Path) -> None:
    check_logits_and_tokens("Gemma3ForCausalLM", GEMMA3_TINY, tmp_path)


def test_gemma3_both_spellings_of_its_rope_settings_read_alike() -> None:
    from transformers import Gemma3TextConfig

    saved = Gemma3TextConfig(**GEMMA3_TINY).to_dict()  # transformers 5: rope_parameters per type
    assert set(saved["rope_parameters"]) == {"sliding_attention", "full_attention"}
    old = import_config({**GEMMA3_TINY, "architectures": ["Gemma3ForCausalLM"]}).spec
    new = import_config({**saved, "architectures": ["Gemma3ForCausalLM"]}).spec
    assert old == new and old.position.scaling.type == "linear"
    assert old.local_position.scaling.type == "none"
    assert import_config(hf_config_dict(new)).spec == new
    with pytest.raises(SpecError, match="disagree") as err:
        import_config({**saved, "rope_local_base_freq": 5.0})
    assert err.value.path == "rope_local_base_freq"
    bad = {**saved["rope_parameters"], "sliding_attention": {"rope_type": "magic"}}
    with pytest.raises(SpecError, match="magic") as err:
        import_config({**saved, "rope_parameters": bad})
    assert err.value.path == "rope_parameters.sliding_attention"


@pytest.mark.long
def test_gemma3_flops_equal_transformers() -> None:
    check_forward_matmul_flops("Gemma3ForCausalLM", GEMMA3_TINY)


@pytest.mark.long
@pytest.mark.parametrize(
    "cls, fields",
    [
        ("Cohere2ForCausalLM", COHERE2_TINY),
        ("SmolLM3ForCausalLM", SMOLLM3_TINY),
        ("SmolLM3ForCausalLM", {**SMOLLM3_TINY, **SLIDING}),
        ("Olmo3ForCausalLM", OLMO3_TINY),
    ],
    ids=["cohere2", "smollm3", "smollm3-sliding", "olmo3"],
)
def test_logits_tokens_and_flops_equal_transformers(cls, fields, tmp_path: Path) -> None:
    check_logits_and_tokens(cls, fields, tmp_path)
    check_forward_matmul_flops(cls, fields)


@pytest.mark.long
@pytest.mark.parametrize("config", [COHERE2_DEFAULTS, SMOLLM3_3B], ids=["cohere2", "smollm3"])
def test_real_size_counts_like_transformers(config) -> None:
    ours, theirs = real_total_equals_transformers(config)
    assert ours == theirs


def test_what_the_real_files_say_about_positions() -> None:
    cohere2 = import_config(COHERE2_DEFAULTS).spec
    assert (cohere2.attention.window_pattern, cohere2.position_pattern) == ("LLLG", "PPPN")
    assert cohere2.position.interleaved and cohere2.local_position is None
    imported = import_config(SMOLLM3_3B)
    smollm3 = imported.spec
    assert (smollm3.position_pattern, smollm3.position.theta) == ("PPPN", 5e6)
    assert smollm3.attention.sliding_window is None and smollm3.head.tied
    assert any("max_window_layers" in note for note in imported.notes)
    for spec in (cohere2, smollm3):
        assert import_config(hf_config_dict(spec)).spec == spec


def test_cohere2_without_windows_is_refused_naming_the_field() -> None:
    with pytest.raises(SpecError, match="windowed layers alone") as err:
        import_config({**COHERE2_DEFAULTS, "sliding_window": None})
    assert err.value.path == "sliding_window"


# Every layer windowed (layer_types all sliding_attention): the windowed layers' rotation
# (rope_local_base_freq) is the stack's, and the full layers' settings, which no layer reads,
# are reported as ignored. Once refused in the spec's terms ("position_pattern 'L' uses
# `position` on no layer").
GEMMA3_ALL_SLIDING = {
    **{k: v for k, v in GEMMA3_TINY.items() if k != "sliding_window_pattern"},
    "layer_types": ["sliding_attention"] * 3,
    "rope_local_base_freq": 100.0,
}


def test_gemma3_with_every_layer_windowed_rotates_by_the_local_settings() -> None:
    imported = import_config({**GEMMA3_ALL_SLIDING, "architectures": ["Gemma3ForCausalLM"]})
    spec, notes = imported.spec, imported.notes
    assert spec.position.theta == 100.0 and spec.local_position is None
    assert [spec.windowed(i) for i in range(3)] == [True] * 3
    assert any("full_attention layers' rotary settings are ignored" in n for n in notes)


# Every layer full, and both rotations at one base: the base spec's windows (five of six
# layers) and its local rotation (base 10,000) were once kept, a silent other model.
GEMMA3_ALL_FULL = {**GEMMA3_ALL_SLIDING, "layer_types": ["full_attention"] * 3}
GEMMA3_ONE_BASE = {
    **GEMMA3_TINY,
    "rope_theta": 500.0,
    "rope_local_base_freq": 500.0,
    "rope_scaling": None,
}
GEMMA2_ALL_FULL = dict(model_type="gemma2", hidden_size=64, num_hidden_layers=3,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                       intermediate_size=96, max_position_embeddings=64, pad_token_id=0,
                       sliding_window=4, query_pre_attn_scalar=24,
                       layer_types=["full_attention"] * 3)  # fmt: skip


def test_layer_types_without_one_kind_import_as_they_say() -> None:
    def imported(fields, cls):
        return import_config({**fields, "architectures": [cls]})

    full = imported(GEMMA3_ALL_FULL, "Gemma3ForCausalLM")
    assert not any(full.spec.windowed(i) for i in range(3)) and full.spec.local_position is None
    assert full.spec.position.theta == 1e6  # Gemma3TextConfig's rope_theta, scaled as given
    assert any("sliding_attention layers' rotary settings are ignored" in n for n in full.notes)
    one = imported(GEMMA3_ONE_BASE, "Gemma3ForCausalLM").spec
    assert one.local_position is None and one.position.theta == 500.0
    gemma2 = imported(GEMMA2_ALL_FULL, "Gemma2ForCausalLM").spec
    assert not any(gemma2.windowed(i) for i in range(3))


@pytest.mark.long
@pytest.mark.parametrize(
    ("cls", "fields"),
    [("Gemma3ForCausalLM", GEMMA3_ALL_SLIDING), ("Gemma3ForCausalLM", GEMMA3_ALL_FULL),
     ("Gemma3ForCausalLM", GEMMA3_ONE_BASE), ("Gemma2ForCausalLM", GEMMA2_ALL_FULL)],
    ids=["gemma3-all-sliding", "gemma3-all-full", "gemma3-one-base", "gemma2-all-full"],
)  # fmt: skip
def test_layer_types_of_one_kind_equal_transformers(cls, fields, tmp_path: Path) -> None:
    check_logits_and_tokens(cls, fields, tmp_path)
