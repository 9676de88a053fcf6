"""ModernBERT (`model_type: modernbert`): a pre-norm encoder without biases, rotary positions
and a GeGLU MLP whose gate and up rows are fused in `Wi` (`act(input) * gate`: the first half
is activated). Two of every three layers (`layer_types`, or the older
`global_attn_every_n_layers`: 3, layer 0 full) attend within a window on both sides of each
token, |query - key| <= local_attention // 2, which the spec says as a two-sided
`sliding_window` of local_attention // 2 + 1 (keys a query sees on each side, its own
included); those layers rotate by `local_rope_theta` (10,000), the full ones by
`global_rope_theta` (160,000). The embeddings are normalised (`embeddings.norm`) and layer 0
has no attention norm of its own (an Identity): the spec's `norm.first_attention: false`.
The masked-LM head is dense (no bias, `classifier_bias`), activation (`classifier_activation`)
and norm, then the tied `decoder` with its bias (`decoder_bias`)."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf import dropouts
from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.families._layer_rope import (
    check_local_layers,
    local_layers,
    rope_per_type,
    write_rope_per_type,
)
from archspec.hf.families._windows import check_layer_types, layer_types, window_pattern
from archspec.hf.families.phi3 import fused_rows
from archspec.hf.family import Family, HFClass, NameRules, Target, UnsupportedHeads
from archspec.hf.name_rules import table
from archspec.spec.schema import Spec

THETAS = {
    "sliding_attention": ("local_rope_theta", 10000.0),
    "full_attention": ("global_rope_theta", 160000.0),
}
EVERY = 3  # global_attn_every_n_layers: layers 0, 3, 6, ... attend to every key
LOCAL_ATTENTION = 128
PAD = 50283  # ModernBertConfig's pad_token_id
DROPOUT: dropouts.Places = {
    "attention": ("attention_dropout", 0.0),
    "embedding": ("embedding_dropout", 0.0),
    "mlp": ("mlp_dropout", 0.0),
}
# Fields ModernBertConfig reads that change nothing a forward pass computes (initialisation,
# the flash-attention kernel's determinism, the classifiers' pooling, a loss over the masked
# positions only) and settings of the original training code that real files carry.
HARMLESS = (
    "initializer_cutoff_factor",
    "deterministic_flash_attn",
    "classifier_pooling",
    "classifier_dropout",
    "sparse_prediction",
    "sparse_pred_ignore_index",
    "reference_compile",
    "repad_logits_with_grad",
    "cls_token_id",
    "sep_token_id",
)


def _layer_types(f: Fields, n_layers: int) -> list[str]:
    """`layer_types`, or the older global_attn_every_n_layers' (layer i full when i % n is
    0), as ModernBertConfig builds them."""
    every = f.int("global_attn_every_n_layers", EVERY)
    if every < 1:
        raise f.error("global_attn_every_n_layers", f"expected a positive integer, got {every}")
    default = ["sliding_attention" if i % every else "full_attention" for i in range(n_layers)]
    return check_layer_types(f, f.get("layer_types") or default, n_layers)


def import_modernbert(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.harmless(*HARMLESS)
    for key in ("position_embedding_type", "layer_norm_eps", "gradient_checkpointing"):
        f.ignored(key, "ModernBertConfig and ModernBertModel")
    if f.get("rope_scaling") is not None:
        raise f.error("rope_scaling", "ModernBERT's rope scaling on both layer types")
    ropes = rope_per_type(f, THETAS, scaled=None)
    n_layers = f.int("num_hidden_layers", 22)
    pattern = window_pattern(f, _layer_types(f, n_layers))
    half = f.int("local_attention", LOCAL_ATTENTION) // 2
    spec = read_modernbert(f, cls, "encoder", ropes)
    # Written either way: the base spec's two local layers to each global one, and their
    # rotation, are not the config's where every layer is global.
    if "L" in pattern:
        spec["attention"] |= {"sliding_window": half + 1, "window_pattern": pattern}
    else:
        spec["attention"] |= {"sliding_window": None}
    local_layers(f, spec, pattern, ropes["sliding_attention"])
    return spec


def read_modernbert(
    f: Fields, cls: HFClass, layout: str, ropes: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The fields ModernBERT's encoder and its decoder (`modernbert-decoder`) share: all but
    the window and the local layers' rotation, which the caller adds."""
    d = f.int("hidden_size", 768)
    n_layers = f.int("num_hidden_layers", 22)
    if f.float("attention_dropout", 0.0):
        # ModernBertAttention drops its output too (out_drop), the MLP's output is not:
        # archspec's hidden dropout is on both sublayers' outputs.
        raise f.error(
            "attention_dropout",
            "ModernBERT drops the attention's output with attention_dropout but not the "
            "MLP's; a spec's dropout.hidden drops both",
        )
    norm = {
        "kind": "layernorm",
        "bias": f.bool("norm_bias", False),
        "eps": f.float("norm_eps", 1e-5),
        "first_attention": False,
    }
    spec: dict[str, Any] = {
        "d_model": d,
        "n_layers": n_layers,
        "n_heads": f.count("num_attention_heads", 12),
        "d_ff": f.int("intermediate_size", 1152),
        "vocab_size": f.int("vocab_size", 50368),
        "max_seq_len": f.int("max_position_embeddings", 8192),
        "layout": layout,
        "residual": "pre",
        "final_norm": True,
        "norm": norm,
        "position": ropes["full_attention"],
        "embedding": {"token_types": 0, "norm": True, "scale": False},
        "attention": {"bias": f.bool("attention_bias", False), "scale_scores": True},
        "mlp": {
            "gated": True,
            "activation": f.activation("hidden_activation", "gelu"),
            "bias": f.bool("mlp_bias", False),
        },
        "head": read_head(f, cls, True),
        "dropout": read_dropout(f, DROPOUT),
    }
    classifier = ("classifier_activation", "classifier_bias", "decoder_bias")
    if cls.head == "lm":
        spec["head"] |= {
            "transform": True,
            "transform_activation": f.activation("classifier_activation", "gelu"),
            "transform_bias": f.bool("classifier_bias", False),
            "bias": f.bool("decoder_bias", True),
        }
    else:
        spec["head"]["transform"] = False
        f.harmless(*classifier)
    return spec


def export_modernbert(spec: Spec) -> dict[str, Any]:
    fields = write_modernbert(spec)
    window = spec.attention.sliding_window
    if window is not None and "L" in spec.attention.window_pattern:
        fields["local_attention"] = 2 * (window - 1)
    return fields


def write_modernbert(spec: Spec) -> dict[str, Any]:
    """The config fields ModernBERT's encoder and decoder share: all but local_attention."""
    if spec.norm.first_attention or spec.residual != "pre" or not spec.mlp.gated:
        raise SpecError(
            "ModernBERT's blocks are pre-norm with a gated MLP, the first without an "
            "attention norm (norm.first_attention: false)",
            path="norm",
        )
    check_local_layers(spec, "ModernBERT")
    fields: dict[str, Any] = {
        "hidden_size": spec.d_model,
        "num_hidden_layers": spec.n_layers,
        "num_attention_heads": spec.n_heads,
        "intermediate_size": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len,
        "norm_eps": spec.norm.eps,
        "norm_bias": spec.norm.has_bias,
        "attention_bias": spec.attention.bias,
        "mlp_bias": spec.mlp.bias,
        "hidden_activation": EXPORT_ACTIVATIONS[spec.mlp.activation],
        "layer_types": layer_types(spec),
        "rope_parameters": write_rope_per_type(spec),
        **write_dropout(spec, DROPOUT),
    }
    if spec.vocab_size <= PAD:
        # The embedding's padding_idx (which changes only its gradient) must lie in the
        # vocabulary: ModernBertConfig's default would not.
        fields["pad_token_id"] = None
    if spec.head.lm_head:
        activation = spec.head.transform_activation or spec.mlp.activation
        fields |= {
            "tie_word_embeddings": spec.head.tied,
            "decoder_bias": spec.head.bias,
            "classifier_bias": spec.head.transform_bias,
            "classifier_activation": EXPORT_ACTIVATIONS[activation],
        }
    return fields


# The classifier heads pool the sequence (its first token or its mean, classifier_pooling)
# before their dense, activation, norm and classifier: no spec head pools that way.
CLASSIFIERS = {
    f"ModernBertFor{task}": "a classifier over the pooled sequence (classifier_pooling)"
    for task in ("SequenceClassification", "MultipleChoice")
} | {
    f"ModernBertFor{task}": "a num_labels-wide classifier on each token after the prediction "
    "head's transform; a spec's head projects to the vocabulary"
    for task in ("TokenClassification", "QuestionAnswering")
}

FAMILY = Family(
    model_type="modernbert",
    classes=(
        HFClass("ModernBertForMaskedLM", "modernbert", "lm", base=False),
        HFClass("ModernBertModel", "modernbert", "none", base=True),
    ),
    bases=("_modernbert",),
    import_config=import_modernbert,
    export_config=export_modernbert,
    names=NameRules(
        "model.",
        model=table(
            {
                "tok_emb": "embeddings.tok_embeddings",
                "lm_transform": Target("head.dense", outside=True),
                "lm_norm": Target("head.norm", outside=True),
                "lm_head": Target("decoder", outside=True),
            }
        ),
        stack=table({"emb_norm": "embeddings.norm", "final_norm": "final_norm"}),
        blocks=lambda role: "layers",
        block=table(
            {
                "attn_norm": "attn_norm",
                "attn.q": fused_rows("attn.Wqkv", 0, 3, "q"),
                "attn.k": fused_rows("attn.Wqkv", 1, 3, "k"),
                "attn.v": fused_rows("attn.Wqkv", 2, 3, "v"),
                "attn.o": "attn.Wo",
                "mlp_norm": "mlp_norm",
                "mlp.gate": fused_rows("mlp.Wi", 0, 2, "input (activated)"),
                "mlp.up": fused_rows("mlp.Wi", 1, 2, "gate"),
                "mlp.down": "mlp.Wo",
            }
        ),
    ),
    unsupported_heads=UnsupportedHeads(
        tuple(CLASSIFIERS),
        what=CLASSIFIERS,
        instead="ModernBertModel",
        weights=("head.*", "classifier.*"),
    ),
)
