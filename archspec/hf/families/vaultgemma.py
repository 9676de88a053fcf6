"""VaultGemma (`model_type: vaultgemma`, VaultGemma-1B): Gemma 2's decoder (`gemma2.py`:
soft-capped scores and logits, `query_pre_attn_scalar`, windows from `layer_types`) without
the norms on the sublayers' outputs: a pre-norm block (`input_layernorm`,
`pre_feedforward_layernorm`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import MODEL_NAMES, ROPE_BUFFERS, STACK_NAMES
from archspec.hf.families.gemma2 import export_gemma2, import_gemma2
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import table
from archspec.spec.schema import Spec


def import_vaultgemma(f: Fields, cls: HFClass) -> dict[str, Any]:
    return {**import_gemma2(f, cls), "residual": "pre"}


def export_vaultgemma(spec: Spec) -> dict[str, Any]:
    if spec.residual != "pre":
        raise SpecError("VaultGemma blocks are pre-norm blocks", path="residual")
    # Gemma 2's fields; its check of the residual is the only one that differs here
    return export_gemma2(dataclasses.replace(spec, residual="sandwich"))


BLOCK = table(
    {
        "attn_norm": "input_layernorm",
        "attn.q": "self_attn.q_proj",
        "attn.k": "self_attn.k_proj",
        "attn.v": "self_attn.v_proj",
        "attn.o": "self_attn.o_proj",
        "mlp_norm": "pre_feedforward_layernorm",
        "mlp.gate": "mlp.gate_proj",
        "mlp.up": "mlp.up_proj",
        "mlp.down": "mlp.down_proj",
    }
)

FAMILY = Family(
    model_type="vaultgemma",
    classes=(
        HFClass("VaultGemmaForCausalLM", "vaultgemma", "lm", base=False),
        HFClass("VaultGemmaModel", "vaultgemma", "none", base=True),
    ),
    bases=("_gemma2",),
    spec_family="vaultgemma",
    import_config=import_vaultgemma,
    export_config=export_vaultgemma,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
