"""BertGeneration (`model_type: bert-generation`, the BERT encoders of Rothe et al.'s
seq2seq warm-starting): BERT's blocks and names without token types or a pooler, as
`BertGenerationEncoder`. The decoder class (`BertGenerationDecoder`, causal with
cross-attention) is not imported."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families._bert_like import (
    BERT_LIKE_BUFFERS,
    bert_like_names,
    export_bert_like,
    import_bert_like,
)
from archspec.hf.family import Family, HFClass
from archspec.spec.schema import Spec

# BertGenerationConfig's sizes (bert_for_seq_generation_L-24_bbc_encoder's).
DEFAULTS = {
    "hidden_size": 1024,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "hidden_act": "gelu",
}
READER = "BertGenerationConfig and BertGenerationEncoder"


def import_bert_generation(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.ignored("type_vocab_size", READER)  # no token-type table
    spec = import_bert_like(f, cls, roberta=False, vocab_default=50358, defaults=DEFAULTS)
    spec["embedding"]["token_types"] = 0
    return spec


def export_bert_generation(spec: Spec) -> dict[str, Any]:
    fields = export_bert_like(spec)
    del fields["type_vocab_size"]
    return fields


FAMILY = Family(
    model_type="bert-generation",
    classes=(HFClass("BertGenerationEncoder", "bert-generation", "none", base=True),),
    bases=("_bert",),
    spec_family="bert-generation",
    import_config=import_bert_generation,
    export_config=export_bert_generation,
    names=bert_like_names("bert."),
    buffers=BERT_LIKE_BUFFERS,
)
