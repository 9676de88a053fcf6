"""RoBERTa (`model_type: roberta`): BERT's architecture, positions numbered after padding."""

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
    model_type="roberta",
    classes=(
        HFClass("RobertaModel", "roberta", "pooler", base=True),
        HFClass("RobertaForMaskedLM", "roberta", "lm", base=False),
    ),
    bases=("_roberta",),
    import_config=lambda f, cls: import_bert_like(f, cls, roberta=True),
    export_config=export_bert_like,
    names=bert_like_names("roberta.", ROBERTA_MLM),
    buffers=BERT_LIKE_BUFFERS,
    unsupported_heads=bert_like_unsupported_heads(
        {"RobertaForCausalLM": CAUSAL}, "RobertaModel", "lm_head.*"
    ),
)
