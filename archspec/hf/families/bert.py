"""BERT (`model_type: bert`): a post-norm encoder with token types and a pooler."""

from __future__ import annotations

from archspec.hf.families._bert_like import (
    BERT_LIKE_BUFFERS,
    BERT_MLM,
    CAUSAL,
    PRETRAINING,
    bert_like_names,
    bert_like_unsupported_heads,
    export_bert_like,
    import_bert_like,
)
from archspec.hf.family import Family, HFClass

FAMILY = Family(
    model_type="bert",
    classes=(
        HFClass("BertModel", "bert", "pooler", base=True),
        HFClass("BertForMaskedLM", "bert", "lm", base=False),
    ),
    bases=("_bert",),
    import_config=lambda f, cls: import_bert_like(f, cls, roberta=False),
    export_config=export_bert_like,
    names=bert_like_names("bert.", BERT_MLM),
    buffers=BERT_LIKE_BUFFERS,
    unsupported_heads=bert_like_unsupported_heads(
        {
            "BertForPreTraining": PRETRAINING.format(
                "next-sentence prediction, cls.seq_relationship"
            ),
            "BertLMHeadModel": CAUSAL,
        },
        "BertModel",
        "cls.*",
    ),
)
