"""BioGPT (`model_type: biogpt`, microsoft/biogpt): a fairseq-style pre-norm decoder (BART's
layers without cross-attention) with learned positions offset by 2 (OPT's table, but numbered
0, 1, ... whatever the padding: transformers passes them as position ids), token embeddings
scaled by sqrt(hidden_size) (`scale_embedding`), a final norm and a head tied to the
embeddings (`output_projection`). Its LayerNorms keep torch's eps (1e-5): transformers' BioGPT
never reads `layer_norm_eps`."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, head_fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.family import Family, HFClass, NameRules, Target
from archspec.hf.name_rules import fairseq_block, table
from archspec.spec.schema import Spec

DROPOUTS = {
    "attention": ("attention_probs_dropout_prob", 0.1),
    "hidden": ("hidden_dropout_prob", 0.1),
    "embedding": ("hidden_dropout_prob", 0.1),
}
EPS = 1e-5  # nn.LayerNorm's default, which every BioGPT norm keeps


def import_biogpt(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.ignored("layer_norm_eps", "BioGptModel's LayerNorms (torch's 1e-5)")
    f.expect("layerdrop", (0, 0.0), 0.0, "layers skipped at random in training")
    return {
        "d_model": f.int("hidden_size", 1024),
        "n_layers": f.int("num_hidden_layers", 24),
        "n_heads": f.count("num_attention_heads", 16),
        "d_ff": f.int("intermediate_size", 4096),
        "vocab_size": f.int("vocab_size", 42384),
        "max_seq_len": f.int("max_position_embeddings", 1024),
        "layout": "decoder",
        "residual": "pre",
        "final_norm": True,
        "norm": {"kind": "layernorm", "bias": True, "eps": EPS},
        "position": {"kind": "learned", "offset": 2, "from_mask": False},
        "embedding": {"token_types": 0, "norm": False, "scale": f.bool("scale_embedding", True)},
        "attention": {"bias": True, "scale_scores": True},
        "mlp": {
            "gated": False,
            "activation": f.activation("hidden_act", "gelu"),
            "bias": True,
        },
        "head": {**read_head(f, cls, True), "bias": False},
        "dropout": read_dropout(f, DROPOUTS),
    }


def export_biogpt(spec: Spec) -> dict[str, Any]:
    return {
        "hidden_size": spec.d_model,
        "num_hidden_layers": spec.n_layers,
        "num_attention_heads": spec.n_heads,
        "intermediate_size": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len,
        "scale_embedding": spec.embedding.scale,
        "hidden_act": EXPORT_ACTIVATIONS[spec.mlp.activation],
        **write_dropout(spec, DROPOUTS),
        **head_fields(spec),
    }


FAMILY = Family(
    model_type="biogpt",
    classes=(
        HFClass("BioGptForCausalLM", "biogpt", "lm", base=False),
        HFClass("BioGptModel", "biogpt", "none", base=True),
    ),
    bases=("_biogpt",),
    import_config=import_biogpt,
    export_config=export_biogpt,
    names=NameRules(
        "biogpt.",
        model=table(
            {
                "tok_emb": "embed_tokens",
                "lm_head": Target("output_projection", outside=True),
            }
        ),
        stack=table({"pos_emb": "embed_positions", "final_norm": "layer_norm"}),
        blocks=lambda role: "layers",
        block=fairseq_block,
    ),
)
