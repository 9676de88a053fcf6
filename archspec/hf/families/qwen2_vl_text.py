"""Qwen2-VL's language model (`model_type: qwen2_vl_text`, the `text_config` of a `qwen2_vl`
config): Qwen2's decoder (biases on q, k and v, its sliding window) under M-RoPE, which on text
is RoPE (`_mrope.py`). transformers builds it as `Qwen2VLTextModel`, hidden states without a
head: the LM head belongs to the vision-language model. Qwen2.5-VL's (`qwen2_5_vl_text.py`) is
the same record under its own names."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families import qwen2
from archspec.hf.families._llama_like import LlamaVariant
from archspec.hf.families._mrope import check_sections, text_rope, with_sections
from archspec.hf.family import Family, HFClass
from archspec.spec.schema import Spec

# Qwen2VLTextConfig's (and Qwen2_5_VLTextConfig's) defaults where they differ from Qwen2Config's
# (transformers' configuration_qwen2_vl.py): a 72B-sized model, RoPE base 1,000,000.
VARIANT = replace(
    qwen2.VARIANT, d_ff=29568, kv_heads=8, rms_eps=1e-5, vocab_size=152064, rope_theta=1e6
)
SECTIONS = [16, 24, 24]  # the rotary embedding's mrope_section where the file has none
DEFAULTS = {"hidden_size": 8192, "num_hidden_layers": 80, "num_attention_heads": 64,
            "max_window_layers": 80}  # fmt: skip


def import_vl_text(
    f: Fields, cls: HFClass, variant: LlamaVariant = VARIANT, defaults: dict[str, Any] = DEFAULTS
) -> dict[str, Any]:
    f.data = {**defaults, **f.data}
    sections = text_rope(f, default=SECTIONS)
    f.ignored("attention_bias", f"{cls.name} and its attention")  # q, k, v biased, o not
    spec = qwen2.import_qwen2_like(f, cls, variant)
    check_sections(f, sections, spec)
    return spec


def export_vl_text(spec: Spec) -> dict[str, Any]:
    fields = qwen2.export_qwen2(spec)
    return with_sections(fields, spec, SECTIONS)


def vl_text_family(
    model_type: str,
    class_name: str,
    variant: LlamaVariant = VARIANT,
    defaults: dict[str, Any] = DEFAULTS,
) -> Family:
    """The record of a Qwen2-VL-like language model: its model_type, class and config class
    defaults (Qwen2.5-Omni's thinker is 7B-sized by default)."""
    return replace(
        qwen2.FAMILY,
        model_type=model_type,
        classes=(HFClass(class_name, model_type, "none", base=True),),
        import_config=lambda f, cls: import_vl_text(f, cls, variant, defaults),
        export_config=export_vl_text,
        spec_family=model_type,
    )


FAMILY = vl_text_family("qwen2_vl_text", "Qwen2VLTextModel")
