"""ELECTRA (`model_type: electra`): BERT's encoder without a pooler, whose embeddings are
`embedding_size` wide and projected to `hidden_size` (`embeddings_project`) when the two differ
(the small models and the generators; the base and large discriminators have none)."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families._bert_like import (
    BERT_LIKE_BUFFERS,
    bert_like_names,
    export_bert_like,
    import_bert_like,
    mlm_head,
)
from archspec.hf.family import Family, HFClass, NameRules, Target
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
    spec = import_bert_like(
        f, cls, roberta=False, defaults=DEFAULTS, factorised=True, separate_bias=False
    )
    if cls.head == "lm" and spec["mlp"]["activation"] != "gelu":
        spec["head"]["transform_activation"] = "gelu"  # ElectraGeneratorPredictions
    return spec


def export_electra(spec: Spec) -> dict[str, Any]:
    return {**export_bert_like(spec), "embedding_size": spec.embedding_dim}


_BERT = bert_like_names("electra.")
# ElectraForMaskedLM (the generator): its transform calls gelu whatever hidden_act says.
_GENERATOR = mlm_head(
    "generator_predictions.dense",
    "generator_predictions.LayerNorm",
    "generator_lm_head",
    None,
) | {  # ElectraForPreTraining, the discriminator
    "score_dense": Target("discriminator_predictions.dense", outside=True),
    "score": Target("discriminator_predictions.dense_prediction", outside=True),
}
FAMILY = Family(
    model_type="electra",
    classes=(
        HFClass("ElectraModel", "electra", "none", base=True),
        HFClass("ElectraForMaskedLM", "electra", "lm", base=False),
        HFClass("ElectraForPreTraining", "electra", "score", base=False),
    ),
    bases=("_electra",),
    import_config=import_electra,
    export_config=export_electra,
    names=NameRules(
        "electra.",
        model=lambda w: _GENERATOR.get(w.local) or _BERT.model(w),
        stack=lambda w: "embeddings_project" if w.local == "emb_proj" else _BERT.stack(w),
        blocks=_BERT.blocks,
        block=_BERT.block,
    ),
    buffers=BERT_LIKE_BUFFERS,
)
