"""Qwen2.5-Omni's thinker language model (`model_type: qwen2_5_omni_text`, built as
`Qwen2_5OmniThinkerTextModel`, hidden states without a head): Qwen2.5-VL's (`qwen2_vl_text.py`:
Qwen2's block under M-RoPE, which on text is RoPE) with its config class's 7B-sized defaults."""

from __future__ import annotations

from dataclasses import replace

from archspec.hf.families.qwen2_vl_text import VARIANT, vl_text_family

# Qwen2_5OmniTextConfig's defaults where they differ from Qwen2_5_VLTextConfig's (transformers'
# configuration_qwen2_5_omni.py).
OMNI = replace(VARIANT, d_ff=18944, kv_heads=4, rms_eps=1e-6)
DEFAULTS = {"hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28,
            "max_window_layers": 28}  # fmt: skip

FAMILY = vl_text_family("qwen2_5_omni_text", "Qwen2_5OmniThinkerTextModel", OMNI, DEFAULTS)
