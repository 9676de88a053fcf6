"""Arcee (`model_type: arcee`, AFM-4.5B): LLaMA's decoder whose MLP is not gated: up_proj,
squared ReLU (`relu2`), down_proj (Nemotron's MLP), with biases on the attention's four
projections (`attention_bias`) and on the MLP's (`mlp_bias`) optional."""

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
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import table
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(d_ff=18432, kv_heads=None, max_positions=4096, rms_eps=1e-5, biases=True)
# ArceeConfig's defaults where they differ from what import_llama_like assumes.
DEFAULTS = {"hidden_size": 2560, "hidden_act": "relu2"}


def import_arcee(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.data = {**DEFAULTS, **f.data}
    spec = import_llama_like(f, cls, VARIANT)
    spec["mlp"] = {**spec["mlp"], "gated": False}
    return spec


def export_arcee(spec: Spec) -> dict[str, Any]:
    if spec.mlp.gated:
        raise SpecError("Arcee's MLP is not gated", path="mlp.gated")
    return {
        **export_llama_like(spec),
        "attention_bias": spec.attention.bias,
        "mlp_bias": spec.mlp.bias,
    }


BLOCK = table(
    {
        "attn_norm": "input_layernorm",
        "attn.q": "self_attn.q_proj",
        "attn.k": "self_attn.k_proj",
        "attn.v": "self_attn.v_proj",
        "attn.o": "self_attn.o_proj",
        "mlp_norm": "post_attention_layernorm",
        "mlp.up": "mlp.up_proj",
        "mlp.down": "mlp.down_proj",
    }
)

FAMILY = Family(
    model_type="arcee",
    classes=(
        HFClass("ArceeForCausalLM", "arcee", "lm", base=False),
        HFClass("ArceeModel", "arcee", "none", base=True),
    ),
    bases=("_arcee",),
    import_config=import_arcee,
    export_config=export_arcee,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
