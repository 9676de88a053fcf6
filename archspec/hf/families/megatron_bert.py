"""Megatron-BERT (`model_type: megatron-bert`, NVIDIA's Megatron-LM BERTs): BERT made
pre-norm, with no norm after the embeddings and a final norm on the encoder (`encoder.ln`);
a block's norms are `attention.ln` and `ln`."""

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
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain, table

# MegatronBertConfig's sizes (megatron-bert-uncased-345m's); the rest as BERT's.
DEFAULTS = {
    "hidden_size": 1024,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "hidden_act": "gelu",
}


def import_megatron_bert(f: Fields, cls: HFClass) -> dict[str, Any]:
    spec = import_bert_like(f, cls, roberta=False, vocab_default=29056, defaults=DEFAULTS)
    spec["residual"] = "pre"
    spec["final_norm"] = True
    spec["embedding"]["norm"] = False
    return spec


_BERT = bert_like_names("bert.", BERT_MLM)
NAMES = NameRules(
    "bert.",
    model=_BERT.model,
    stack=table({"pos_emb": "embeddings.position_embeddings", "final_norm": "encoder.ln"}),
    blocks=_BERT.blocks,
    block=chain(table({"attn_norm": "attention.ln", "mlp_norm": "ln"}), _BERT.block),
)

FAMILY = Family(
    model_type="megatron-bert",
    classes=(
        HFClass("MegatronBertModel", "megatron-bert", "pooler", base=True),
        HFClass("MegatronBertForMaskedLM", "megatron-bert", "lm", base=False),
    ),
    bases=("_megatron-bert",),
    import_config=import_megatron_bert,
    export_config=export_bert_like,
    names=NAMES,
    buffers=BERT_LIKE_BUFFERS,
    unsupported_heads=bert_like_unsupported_heads(
        {
            "MegatronBertForPreTraining": PRETRAINING.format(
                "next-sentence prediction, cls.seq_relationship"
            ),
            "MegatronBertForCausalLM": CAUSAL,
        },
        "MegatronBertModel",
        "cls.*",
    ),
)
