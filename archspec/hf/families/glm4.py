"""GLM 4 (`model_type: glm4`, GLM-4-0414): GLM's decoder (`glm.py`) with sandwich norms, a
second RMSNorm on each sublayer's output before the residual add (`post_self_attn_layernorm`,
`post_mlp_layernorm`)."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import MODEL_NAMES, ROPE_BUFFERS, STACK_NAMES
from archspec.hf.families.glm import BLOCK_NAMES, export_glm, import_glm
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import table
from archspec.spec.schema import Spec


def import_glm4(f: Fields, cls: HFClass) -> dict[str, Any]:
    return {**import_glm(f, cls), "residual": "sandwich"}


def export_glm4(spec: Spec) -> dict[str, Any]:
    if spec.residual != "sandwich":
        raise SpecError("GLM 4 blocks are sandwich-norm blocks", path="residual")
    return export_glm(spec)


FAMILY = Family(
    model_type="glm4",
    classes=(
        HFClass("Glm4ForCausalLM", "glm4", "lm", base=False),
        HFClass("Glm4Model", "glm4", "none", base=True),
    ),
    bases=("_glm4",),
    import_config=import_glm4,
    export_config=export_glm4,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=table(
            {
                **BLOCK_NAMES,
                "attn_post_norm": "post_self_attn_layernorm",
                "mlp_post_norm": "post_mlp_layernorm",
            }
        ),
    ),
    buffers=ROPE_BUFFERS,
)
