"""ModernBERT's decoder (`model_type: modernbert-decoder`, ModernBertDecoderForCausalLM: the
Ettin decoders, jhu-clsp/ettin-decoder-*): ModernBERT's block (`modernbert.py`: a pre-norm
stack without biases, the embeddings normalised, no attention norm on layer 0, a GeGLU MLP)
run causally, with q, k and v projected apart (`q_proj`, `k_proj`, `v_proj`; the output is
still `Wo`). Its windowed layers (`layer_types`, or `global_attn_every_n_layers`: 3, layer 0
full) see a causal window of `sliding_window = local_attention // 2` keys, the query's own
included (transformers' sliding-window mask: kv > q - sliding_window; the cache keeps the
last sliding_window - 1 keys), the spec's decoder `sliding_window` exactly; those layers rotate
by `rope_parameters.sliding_attention` (`local_rope_theta`, 10,000), the full ones by
`full_attention`'s (`global_rope_theta`, 160,000); `rope_scaling` updates both. The causal LM's
head is ModernBERT's prediction head (`lm_head`: dense without bias, `classifier_activation`,
norm) before the tied `decoder` with its bias (`decoder_bias`)."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families._layer_rope import local_layers, rope_per_type
from archspec.hf.families._windows import window_pattern
from archspec.hf.families.modernbert import (
    LOCAL_ATTENTION,
    THETAS,
    _layer_types,
    read_modernbert,
    write_modernbert,
)
from archspec.hf.families.phi3 import fused_rows
from archspec.hf.family import Family, HFClass, NameRules, Target, UnsupportedHeads
from archspec.hf.name_rules import table
from archspec.spec.schema import Spec

# Fields ModernBertDecoderConfig reads that change nothing a forward pass computes:
# initialisation, the sequence classifier's dropout, token ids no model code uses.
HARMLESS = ("initializer_cutoff_factor", "classifier_dropout", "cls_token_id", "sep_token_id")


def _ropes(f: Fields) -> dict[str, dict[str, Any]]:
    """Each layer type's rotation; ModernBertDecoderConfig updates both with rope_scaling."""
    if f.get("rope_scaling") is None:
        return rope_per_type(f, THETAS, scaled=None)
    full = rope_per_type(f, THETAS, scaled="full_attention")
    local = rope_per_type(f, THETAS, scaled="sliding_attention")
    return {
        "full_attention": full["full_attention"],
        "sliding_attention": local["sliding_attention"],
    }


def _window(f: Fields) -> tuple[int | None, str, str]:
    """The windowed layers' window, the field that sets it and how. ModernBertDecoderConfig
    sets sliding_window = local_attention // 2 (-1 where local_attention is null or 0); a
    sliding_window in the file (saved configs carry it) is set after that, and wins."""
    if "sliding_window" in f.data:
        f.harmless("local_attention")
        given = f.data["sliding_window"]
        return (
            (None if given is None else f.int("sliding_window")),
            "sliding_window",
            "sliding_window",
        )
    if f.data.get("local_attention", LOCAL_ATTENTION) is None:
        f.harmless("local_attention")
        return -1, "local_attention", "-1 where local_attention is null or 0"
    local = f.int("local_attention", LOCAL_ATTENTION)
    window = local // 2 if local else -1
    return window, "local_attention", "local_attention // 2 (-1 where it is null or 0)"


def import_modernbert_decoder(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.harmless(*HARMLESS)
    ropes = _ropes(f)
    n_layers = f.int("num_hidden_layers", 22)
    pattern = window_pattern(f, _layer_types(f, n_layers))
    window, key, why = _window(f)
    spec = read_modernbert(f, cls, "decoder", ropes)
    # Written either way: the base spec's two local layers to each global one, and their
    # rotation, are not the config's where every layer is global.
    if "L" not in pattern:
        f.harmless("local_attention", "sliding_window")
        spec["attention"] |= {"sliding_window": None}
    elif window is None or window < 1:
        raise f.error(
            key,
            f"the sliding_attention layers' window is {why} = {window} keys: transformers' "
            "mask hides every key (or has no window)",
        )
    else:
        spec["attention"] |= {"sliding_window": window, "window_pattern": pattern}
    local_layers(f, spec, pattern, ropes["sliding_attention"])
    return spec


def export_modernbert_decoder(spec: Spec) -> dict[str, Any]:
    fields = write_modernbert(spec)
    if fields.get("pad_token_id", 0) is None:
        # ModernBertDecoderConfig's pad_token_id must be an integer (the embedding's
        # padding_idx, which changes only its gradient): one in the vocabulary.
        fields["pad_token_id"] = 0
    window = spec.attention.sliding_window
    if window is not None and "L" in spec.attention.window_pattern:
        fields["local_attention"] = 2 * window
    return fields


FAMILY = Family(
    model_type="modernbert-decoder",
    classes=(
        HFClass("ModernBertDecoderForCausalLM", "modernbert-decoder", "lm", base=False),
        HFClass("ModernBertDecoderModel", "modernbert-decoder", "none", base=True),
    ),
    bases=("_modernbert_decoder",),
    import_config=import_modernbert_decoder,
    export_config=export_modernbert_decoder,
    names=NameRules(
        "model.",
        model=table(
            {
                "tok_emb": "embeddings.tok_embeddings",
                "lm_transform": Target("lm_head.dense", outside=True),
                "lm_norm": Target("lm_head.norm", outside=True),
                "lm_head": Target("decoder", outside=True),
            }
        ),
        stack=table({"emb_norm": "embeddings.norm", "final_norm": "final_norm"}),
        blocks=lambda role: "layers",
        block=table(
            {
                "attn_norm": "attn_norm",
                "attn.q": "attn.q_proj",
                "attn.k": "attn.k_proj",
                "attn.v": "attn.v_proj",
                "attn.o": "attn.Wo",
                "mlp_norm": "mlp_norm",
                "mlp.gate": fused_rows("mlp.Wi", 0, 2, "input (activated)"),
                "mlp.up": fused_rows("mlp.Wi", 1, 2, "gate"),
                "mlp.down": "mlp.Wo",
            }
        ),
    ),
    unsupported_heads=UnsupportedHeads(
        ("ModernBertDecoderForSequenceClassification",),
        what={
            "ModernBertDecoderForSequenceClassification": "a classifier, after the "
            "prediction head's transform, over each sequence's last non-padding token"
        },
        instead="ModernBertDecoderModel",
        weights=("head.*", "classifier.*"),
    ),
)
