"""Config fields a fuzz of transformers' own config classes (about 146,000 mutated configs
over every family) found imported to a count other than transformers': each now counts as
transformers builds it, or is refused naming the field."""

from __future__ import annotations

import copy

import pytest

from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from tests.hf_counts import counts
from tests.hf_reference import FAMILY_CONFIGS

transformers = pytest.importorskip("transformers")


def _config(model_type: str, **changes) -> dict:
    return {"model_type": model_type, **copy.deepcopy(FAMILY_CONFIGS[model_type]), **changes}


@pytest.mark.parametrize(
    ("model_type", "changes"),
    [
        # FalconConfig keeps null, which its modeling code reads as false (was: the default, true)
        ("falcon", {"multi_query": None}),
        ("falcon", {"parallel_attn": None}),
        # Qwen3MLP takes bias=False whatever mlp_bias says (was: biases counted)
        ("qwen3", {"mlp_bias": True}),
        # an explicit head_dim outlives Cohere2Config's __post_init__ (was: reported ignored)
        ("cohere2", {"head_dim": 8}),
        # ELECTRA's generator head has one output bias: untied, it imports exactly
        ("electra", {"architectures": ["ElectraForMaskedLM"], "tie_word_embeddings": False}),
    ],
)
def test_counts_as_transformers_builds_it(model_type: str, changes: dict) -> None:
    ours, theirs = counts(_config(model_type, **changes))
    assert ours == theirs


def test_qwen3_mlp_bias_is_reported_as_ignored() -> None:
    notes = import_config(_config("qwen3", mlp_bias=True)).notes
    assert any("'mlp_bias'" in note and "ignored" in note for note in notes)


@pytest.mark.parametrize(
    ("model_type", "changes", "field"),
    [
        # untied, BART's family builds three token tables (and the head): a spec has one
        *((name, {"tie_word_embeddings": False}, "tie_word_embeddings")
          for name in ("bart", "mbart", "marian", "pegasus", "m2m_100", "plbart", "mvp",
                       "blenderbot")),
        # an untied masked-LM head keeps its output bias twice
        *((name, {"architectures": [cls], "tie_word_embeddings": False}, "tie_word_embeddings")
          for name, cls in (("bert", "BertForMaskedLM"), ("roberta", "RobertaForMaskedLM"),
                            ("albert", "AlbertForMaskedLM"), ("ernie", "ErnieForMaskedLM"))),
        # ALBERT projects its embeddings even at the hidden width
        ("albert", {"embedding_size": 64}, "embedding_size"),
    ],
)  # fmt: skip
def test_what_archspec_cannot_build_is_refused_naming_the_field(
    model_type: str, changes: dict, field: str
) -> None:
    config = _config(model_type, **changes)
    if field == "embedding_size":
        config["embedding_size"] = config["hidden_size"]
    with pytest.raises(SpecError) as err:
        import_config(config)
    assert err.value.path == field


def test_a_spec_refusal_names_the_spec_field_it_came_to() -> None:
    """'expected a positive number, got 0.0' named nothing a user could find in the config."""
    with pytest.raises(SpecError, match=r"\(the spec's attention\.scale\)"):
        import_config(_config("granite", attention_multiplier=0.0))


def test_a_left_out_key_value_head_count_says_it_took_the_default() -> None:
    config = _config("qwen2")
    config.pop("num_key_value_heads", None)
    with pytest.raises(SpecError, match="left out, it is the config class's default, 32") as err:
        import_config(config)
    assert err.value.path == "num_key_value_heads"
