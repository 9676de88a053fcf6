"""mBART (`model_type: mbart`): BART made pre-norm, with a final layer norm on each stack
(`layer_norm`) beside the norm after the embeddings (`layernorm_embedding`)."""

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
from archspec.hf.families.bart import LEARNED_OFFSET_2
from archspec.hf.family import Family, HFClass

# MBartConfig's decoder_start_token_id is None: generate then starts from bos_token_id (0).
VARIANT = Seq2Seq(
    vocab_size=50265,
    decoder_start=None,
    pre_norm=True,
    emb_norm=True,
    read_position=lambda f: LEARNED_OFFSET_2,
    write_position=lambda spec: {},
)


def import_mbart(f: Fields, cls: HFClass) -> dict[str, Any]:
    read_legacy(f, VARIANT, sinusoidal=False)
    return import_seq2seq(f, cls, VARIANT)


FAMILY = Family(
    model_type="mbart",
    classes=(
        HFClass("MBartForConditionalGeneration", "mbart", "lm", base=False),
        HFClass("MBartModel", "mbart", "none", base=True),
    ),
    bases=("_mbart",),
    import_config=import_mbart,
    export_config=lambda spec: export_seq2seq(spec, VARIANT),
    names=NAMES,
    buffers=(FINAL_LOGITS_BIAS,),
)
