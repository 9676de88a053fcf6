"""Importers for the families with an encoder: BERT and RoBERTa, T5, BART.

Each importer reads the fields of its model_type that shape the architecture and returns the
spec fields they determine, as a nested mapping; a field it leaves out is inherited from the
family base. Defaults are transformers' config-class defaults. A value archspec cannot express
is refused with `Fields.expect` or `Fields.error`, naming the field.
"""

from __future__ import annotations

from typing import Any

from archspec.hf.classes import HFClass
from archspec.hf.config_fields import ACTIVATIONS, Fields, read_head


def bert_like(f: Fields, cls: HFClass, roberta: bool) -> dict[str, Any]:
    f.expect("position_embedding_type", ("absolute",), "absolute", "only absolute positions")
    f.expect("is_decoder", False, False, "a causal BERT")
    f.expect("embedding_size", (None, f.get("hidden_size", 768)), None, "factorised embeddings")
    d = f.int("hidden_size", 768)
    max_pos = f.int("max_position_embeddings", 512)
    offset = 0
    if roberta:
        # RoBERTa numbers positions after the padding index: position ids start at pad + 1.
        offset = f.int("pad_token_id", 1) + 1
        f.notes.append(
            f"RoBERTa numbers positions from pad_token_id + 1 = {offset}; they equal "
            "transformers' for right-padded batches"
        )
    return {
        "d_model": d,
        "n_layers": f.int("num_hidden_layers", 12),
        "n_heads": f.int("num_attention_heads", 12),
        "d_ff": f.int("intermediate_size", 3072),
        "vocab_size": f.int("vocab_size", 50265 if roberta else 30522),
        "max_seq_len": max_pos - offset,
        "layout": "encoder",
        "residual": "post",
        "norm": {"kind": "layernorm", "bias": True, "eps": f.float("layer_norm_eps", 1e-12)},
        "position": {"kind": "learned", "offset": offset},
        "embedding": {"token_types": f.int("type_vocab_size", 2), "norm": True, "scale": False},
        "attention": {"bias": True, "scale_scores": True},
        "mlp": {"gated": False, "activation": f.activation("hidden_act", "gelu"), "bias": True},
        "head": read_head(f, cls, True),
    }


def t5(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.expect("is_decoder", False, False, "a decoder-only T5")
    proj = f.get("feed_forward_proj", "relu")
    act_info = proj.split("-")
    gated = act_info[0] == "gated" and len(act_info) == 2
    if len(act_info) > 2 or (len(act_info) == 2 and not gated):
        raise f.error("feed_forward_proj", f"feed_forward_proj {proj!r} is not valid")
    act_name = "gelu_new" if proj == "gated-gelu" else act_info[-1]
    if act_name not in ACTIVATIONS:
        raise f.error("feed_forward_proj", f"activation {act_info[-1]!r} is not supported")
    # Fields transformers derives from feed_forward_proj must agree with it.
    f.expect(
        "dense_act_fn", (None, act_name), None, f"feed_forward_proj {proj!r} implies {act_name}"
    )
    f.expect("is_gated_act", (None, gated), None, f"feed_forward_proj {proj!r} implies {gated}")
    n_layers = f.int("num_layers", 6, "num_hidden_layers")
    decoder_layers = f.int("num_decoder_layers", n_layers)
    d = f.int("d_model", 512, "hidden_size")
    spec: dict[str, Any] = {
        "d_model": d,
        "n_layers": n_layers,
        "n_heads": f.int("num_heads", 8, "num_attention_heads"),
        "head_dim": f.int("d_kv", 64, "head_dim"),
        "d_ff": f.int("d_ff", 2048),
        "vocab_size": f.int("vocab_size", 32128),
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
        spec["head"] = {"lm_head": False, "pooler": False}
        return spec
    f.expect("is_encoder_decoder", True, True, "T5 is an encoder-decoder")
    if decoder_layers != n_layers:
        spec["decoder"] = {"n_layers": decoder_layers}
    head = read_head(f, cls, True)
    if cls.head == "lm":
        # transformers scales the decoder output by d_model**-0.5 before a tied head (T5 v1.0);
        # 5.x states it as scale_decoder_outputs, defaulting to "the head is tied".
        scale = f.get("scale_decoder_outputs", head["tied"])
        if scale and not head["tied"]:
            raise f.error(
                "scale_decoder_outputs",
                "scaling the decoder output before an untied head is not supported",
            )
        head["scale_tied_output"] = bool(scale)
    else:
        f.harmless("scale_decoder_outputs")
    spec["head"] = {**head, "bias": False}
    return spec


def bart(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.expect("is_decoder", False, False, "a decoder-only BART")
    f.expect("is_encoder_decoder", True, True, "BART is an encoder-decoder")
    # Old fairseq-era fields that transformers' BART no longer reads: only BART's values.
    f.expect("add_bias_logits", False, False, "a learned logits bias")
    f.expect("add_final_layer_norm", False, False, "a final norm after each stack (mBART)")
    f.expect("normalize_before", False, False, "pre-norm blocks (mBART)")
    f.expect("normalize_embedding", True, True, "BART normalises its embeddings")
    f.expect("static_position_embeddings", False, False, "sinusoidal positions")
    f.expect("extra_pos_embeddings", 2, 2, "BART's position offset is 2")
    f.harmless("force_bos_token_to_be_generated")
    enc_layers = f.int("encoder_layers", 12, "num_hidden_layers")
    dec_layers = f.int("decoder_layers", 12)
    heads = f.int("encoder_attention_heads", 16, "num_attention_heads")
    ffn = f.int("encoder_ffn_dim", 4096)
    if f.int("decoder_attention_heads", 16) != heads:
        raise f.error(
            "decoder_attention_heads",
            f"decoder_attention_heads ({f.get('decoder_attention_heads')}) differs from "
            f"encoder_attention_heads ({heads}); a spec has one n_heads",
        )
    if f.int("decoder_ffn_dim", 4096) != ffn:
        raise f.error(
            "decoder_ffn_dim",
            f"decoder_ffn_dim ({f.get('decoder_ffn_dim')}) differs from encoder_ffn_dim "
            f"({ffn}); a spec has one d_ff",
        )
    spec: dict[str, Any] = {
        "d_model": f.int("d_model", 1024, "hidden_size"),
        "n_layers": enc_layers,
        "n_heads": heads,
        "d_ff": ffn,
        "vocab_size": f.int("vocab_size", 50265),
        "max_seq_len": f.int("max_position_embeddings", 1024),
        "layout": "encoder-decoder",
        "residual": "post",
        "final_norm": False,
        "norm": {"kind": "layernorm", "bias": True, "eps": 1e-5},
        "position": {"kind": "learned", "offset": 2},
        "embedding": {"token_types": 0, "norm": True, "scale": f.bool("scale_embedding", False)},
        "attention": {"bias": True, "scale_scores": True},
        "mlp": {
            "gated": False,
            "activation": f.activation("activation_function", "gelu"),
            "bias": True,
        },
        "head": {**read_head(f, cls, True), "bias": False},
    }
    if dec_layers != enc_layers:
        spec["decoder"] = {"n_layers": dec_layers}
    return spec
