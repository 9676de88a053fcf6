"""CTRL (`model_type: ctrl`, Salesforce/ctrl): a pre-norm decoder with fixed sinusoids (sines
then cosines, Marian's table, numbered 0, 1, ... whatever the padding) added to token
embeddings scaled by sqrt(n_embd), biases everywhere, a ReLU MLP (`ffn.0`, `ffn.2`), a final
norm and a head tied to the embeddings with a bias of its own.

Its blocks' LayerNorms keep eps 1e-6 whatever `layer_norm_epsilon` says (only the final norm
reads it): a spec has one eps, so other values are refused."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields, head_fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.family import Family, HFClass, NameRules, Target
from archspec.hf.name_rules import table
from archspec.spec.schema import Spec

DROPOUTS = {"hidden": ("resid_pdrop", 0.1), "embedding": ("embd_pdrop", 0.1)}
EPS = 1e-6  # CTRL's blocks' LayerNorms, fixed


def import_ctrl(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.follow_attribute_map(
        {
            "max_position_embeddings": "n_positions",
            "hidden_size": "n_embd",
            "num_attention_heads": "n_head",
            "num_hidden_layers": "n_layer",
        }
    )
    f.expect("layer_norm_epsilon", (EPS,), EPS, "CTRL's blocks keep eps 1e-6 whatever it says")
    return {
        "d_model": f.int("n_embd", 1280),
        "n_layers": f.int("n_layer", 48),
        "n_heads": f.count("n_head", 16),
        "d_ff": f.int("dff", 8192),
        "vocab_size": f.int("vocab_size", 246534),
        "max_seq_len": f.int("n_positions", 256),
        "layout": "decoder",
        "residual": "pre",
        "final_norm": True,
        "norm": {"kind": "layernorm", "bias": True, "eps": EPS},
        "position": {"kind": "sinusoidal", "layout": "halves"},
        "embedding": {"token_types": 0, "norm": False, "scale": True},
        "attention": {"bias": True, "scale_scores": True},
        "mlp": {"gated": False, "activation": "relu", "bias": True},
        "head": {**read_head(f, cls, True), "bias": True},
        "dropout": read_dropout(f, DROPOUTS),
    }


def export_ctrl(spec: Spec) -> dict[str, Any]:
    return {
        "n_embd": spec.d_model,
        "n_layer": spec.n_layers,
        "n_head": spec.n_heads,
        "dff": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "n_positions": spec.max_seq_len,
        **write_dropout(spec, DROPOUTS),
        **head_fields(spec),
    }


FAMILY = Family(
    model_type="ctrl",
    classes=(
        HFClass("CTRLLMHeadModel", "ctrl", "lm", base=False),
        HFClass("CTRLModel", "ctrl", "none", base=True),
    ),
    bases=("_ctrl",),
    import_config=import_ctrl,
    export_config=export_ctrl,
    names=NameRules(
        "transformer.",
        model=table({"tok_emb": "w", "lm_head": Target("lm_head", outside=True)}),
        stack=table({"final_norm": "layernorm"}),
        blocks=lambda role: "h",
        block=table(
            {
                "attn_norm": "layernorm1",
                "attn.q": "multi_head_attention.Wq",
                "attn.k": "multi_head_attention.Wk",
                "attn.v": "multi_head_attention.Wv",
                "attn.o": "multi_head_attention.dense",
                "mlp_norm": "layernorm2",
                "mlp.up": "ffn.0",
                "mlp.down": "ffn.2",
            }
        ),
    ),
)
