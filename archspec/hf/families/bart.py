"""BART (`model_type: bart`): a post-norm encoder-decoder with learned positions offset by 2."""

from __future__ import annotations

from typing import Any

from archspec.hf import dropouts
from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, head_fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.family import Buffer, Family, HFClass, NameRules
from archspec.hf.name_rules import chain, fairseq_block, lm_head, shared_embedding
from archspec.spec.schema import Spec


def import_bart(f: Fields, cls: HFClass) -> dict[str, Any]:
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
    # Settings of the distillation script that made distilbart (layer replacement during
    # training, the student's layer counts, already written as encoder_/decoder_layers).
    f.harmless("replacing_rate", "student_encoder_layers", "student_decoder_layers")
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
        "head": {
            **read_head(f, cls, True),
            "bias": False,
            "decoder_start_token": f.int("decoder_start_token_id", 2),
        },
        "dropout": read_dropout(f, dropouts.BART),
    }
    if dec_layers != enc_layers:
        spec["decoder"] = {"n_layers": dec_layers}
    return spec


def export_bart(spec: Spec) -> dict[str, Any]:
    return {
        "d_model": spec.d_model,
        "encoder_layers": spec.encoder.n_layers or spec.n_layers,
        "decoder_layers": spec.decoder.n_layers or spec.n_layers,
        "encoder_attention_heads": spec.n_heads,
        "decoder_attention_heads": spec.n_heads,
        "encoder_ffn_dim": spec.d_ff,
        "decoder_ffn_dim": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len,
        "activation_function": EXPORT_ACTIVATIONS[spec.mlp.activation],
        "scale_embedding": spec.embedding.scale,
        **write_dropout(spec, dropouts.BART),
        "decoder_start_token_id": 2
        if spec.head.decoder_start_token is None
        else spec.head.decoder_start_token,
        **head_fields(spec),
    }


FAMILY = Family(
    model_type="bart",
    classes=(
        HFClass("BartForConditionalGeneration", "bart", "lm", base=False),
        HFClass("BartModel", "bart", "none", base=True),
    ),
    bases=("_bart",),
    import_config=import_bart,
    export_config=export_bart,
    names=NameRules(
        "model.",
        model=chain(shared_embedding, lm_head),
        stack=lambda w: {
            "pos_emb": f"{w.role}.embed_positions",
            "emb_norm": f"{w.role}.layernorm_embedding",
        }.get(w.local),
        blocks=lambda role: f"{role}.layers",
        block=fairseq_block,
    ),
    # The LM head's bias is a zero buffer (final_logits_bias) outside the base model.
    buffers=(Buffer("@final_logits_bias", "zeros", lambda ir: (1, ir.value(ir.root.vocab_size))),),
)
