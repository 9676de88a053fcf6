"""Phi (`model_type: phi`; phi-1, phi-1.5, phi-2): attention and MLP in parallel from one
LayerNorm (as GPT-J), RoPE on the first `partial_rotary_factor` of each head, biases on every
projection, gelu_new, a final LayerNorm and an untied head with a bias."""

from __future__ import annotations

from typing import Any

from archspec.hf import dropouts
from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, head_fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.families._llama_like import ROPE_BUFFERS
from archspec.hf.families._rotary import read_rope, rope_parameters
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain, lm_head, table
from archspec.spec.schema import Spec

DROPOUT: dropouts.Places = {
    "attention": ("attention_dropout", 0.0),
    "hidden": ("resid_pdrop", 0.0),
    "embedding": ("embd_pdrop", 0.0),
}


def import_phi(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.refuse_null("partial_rotary_factor", "transformers' PhiRotaryEmbedding")
    d = f.int("hidden_size", 2048)
    heads = f.count("num_attention_heads", 32)
    kv = f.size("num_key_value_heads", None) or heads
    f.expect("qk_layernorm", False, False, "LayerNorms on the queries and keys of every head")
    return {
        "d_model": d,
        "n_layers": f.int("num_hidden_layers", 24),
        "n_heads": heads,
        "n_kv_heads": kv if kv != heads else None,
        "d_ff": f.int("intermediate_size", 8192),
        "vocab_size": f.int("vocab_size", 51200),
        "max_seq_len": f.int("max_position_embeddings", 2048),
        "layout": "decoder",
        "residual": "parallel",
        "final_norm": True,
        "norm": {"kind": "layernorm", "bias": True, "eps": f.float("layer_norm_eps", 1e-5)},
        "position": read_rope(f, d // heads, default_fraction=0.5),
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": {"bias": True, "scale_scores": True},
        "mlp": {
            "gated": False,
            "activation": f.activation("hidden_act", "gelu_new"),
            "bias": True,
        },
        "head": {**read_head(f, cls, False), "bias": True},
        "dropout": read_dropout(f, DROPOUT),
    }


def export_phi(spec: Spec) -> dict[str, Any]:
    parameters = rope_parameters(spec)
    return {
        "hidden_size": spec.d_model,
        "num_hidden_layers": spec.n_layers,
        "num_attention_heads": spec.n_heads,
        "num_key_value_heads": spec.kv_heads,
        "intermediate_size": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len,
        "layer_norm_eps": spec.norm.eps,
        "hidden_act": EXPORT_ACTIVATIONS[spec.mlp.activation],
        # transformers 5 reads rope_parameters, 4.x the top-level fields: both, equal.
        "rope_parameters": parameters,
        "rope_theta": spec.position.theta,
        "partial_rotary_factor": parameters["partial_rotary_factor"],
        **write_dropout(spec, DROPOUT),
        **head_fields(spec),
    }


FAMILY = Family(
    model_type="phi",
    classes=(
        HFClass("PhiForCausalLM", "phi", "lm", base=False),
        HFClass("PhiModel", "phi", "none", base=True),
    ),
    bases=("_phi",),
    import_config=import_phi,
    export_config=export_phi,
    names=NameRules(
        "model.",
        model=chain(table({"tok_emb": "embed_tokens"}), lm_head),
        stack=table({"final_norm": "final_layernorm"}),
        blocks=lambda role: "layers",
        block=table(
            {
                "norm": "input_layernorm",
                "attn.q": "self_attn.q_proj",
                "attn.k": "self_attn.k_proj",
                "attn.v": "self_attn.v_proj",
                "attn.o": "self_attn.dense",
                "mlp.up": "mlp.fc1",
                "mlp.down": "mlp.fc2",
            }
        ),
    ),
    buffers=ROPE_BUFFERS,
)
