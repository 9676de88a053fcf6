"""GPT-2 (`model_type: gpt2`): a pre-norm decoder with Conv1D layers and a tied head."""

from __future__ import annotations

from typing import Any

from archspec.hf import dropouts
from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, head_fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.families._gpt_like import GPT_BUFFERS, SUMMARY_FIELDS, conv1d_block
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain, lm_head, table
from archspec.spec.schema import Spec


def import_gpt2(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.expect(
        "scale_attn_by_inverse_layer_idx",
        False,
        False,
        "attention scores divided by (layer index + 1) cannot be expressed in a spec",
    )
    if f.get("reorder_and_upcast_attn", False):
        f.notes.append(
            "reorder_and_upcast_attn only changes half-precision rounding, not the function"
        )
    f.harmless("n_ctx", *SUMMARY_FIELDS)
    d = f.int("n_embd", 768, "hidden_size")
    return {
        "d_model": d,
        "n_layers": f.int("n_layer", 12, "num_hidden_layers"),
        "n_heads": f.count("n_head", 12, "num_attention_heads"),
        "d_ff": f.size("n_inner", None) or 4 * d,
        "vocab_size": f.int("vocab_size", 50257),
        "max_seq_len": f.int("n_positions", 1024, "max_position_embeddings"),
        "layout": "decoder",
        "residual": "pre",
        "final_norm": True,
        "norm": {"kind": "layernorm", "bias": True, "eps": f.float("layer_norm_epsilon", 1e-5)},
        "position": {"kind": "learned", "offset": 0},
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": {"bias": True, "scale_scores": f.bool("scale_attn_weights", True)},
        "mlp": {
            "gated": False,
            "activation": f.activation("activation_function", "gelu_new"),
            "bias": True,
        },
        "head": {**read_head(f, cls, True), "bias": False},
        "dropout": read_dropout(f, dropouts.GPT2),
    }


def export_gpt2(spec: Spec) -> dict[str, Any]:
    return {
        "n_embd": spec.d_model,
        "n_layer": spec.n_layers,
        "n_head": spec.n_heads,
        "n_inner": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "n_positions": spec.max_seq_len,
        "layer_norm_epsilon": spec.norm.eps,
        "activation_function": EXPORT_ACTIVATIONS[spec.mlp.activation],
        "scale_attn_weights": spec.attention.scale_scores,
        **write_dropout(spec, dropouts.GPT2),
        **head_fields(spec),
    }


FAMILY = Family(
    model_type="gpt2",
    classes=(
        HFClass("GPT2LMHeadModel", "gpt2", "lm", base=False),
        HFClass("GPT2Model", "gpt2", "none", base=True),
    ),
    bases=("_gpt2",),
    import_config=import_gpt2,
    export_config=export_gpt2,
    names=NameRules(
        "transformer.",
        model=chain(table({"tok_emb": "wte"}), lm_head),
        stack=table({"pos_emb": "wpe", "final_norm": "ln_f"}),
        blocks=lambda role: "h",
        block=conv1d_block("ln_1", "ln_2"),
    ),
    buffers=GPT_BUFFERS,
)
