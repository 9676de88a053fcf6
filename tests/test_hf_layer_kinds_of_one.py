"""Configs whose layers are all of one kind where the family's base spec mixes two: every
layer global in GPT-Neo and ModernBERT, every layer rotated in SmolLM3, every layer windowed
in Cohere 2 (and, in tests/test_hf_zoo_rope_layers.py, Gemma 2 and Gemma 3). The importer
once wrote a family's layer pattern only where the config's mixed kinds, so these imported
with the base spec's pattern: a windowed layer in every other GPT-Neo layer, two in three
ModernBERT layers, a NoPE layer in every fourth SmolLM3 and Cohere 2 layer, with nothing
said. Checked against transformers' own classes: the pattern read, and (long tests, tiny
random models) the logits and greedy tokens of the generated code on the same weights."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from archspec.hf.import_config import import_config
from tests.test_hf_modernbert import TINY as MODERNBERT_TINY
from tests.test_hf_weights import assert_close, batch
from tests.test_hf_zoo_rope_layers import COHERE2_TINY, SMOLLM3_TINY
from tests.zoo_check import check_logits_and_tokens

pytest.importorskip("transformers")

GPT_NEO_GLOBAL = dict(model_type="gpt_neo", hidden_size=64, num_layers=2, num_heads=4,
                      intermediate_size=128, max_position_embeddings=32, window_size=4,
                      attention_types=[[["global"], 2]], vocab_size=256)  # fmt: skip
SMOLLM3_ROTATED = {**SMOLLM3_TINY, "no_rope_layers": [1, 1, 1, 1]}
COHERE2_WINDOWED = {**COHERE2_TINY, "layer_types": ["sliding_attention"] * 4}
MODERNBERT_GLOBAL = {**MODERNBERT_TINY, "global_attn_every_n_layers": 1}

CASES = {
    # (class, config, each layer windowed, each layer's positions)
    "gpt-neo-global": ("GPTNeoForCausalLM", GPT_NEO_GLOBAL, "..", "PP"),
    "smollm3-rotated": ("SmolLM3ForCausalLM", SMOLLM3_ROTATED, "....", "PPPP"),
    "cohere2-windowed": ("Cohere2ForCausalLM", COHERE2_WINDOWED, "WWWW", "PPPP"),
    "modernbert-global": ("ModernBertForMaskedLM", MODERNBERT_GLOBAL, "....", "PPPP"),
}


@pytest.mark.parametrize("case", CASES)
def test_the_layers_import_as_the_config_says(case: str) -> None:
    cls, fields, windowed, positions = CASES[case]
    spec = import_config({**fields, "architectures": [cls]}).spec
    n = spec.n_layers
    assert "".join("W" if spec.windowed(i) else "." for i in range(n)) == windowed
    assert "".join(spec.position_letter(i) for i in range(n)) == positions
    assert spec.local_position is None


@pytest.mark.long
@pytest.mark.parametrize("case", ["gpt-neo-global", "smollm3-rotated", "cohere2-windowed"])
def test_the_decoders_equal_transformers(case: str, tmp_path: Path) -> None:
    cls, fields, *_ = CASES[case]
    check_logits_and_tokens(cls, fields, tmp_path)


@pytest.mark.long
def test_modernbert_with_every_layer_global_equals_transformers(tmp_path: Path) -> None:
    from tests.test_hf_modernbert import generated, load_weights, tiny_model

    hf = tiny_model("ModernBertForMaskedLM", MODERNBERT_GLOBAL)
    hf.save_pretrained(tmp_path / "checkpoint")
    module, _ = generated(tmp_path / "checkpoint", tmp_path)
    model = load_weights(module.Model().eval(), tmp_path / "checkpoint")
    ids, mask = batch(0)
    real = mask.bool()
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask).logits
        assert_close(model(ids, mask)[real], ref[real])
