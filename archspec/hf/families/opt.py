"""OPT (`model_type: opt`): a fairseq-style decoder, pre- or post-norm, positions offset by 2."""

from __future__ import annotations

from typing import Any

from archspec.hf import dropouts
from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, head_fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain, fairseq_block, lm_head, table
from archspec.spec.schema import Spec


def import_opt(f: Fields, cls: HFClass) -> dict[str, Any]:
    d = f.int("hidden_size", 768)
    # OPT-350m: embeddings word_embed_proj_dim wide, project_in to hidden_size before the
    # positions, project_out back after the decoder, the tied head at the embeddings' width.
    proj = f.size("word_embed_proj_dim", d)
    f.expect("layer_norm_elementwise_affine", True, True, "layer norms without a learned scale")
    pre = f.bool("do_layer_norm_before", True)
    remove_final = f.bool("_remove_final_layer_norm", False)
    bias = f.bool("enable_bias", True)
    return {
        "d_model": d,
        "n_layers": f.int("num_hidden_layers", 12),
        "n_heads": f.count("num_attention_heads", 12),
        "d_ff": f.int("ffn_dim", 3072),
        "vocab_size": f.int("vocab_size", 50272),
        "max_seq_len": f.int("max_position_embeddings", 2048),
        "layout": "decoder",
        "residual": "pre" if pre else "post",
        # transformers builds the final norm only for pre-norm OPT.
        "final_norm": pre and not remove_final,
        "norm": {"kind": "layernorm", "bias": True, "eps": 1e-5},
        "position": {"kind": "learned", "offset": 2, "from_mask": True},
        "embedding": {
            "token_types": 0,
            "norm": False,
            "scale": False,
            "dim": None if proj == d else proj,
            "projection": "after_norm" if proj == d else "around_stack",
        },
        "attention": {"bias": bias, "scale_scores": True},
        "mlp": {
            "gated": False,
            "activation": f.activation("activation_function", "relu"),
            "bias": bias,
        },
        "head": {**read_head(f, cls, True), "bias": False},
        "dropout": read_dropout(f, dropouts.OPT),
    }


def export_opt(spec: Spec) -> dict[str, Any]:
    pre = spec.residual == "pre"
    return {
        "hidden_size": spec.d_model,
        "word_embed_proj_dim": spec.embedding_dim,
        "num_hidden_layers": spec.n_layers,
        "num_attention_heads": spec.n_heads,
        "ffn_dim": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len,
        "do_layer_norm_before": pre,
        # has_final_norm: a spec that leaves final_norm unset has one when pre-norm.
        "_remove_final_layer_norm": pre and not spec.has_final_norm,
        "enable_bias": spec.attention.bias,
        "activation_function": EXPORT_ACTIVATIONS[spec.mlp.activation],
        **write_dropout(spec, dropouts.OPT),
        # transformers' OPT reads activation_dropout but never applies it.
        "activation_dropout": 0.0,
        "layerdrop": 0.0,
        **head_fields(spec),
    }


FAMILY = Family(
    model_type="opt",
    classes=(
        HFClass("OPTForCausalLM", "opt", "lm", base=False),
        HFClass("OPTModel", "opt", "none", base=True),
    ),
    bases=("_opt",),
    import_config=import_opt,
    export_config=export_opt,
    names=NameRules(
        "model.",
        model=chain(table({"tok_emb": "decoder.embed_tokens"}), lm_head),
        stack=table(
            {
                "pos_emb": "decoder.embed_positions",
                "final_norm": "decoder.final_layer_norm",
                "emb_proj": "decoder.project_in",
                "out_proj": "decoder.project_out",
            }
        ),
        blocks=lambda role: "decoder.layers",
        block=fairseq_block,
    ),
)
