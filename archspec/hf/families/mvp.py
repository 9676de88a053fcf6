"""MVP (`model_type: mvp`): BART's architecture under its own classes. Its optional
task prompts (`use_prompt: true`, prefix key/value prompts in every attention layer) are
refused: archspec's attention has no prompt prefix."""

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

# MvpConfig's defaults.
VARIANT = Seq2Seq(
    vocab_size=50267,
    decoder_start=2,
    pre_norm=False,
    emb_norm=True,
    read_position=lambda f: LEARNED_OFFSET_2,
    write_position=lambda spec: {},
)


def import_mvp(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.expect("use_prompt", False, False, "task prompts prefixed to every attention layer's keys")
    f.harmless("prompt_length", "prompt_mid_dim")  # the prompts' sizes, unused without them
    read_legacy(f, VARIANT, sinusoidal=False)
    return import_seq2seq(f, cls, VARIANT)


FAMILY = Family(
    model_type="mvp",
    classes=(
        HFClass("MvpForConditionalGeneration", "mvp", "lm", base=False),
        HFClass("MvpModel", "mvp", "none", base=True),
    ),
    bases=("_mvp",),
    import_config=import_mvp,
    export_config=lambda spec: export_seq2seq(spec, VARIANT),
    names=NAMES,
    buffers=(FINAL_LOGITS_BIAS,),
)
