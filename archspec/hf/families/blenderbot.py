"""Blenderbot (`model_type: blenderbot`, Blenderbot 400M-distill to 9B): pre-norm blocks with
a final layer norm on each stack, no norm after the embeddings, and a learned position table
with no offset; real configs have a 2-layer encoder beside a deep decoder."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families._fairseq_seq2seq import (
    FINAL_LOGITS_BIAS,
    NAMES,
    Seq2Seq,
    export_seq2seq,
    import_seq2seq,
    read_legacy,
)
from archspec.hf.family import Family, HFClass

# BlenderbotConfig's defaults (blenderbot-3B's sizes).
VARIANT = Seq2Seq(
    vocab_size=8008,
    decoder_start=1,
    bos=1,
    pre_norm=True,
    emb_norm=False,
    read_position=lambda f: {"kind": "learned", "offset": 0},
    write_position=lambda spec: {},
    d_model=2560,
    layers=(2, 24),
    heads=32,
    ffn=10240,
    max_positions=128,
)


def import_blenderbot(f: Fields, cls: HFClass) -> dict[str, Any]:
    read_legacy(f, VARIANT, sinusoidal=False, offset=0)
    return import_seq2seq(f, cls, VARIANT)


FAMILY = Family(
    model_type="blenderbot",
    classes=(
        HFClass("BlenderbotForConditionalGeneration", "blenderbot", "lm", base=False),
        HFClass("BlenderbotModel", "blenderbot", "none", base=True),
    ),
    bases=("_blenderbot",),
    import_config=import_blenderbot,
    export_config=lambda spec: export_seq2seq(spec, VARIANT),
    names=NAMES,
    buffers=(FINAL_LOGITS_BIAS,),
)
