"""GPT-J (`model_type: gptj`): attention and MLP in parallel from one LayerNorm (as PaLM),
RoPE on the first `rotary_dim` channels of each head with GPT-J's interleaved channel pairs
(rotate_every_two), no biases on q, k, v and the output projection, and an untied head with a
bias."""

from __future__ import annotations

from typing import Any

from archspec.hf import dropouts
from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, head_fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.families._gpt_like import GPT_BUFFERS, SUMMARY_FIELDS
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain, lm_head, table
from archspec.spec.schema import Spec

# GPTJConfig's dropouts are GPT-2's fields, with 0.0 defaults.
DROPOUT: dropouts.Places = {
    "attention": ("attn_pdrop", 0.0),
    "hidden": ("resid_pdrop", 0.0),
    "embedding": ("embd_pdrop", 0.0),
}


def import_gptj(f: Fields, cls: HFClass) -> dict[str, Any]:
    d = f.int("n_embd", 4096, "hidden_size")
    heads = f.count("n_head", 16, "num_attention_heads")
    head_dim = d // heads
    rotary_dim = f.data.get("rotary_dim", 64)  # null is a value here: all of n_embd
    f.harmless("rotary_dim")
    if rotary_dim is None or not isinstance(rotary_dim, int) or rotary_dim > head_dim:
        # With rotary_dim null GPT-J builds angles for all of n_embd and applies them to each
        # head, which only broadcasts with one head.
        raise f.error(
            "rotary_dim",
            f"rotary_dim = {rotary_dim!r} is not supported: archspec rotates at most the "
            f"head_dim ({head_dim}) channels of each head",
        )
    # Fields of GPT-J's original config that transformers' GPT-J never reads: it always
    # rotates and always scales the scores. Only the values that say so are the same model.
    f.expect("rotary", True, True, "GPT-J without rotary positions")
    f.expect("scale_attn_weights", True, True, "unscaled attention scores")
    f.harmless("n_ctx", *SUMMARY_FIELDS)
    position: dict[str, Any] = {"kind": "rope", "theta": 10000.0, "interleaved": True}
    if rotary_dim != head_dim:
        position["rotary_dim"] = rotary_dim
    return {
        "d_model": d,
        "n_layers": f.int("n_layer", 28, "num_hidden_layers"),
        "n_heads": heads,
        "d_ff": f.size("n_inner", None) or 4 * d,
        "vocab_size": f.int("vocab_size", 50400),
        "max_seq_len": f.int("n_positions", 2048, "max_position_embeddings"),
        "layout": "decoder",
        "residual": "parallel",
        "final_norm": True,
        "norm": {"kind": "layernorm", "bias": True, "eps": f.float("layer_norm_epsilon", 1e-5)},
        "position": position,
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": {"bias": False, "scale_scores": True},
        "mlp": {
            "gated": False,
            "activation": f.activation("activation_function", "gelu_new"),
            "bias": True,
        },
        "head": {**read_head(f, cls, False), "bias": True},
        "dropout": read_dropout(f, DROPOUT),
    }


def export_gptj(spec: Spec) -> dict[str, Any]:
    return {
        "n_embd": spec.d_model,
        "n_layer": spec.n_layers,
        "n_head": spec.n_heads,
        "n_inner": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "n_positions": spec.max_seq_len,
        "rotary_dim": spec.position.rotary_dim or spec.resolved_head_dim,
        "layer_norm_epsilon": spec.norm.eps,
        "activation_function": EXPORT_ACTIVATIONS[spec.mlp.activation],
        **write_dropout(spec, DROPOUT),
        **head_fields(spec),
    }


FAMILY = Family(
    model_type="gptj",
    classes=(
        HFClass("GPTJForCausalLM", "gptj", "lm", base=False),
        HFClass("GPTJModel", "gptj", "none", base=True),
    ),
    bases=("_gptj",),
    import_config=import_gptj,
    export_config=export_gptj,
    names=NameRules(
        "transformer.",
        model=chain(table({"tok_emb": "wte"}), lm_head),
        stack=table({"final_norm": "ln_f"}),
        blocks=lambda role: "h",
        block=table(
            {
                "norm": "ln_1",
                "attn.q": "attn.q_proj",
                "attn.k": "attn.k_proj",
                "attn.v": "attn.v_proj",
                "attn.o": "attn.out_proj",
                "mlp.up": "mlp.fc_in",
                "mlp.down": "mlp.fc_out",
            }
        ),
    ),
    buffers=GPT_BUFFERS,  # older checkpoints: each layer's causal mask and masked_bias
)
