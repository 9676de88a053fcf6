"""Generation past LongRoPE's original context, token for token like transformers.

transformers' Phi-3 (`Phi3ForCausalLM.prepare_inputs_for_generation`) drops its cache the
first time a sequence outgrows original_max_position_embeddings and recomputes every key
with the long factors; Llama keeps the keys it computed with the short factors. Tiny random
models of both (original context 8 of 32, tests/test_hf_weights.py), weights drawn wide so
that the tokens depend on the context, generate from a prompt of 5 to 25 tokens.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from archspec.errors import SpecError
from archspec.hf.export_config import hf_config_dict
from archspec.hf.import_config import import_config
from archspec.hf.weights import load_weights
from tests.test_generation_hf import hf_generate, lively
from tests.test_hf_weights import VOCAB, generated, hf_model, save

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models

STEPS = 20  # from 5 positions to 25, past the original context of 8


@pytest.fixture(scope="module", params=["phi3-longrope", "llama-rope-longrope"])
def pair(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    hf = lively(hf_model(request.param))
    checkpoint = save(hf, tmp / "checkpoint", request.param)
    module, _ = generated(checkpoint, tmp)
    return hf, load_weights(module.Model().eval(), checkpoint)


def prompt() -> torch.Tensor:
    torch.manual_seed(2)
    return torch.randint(3, VOCAB, (2, 5))


def test_greedy_tokens_equal_transformers_past_the_original_context(pair) -> None:
    hf, model = pair
    expected = hf_generate(hf, prompt(), STEPS)
    assert len(set(expected[0, 5:].tolist())) > 3  # not one token repeated
    assert torch.equal(model.generate(prompt(), STEPS), expected)


def test_left_padded_greedy_tokens_equal_transformers(pair) -> None:
    hf, model = pair
    ids = prompt()
    mask = torch.ones_like(ids)
    mask[1, :2] = 0
    ids[1, :2] = 0
    expected = hf_generate(hf, ids, STEPS, attention_mask=mask)
    assert torch.equal(model.generate(ids, STEPS, attention_mask=mask), expected)


def test_beam_search_equals_transformers_past_the_original_context(pair) -> None:
    hf, model = pair
    expected = hf_generate(hf, prompt(), STEPS, num_beams=4)
    assert torch.equal(model.generate(prompt(), STEPS, num_beams=4), expected)


def test_the_import_says_which_family_recomputes_and_export_keeps_to_it(tmp_path) -> None:
    """Phi-3's import says recompute_cache: true, LLaMA's false; a spec saying the other
    is refused on export to that family, naming the field, rather than written as a
    config.json transformers would generate other tokens from."""
    specs = {}
    for family in ("phi3-longrope", "llama-rope-longrope"):
        folder = save(hf_model(family), tmp_path / family, family)
        specs[family] = import_config(json.loads((folder / "config.json").read_text())).spec
    assert specs["phi3-longrope"].position.scaling.recompute_cache is True
    assert specs["llama-rope-longrope"].position.scaling.recompute_cache is False
    for spec in specs.values():
        scaling = spec.position.scaling
        flipped = replace(scaling, recompute_cache=not scaling.recompute_cache)
        with pytest.raises(SpecError, match="recompute_cache") as refused:
            hf_config_dict(replace(spec, position=replace(spec.position, scaling=flipped)))
        assert refused.value.path == "position.scaling.recompute_cache"
