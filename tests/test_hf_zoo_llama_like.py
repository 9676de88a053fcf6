"""Issue 28, the LLaMA-like decoders transformers ships that reuse what archspec has:
Seed-OSS (`seed_oss`), ERNIE 4.5 (`ernie4_5`), Helium (`helium`), Ministral (`ministral`),
GLM (`glm`), GLM 4 (`glm4`), CWM (`cwm`), Arcee (`arcee`: squared ReLU), Nemotron
(`nemotron`: LayerNorm1P, squared ReLU) and Jais 2 (`jais2`: LayerNorms, squared ReLU), each
against transformers' own classes
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

# Full sizes: each config class's defaults, a full-size model (what a config.json naming only
# its class builds), counted exactly on the meta device. The comment names the checkpoint the
# class's docstring documents (`@auto_docstring(checkpoint=...)`), whose sizes the defaults
# need not be: seed_oss's count 28.9B (not 36B), nemotron's 17.6B (not 8B), arcee's 4.0B (a
# 32000-token vocabulary).
REAL: dict[str, dict[str, Any]] = {
    # ByteDance-Seed/Seed-OSS-36B-Instruct
    "seed_oss": {"architectures": ["SeedOssForCausalLM"], "model_type": "seed_oss"},
    # baidu/ERNIE-4.5-0.3B-PT
    "ernie4_5": {"architectures": ["Ernie4_5ForCausalLM"], "model_type": "ernie4_5"},
    # kyutai/helium-1-preview
    "helium": {"architectures": ["HeliumForCausalLM"], "model_type": "helium"},
    # MinistralConfig's defaults (a 7B-sized stack windowed on every layer); its attention
    # needs head_dim, which the class leaves None
    "ministral": {
        "architectures": ["MinistralForCausalLM"],
        "model_type": "ministral",
        "head_dim": 128,
    },
    # THUDM/glm-4-9b-chat
    "glm": {"architectures": ["GlmForCausalLM"], "model_type": "glm"},
    # Glm4Config's defaults (GLM-4-9B's sizes with GLM 4's sandwich norms)
    "glm4": {"architectures": ["Glm4ForCausalLM"], "model_type": "glm4"},
    # facebook/cwm
    "cwm": {"architectures": ["CwmForCausalLM"], "model_type": "cwm"},
    # arcee-ai/AFM-4.5B
    "arcee": {"architectures": ["ArceeForCausalLM"], "model_type": "arcee"},
    # thhaus/nemotron3-8b; its attention needs num_key_value_heads, which the class leaves
    # None (48: one per query head)
    "nemotron": {
        "architectures": ["NemotronForCausalLM"],
        "model_type": "nemotron",
        "num_key_value_heads": 48,
    },
    # inceptionai/Jais-2-8B-Chat
    "jais2": {"architectures": ["Jais2ForCausalLM"], "model_type": "jais2"},
}

# fmt: off
_TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, intermediate_size=96,
             max_position_embeddings=64, pad_token_id=0)
# name: (transformers class, config fields of a tiny model); tied heads drawn wider
# (initializer_range) so that the greedy tokens vary
TINY: dict[str, tuple[str, dict[str, Any]]] = {
    # 32-wide heads over a 64-wide stream, q/k/v biases without the output's, MLP biases
    "seed_oss": ("SeedOssForCausalLM", dict(
        model_type="seed_oss", **{**_TINY, "head_dim": 32}, mlp_bias=True)),
    "seed_oss-out-bias": ("SeedOssForCausalLM", dict(
        model_type="seed_oss", **_TINY, attention_bias=False, attention_out_bias=True,
        initializer_range=0.2)),
    "ernie4_5": ("Ernie4_5ForCausalLM", dict(
        model_type="ernie4_5", **_TINY, use_bias=True, initializer_range=0.2)),
    "helium": ("HeliumForCausalLM", dict(
        model_type="helium", **_TINY, attention_bias=True, mlp_bias=True,
        initializer_range=0.2)),
    # the window (4) on the first of three layers
    "ministral": ("MinistralForCausalLM", dict(
        model_type="ministral", **{**_TINY, "num_hidden_layers": 3}, sliding_window=4,
        layer_types=["sliding_attention", "full_attention", "full_attention"])),
    # RoPE on half of each head (GlmConfig's default), interleaved there
    "glm": ("GlmForCausalLM", dict(model_type="glm", **_TINY)),
    "glm4": ("Glm4ForCausalLM", dict(
        model_type="glm4", **_TINY, partial_rotary_factor=0.25, attention_bias=False)),
    # full, windowed (4), windowed; Llama 3's RoPE scaling (CwmConfig's default)
    "cwm": ("CwmForCausalLM", dict(
        model_type="cwm", **{**_TINY, "num_hidden_layers": 3}, sliding_window=4,
        layer_types=["full_attention", "sliding_attention", "sliding_attention"])),
    "arcee": ("ArceeForCausalLM", dict(
        model_type="arcee", **_TINY, attention_bias=True, mlp_bias=True, bos_token_id=1,
        eos_token_id=2, initializer_range=0.2)),
    "nemotron": ("NemotronForCausalLM", dict(
        model_type="nemotron", **{**_TINY, "head_dim": 32}, attention_bias=True,
        mlp_bias=True, bos_token_id=1, eos_token_id=2, initializer_range=0.2)),
    "jais2": ("Jais2ForCausalLM", dict(
        model_type="jais2", **_TINY, bos_token_id=1, eos_token_id=2, initializer_range=0.2)),
}
# fmt: on


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


def test_imported_structure() -> None:
    seed = import_config(REAL["seed_oss"]).spec
    assert (seed.attention.bias, seed.attention.qkv_bias, seed.head_dim) == (False, True, 128)
    assert import_config(REAL["ernie4_5"]).spec.position.interleaved
    helium = import_config(REAL["helium"]).spec
    assert helium.position.interleaved and helium.norm.eps == 1e-8
    ministral = import_config(REAL["ministral"]).spec
    assert (ministral.attention.sliding_window, ministral.attention.window_pattern) == (4096, "L")
    full = import_config({**REAL["ministral"], "sliding_window": None}).spec
    assert full.attention.sliding_window is None
    glm = import_config(REAL["glm"]).spec
    assert (glm.position.rotary_dim, glm.position.interleaved) == (64, True)
    assert import_config(REAL["glm4"]).spec.residual == "sandwich"
    cwm = import_config(REAL["cwm"]).spec
    assert (cwm.attention.sliding_window, cwm.attention.window_pattern) == (8192, "GLLL")
    assert cwm.position.scaling.type == "llama3"
    arcee = import_config(REAL["arcee"]).spec
    assert (arcee.mlp.gated, arcee.mlp.activation) == (False, "squared_relu")
    nemotron = import_config(REAL["nemotron"]).spec
    assert (nemotron.norm.kind, nemotron.position.rotary_dim) == ("offset_layernorm", 64)
    jais2 = import_config(REAL["jais2"]).spec
    assert (jais2.norm.kind, jais2.mlp.activation, jais2.mlp.bias) == (
        "layernorm",
        "squared_relu",
        True,
    )


def test_helium_refuses_heads_narrower_than_its_output_projection() -> None:
    with pytest.raises(SpecError, match="hidden_size") as err:
        import_config({**REAL["helium"], "head_dim": 64})
    assert err.value.path == "head_dim"
