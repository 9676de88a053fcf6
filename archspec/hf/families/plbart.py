"""PLBart (`model_type: plbart`, BART trained on code): BART's architecture, its post-norm
blocks, norm after the embeddings and learned positions offset by 2, with embeddings scaled
by sqrt(d_model) by default."""

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

# PLBartConfig's defaults; it has no decoder_start_token_id, so generate starts from
# bos_token_id (0).
VARIANT = Seq2Seq(
    vocab_size=50005,
    decoder_start=None,
    pre_norm=False,
    emb_norm=True,
    read_position=lambda f: LEARNED_OFFSET_2,
    write_position=lambda spec: {},
    scale_embedding=True,
    d_model=768,
    layers=(6, 6),
    heads=12,
    ffn=3072,
    dropout={"attention": ("attention_dropout", 0.1), "hidden": ("dropout", 0.1),
             "embedding": ("dropout", 0.1), "mlp": ("activation_dropout", 0.0)},
)  # fmt: skip


def import_plbart(f: Fields, cls: HFClass) -> dict[str, Any]:
    read_legacy(f, VARIANT, sinusoidal=False)
    return import_seq2seq(f, cls, VARIANT)


FAMILY = Family(
    model_type="plbart",
    classes=(
        HFClass("PLBartForConditionalGeneration", "plbart", "lm", base=False),
        HFClass("PLBartModel", "plbart", "none", base=True),
    ),
    bases=("_plbart",),
    import_config=import_plbart,
    export_config=lambda spec: export_seq2seq(spec, VARIANT),
    names=NAMES,
    buffers=(FINAL_LOGITS_BIAS,),
)
