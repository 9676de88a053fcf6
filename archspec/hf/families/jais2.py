"""Jais 2 (`model_type: jais2`, Jais-2-8B): LLaMA's attention with LayerNorms (weight and
bias, `layer_norm_eps`) and Nemotron's ungated squared-ReLU MLP (`relu2`), biases on the
attention's four projections and on the MLP's (`attention_bias`, `mlp_bias`, both on by
default)."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import (
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    LlamaVariant,
    export_llama_like,
    import_llama_like,
)
from archspec.hf.families.arcee import BLOCK
from archspec.hf.family import Family, HFClass, NameRules
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    d_ff=26624,
    kv_heads=None,
    max_positions=8192,
    rms_eps=1e-5,
    vocab_size=150272,
    biases=True,
    norm_kind="layernorm",
    eps_key="layer_norm_eps",
)
# Jais2Config's defaults where they differ from what import_llama_like assumes.
DEFAULTS = {
    "hidden_size": 3328,
    "num_attention_heads": 26,
    "hidden_act": "relu2",
    "attention_bias": True,
    "mlp_bias": True,
}


def import_jais2(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.data = {**DEFAULTS, **f.data}
    spec = import_llama_like(f, cls, VARIANT)
    spec["mlp"] = {**spec["mlp"], "gated": False}
    return spec


def export_jais2(spec: Spec) -> dict[str, Any]:
    if spec.mlp.gated or spec.norm.kind != "layernorm":
        raise SpecError("Jais 2 has LayerNorms and an ungated MLP")
    fields = export_llama_like(spec)
    fields["layer_norm_eps"] = fields.pop("rms_norm_eps")
    return {**fields, "attention_bias": spec.attention.bias, "mlp_bias": spec.mlp.bias}


FAMILY = Family(
    model_type="jais2",
    classes=(
        HFClass("Jais2ForCausalLM", "jais2", "lm", base=False),
        HFClass("Jais2Model", "jais2", "none", base=True),
    ),
    bases=("_jais2",),
    import_config=import_jais2,
    export_config=export_jais2,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
