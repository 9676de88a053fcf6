"""T5 (`model_type: t5`): an encoder-decoder with RMSNorm and relative-position biases."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from archspec.hf import dropouts
from archspec.hf.config_fields import (
    ACTIVATIONS,
    EXPORT_ACTIVATIONS,
    Fields,
    head_fields,
    read_head,
    shown,
)
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.family import Family, HFClass, NameRules, Target, Where
from archspec.hf.name_rules import chain, lm_head, placed, shared_embedding
from archspec.hf.unsupported import known_activation, typo_hint
from archspec.spec.schema import Spec


@dataclass(frozen=True)
class T5Variant:
    """A config class's defaults (T5Config's, MT5Config's), and whether it may scale the decoder
    output before a tied head (T5 v1.0 does; MT5 never does)."""

    n_layers: int = 6
    n_heads: int = 8
    d_ff: int = 2048
    vocab_size: int = 32128
    feed_forward_proj: str = "relu"
    tie: bool = True
    scales_output: bool = True


T5 = T5Variant()


def import_t5(f: Fields, cls: HFClass, v: T5Variant = T5) -> dict[str, Any]:
    f.expect("is_decoder", False, False, "a decoder-only T5")
    proj = f.get("feed_forward_proj", v.feed_forward_proj)
    if not isinstance(proj, str):
        raise f.error("feed_forward_proj", f"expected text such as 'gated-gelu', got {shown(proj)}")
    act_info = proj.split("-")
    gated = act_info[0] == "gated" and len(act_info) == 2
    if len(act_info) > 2 or (len(act_info) == 2 and not gated):
        raise f.error("feed_forward_proj", f"feed_forward_proj {proj!r} is not valid")
    act_name = "gelu_new" if proj == "gated-gelu" else act_info[-1]
    if act_name not in ACTIVATIONS:
        raise f.error("feed_forward_proj", f"activation {act_info[-1]!r} is not supported",
                      hint=typo_hint(act_info[-1], ACTIVATIONS, known_activation))  # fmt: skip
    # Fields transformers derives from feed_forward_proj must agree with it.
    f.expect(
        "dense_act_fn", (None, act_name), None, f"feed_forward_proj {proj!r} implies {act_name}"
    )
    f.expect("is_gated_act", (None, gated), None, f"feed_forward_proj {proj!r} implies {gated}")
    # An explicit null is kept by T5Config (it derives the flag only when left out), and the
    # model then builds the ungated MLP (T5DenseActDense) with feed_forward_proj's activation.
    gated = gated and not f.is_null("is_gated_act")
    n_layers = f.int("num_layers", v.n_layers, "num_hidden_layers")
    decoder_layers = f.size("num_decoder_layers", n_layers)  # null: as many (T5Config)
    d = f.int("d_model", 512, "hidden_size")
    spec: dict[str, Any] = {
        "d_model": d,
        "n_layers": n_layers,
        "n_heads": f.count("num_heads", v.n_heads, "num_attention_heads"),
        "head_dim": f.count("d_kv", 64, "head_dim"),
        "d_ff": f.int("d_ff", v.d_ff),
        "vocab_size": f.int("vocab_size", v.vocab_size),
        "layout": cls.layout or "encoder-decoder",
        "residual": "pre",
        "final_norm": True,
        "norm": {"kind": "rmsnorm", "eps": f.float("layer_norm_epsilon", 1e-6)},
        "position": {
            "kind": "relative_bias",
            "num_buckets": f.int("relative_attention_num_buckets", 32),
            "max_distance": f.int("relative_attention_max_distance", 128),
        },
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": {"bias": False, "scale_scores": False},
        "mlp": {"gated": gated, "activation": ACTIVATIONS[act_name], "bias": False},
        "dropout": read_dropout(f, dropouts.T5),
    }
    if f.present("n_positions"):
        spec["max_seq_len"] = f.int("n_positions")
    if cls.layout == "encoder":
        f.harmless(
            "num_decoder_layers",
            "is_encoder_decoder",
            "tie_word_embeddings",
            "scale_decoder_outputs",
        )
        # No decoder: none of the T5 base's decoder start token either.
        spec["head"] = {"lm_head": False, "pooler": False, "decoder_start_token": None}
        return spec
    f.expect("is_encoder_decoder", True, True, "T5 is an encoder-decoder")
    if decoder_layers != n_layers:
        spec["decoder"] = {"n_layers": decoder_layers}
    head = read_head(f, cls, v.tie)
    # T5 starts decoding from its pad token (0 in every T5 config.json).
    head["decoder_start_token"] = f.int("decoder_start_token_id", f.int("pad_token_id", 0))
    if cls.head == "lm" and not v.scales_output:
        head["scale_tied_output"] = False
    elif cls.head == "lm":
        # transformers scales the decoder output by d_model**-0.5 before a tied head (T5 v1.0);
        # 5.x states it as scale_decoder_outputs, defaulting to "the head is tied".
        # An explicit null is kept by T5Config and read as false by the model.
        nulled = f.is_null("scale_decoder_outputs")
        scale = f.get("scale_decoder_outputs", head["tied"]) and not nulled
        if scale and not head["tied"]:
            raise f.error(
                "scale_decoder_outputs",
                "scaling the decoder output before an untied head is not supported",
            )
        head["scale_tied_output"] = bool(scale)
    else:
        f.harmless("scale_decoder_outputs")
    spec["head"] = {**head, "bias": False}
    if head.get("lm_head") and not head.get("tied"):
        _forced_tie_note(f, spec)
    return spec


def _forced_tie_note(f: Fields, spec: dict[str, Any]) -> None:
    """T5Config and MT5Config (transformers 5) drop tie_word_embeddings and set True ("official
    weights have False serialized, but we have to tie always"); from_pretrained then unties
    the head when the checkpoint stores a lm_head.weight that differs from shared.weight, as
    T5 v1.1's, FLAN-T5's and mT5's do. archspec follows the file; the note says where a model
    built from the config alone differs."""
    extra = spec["vocab_size"] * spec["d_model"]
    config_class = "MT5Config" if f.model_type == "mt5" else "T5Config"
    f.notes.append(
        "config.json says tie_word_embeddings: false, which archspec follows, as "
        "from_pretrained does on checkpoints that store a separate lm_head.weight (T5 v1.1, "
        f"FLAN-T5, mT5); transformers' {config_class} forces the tie, so a model built from "
        f"this config alone (meta device, from_config) ties the head and counts {extra:,} "
        "parameters fewer"
    )


def export_t5(spec: Spec, v: T5Variant = T5) -> dict[str, Any]:
    act = EXPORT_ACTIVATIONS[spec.mlp.activation]
    if spec.mlp.gated:
        # transformers reads "gated-gelu" as the tanh approximation (gelu_new).
        proj = "gated-gelu" if act == "gelu_new" else f"gated-{act}"
    else:
        proj = act
    return {
        "d_model": spec.d_model,
        "num_layers": spec.encoder.n_layers or spec.n_layers,
        "num_decoder_layers": spec.decoder.n_layers or spec.n_layers,
        "num_heads": spec.n_heads,
        "d_kv": spec.head_dim,
        "d_ff": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "n_positions": spec.max_seq_len,
        "feed_forward_proj": proj,
        "layer_norm_epsilon": spec.norm.eps,
        "relative_attention_num_buckets": spec.position.num_buckets,
        "relative_attention_max_distance": spec.position.max_distance,
        **({"scale_decoder_outputs": spec.head.scale_tied_output} if v.scales_output else {}),
        **write_dropout(spec, dropouts.T5),
        "decoder_start_token_id": _start(spec, 0),
        **head_fields(spec),
    }


def _start(spec: Spec, default: int) -> int:
    start = spec.head.decoder_start_token
    return default if start is None else start


# The relative-position bias table: one per stack (`<stack>.rel_bias` in the IR), which
# transformers keeps in the first block's self-attention.
_REL_BIAS_TABLE = "layer.0.SelfAttention.relative_attention_bias"
REL_BIAS = placed("stack", "rel_bias", "{role}.block.0." + _REL_BIAS_TABLE)


def _block(w: Where) -> Target | str | None:
    ff = 2 if w.cross else 1  # layer.0 self-attention, [layer.1 cross-attention], feed-forward
    names = {
        "attn_norm": "layer.0.layer_norm",
        "cross_norm": "layer.1.layer_norm",
        "mlp_norm": f"layer.{ff}.layer_norm",
        "mlp.gate": f"layer.{ff}.DenseReluDense.wi_0",
        "mlp.up": f"layer.{ff}.DenseReluDense.{'wi_1' if w.gated else 'wi'}",
        "mlp.down": f"layer.{ff}.DenseReluDense.wo",
    }
    for p in "qkvo":
        names[f"attn.{p}"] = f"layer.0.SelfAttention.{p}"
        names[f"cross_attn.{p}"] = f"layer.1.EncDecAttention.{p}"
    return names.get(w.local)


def _stack(w: Where) -> str | None:
    return {"final_norm": f"{w.role}.final_layer_norm"}.get(w.local)


NAMES = NameRules(
    "",
    model=chain(shared_embedding, lm_head),
    # REL_BIAS is in both: it answers only at the level where the IR puts the table.
    stack=chain(REL_BIAS, _stack),
    blocks=lambda role: f"{role}.block",
    block=chain(REL_BIAS, _block),
)

FAMILY = Family(
    model_type="t5",
    classes=(
        HFClass("T5ForConditionalGeneration", "t5", "lm", base=False),
        HFClass("T5Model", "t5", "none", base=True),
        HFClass("T5EncoderModel", "t5", "none", base=True, layout="encoder"),
    ),
    bases=("_t5", "_flan-t5"),
    import_config=import_t5,
    export_config=export_t5,
    names=NAMES,
    class_aliases={"T5WithLMHeadModel": "T5ForConditionalGeneration"},
)
