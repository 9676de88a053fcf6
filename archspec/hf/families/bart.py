"""BART (`model_type: bart`): a post-norm encoder-decoder with learned positions offset by 2."""

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

# Learned positions with 2 rows before position 0 (fairseq's padding offset), in BART and mBART.
LEARNED_OFFSET_2 = {"kind": "learned", "offset": 2}

VARIANT = Seq2Seq(
    vocab_size=50265,
    decoder_start=2,
    pre_norm=False,
    emb_norm=True,
    read_position=lambda f: LEARNED_OFFSET_2,
    write_position=lambda spec: {},
)


def import_bart(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.refuse_null("activation_function", "transformers' BartEncoderLayer")
    read_legacy(f, VARIANT, sinusoidal=False)
    # Settings of the distillation script that made distilbart (layer replacement during
    # training, the student's layer counts, already written as encoder_/decoder_layers).
    f.harmless("replacing_rate", "student_encoder_layers", "student_decoder_layers")
    return import_seq2seq(f, cls, VARIANT)


FAMILY = Family(
    model_type="bart",
    classes=(
        HFClass("BartForConditionalGeneration", "bart", "lm", base=False),
        HFClass("BartModel", "bart", "none", base=True),
    ),
    bases=("_bart",),
    import_config=import_bart,
    export_config=lambda spec: export_seq2seq(spec, VARIANT),
    names=NAMES,
    buffers=(FINAL_LOGITS_BIAS,),
)
