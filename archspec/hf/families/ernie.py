"""ERNIE (`model_type: ernie`, Baidu's ERNIE 1.0 to 3.0 in transformers): BERT's architecture
and names under `ernie.`. Its optional task-type embeddings (`use_task_id: true`, a third
embedding table added to every token) are refused."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
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


def import_ernie(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.expect("use_task_id", False, False, "task-type embeddings added to every token")
    f.harmless("task_type_vocab_size")  # the size of that table, unused without it
    return import_bert_like(f, cls, roberta=False)


FAMILY = Family(
    model_type="ernie",
    classes=(
        HFClass("ErnieModel", "ernie", "pooler", base=True),
        HFClass("ErnieForMaskedLM", "ernie", "lm", base=False),
    ),
    bases=("_bert",),
    spec_family="ernie",
    import_config=import_ernie,
    export_config=export_bert_like,
    names=bert_like_names("ernie.", BERT_MLM),
    buffers=BERT_LIKE_BUFFERS,
    unsupported_heads=bert_like_unsupported_heads(
        {
            "ErnieForPreTraining": PRETRAINING.format(
                "next-sentence prediction, cls.seq_relationship"
            ),
            "ErnieForCausalLM": CAUSAL,
        },
        "ErnieModel",
        "cls.*",
    ),
)
