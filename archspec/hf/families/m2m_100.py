"""M2M100 (`model_type: m2m_100`, also NLLB-200's): pre-norm blocks with a final layer norm on
each stack, no norm after the embeddings, embeddings scaled by sqrt(d_model), and fairseq's
fixed sinusoids, counted from the padding index + 1 over the input's non-padding tokens
(`position: {kind: sinusoidal, layout: fairseq, offset: pad_token_id + 1, from_mask: true}`).
Its head has no final_logits_bias."""

from __future__ import annotations

from typing import Any

from archspec.hf import dropouts
from archspec.hf.config_fields import Fields
from archspec.hf.families._fairseq_seq2seq import (
    NAMES,
    Seq2Seq,
    export_seq2seq,
    import_seq2seq,
    read_legacy,
)
from archspec.hf.family import Family, HFClass
from archspec.spec.schema import Spec

PAD = 1  # M2M100Config's pad_token_id


def read_position(f: Fields) -> dict[str, Any]:
    # transformers numbers a token's position from padding_idx + 1 (fairseq's make_positions)
    return {
        "kind": "sinusoidal",
        "layout": "fairseq",
        "offset": f.int("pad_token_id", PAD) + 1,
        "from_mask": True,
    }


def write_position(spec: Spec) -> dict[str, Any]:
    return {"pad_token_id": spec.position.offset - 1}


VARIANT = Seq2Seq(
    vocab_size=128112,
    decoder_start=2,
    pre_norm=True,
    emb_norm=False,
    read_position=read_position,
    write_position=write_position,
    activation="relu",
    scale_embedding=True,
    dropout={**dropouts.BART, "attention": ("attention_dropout", 0.1)},
)


def import_m2m_100(f: Fields, cls: HFClass) -> dict[str, Any]:
    read_legacy(f, VARIANT, sinusoidal=True)
    return import_seq2seq(f, cls, VARIANT)


FAMILY = Family(
    model_type="m2m_100",
    classes=(
        HFClass("M2M100ForConditionalGeneration", "m2m_100", "lm", base=False),
        HFClass("M2M100Model", "m2m_100", "none", base=True),
    ),
    bases=("_m2m_100",),
    import_config=import_m2m_100,
    export_config=lambda spec: export_seq2seq(spec, VARIANT),
    names=NAMES,
)
