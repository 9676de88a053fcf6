"""GLM-4.5V's language model (`model_type: glm4v_moe_text`, the `text_config` of a `glm4v_moe`
config, built as `Glm4vMoeTextModel`, hidden states without a head): GLM-4.5's decoder
(`glm4_moe.py`: RoPE on half of each head, the sigmoid router's experts after the dense first
layers) with biases on q, k and v by default and no q/k norms (`use_qk_norm` is not read),
under M-RoPE, which on text is RoPE (`_mrope.py`). Its rotary embedding splits the frequencies
by `mrope_section`, [8, 12, 12] where the file gives none."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields
from archspec.hf.families import glm4_moe
from archspec.hf.families._mrope import check_sections, text_rope, with_sections
from archspec.hf.family import HFClass
from archspec.spec.schema import Spec

# Glm4vMoeTextConfig's defaults where they differ from Glm4MoeConfig's (transformers'
# configuration_glm4v_moe.py).
VARIANT = replace(glm4_moe.VARIANT, max_positions=65536, vocab_size=151424)
SECTIONS = [8, 12, 12]  # Glm4vMoeTextRotaryEmbedding's mrope_section where the file has none


def import_glm4v_moe_text(f: Fields, cls: HFClass) -> dict[str, Any]:
    sections = text_rope(f, default=SECTIONS)
    f.ignored("use_qk_norm", f"{cls.name} and its attention")
    f.harmless("router_aux_loss_coef")  # a training loss's weight
    f.data = {"attention_bias": True, **f.data}
    f.data = {k: v for k, v in f.data.items() if k != "use_qk_norm"}
    spec = glm4_moe.import_glm4_moe(f, cls, VARIANT)
    check_sections(f, sections, spec)
    return spec


def export_glm4v_moe_text(spec: Spec) -> dict[str, Any]:
    if spec.attention.qk_norm:
        raise SpecError(f"{spec.hf_class} has no q/k norms", path="attention.qk_norm")
    fields = glm4_moe.export_glm4_moe(spec)
    fields.pop("use_qk_norm")
    return with_sections(fields, spec, SECTIONS)


FAMILY = replace(
    glm4_moe.FAMILY,
    model_type="glm4v_moe_text",
    classes=(HFClass("Glm4vMoeTextModel", "glm4v_moe_text", "none", base=True),),
    import_config=import_glm4v_moe_text,
    export_config=export_glm4v_moe_text,
    spec_family="glm4v_moe_text",
)
