"""Config fields given as null where the config class keeps the None and its model reads it
otherwise than the left-out default (a fuzz of every family's fields found them): the soft caps
of Gemma 2 and VaultGemma (null: no cap, not 50 and 30), GraniteMoe's attention_multiplier
(null: SDPA's 1/sqrt(head_dim), not 1), GLM's and MiniMax-M2's partial_rotary_factor
(null: the whole head rotates, not half or rotary_dim), T5's is_gated_act (null: the ungated
MLP) and scale_decoder_outputs (null: no scaling), Qwen2's sliding_window beside
use_sliding_window (null: no window). Each imported as the left-out default before, a silent
other model; checked against transformers' own classes (the decoders' logits and greedy
tokens on tiny random models are long tests). Beside them, values transformers keeps but
cannot build with (a null rotary fraction in Phi and its kin, an empty token-type table),
refused where they were read as something else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from archspec.hf.weights import load_weights
from tests.hf_reference import FAMILY_CONFIGS
from tests.test_hf_weights import VOCAB, assert_close, batch, generated, greedy_hf
from tests.zoo_check import tiny_model

transformers = pytest.importorskip("transformers")


def fields(name: str, **changes) -> dict:
    kept = {
        k: v for k, v in FAMILY_CONFIGS[name].items() if k not in ("architectures", "vocab_size")
    }
    return {"model_type": name, **kept, **changes}


def imported(cls: str, config: dict):
    return import_config({**config, "architectures": [cls]}).spec


DECODERS = {
    "gemma2-final-cap": ("Gemma2ForCausalLM", fields("gemma2", final_logit_softcapping=None)),
    "gemma2-attention-cap": ("Gemma2ForCausalLM", fields(
        "gemma2", attn_logit_softcapping=None, query_pre_attn_scalar=1)),
    "vaultgemma-caps": ("VaultGemmaForCausalLM", fields(
        "vaultgemma", attn_logit_softcapping=None, final_logit_softcapping=None)),
    "granitemoe-multiplier": ("GraniteMoeForCausalLM", fields(
        "granitemoe", attention_multiplier=None)),
    "granitemoeshared-multiplier": ("GraniteMoeSharedForCausalLM", fields(
        "granitemoeshared", attention_multiplier=None)),
    "glm-rotary": ("GlmForCausalLM", fields("glm", partial_rotary_factor=None, pad_token_id=0)),
    "glm4-rotary": ("Glm4ForCausalLM", fields("glm4", partial_rotary_factor=None, pad_token_id=0)),
    "glm4_moe-rotary": ("Glm4MoeForCausalLM", fields("glm4_moe", partial_rotary_factor=None)),
    # MiniMaxM2Config derives the factor from rotary_dim by setdefault: a null one outranks it
    "minimax_m2-rotary": ("MiniMaxM2ForCausalLM", fields(
        "minimax_m2", partial_rotary_factor=None, pad_token_id=0)),
}  # fmt: skip


def test_each_null_imports_as_the_model_reads_it() -> None:
    gemma2 = imported(*DECODERS["gemma2-final-cap"])
    assert gemma2.head.softcap is None and gemma2.attention.softcap == 50.0
    vault = imported(*DECODERS["vaultgemma-caps"])
    assert vault.head.softcap is None and vault.attention.softcap is None
    for case in ("granitemoe-multiplier", "granitemoeshared-multiplier"):
        assert imported(*DECODERS[case]).attention.scale is None, case
    for case in ("glm-rotary", "glm4-rotary", "glm4_moe-rotary", "minimax_m2-rotary"):
        assert imported(*DECODERS[case]).position.rotary_dim is None, case  # the whole head
    t5 = {"model_type": "t5", "feed_forward_proj": "gated-gelu", "is_gated_act": None}
    assert not imported("T5ForConditionalGeneration", t5).mlp.gated
    unscaled = {"model_type": "t5", "scale_decoder_outputs": None}
    assert not imported("T5ForConditionalGeneration", unscaled).head.scale_tied_output
    qwen2 = {**fields("qwen2"), "use_sliding_window": True, "sliding_window": None}
    assert imported("Qwen2ForCausalLM", qwen2).attention.sliding_window is None


def test_the_nulls_transformers_builds_the_same_way() -> None:
    """What the assertions above stand on, read off transformers' config classes and modules."""
    from transformers import Qwen2Config, T5Config, T5ForConditionalGeneration

    t5 = T5Config(feed_forward_proj="gated-gelu", is_gated_act=None, d_model=32, d_ff=64,
                  num_layers=1, num_heads=2, d_kv=16, vocab_size=50)  # fmt: skip
    block = T5ForConditionalGeneration(t5).encoder.block[0].layer[1].DenseReluDense
    assert type(block).__name__ == "T5DenseActDense"
    assert T5Config(scale_decoder_outputs=None).scale_decoder_outputs is None
    qwen2 = Qwen2Config(use_sliding_window=True, sliding_window=None, num_hidden_layers=4)
    assert qwen2.layer_types == ["full_attention"] * 4


def test_dense_granite_refuses_a_null_multiplier() -> None:
    with pytest.raises(SpecError, match="attention_multiplier"):
        imported("GraniteForCausalLM", fields("granite", attention_multiplier=None))


@pytest.mark.long
@pytest.mark.parametrize("case", DECODERS)
def test_the_decoders_equal_transformers(case: str, tmp_path: Path) -> None:
    """The nulls written into the saved config.json, and transformers' model loaded from that
    file: both sides read the same file (transformers' own save drops a null it keeps in
    memory, GLM's partial_rotary_factor, whose reload then rotates half the head)."""
    cls, config = DECODERS[case]
    nulls = [key for key, value in config.items() if value is None]
    hf = tiny_model(cls, config)
    checkpoint = tmp_path / "checkpoint"
    hf.save_pretrained(checkpoint)
    written = json.loads((checkpoint / "config.json").read_text())
    (checkpoint / "config.json").write_text(json.dumps({**written, **dict.fromkeys(nulls)}))
    hf = getattr(transformers, cls).from_pretrained(checkpoint).eval()
    module, _ = generated(checkpoint, tmp_path)
    model = load_weights(module.Model().eval(), checkpoint)
    ids, mask = batch(0)
    real = mask.bool()
    with torch.no_grad():
        assert_close(model(ids, mask)[real], hf(input_ids=ids, attention_mask=mask).logits[real])
        prompt = torch.randint(3, VOCAB, (2, 5))
        assert torch.equal(model.generate(prompt, 16), greedy_hf(hf, prompt, 16))


@pytest.mark.parametrize(
    ("family", "key"),
    [("phi", "partial_rotary_factor"), ("persimmon", "partial_rotary_factor"),
     ("stablelm", "partial_rotary_factor"), ("nemotron", "partial_rotary_factor"),
     ("gpt_neox", "rotary_pct"), ("cohere", "logit_scale"), ("cohere2", "logit_scale"),
     ("granite", "embedding_multiplier"), ("granite", "residual_multiplier"),
     ("granite", "logits_scaling"), ("granitemoe", "embedding_multiplier"),
     ("falcon", "activation"), ("qwen2_moe", "num_key_value_heads"),
     ("glm", "num_key_value_heads"), ("nemotron", "num_key_value_heads"),
     ("cohere2", "head_dim"), ("ministral", "head_dim"), ("glm", "head_dim"),
     ("bart", "activation_function")],
)  # fmt: skip
def test_a_null_transformers_cannot_build_is_refused(family: str, key: str) -> None:
    """Nulls that transformers cannot build with: its config class refuses them, or keeps
    them and the model fails (a KeyError, a TypeError). Refused, naming the field, where they
    were read as the default."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = fields(family, **{key: None})
    with pytest.raises(Exception):  # noqa: B017, PT011 (each class fails its own way)
        built = AutoConfig.for_model(**config)
        AutoModelForCausalLM.from_config(built)(torch.tensor([[1, 2, 3]]))
    cls = FAMILY_CONFIGS[family]["architectures"][0]
    with pytest.raises(SpecError, match=f"{key}.*null"):
        imported(cls, config)


@pytest.mark.parametrize("family", ["bert", "roberta", "electra", "albert", "megatron-bert"])
def test_an_empty_token_type_table_is_refused(family: str) -> None:
    """type_vocab_size 0: transformers builds a table of no rows and its forward fails; it was
    imported as a model without token types (a helper's audit of the encoder families)."""
    from transformers import AutoConfig, AutoModel

    config = fields(family, type_vocab_size=0)
    model = AutoModel.from_config(AutoConfig.for_model(**config))
    with pytest.raises(RuntimeError):
        model(input_ids=torch.tensor([[5, 6, 7]]))
    cls = FAMILY_CONFIGS[family]["architectures"][0]
    with pytest.raises(SpecError, match="type_vocab_size"):
        imported(cls, config)
