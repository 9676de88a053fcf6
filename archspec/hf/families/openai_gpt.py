"""GPT-1 (`model_type: openai-gpt`): a post-norm decoder with Conv1D layers, no final norm."""

from __future__ import annotations

from typing import Any

from archspec.hf import dropouts
from archspec.hf.config_fields import Fields, head_fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.families._gpt_like import GPT_BUFFERS, SUMMARY_FIELDS, conv1d_block
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain, lm_head, table
from archspec.spec.schema import Spec

# OpenAI GPT's own table: its "gelu" is the tanh approximation (modeling_openai.ACT_FNS).
_ACTIVATIONS = {"gelu": "gelu_tanh", "relu": "relu", "silu": "silu", "swish": "silu"}
_EXPORT_ACTIVATIONS = {"gelu_tanh": "gelu", "relu": "relu", "silu": "silu"}


def import_openai_gpt(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.expect("n_special", (0, None), 0, "extra special-token rows in the embedding")
    f.harmless("n_ctx", "predict_special_tokens", *SUMMARY_FIELDS)
    d = f.int("n_embd", 768, "hidden_size")
    return {
        "d_model": d,
        "n_layers": f.int("n_layer", 12, "num_hidden_layers"),
        "n_heads": f.count("n_head", 12, "num_attention_heads"),
        "d_ff": 4 * d,
        "vocab_size": f.int("vocab_size", 40478),
        "max_seq_len": f.int("n_positions", 512, "max_position_embeddings"),
        "layout": "decoder",
        "residual": "post",
        "final_norm": False,
        "norm": {"kind": "layernorm", "bias": True, "eps": f.float("layer_norm_epsilon", 1e-5)},
        "position": {"kind": "learned", "offset": 0},
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": {"bias": True, "scale_scores": True},
        "mlp": {
            "gated": False,
            "activation": f.activation("afn", "gelu", _ACTIVATIONS),
            "bias": True,
        },
        "head": {**read_head(f, cls, True), "bias": False},
        "dropout": read_dropout(f, dropouts.GPT2),
    }


def export_openai_gpt(spec: Spec) -> dict[str, Any]:
    return {
        "n_embd": spec.d_model,
        "n_layer": spec.n_layers,
        "n_head": spec.n_heads,
        "vocab_size": spec.vocab_size,
        "n_positions": spec.max_seq_len,
        "layer_norm_epsilon": spec.norm.eps,
        "afn": _EXPORT_ACTIVATIONS.get(spec.mlp.activation, spec.mlp.activation),
        **write_dropout(spec, dropouts.GPT2),
        **head_fields(spec),
    }


FAMILY = Family(
    model_type="openai-gpt",
    classes=(
        HFClass("OpenAIGPTLMHeadModel", "openai-gpt", "lm", base=False),
        HFClass("OpenAIGPTModel", "openai-gpt", "none", base=True),
    ),
    bases=("gpt-1",),
    import_config=import_openai_gpt,
    export_config=export_openai_gpt,
    names=NameRules(
        "transformer.",
        model=chain(table({"tok_emb": "tokens_embed"}), lm_head),
        stack=table({"pos_emb": "positions_embed"}),
        blocks=lambda role: "h",
        block=conv1d_block("ln_1", "ln_2"),  # post-norm: ln_1 after attention, ln_2 after MLP
    ),
    buffers=GPT_BUFFERS,
)
