"""XLM-RoBERTa XL and XXL (`model_type: xlm-roberta-xl`): RoBERTa's encoder made pre-norm
(a LayerNorm before attention, `attention.self_attn_layer_norm`, and before the MLP, the
layer's `LayerNorm`), no norm on the embeddings and a final norm (`encoder.LayerNorm`); its
masked-LM head and pooler are RoBERTa's."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families._bert_like import (
    BERT_LIKE_BUFFERS,
    CAUSAL,
    ROBERTA_MLM,
    bert_like_unsupported_heads,
    export_bert_like,
    import_bert_like,
)
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import table

DEFAULTS = {
    "hidden_size": 2560,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "intermediate_size": 10240,
    "hidden_act": "gelu",
}


# XLMRobertaXLConfig's defaults where they differ from BertConfig's
CONFIG_DEFAULTS = {"max_position_embeddings": 514, "type_vocab_size": 1, "layer_norm_eps": 1e-5}


def import_pre_norm_roberta(
    f: Fields,
    cls: HFClass,
    emb_norm: bool,
    defaults: dict[str, Any],
    config_defaults: dict[str, Any],
    vocab: int,
) -> dict[str, Any]:
    """A RoBERTa whose layers normalise their inputs, with a final norm (`emb_norm`: and its
    embeddings'); RoBERTa's positions, heads and dropouts."""
    f.data = {**config_defaults, **f.data}
    spec = import_bert_like(f, cls, roberta=True, vocab_default=vocab, defaults=defaults)
    spec["residual"] = "pre"
    spec["final_norm"] = True
    spec["embedding"] = {**spec["embedding"], "norm": emb_norm}
    return spec


FAMILY = Family(
    model_type="xlm-roberta-xl",
    classes=(
        HFClass("XLMRobertaXLModel", "xlm-roberta-xl", "pooler", base=True),
        HFClass("XLMRobertaXLForMaskedLM", "xlm-roberta-xl", "lm", base=False),
    ),
    bases=("_roberta",),
    spec_family="xlm-roberta-xl",
    import_config=lambda f, cls: import_pre_norm_roberta(
        f, cls, False, DEFAULTS, CONFIG_DEFAULTS, 250880
    ),
    export_config=export_bert_like,
    names=NameRules(
        "roberta.",
        model=table(
            {
                "tok_emb": "embeddings.word_embeddings",
                "type_emb": "embeddings.token_type_embeddings",
                "pooler": "pooler.dense",
                **ROBERTA_MLM,
            }
        ),
        stack=table(
            {"pos_emb": "embeddings.position_embeddings", "final_norm": "encoder.LayerNorm"}
        ),
        blocks=lambda role: "encoder.layer",
        block=table(
            {
                "attn_norm": "attention.self_attn_layer_norm",
                "attn.q": "attention.self.query",
                "attn.k": "attention.self.key",
                "attn.v": "attention.self.value",
                "attn.o": "attention.output.dense",
                "mlp_norm": "LayerNorm",
                "mlp.up": "intermediate.dense",
                "mlp.down": "output.dense",
            }
        ),
    ),
    buffers=BERT_LIKE_BUFFERS,
    unsupported_heads=bert_like_unsupported_heads(
        {"XLMRobertaXLForCausalLM": CAUSAL}, "XLMRobertaXLModel", "lm_head.*"
    ),
)
