"""ALBERT (`model_type: albert`): BERT with factorised embeddings (`embedding_size`, projected
to `hidden_size` by `embedding_hidden_mapping_in`) and layers sharing weights: one block per
`num_hidden_groups`, each run `num_hidden_layers / num_hidden_groups` times in a row."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.dropouts import Places
from archspec.hf.families._bert_like import (
    BERT_LIKE_BUFFERS,
    PRETRAINING,
    bert_like_unsupported_heads,
    export_bert_like,
    import_bert_like,
    mlm_head,
)
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import table
from archspec.spec.schema import Spec

DEFAULTS = {
    "hidden_size": 4096,
    "num_hidden_layers": 12,
    "num_attention_heads": 64,
    "intermediate_size": 16384,
    "hidden_act": "gelu_new",
}
DROPOUTS: Places = {
    "attention": ("attention_probs_dropout_prob", 0.0),
    "hidden": ("hidden_dropout_prob", 0.0),
    "embedding": ("hidden_dropout_prob", 0.0),
}


def import_albert(f: Fields, cls: HFClass) -> dict[str, Any]:
    # Fields of Google's TF ALBERT for variants transformers never built: only their
    # neutral values (transformers ignores them, so any other value would mean another model).
    for key, neutral in (
        ("down_scale_factor", 1),
        ("gap_size", 0),
        ("net_structure_type", 0),
        ("num_memory_blocks", 0),
    ):
        f.expect(key, neutral, neutral, "a TF ALBERT variant transformers does not implement")
    f.expect(
        "inner_group_num",
        1,
        1,
        "each of ALBERT's layer groups would hold that many different layers, run in turn "
        "every time the group runs; a spec's layer_groups share one layer per group",
    )
    spec = import_bert_like(
        f, cls, roberta=False, vocab_default=30000, defaults=DEFAULTS, places=DROPOUTS,
        factorised=True,
    )  # fmt: skip
    if "dim" in spec["embedding"] and spec["embedding"]["dim"] is None:
        raise f.error(
            "embedding_size",
            f"{spec['d_model']}, the hidden size: ALBERT still projects it "
            "(embedding_hidden_mapping_in, a hidden_size² linear), and a spec projects only "
            "embeddings of another width",
        )
    layers = spec["n_layers"]
    groups = f.int("num_hidden_groups", 1)
    if groups < 1 or layers % groups:
        raise f.error(
            "num_hidden_groups",
            f"num_hidden_groups ({groups}) does not divide num_hidden_layers ({layers}): "
            "transformers would then use the groups for unequal numbers of layers",
        )
    spec["layer_groups"] = groups if groups != layers else None
    return spec


def export_albert(spec: Spec) -> dict[str, Any]:
    return {
        **export_bert_like(spec, DROPOUTS),
        "embedding_size": spec.embedding_dim,
        "num_hidden_groups": spec.layer_groups or spec.n_layers,
        "inner_group_num": 1,
    }


# transformers' names inside one layer group's (only) layer.
LAYER = "albert_layers.0."

FAMILY = Family(
    model_type="albert",
    classes=(
        HFClass("AlbertModel", "albert", "pooler", base=True),
        HFClass("AlbertForMaskedLM", "albert", "lm", base=False),
    ),
    bases=("_albert",),
    import_config=import_albert,
    export_config=export_albert,
    names=NameRules(
        "albert.",
        model=table(
            {
                "tok_emb": "embeddings.word_embeddings",
                "type_emb": "embeddings.token_type_embeddings",
                "pooler": "pooler",
                **mlm_head(
                    "predictions.dense",
                    "predictions.LayerNorm",
                    "predictions.decoder",
                    "predictions",
                ),  # fmt: skip
            }
        ),
        stack=table(
            {
                "pos_emb": "embeddings.position_embeddings",
                "emb_norm": "embeddings.LayerNorm",
                "emb_proj": "encoder.embedding_hidden_mapping_in",
            }
        ),
        blocks=lambda role: "encoder.albert_layer_groups",
        block=table(
            {
                "attn.q": LAYER + "attention.query",
                "attn.k": LAYER + "attention.key",
                "attn.v": LAYER + "attention.value",
                "attn.o": LAYER + "attention.dense",
                "attn_norm": LAYER + "attention.LayerNorm",
                "mlp.up": LAYER + "ffn",
                "mlp.down": LAYER + "ffn_output",
                "mlp_norm": LAYER + "full_layer_layer_norm",
            }
        ),
    ),
    buffers=BERT_LIKE_BUFFERS,
    unsupported_heads=bert_like_unsupported_heads(
        {"AlbertForPreTraining": PRETRAINING.format("sentence-order prediction, sop_classifier")},
        "AlbertModel",
        "predictions.*",
        "sop_classifier.*",
    ),
)
