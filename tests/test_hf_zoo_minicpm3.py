"""MiniCPM3 (`minicpm3`) against transformers' own classes (tests/zoo_check.py says what is
measured)."""

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
# openbmb/MiniCPM3-4B. Sources: a test fixture quoting its config.json's sizes, found by
# exact-string search of public code ('"model_type": "minicpm3"'; repository not named by
# the index): hidden 2560, 62 layers, 40 heads, 40 kv heads, intermediate 6400, vocab 73448,
# q_lora_rank 768, kv_lora_rank 256, qk_nope_head_dim 64, qk_rope_head_dim 32,
# max_position_embeddings 32768; MiniCPM3Config's docstring and defaults (transformers 5,
# "Defaults match the openbmb/MiniCPM3-4B checkpoint": the same sizes, a tied head), and a
# conversion script found the same way: "MiniCPM3-4B ties embeddings (no lm_head.weight)".
MINICPM3_4B = {
    "architectures": ["MiniCPM3ForCausalLM"], "model_type": "minicpm3", "hidden_size": 2560,
    "num_hidden_layers": 62, "num_attention_heads": 40, "num_key_value_heads": 40,
    "intermediate_size": 6400, "vocab_size": 73448, "q_lora_rank": 768, "kv_lora_rank": 256,
    "qk_nope_head_dim": 64, "qk_rope_head_dim": 32, "max_position_embeddings": 32768,
    "tie_word_embeddings": True, "scale_emb": 12, "scale_depth": 1.4, "dim_model_base": 256,
}
REAL = {"minicpm3": MINICPM3_4B}

_LATENT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
               intermediate_size=96, max_position_embeddings=64, pad_token_id=0,
               kv_lora_rank=32, q_lora_rank=48, qk_rope_head_dim=8, qk_nope_head_dim=16,
               # MiniCPM3-4B's, beside the latents' norms' 1e-6
               rms_norm_eps=1e-5)
# name: (transformers class, config fields of a tiny model)
TINY: dict[str, tuple[str, dict[str, Any]]] = {
    # MiniCPM3-4B's scalings (hidden 60 over dim_model_base 6 divides by 10, as 2560 over
    # 256 does: not a power of two, so the head's input must be divided where transformers
    # divides it for the logits to agree bit for bit), an untied head
    "minicpm3": ("MiniCPM3ForCausalLM", dict(
        model_type="minicpm3", **{**_LATENT, "hidden_size": 60}, v_head_dim=12, scale_emb=12,
        scale_depth=1.4, dim_model_base=6, tie_word_embeddings=False)),
    # LongRoPE on the 8 rotated channels (the long table past 16 positions), no q_lora,
    # the tied head and v_head_dim of MiniCPM3Config's defaults
    "minicpm3-longrope": ("MiniCPM3ForCausalLM", dict(
        model_type="minicpm3", **{**_LATENT, "q_lora_rank": None}, scale_emb=12,
        scale_depth=1.4, dim_model_base=16, initializer_range=0.2, rope_parameters={
            "rope_type": "longrope", "rope_theta": 10000.0, "short_factor": [1.0, 1.5, 2.0, 2.5],
            "long_factor": [2.0, 3.0, 4.0, 5.0], "original_max_position_embeddings": 16})),
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


def test_minicpm3_refuses_an_embedding_scale_its_dtype_would_round() -> None:
    with pytest.raises(SpecError, match="rounds") as err:
        import_config({**MINICPM3_4B, "scale_emb": 1.1})
    assert err.value.path == "scale_emb"


def test_minicpm3_refuses_attention_biases() -> None:
    with pytest.raises(SpecError) as err:
        import_config({**MINICPM3_4B, "attention_bias": True})
    assert err.value.path == "attention_bias"
