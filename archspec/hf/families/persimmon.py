"""Persimmon (`model_type: persimmon`, Persimmon-8B, Fuyu's language model): a pre-norm
decoder with LayerNorms (weight and bias), a fused q/k/v interleaved per head (GPT-NeoX's
layout), biases on every projection, LayerNorms over each head's queries and keys shared by
the heads (`qk_layernorm`, before RoPE), RoPE on the first half of each head
(`partial_rotary_factor` 0.5), a squared-ReLU MLP and an untied head."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, head_fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.families._llama_like import ROPE_BUFFERS
from archspec.hf.families._rotary import read_rope, rope_parameters
from archspec.hf.family import Family, HFClass, NameRules, Target
from archspec.hf.name_rules import chain, lm_head, table
from archspec.spec.schema import Spec

DROPOUTS = {"attention": ("attention_dropout", 0.0), "hidden": ("hidden_dropout", 0.0)}


def import_persimmon(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.refuse_null("partial_rotary_factor", "transformers' PersimmonRotaryEmbedding")
    d = f.int("hidden_size", 4096)
    heads = f.count("num_attention_heads", 64)
    max_pos = f.int("max_position_embeddings", 16384)
    qk_norm = f.bool("qk_layernorm", True)
    # Adept's files carry it; transformers' Persimmon gives every query head its own key
    f.expect("num_key_value_heads", (None, heads), None, "Persimmon has one key head per head")
    return {
        "d_model": d,
        "n_layers": f.int("num_hidden_layers", 36),
        "n_heads": heads,
        "d_ff": f.int("intermediate_size", 16384),
        "vocab_size": f.int("vocab_size", 262144),
        "max_seq_len": max_pos,
        "layout": "decoder",
        "residual": "pre",
        "final_norm": True,
        "norm": {"kind": "layernorm", "bias": True, "eps": f.float("layer_norm_eps", 1e-5)},
        "position": read_rope(f, d // heads, default_fraction=0.5, max_positions=max_pos),
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": {"bias": True, "scale_scores": True, "qk_norm": qk_norm}
        | ({"qk_norm_scope": "head"} if qk_norm else {}),
        "mlp": {"gated": False, "activation": f.activation("hidden_act", "relu2"), "bias": True},
        "head": {**read_head(f, cls, False), "bias": False},
        "dropout": read_dropout(f, DROPOUTS),
    }


def export_persimmon(spec: Spec) -> dict[str, Any]:
    return {
        "hidden_size": spec.d_model,
        "num_hidden_layers": spec.n_layers,
        "num_attention_heads": spec.n_heads,
        "intermediate_size": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len,
        "layer_norm_eps": spec.norm.eps,
        "qk_layernorm": spec.attention.qk_norm,
        "rope_parameters": rope_parameters(spec),
        "hidden_act": EXPORT_ACTIVATIONS[spec.mlp.activation],
        **write_dropout(spec, DROPOUTS),
        **head_fields(spec),
    }


def _qkv(part: int) -> Target:
    what = "qkv"[part]
    return Target(
        "self_attn.query_key_value", "heads", part, 3, note=f"{what} slice, interleaved per head"
    )


FAMILY = Family(
    model_type="persimmon",
    classes=(
        HFClass("PersimmonForCausalLM", "persimmon", "lm", base=False),
        HFClass("PersimmonModel", "persimmon", "none", base=True),
    ),
    bases=("_persimmon",),
    import_config=import_persimmon,
    export_config=export_persimmon,
    names=NameRules(
        "model.",
        model=chain(table({"tok_emb": "embed_tokens"}), lm_head),
        stack=table({"final_norm": "final_layernorm"}),
        blocks=lambda role: "layers",
        block=table(
            {
                "attn_norm": "input_layernorm",
                "attn.q": _qkv(0),
                "attn.k": _qkv(1),
                "attn.v": _qkv(2),
                "attn.q_norm": "self_attn.q_layernorm",
                "attn.k_norm": "self_attn.k_layernorm",
                "attn.o": "self_attn.dense",
                "mlp_norm": "post_attention_layernorm",
                "mlp.up": "mlp.dense_h_to_4h",
                "mlp.down": "mlp.dense_4h_to_h",
            }
        ),
    ),
    buffers=ROPE_BUFFERS,
)
