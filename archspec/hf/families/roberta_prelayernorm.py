"""RoBERTa-PreLayerNorm (`model_type: roberta-prelayernorm`, the efficient-MLM models):
RoBERTa's encoder made pre-norm (`attention.LayerNorm` before attention,
`intermediate.LayerNorm` before the MLP) with a final norm (the base model's `LayerNorm`),
keeping the norm on the embeddings; RoBERTa's positions, pooler and masked-LM head."""

from __future__ import annotations

from archspec.hf.families._bert_like import (
    BERT_DEFAULTS,
    BERT_LIKE_BUFFERS,
    CAUSAL,
    ROBERTA_MLM,
    bert_like_unsupported_heads,
    export_bert_like,
)
from archspec.hf.families.xlm_roberta_xl import import_pre_norm_roberta
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import table

FAMILY = Family(
    model_type="roberta-prelayernorm",
    classes=(
        HFClass("RobertaPreLayerNormModel", "roberta-prelayernorm", "pooler", base=True),
        HFClass("RobertaPreLayerNormForMaskedLM", "roberta-prelayernorm", "lm", base=False),
    ),
    bases=("_roberta",),
    spec_family="roberta-prelayernorm",
    import_config=lambda f, cls: import_pre_norm_roberta(f, cls, True, BERT_DEFAULTS, {}, 50265),
    export_config=export_bert_like,
    names=NameRules(
        "roberta_prelayernorm.",
        model=table(
            {
                "tok_emb": "embeddings.word_embeddings",
                "type_emb": "embeddings.token_type_embeddings",
                "pooler": "pooler.dense",
                **ROBERTA_MLM,
            }
        ),
        stack=table(
            {
                "pos_emb": "embeddings.position_embeddings",
                "emb_norm": "embeddings.LayerNorm",
                "final_norm": "LayerNorm",
            }
        ),
        blocks=lambda role: "encoder.layer",
        block=table(
            {
                "attn_norm": "attention.LayerNorm",
                "attn.q": "attention.self.query",
                "attn.k": "attention.self.key",
                "attn.v": "attention.self.value",
                "attn.o": "attention.output.dense",
                "mlp_norm": "intermediate.LayerNorm",
                "mlp.up": "intermediate.dense",
                "mlp.down": "output.dense",
            }
        ),
    ),
    buffers=BERT_LIKE_BUFFERS,
    unsupported_heads=bert_like_unsupported_heads(
        {"RobertaPreLayerNormForCausalLM": CAUSAL}, "RobertaPreLayerNormModel", "lm_head.*"
    ),
)
