"""XGLM (`model_type: xglm`, facebook/xglm-564M to 7.5B): a fairseq-style pre-norm decoder
(BART's layers without cross-attention, a final norm) with fairseq's fixed sinusoids offset by
2 and numbered 0, 1, ... whatever the padding (transformers passes them as position ids),
token embeddings scaled by sqrt(d_model) (`scale_embedding`) and a head tied to them. Its
LayerNorms keep torch's eps (1e-5)."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, head_fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain, fairseq_block, lm_head, table
from archspec.spec.schema import Spec

DROPOUTS = {
    "attention": ("attention_dropout", 0.1),
    "hidden": ("dropout", 0.1),
    "embedding": ("dropout", 0.1),
}
OFFSET = 2  # XGLMSinusoidalPositionalEmbedding's, whatever pad_token_id is


def import_xglm(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.follow_attribute_map(
        {
            "num_attention_heads": "attention_heads",
            "hidden_size": "d_model",
            "num_hidden_layers": "num_layers",
        }
    )
    f.expect("layerdrop", (0, 0.0), 0.0, "layers skipped at random in training")
    f.harmless("decoder_start_token_id")  # generation only: XGLM is a decoder
    return {
        "d_model": f.int("d_model", 1024),
        "n_layers": f.int("num_layers", 24),
        "n_heads": f.count("attention_heads", 16),
        "d_ff": f.int("ffn_dim", 4096),
        "vocab_size": f.int("vocab_size", 256008),
        "max_seq_len": f.int("max_position_embeddings", 2048),
        "layout": "decoder",
        "residual": "pre",
        "final_norm": True,
        "norm": {"kind": "layernorm", "bias": True, "eps": 1e-5},
        "position": {"kind": "sinusoidal", "layout": "fairseq", "offset": OFFSET},
        "embedding": {"token_types": 0, "norm": False, "scale": f.bool("scale_embedding", True)},
        "attention": {"bias": True, "scale_scores": True},
        "mlp": {
            "gated": False,
            "activation": f.activation("activation_function", "gelu"),
            "bias": True,
        },
        "head": {**read_head(f, cls, True), "bias": False},
        "dropout": read_dropout(f, DROPOUTS),
    }


def export_xglm(spec: Spec) -> dict[str, Any]:
    return {
        "d_model": spec.d_model,
        "num_layers": spec.n_layers,
        "attention_heads": spec.n_heads,
        "ffn_dim": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len,
        "scale_embedding": spec.embedding.scale,
        "activation_function": EXPORT_ACTIVATIONS[spec.mlp.activation],
        **write_dropout(spec, DROPOUTS),
        **head_fields(spec),
    }


FAMILY = Family(
    model_type="xglm",
    classes=(
        HFClass("XGLMForCausalLM", "xglm", "lm", base=False),
        HFClass("XGLMModel", "xglm", "none", base=True),
    ),
    bases=("_xglm",),
    import_config=import_xglm,
    export_config=export_xglm,
    names=NameRules(
        "model.",
        model=chain(table({"tok_emb": "embed_tokens"}), lm_head),
        stack=table({"final_norm": "layer_norm"}),
        blocks=lambda role: "layers",
        block=fairseq_block,
    ),
)
