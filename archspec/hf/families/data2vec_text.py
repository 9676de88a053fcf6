"""data2vec-text (`model_type: data2vec-text`): RoBERTa's architecture and names under
`data2vec_text.`, positions numbered after the padding index; Data2VecTextConfig's default
vocab_size is BERT's."""

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
    model_type="data2vec-text",
    classes=(
        HFClass("Data2VecTextModel", "data2vec-text", "pooler", base=True),
        HFClass("Data2VecTextForMaskedLM", "data2vec-text", "lm", base=False),
    ),
    bases=("_roberta",),
    spec_family="data2vec-text",
    import_config=lambda f, cls: import_bert_like(f, cls, roberta=True, vocab_default=30522),
    export_config=export_bert_like,
    names=bert_like_names("data2vec_text.", ROBERTA_MLM),
    buffers=BERT_LIKE_BUFFERS,
    unsupported_heads=bert_like_unsupported_heads(
        {"Data2VecTextForCausalLM": CAUSAL}, "Data2VecTextModel", "lm_head.*"
    ),
)
