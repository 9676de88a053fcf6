"""DistilBERT (`model_type: distilbert`): BERT's post-norm encoder, six layers, without token
types or a pooler, under names of its own (`q_lin`, `sa_layer_norm`, `ffn.lin1`)."""

from __future__ import annotations

from typing import Any

from archspec.hf import dropouts
from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.families._bert_like import mlm_head
from archspec.hf.family import Buffer, Family, HFClass, NameRules
from archspec.hf.name_rules import table
from archspec.spec.schema import Spec

# DistilBertConfig's fields -> the spec's dropouts (there is no separate embedding one).
DROPOUTS: dropouts.Places = {
    "attention": ("attention_dropout", 0.1),
    "hidden": ("dropout", 0.1),
    "embedding": ("dropout", 0.1),
}


def import_distilbert(f: Fields, cls: HFClass) -> dict[str, Any]:
    # A sinusoidal table is still a learned nn.Embedding in transformers, only initialised to
    # sinusoids (and frozen in training): the generated model would initialise it at random.
    f.expect(
        "sinusoidal_pos_embds",
        False,
        False,
        "a position table initialised to fixed sinusoids; archspec initialises it at random",
    )
    # An old training flag in distilbert-base's file; the head is tied by tie_word_embeddings.
    f.ignored("tie_weights_", "DistilBertConfig and DistilBertForMaskedLM")
    spec: dict[str, Any] = {
        "d_model": f.int("dim", 768, "hidden_size"),
        "n_layers": f.int("n_layers", 6, "num_hidden_layers"),
        "n_heads": f.count("n_heads", 12, "num_attention_heads"),
        "d_ff": f.int("hidden_dim", 3072),
        "vocab_size": f.int("vocab_size", 30522),
        "max_seq_len": f.int("max_position_embeddings", 512),
        "layout": "encoder",
        "residual": "post",
        # transformers hard-codes eps = 1e-12 in every DistilBERT LayerNorm.
        "norm": {"kind": "layernorm", "bias": True, "eps": 1e-12},
        "position": {"kind": "learned", "offset": 0},
        "embedding": {"token_types": 0, "norm": True, "scale": False},
        "attention": {"bias": True, "scale_scores": True},
        "mlp": {"gated": False, "activation": f.activation("activation", "gelu"), "bias": True},
        "head": read_head(f, cls, True),
        "dropout": read_dropout(f, DROPOUTS),
    }
    if cls.head == "lm":  # DistilBertForMaskedLM: vocab_transform, activation, vocab_layer_norm
        spec["head"] |= {"transform": True, "bias": True}
    return spec


def export_distilbert(spec: Spec) -> dict[str, Any]:
    return {
        "dim": spec.d_model,
        "n_layers": spec.n_layers,
        "n_heads": spec.n_heads,
        "hidden_dim": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len,
        "sinusoidal_pos_embds": False,
        "activation": EXPORT_ACTIVATIONS[spec.mlp.activation],
        **write_dropout(spec, DROPOUTS),
        **({"tie_word_embeddings": spec.head.tied} if spec.head.lm_head else {}),
    }


NAMES = NameRules(
    "distilbert.",
    model=table(
        {
            "tok_emb": "embeddings.word_embeddings",
            **mlm_head("vocab_transform", "vocab_layer_norm", "vocab_projector", None),
        }
    ),
    stack=table({"pos_emb": "embeddings.position_embeddings", "emb_norm": "embeddings.LayerNorm"}),
    blocks=lambda role: "transformer.layer",
    block=table(
        {
            "attn.q": "attention.q_lin",
            "attn.k": "attention.k_lin",
            "attn.v": "attention.v_lin",
            "attn.o": "attention.out_lin",
            "attn_norm": "sa_layer_norm",
            "mlp.up": "ffn.lin1",
            "mlp.down": "ffn.lin2",
            "mlp_norm": "output_layer_norm",
        }
    ),
)

FAMILY = Family(
    model_type="distilbert",
    classes=(
        HFClass("DistilBertModel", "distilbert", "none", base=True),
        HFClass("DistilBertForMaskedLM", "distilbert", "lm", base=False),
    ),
    bases=("_distilbert",),
    import_config=import_distilbert,
    export_config=export_distilbert,
    names=NAMES,
    buffers=(Buffer("embeddings.position_ids", "arange"),),
)
