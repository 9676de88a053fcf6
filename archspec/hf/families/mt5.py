"""mT5 (`model_type: mt5`): T5 v1.1's architecture (gated-GELU MLP) with a multilingual
vocabulary, under its own classes. Unlike T5, MT5 never scales the decoder output before the
head, tied or not, so `scale_decoder_outputs` is no field of it (refused if present)."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families.t5 import NAMES, T5Variant, export_t5, import_t5
from archspec.hf.family import Family, HFClass
from archspec.spec.schema import Spec

# MT5Config's defaults (transformers 5: a tied head, forced whatever config.json says; real
# mT5 configs say tie_word_embeddings: false, and their checkpoints keep a separate
# lm_head.weight, which from_pretrained keeps untied).
VARIANT = T5Variant(
    n_layers=8,
    n_heads=6,
    d_ff=1024,
    vocab_size=250112,
    feed_forward_proj="gated-gelu",
    tie=True,
    scales_output=False,
)


def import_mt5(f: Fields, cls: HFClass) -> dict[str, Any]:
    return import_t5(f, cls, VARIANT)  # the forced tie's note is import_t5's


def export_mt5(spec: Spec) -> dict[str, Any]:
    return export_t5(spec, VARIANT)


FAMILY = Family(
    model_type="mt5",
    classes=(
        HFClass("MT5ForConditionalGeneration", "mt5", "lm", base=False),
        HFClass("MT5Model", "mt5", "none", base=True),
        HFClass("MT5EncoderModel", "mt5", "none", base=True, layout="encoder"),
    ),
    bases=("_mt5",),
    import_config=import_mt5,
    export_config=export_mt5,
    names=NAMES,
)
