"""CamemBERT (`model_type: camembert`): RoBERTa's architecture and checkpoint names
(`roberta.`) under its own classes, with a French SentencePiece vocabulary (CamembertConfig's
default vocab_size is BERT's)."""

from __future__ import annotations

from archspec.hf.families._bert_like import (
    BERT_LIKE_BUFFERS,
    CAUSAL,
    ROBERTA_MLM,
    bert_like_names,
    bert_like_unsupported_heads,
    export_bert_like,
    import_bert_like,
)
from archspec.hf.family import Family, HFClass

FAMILY = Family(
    model_type="camembert",
    classes=(
        HFClass("CamembertModel", "camembert", "pooler", base=True),
        HFClass("CamembertForMaskedLM", "camembert", "lm", base=False),
    ),
    bases=("_roberta",),
    spec_family="camembert",
    import_config=lambda f, cls: import_bert_like(f, cls, roberta=True, vocab_default=30522),
    export_config=export_bert_like,
    names=bert_like_names("roberta.", ROBERTA_MLM),
    buffers=BERT_LIKE_BUFFERS,
    unsupported_heads=bert_like_unsupported_heads(
        {"CamembertForCausalLM": CAUSAL}, "CamembertModel", "lm_head.*"
    ),
)
