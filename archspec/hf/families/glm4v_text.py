"""GLM-4V's language model (`model_type: glm4v_text`, the `text_config` of a `glm4v` config:
GLM-4.1V and GLM-4.6V's, built as `Glm4vTextModel`, hidden states without a head): GLM 4's
sandwich-norm decoder (`glm4.py`) with biases on q, k and v whatever `attention_bias` says,
under M-RoPE, which on text is RoPE (`_mrope.py`) over the channels `partial_rotary_factor`
picks, interleaved pairs as GLM's. Its config class turns every channel by default and its
rotary embedding shares them out by `mrope_section`, [8, 12, 12] where the file gives none."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families import glm, glm4
from archspec.hf.families._mrope import check_sections, text_rope, with_sections
from archspec.hf.family import HFClass
from archspec.spec.schema import Spec

# Glm4vTextConfig's defaults where they differ from Glm4Config's (transformers'
# configuration_glm4v.py): every channel turned, heads hidden_size / num_attention_heads wide.
VARIANT = replace(glm.VARIANT, max_positions=32768, rms_eps=1e-5, rotary_fraction=1.0)
SECTIONS = [8, 12, 12]  # Glm4vTextRotaryEmbedding's mrope_section where the file has none


def import_glm4v_text(f: Fields, cls: HFClass) -> dict[str, Any]:
    sections = text_rope(f, default=SECTIONS)
    f.ignored("attention_bias", f"{cls.name} and its attention")  # q, k, v biased, o not
    f.data = {k: v for k, v in f.data.items() if k != "attention_bias"}
    spec = glm.import_glm(f, cls, VARIANT, head_dim=None)
    check_sections(f, sections, spec)
    return {**spec, "residual": "sandwich"}


def export_glm4v_text(spec: Spec) -> dict[str, Any]:
    fields = glm4.export_glm4(spec)
    fields.pop("attention_bias")  # Glm4vTextAttention's q, k and v always have biases
    return with_sections(fields, spec, SECTIONS)


FAMILY = replace(
    glm4.FAMILY,
    model_type="glm4v_text",
    classes=(HFClass("Glm4vTextModel", "glm4v_text", "none", base=True),),
    import_config=import_glm4v_text,
    export_config=export_glm4v_text,
    spec_family="glm4v_text",
)
