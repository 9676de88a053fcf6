"""Qwen3-VL's language model (`model_type: qwen3_vl_text`, the `text_config` of a `qwen3_vl`
config): Qwen3's decoder (q and k normalised per head, 128-wide heads) without its sliding
window, under interleaved M-RoPE, which on text is RoPE (`_mrope.py`). transformers builds it
as `Qwen3VLTextModel`, hidden states without a head: the LM head belongs to the vision-language
model."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families import qwen3
from archspec.hf.families._mrope import check_sections, text_rope
from archspec.hf.family import HFClass

# Qwen3VLTextConfig's defaults where they differ from Qwen3Config's (transformers'
# configuration_qwen3_vl.py): 128,000 positions, RoPE base 500,000.
VARIANT = replace(qwen3.VARIANT, max_positions=128000, rope_theta=5e5)


def import_qwen3_vl_text(f: Fields, cls: HFClass) -> dict[str, Any]:
    sections = text_rope(f)
    # Qwen3VLTextAttention attends to every earlier position: no window field is read.
    for key in ("use_sliding_window", "sliding_window", "max_window_layers", "layer_types"):
        f.ignored(key, f"{cls.name} and its attention")
    spec = qwen3.import_qwen3(f, cls, VARIANT, windows=False)
    check_sections(f, sections, spec, split=False)
    return spec


FAMILY = replace(
    qwen3.FAMILY,
    model_type="qwen3_vl_text",
    classes=(HFClass("Qwen3VLTextModel", "qwen3_vl_text", "none", base=True),),
    import_config=import_qwen3_vl_text,
    spec_family="qwen3_vl_text",
)
