"""LLaMA (`model_type: llama`): the dense RoPE decoder, optionally with biases."""

from __future__ import annotations

from typing import Any

from archspec.hf.families._llama_like import (
    DENSE_BLOCK,
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    LlamaVariant,
    export_llama_like,
    import_llama_like,
)
from archspec.hf.family import Family, HFClass, NameRules
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(d_ff=11008, kv_heads=None, max_positions=2048, rms_eps=1e-6, biases=True)


def export_llama(spec: Spec) -> dict[str, Any]:
    return {
        **export_llama_like(spec),
        "attention_bias": spec.attention.bias,
        "mlp_bias": spec.mlp.bias,
    }


FAMILY = Family(
    model_type="llama",
    classes=(
        HFClass("LlamaForCausalLM", "llama", "lm", base=False),
        HFClass("LlamaModel", "llama", "none", base=True),
    ),
    bases=("_llama",),
    import_config=lambda f, cls: import_llama_like(f, cls, VARIANT),
    export_config=export_llama,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=DENSE_BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
