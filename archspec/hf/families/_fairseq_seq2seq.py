"""BART and its relatives (mBART, PLBart, MVP, Blenderbot, Marian, Pegasus, M2M100/NLLB):
fairseq-derived encoder-decoders under one set of config fields (`d_model`,
`encoder_layers`, `encoder_ffn_dim`, ...) and one vocabulary of module names
(`self_attn.q_proj`, `fc1`, `final_layer_norm`, `embed_positions`, `layernorm_embedding`,
`layer_norm`).

They differ in where their norms are (post-norm BART, PLBart, MVP and Marian; pre-norm
mBART, Blenderbot, Pegasus and M2M100 with a final norm on each stack; a norm after the
embeddings in BART, PLBart, MVP and mBART), in their positions (a learned table offset by
2, by 0 in Blenderbot; Marian's and Pegasus' fixed sinusoids in halves; M2M100's fairseq
sinusoids from the padding index + 1) and in their config classes' defaults: a `Seq2Seq`
record says which."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from archspec.hf import dropouts
from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, head_fields, read_head
from archspec.hf.dropouts import Places, read_dropout, write_dropout
from archspec.hf.family import Buffer, HFClass, NameRules, Where
from archspec.hf.name_rules import chain, fairseq_block, lm_head, shared_embedding
from archspec.spec.schema import Spec


@dataclass(frozen=True)
class Seq2Seq:
    """One family's config-class defaults and the architecture its config fields do not say."""

    vocab_size: int
    decoder_start: int | None  # decoder_start_token_id's default; None: bos_token_id's
    pre_norm: bool  # pre-norm blocks and a final norm on each stack (else post-norm, none)
    emb_norm: bool  # a norm after the embeddings (layernorm_embedding)
    # config.json -> the spec's position section, and back
    read_position: Callable[[Fields], dict[str, Any]]
    write_position: Callable[[Spec], dict[str, Any]]
    activation: str = "gelu"
    scale_embedding: bool = False
    # sizes: d_model, encoder and decoder layers, heads, FFN width, positions
    d_model: int = 1024
    layers: tuple[int, int] = (12, 12)
    heads: int = 16
    ffn: int = 4096
    max_positions: int = 1024
    bos: int = 0  # bos_token_id's default
    dropout: Places = field(default_factory=lambda: dropouts.BART)


def read_legacy(f: Fields, v: Seq2Seq, sinusoidal: bool, offset: int = 2) -> None:
    """Fields of transformers 3's shared BartConfig that real files of these families still
    carry (pegasus-large, mbart-large-cc25, the OPUS-MT models) and transformers 5 reads no
    more: accepted where they describe what the family computes, refused where the file
    claims another architecture than transformers builds."""
    norm = "pre-norm" if v.pre_norm else "post-norm"
    f.expect("add_bias_logits", False, False, "a learned logits bias")
    f.expect("normalize_before", v.pre_norm, v.pre_norm, f"{f.model_type} is {norm}")
    f.expect(
        "add_final_layer_norm",
        v.pre_norm,
        v.pre_norm,
        f"{f.model_type} has {'a' if v.pre_norm else 'no'} final norm on each stack",
    )
    f.expect(
        "normalize_embedding",
        v.emb_norm,
        v.emb_norm,
        f"{f.model_type} has {'a' if v.emb_norm else 'no'} norm after the embeddings",
    )
    f.expect(
        "static_position_embeddings",
        sinusoidal,
        sinusoidal,
        f"{f.model_type}'s positions are {'fixed sinusoids' if sinusoidal else 'learned'}",
    )
    if sinusoidal:  # a fixed table has no extra rows: whatever the value, it is unread
        f.ignored("extra_pos_embeddings", f"transformers' {f.model_type} classes")
    else:
        f.expect(
            "extra_pos_embeddings",
            offset,
            offset,
            f"{f.model_type}'s position offset is {offset}",
        )
    f.harmless("force_bos_token_to_be_generated")  # a generation setting


def note_frozen_sinusoids(f: Fields, v: Seq2Seq) -> None:
    """Marian and Pegasus: what transformers counts that archspec does not."""
    rows = f.int("max_position_embeddings", v.max_positions)
    width = f.int("d_model", v.d_model, "hidden_size")
    f.notes.append(
        f"transformers keeps the fixed sinusoids as frozen parameters, 2 x {rows} x {width} "
        f"= {2 * rows * width:,} in num_parameters() but not trainable; archspec computes "
        "them and counts the trainable parameters"
    )


def import_seq2seq(f: Fields, cls: HFClass, v: Seq2Seq) -> dict[str, Any]:
    f.expect("is_decoder", False, False, f"a decoder-only {f.model_type}")
    f.expect("is_encoder_decoder", True, True, f"{f.model_type} is an encoder-decoder")
    f.expect(
        "tie_word_embeddings",
        True,
        True,
        "untied, transformers 5 builds the encoder's and the decoder's token embeddings apart "
        "from `shared` (three tables, the output head a fourth); a spec has one table for both",
    )
    enc_layers = f.int("encoder_layers", v.layers[0], "num_hidden_layers")
    dec_layers = f.int("decoder_layers", v.layers[1])
    heads = f.count("encoder_attention_heads", v.heads, "num_attention_heads")
    ffn = f.int("encoder_ffn_dim", v.ffn)
    if f.count("decoder_attention_heads", v.heads) != heads:
        raise f.error(
            "decoder_attention_heads",
            f"decoder_attention_heads ({f.get('decoder_attention_heads')}) differs from "
            f"encoder_attention_heads ({heads}); a spec has one n_heads",
        )
    if f.int("decoder_ffn_dim", v.ffn) != ffn:
        raise f.error(
            "decoder_ffn_dim",
            f"decoder_ffn_dim ({f.get('decoder_ffn_dim')}) differs from encoder_ffn_dim "
            f"({ffn}); a spec has one d_ff",
        )
    start = f.get("decoder_start_token_id", v.decoder_start)
    if start is None:  # generate then starts from the bos token
        start = f.int("bos_token_id", v.bos)
    if isinstance(start, bool) or not isinstance(start, int):
        raise f.error("decoder_start_token_id", f"expected an integer, got {start!r}")
    spec: dict[str, Any] = {
        "d_model": f.int("d_model", v.d_model, "hidden_size"),
        "n_layers": enc_layers,
        "n_heads": heads,
        "d_ff": ffn,
        "vocab_size": f.int("vocab_size", v.vocab_size),
        "max_seq_len": f.int("max_position_embeddings", v.max_positions),
        "layout": "encoder-decoder",
        "residual": "pre" if v.pre_norm else "post",
        "final_norm": v.pre_norm,
        "norm": {"kind": "layernorm", "bias": True, "eps": 1e-5},
        "position": v.read_position(f),
        "embedding": {
            "token_types": 0,
            "norm": v.emb_norm,
            "scale": f.bool("scale_embedding", v.scale_embedding),
        },
        "attention": {"bias": True, "scale_scores": True},
        "mlp": {
            "gated": False,
            "activation": f.activation("activation_function", v.activation),
            "bias": True,
        },
        "head": {**read_head(f, cls, True), "bias": False, "decoder_start_token": start},
        "dropout": read_dropout(f, v.dropout),
    }
    if dec_layers != enc_layers:
        spec["decoder"] = {"n_layers": dec_layers}
    return spec


def export_seq2seq(spec: Spec, v: Seq2Seq) -> dict[str, Any]:
    start = spec.head.decoder_start_token
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
        **v.write_position(spec),
        **write_dropout(spec, v.dropout),
        "decoder_start_token_id": v.decoder_start if start is None else start,
        **head_fields(spec),
    }


def _stack_names(w: Where) -> str | None:
    return {
        "pos_emb": f"{w.role}.embed_positions",
        "emb_norm": f"{w.role}.layernorm_embedding",
        "final_norm": f"{w.role}.layer_norm",
    }.get(w.local)


NAMES = NameRules(
    "model.",
    model=chain(shared_embedding, lm_head),
    stack=_stack_names,
    blocks=lambda role: f"{role}.layers",
    block=fairseq_block,
)

# The LM head's bias is a zero buffer (final_logits_bias) outside the base model.
FINAL_LOGITS_BIAS = Buffer(
    "@final_logits_bias", "zeros", lambda ir: (1, ir.value(ir.root.vocab_size))
)
# Marian's and Pegasus' sinusoids: a frozen nn.Embedding in transformers, so in its state
# dict and in checkpoints; checked to hold the very encodings the spec computes.
SINUSOID_TABLES = tuple(
    Buffer(f"{role}.embed_positions.weight", "sinusoids") for role in ("encoder", "decoder")
)
