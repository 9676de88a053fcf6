"""BLOOM (`model_type: bloom`): a pre-norm decoder with ALiBi and a per-head fused q/k/v."""

from __future__ import annotations

from typing import Any

from archspec.hf import dropouts
from archspec.hf.config_fields import Fields, head_fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.family import Family, HFClass, NameRules, Target
from archspec.hf.name_rules import chain, lm_head, table
from archspec.spec.schema import Spec


def import_bloom(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.expect(
        "apply_residual_connection_post_layernorm",
        False,
        False,
        "the residual taken after the layer norm",
    )
    # Megatron training settings stored in BLOOM configs; transformers ignores them too.
    f.harmless(
        "attention_softmax_in_fp32",
        "bias_dropout_fusion",
        "masked_softmax_fusion",
        "offset_alibi",
        "skip_bias_add",
        "skip_bias_add_qkv",
        "pretraining_tp",
        "slow_but_exact",
    )
    d = f.int("hidden_size", 64, "n_embed")
    f.expect("n_inner", (None, 4 * d), None, "transformers' BLOOM always uses 4 * hidden_size")
    spec: dict[str, Any] = {
        "d_model": d,
        "n_layers": f.int("n_layer", 2, "num_hidden_layers"),
        "n_heads": f.count("n_head", 8, "num_attention_heads"),
        "d_ff": 4 * d,
        "vocab_size": f.int("vocab_size", 250880),
        "layout": "decoder",
        "residual": "pre",
        "final_norm": True,
        "norm": {"kind": "layernorm", "bias": True, "eps": f.float("layer_norm_epsilon", 1e-5)},
        "position": {"kind": "alibi"},
        "embedding": {"token_types": 0, "norm": True, "scale": False},
        "attention": {"bias": True, "scale_scores": True},
        "mlp": {"gated": False, "activation": "gelu_tanh", "bias": True},
        "head": {**read_head(f, cls, True), "bias": False},
        "dropout": read_dropout(f, dropouts.BLOOM),
    }
    if f.present("seq_length"):
        spec["max_seq_len"] = f.int("seq_length")
    return spec


def export_bloom(spec: Spec) -> dict[str, Any]:
    return {
        "hidden_size": spec.d_model,
        "n_layer": spec.n_layers,
        "n_head": spec.n_heads,
        "vocab_size": spec.vocab_size,
        "seq_length": spec.max_seq_len,
        "layer_norm_epsilon": spec.norm.eps,
        **write_dropout(spec, dropouts.BLOOM),
        **head_fields(spec),
    }


def _qkv(part: int) -> Target:
    """One of q, k, v in BLOOM's fused projection, whose rows interleave them per head."""
    return Target(
        "self_attention.query_key_value",
        "heads",
        part,
        3,
        note=f"{'qkv'[part]} slice, interleaved per head",
    )


FAMILY = Family(
    model_type="bloom",
    classes=(
        HFClass("BloomForCausalLM", "bloom", "lm", base=False),
        HFClass("BloomModel", "bloom", "none", base=True),
    ),
    bases=("_bloom",),
    import_config=import_bloom,
    export_config=export_bloom,
    names=NameRules(
        "transformer.",
        model=chain(table({"tok_emb": "word_embeddings"}), lm_head),
        stack=table({"emb_norm": "word_embeddings_layernorm", "final_norm": "ln_f"}),
        blocks=lambda role: "h",
        block=table(
            {
                "attn_norm": "input_layernorm",
                "attn.q": _qkv(0),
                "attn.k": _qkv(1),
                "attn.v": _qkv(2),
                "attn.o": "self_attention.dense",
                "mlp_norm": "post_attention_layernorm",
                "mlp.up": "mlp.dense_h_to_4h",
                "mlp.down": "mlp.dense_4h_to_h",
            }
        ),
    ),
)
