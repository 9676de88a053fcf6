"""ELECTRA (`model_type: electra`): BERT's encoder without a pooler, whose embeddings are
`embedding_size` wide and projected to `hidden_size` (`embeddings_project`) when the two differ
(the small models and the generators; the base and large discriminators have none)."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families._bert_like import (
    BERT_LIKE_BUFFERS,
    bert_like_names,
    bert_like_unsupported_heads,
    export_bert_like,
    import_bert_like,
)
from archspec.hf.family import Family, HFClass, NameRules
from archspec.spec.schema import Spec

DEFAULTS = {
    "hidden_size": 256,
    "num_hidden_layers": 12,
    "num_attention_heads": 4,
    "intermediate_size": 1024,
    "hidden_act": "gelu",
}


def import_electra(f: Fields, cls: HFClass) -> dict[str, Any]:
    # The sequence summary of ElectraForMultipleChoice: no part of the classes mapped here.
    f.harmless("summary_type", "summary_use_proj", "summary_activation")
    return import_bert_like(f, cls, roberta=False, defaults=DEFAULTS, factorised=True)


def export_electra(spec: Spec) -> dict[str, Any]:
    return {**export_bert_like(spec), "embedding_size": spec.embedding_dim}


_BERT = bert_like_names("electra.")
FAMILY = Family(
    model_type="electra",
    classes=(HFClass("ElectraModel", "electra", "none", base=True),),
    bases=("_electra",),
    import_config=import_electra,
    export_config=export_electra,
    names=NameRules(
        "electra.",
        model=_BERT.model,
        stack=lambda w: "embeddings_project" if w.local == "emb_proj" else _BERT.stack(w),
        blocks=_BERT.blocks,
        block=_BERT.block,
    ),
    buffers=BERT_LIKE_BUFFERS,
    unsupported_heads=bert_like_unsupported_heads(
        ("ElectraForPreTraining", "ElectraForMaskedLM"),
        "ElectraModel",
        "discriminator_predictions.*",
    ),
)
