"""Pegasus (`model_type: pegasus`): pre-norm blocks with a final layer norm on each stack, no
norm after the embeddings, and Marian's fixed sinusoidal positions in halves; real configs
scale the embeddings by sqrt(d_model). As in Marian, transformers keeps the sinusoids as a
frozen nn.Embedding (in its state dict, not trainable): archspec computes them and checks a
checkpoint's table."""

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
from archspec.hf.families.marian import SINUSOIDS_IN_HALVES
from archspec.hf.family import Family, HFClass

VARIANT = Seq2Seq(
    vocab_size=50265,
    decoder_start=0,
    pre_norm=True,
    emb_norm=False,
    read_position=lambda f: SINUSOIDS_IN_HALVES,
    write_position=lambda spec: {},
)


def import_pegasus(f: Fields, cls: HFClass) -> dict[str, Any]:
    read_legacy(f, VARIANT, sinusoidal=True)
    note_frozen_sinusoids(f, VARIANT)
    return import_seq2seq(f, cls, VARIANT)


FAMILY = Family(
    model_type="pegasus",
    classes=(
        HFClass("PegasusForConditionalGeneration", "pegasus", "lm", base=False),
        HFClass("PegasusModel", "pegasus", "none", base=True),
    ),
    bases=("_pegasus",),
    import_config=import_pegasus,
    export_config=lambda spec: export_seq2seq(spec, VARIANT),
    names=NAMES,
    buffers=(FINAL_LOGITS_BIAS, *SINUSOID_TABLES),
)
