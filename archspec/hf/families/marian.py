"""Marian (`model_type: marian`, the OPUS-MT translation models): BART's post-norm blocks
without a norm after the embeddings, and fixed sinusoidal positions in halves (sines, then
cosines) in place of a learned table; real configs scale the embeddings by sqrt(d_model).

transformers keeps the sinusoids as a frozen nn.Embedding, so they are in its state dict and
among its parameters (not trainable ones); archspec computes them, counts the trainable
parameters, and checks a checkpoint's table against its own encodings.
"""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families._fairseq_seq2seq import (
    FINAL_LOGITS_BIAS,
    NAMES,
    SINUSOID_TABLES,
    Seq2Seq,
    export_seq2seq,
    import_seq2seq,
    note_frozen_sinusoids,
    read_legacy,
)
from archspec.hf.family import Family, HFClass
from archspec.spec.schema import Spec

SINUSOIDS_IN_HALVES = {"kind": "sinusoidal", "layout": "halves"}

VARIANT = Seq2Seq(
    vocab_size=58101,
    decoder_start=58100,
    pre_norm=False,
    emb_norm=False,
    read_position=lambda f: SINUSOIDS_IN_HALVES,
    write_position=lambda spec: {},
)


def import_marian(f: Fields, cls: HFClass) -> dict[str, Any]:
    read_legacy(f, VARIANT, sinusoidal=True)
    note_frozen_sinusoids(f, VARIANT)
    f.expect(
        "share_encoder_decoder_embeddings",
        True,
        True,
        "separate encoder and decoder vocabularies (a spec has one token embedding)",
    )
    vocab = f.int("vocab_size", VARIANT.vocab_size)
    decoder_vocab = f.get("decoder_vocab_size")
    if decoder_vocab is not None and decoder_vocab != vocab:
        raise f.error(
            "decoder_vocab_size",
            f"decoder_vocab_size ({decoder_vocab}) differs from vocab_size ({vocab}); a spec "
            "has one vocabulary, shared by the encoder and the decoder",
        )
    return import_seq2seq(f, cls, VARIANT)


def export_marian(spec: Spec) -> dict[str, Any]:
    fields = export_seq2seq(spec, VARIANT)
    # Marian starts decoding from its pad token (the vocabulary's last), and its config
    # class's default pad (58100) would fall outside a smaller vocabulary.
    return {
        **fields,
        "decoder_vocab_size": spec.vocab_size,
        "pad_token_id": fields["decoder_start_token_id"],
    }


FAMILY = Family(
    model_type="marian",
    classes=(
        HFClass("MarianMTModel", "marian", "lm", base=False),
        HFClass("MarianModel", "marian", "none", base=True),
    ),
    bases=("_marian",),
    import_config=import_marian,
    export_config=export_marian,
    names=NAMES,
    buffers=(FINAL_LOGITS_BIAS, *SINUSOID_TABLES),
)
