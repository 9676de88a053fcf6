"""RemBERT (`model_type: rembert`, google/rembert): BERT's encoder with embeddings
`input_embedding_size` wide, normalised and then projected to `hidden_size`
(`encoder.embedding_hidden_mapping_in`, as ALBERT's), and BERT's pooler.

Its masked-LM head projects to `output_embedding_size` (not hidden_size) before its untied
decoder, which a spec's masked-LM transform cannot say: RemBertForMaskedLM is refused, the
encoder imports alone."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families._bert_like import (
    BERT_LIKE_BUFFERS,
    CAUSAL,
    bert_like_names,
    bert_like_unsupported_heads,
    export_bert_like,
    import_bert_like,
)
from archspec.hf.family import Family, HFClass, NameRules
from archspec.spec.schema import Spec

DEFAULTS = {
    "hidden_size": 1152,
    "num_hidden_layers": 32,
    "num_attention_heads": 18,
    "intermediate_size": 4608,
    "hidden_act": "gelu",
}
DROPOUTS = {
    "attention": ("attention_probs_dropout_prob", 0.0),
    "hidden": ("hidden_dropout_prob", 0.0),
    "embedding": ("hidden_dropout_prob", 0.0),
}
MLM = (
    "a transform to output_embedding_size and a decoder from that width, where a spec's "
    "masked-LM transform keeps hidden_size"
)


def import_rembert(f: Fields, cls: HFClass) -> dict[str, Any]:
    d = f.int("hidden_size", DEFAULTS["hidden_size"])
    width = f.int("input_embedding_size", 256)
    if width == d:  # RemBertEncoder projects even then; a spec projects only a narrower one
        raise f.error(
            "input_embedding_size",
            "input_embedding_size = hidden_size: RemBERT still projects the embeddings",
        )
    f.harmless("output_embedding_size")  # the masked-LM head's alone
    data = {k: v for k, v in f.data.items() if k != "input_embedding_size"}
    f.data = {**data, "embedding_size": width}
    spec = import_bert_like(
        f, cls, roberta=False, vocab_default=250300, defaults=DEFAULTS, factorised=True,
        places=DROPOUTS,
    )  # fmt: skip
    return spec


def export_rembert(spec: Spec) -> dict[str, Any]:
    return {
        **export_bert_like(spec, DROPOUTS),
        "input_embedding_size": spec.embedding_dim,
        "pad_token_id": 0,
    }


_BERT = bert_like_names("rembert.")

FAMILY = Family(
    model_type="rembert",
    classes=(HFClass("RemBertModel", "rembert", "pooler", base=True),),
    bases=("_bert",),
    spec_family="rembert",
    import_config=import_rembert,
    export_config=export_rembert,
    names=NameRules(
        "rembert.",
        model=_BERT.model,
        stack=lambda w: (
            "encoder.embedding_hidden_mapping_in" if w.local == "emb_proj" else _BERT.stack(w)
        ),
        blocks=_BERT.blocks,
        block=_BERT.block,
    ),
    buffers=BERT_LIKE_BUFFERS,
    unsupported_heads=bert_like_unsupported_heads(
        {"RemBertForMaskedLM": MLM, "RemBertForCausalLM": CAUSAL}, "RemBertModel", "cls.*"
    ),
)
