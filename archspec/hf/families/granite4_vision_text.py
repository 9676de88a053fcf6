"""Granite 4 Vision's language model (`model_type: granite4_vision_text`, the `text_config` of a
`granite4_vision` config, built as `Granite4VisionTextModel`, hidden states without a head):
Granite's decoder (`granite.py`: the embedding, residual and attention multipliers) with the
same config class defaults. Between layers it adds image features at image tokens' positions
(deepstack), which text has none of: on text it is Granite's model."""

from __future__ import annotations

from dataclasses import replace

from archspec.hf.families import granite
from archspec.hf.family import HFClass

FAMILY = replace(
    granite.FAMILY,
    model_type="granite4_vision_text",
    classes=(HFClass("Granite4VisionTextModel", "granite4_vision_text", "none", base=True),),
    spec_family="granite4_vision_text",
)
