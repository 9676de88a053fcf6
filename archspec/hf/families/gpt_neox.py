"""GPT-NeoX (`model_type: gpt_neox`; Pythia, GPT-NeoX-20B): a decoder whose attention and MLP
run in parallel, each from its own LayerNorm of the block's input (use_parallel_residual), with
RoPE on the first quarter of each head (rotary_pct) and an untied output matrix (`embed_out`).

Its fused `query_key_value` interleaves q, k and v per head (a head's q rows, then its k rows,
then its v rows), as BLOOM's does.
"""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, head_fields, read_head
from archspec.hf.dropouts import Places, read_dropout, write_dropout
from archspec.hf.families._rotary import read_rope, rope_parameters, rotary_fraction
from archspec.hf.family import Buffer, Family, HFClass, NameRules, Target
from archspec.hf.name_rules import table
from archspec.spec.schema import Spec

# The block's two dropouts (after attention, after the MLP) and the embeddings' read one field.
DROPOUT: Places = {
    "attention": ("attention_dropout", 0.0),
    "hidden": ("hidden_dropout", 0.0),
    "embedding": ("hidden_dropout", 0.0),
}


def import_gpt_neox(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.refuse_null("rotary_pct", "transformers' GPTNeoXRotaryEmbedding")
    d = f.int("hidden_size", 6144)
    heads = f.count("num_attention_heads", 64)
    bias = f.bool("attention_bias", True)
    f.expect("is_decoder", False, False, "cross-attention in a decoder-only model")
    f.harmless("classifier_dropout")  # the token and sequence classification heads only
    return {
        "d_model": d,
        "n_layers": f.int("num_hidden_layers", 44),
        "n_heads": heads,
        "d_ff": f.int("intermediate_size", 24576),
        "vocab_size": f.int("vocab_size", 50432),
        "max_seq_len": f.int("max_position_embeddings", 2048),
        "layout": "decoder",
        # Without use_parallel_residual the same two norms sit before each sublayer in turn.
        "residual": "parallel_two_norms" if f.bool("use_parallel_residual", True) else "pre",
        "final_norm": True,
        "norm": {"kind": "layernorm", "bias": True, "eps": f.float("layer_norm_eps", 1e-5)},
        "position": read_rope(
            f,
            d // heads,
            default_fraction=0.25,
            theta_aliases=("rotary_emb_base",),
            fraction_aliases=("rotary_pct",),
        ),
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": {"bias": bias, "scale_scores": True},
        "mlp": {"gated": False, "activation": f.activation("hidden_act", "gelu"), "bias": True},
        "head": {**read_head(f, cls, False), "bias": False},
        "dropout": read_dropout(f, DROPOUT),
    }


def export_gpt_neox(spec: Spec) -> dict[str, Any]:
    return {
        "hidden_size": spec.d_model,
        "num_hidden_layers": spec.n_layers,
        "num_attention_heads": spec.n_heads,
        "intermediate_size": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len,
        "use_parallel_residual": spec.residual == "parallel_two_norms",
        "layer_norm_eps": spec.norm.eps,
        "attention_bias": spec.attention.bias,
        "hidden_act": EXPORT_ACTIVATIONS[spec.mlp.activation],
        # transformers 5 reads rope_parameters, 4.x rotary_pct and rotary_emb_base: all, equal.
        "rope_parameters": rope_parameters(spec),
        "rotary_pct": rotary_fraction(spec),
        "rotary_emb_base": spec.position.theta,
        **write_dropout(spec, DROPOUT),
        **head_fields(spec),
    }


def _qkv(part: int) -> Target:
    return Target(
        "attention.query_key_value",
        "heads",
        part,
        3,
        note=f"{'qkv'[part]} slice, interleaved per head",
    )


_LM_HEAD = Target("lm_head", outside=True)

FAMILY = Family(
    model_type="gpt_neox",
    classes=(
        HFClass("GPTNeoXForCausalLM", "gpt_neox", "lm", base=False),
        HFClass("GPTNeoXModel", "gpt_neox", "none", base=True),
    ),
    bases=("_gpt_neox",),
    import_config=import_gpt_neox,
    export_config=export_gpt_neox,
    names=NameRules(
        "gpt_neox.",
        # Checkpoints (and transformers' save_pretrained) call the untied head `embed_out`;
        # transformers 5 renames it `lm_head` in memory (its conversion mapping).
        model=table({"tok_emb": "embed_in", "lm_head": Target("embed_out", outside=True)}),
        model_variants={"module": table({"tok_emb": "embed_in", "lm_head": _LM_HEAD})},
        stack=table({"final_norm": "final_layer_norm"}),
        blocks=lambda role: "layers",
        block=table(
            {
                "attn_norm": "input_layernorm",
                "attn.q": _qkv(0),
                "attn.k": _qkv(1),
                "attn.v": _qkv(2),
                "attn.o": "attention.dense",
                "mlp_norm": "post_attention_layernorm",
                "mlp.up": "mlp.dense_h_to_4h",
                "mlp.down": "mlp.dense_4h_to_h",
            }
        ),
    ),
    # Older checkpoints store the causal mask and the rotary frequencies of every layer.
    buffers=(
        Buffer("layers.{i}.attention.bias", "causal_mask"),
        Buffer("layers.{i}.attention.masked_bias", "anything"),
        Buffer("layers.{i}.attention.rotary_emb.inv_freq", "rope_inv_freq"),
        Buffer("rotary_emb.inv_freq", "rope_inv_freq"),
    ),
)
