"""Qwen2.5-VL's language model (`model_type: qwen2_5_vl_text`): Qwen2-VL's, whose config class
has the same fields and defaults (`qwen2_vl_text.py`), built as `Qwen2_5_VLTextModel`."""

from __future__ import annotations

from archspec.hf.families.qwen2_vl_text import vl_text_family

FAMILY = vl_text_family("qwen2_5_vl_text", "Qwen2_5_VLTextModel")
