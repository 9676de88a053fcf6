"""Mistral (`model_type: mistral`): LLaMA's architecture with grouped KV heads and a sliding
window on every layer (v0.1: 4096; `"sliding_window": null`, v0.2 on: none)."""

from __future__ import annotations

from typing import Any

from archspec.hf.families._llama_like import (
    DENSE_BLOCK,
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    LlamaVariant,
    export_llama_like,
    export_window,
    import_llama_like,
)
from archspec.hf.family import Family, HFClass, NameRules
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    d_ff=14336,
    kv_heads=8,
    max_positions=4096 * 32,
    rms_eps=1e-6,
    sliding_window=True,
    window_default=4096,
)


def export_mistral(spec: Spec) -> dict[str, Any]:
    return {**export_llama_like(spec), "sliding_window": export_window(spec)}


FAMILY = Family(
    model_type="mistral",
    classes=(
        HFClass("MistralForCausalLM", "mistral", "lm", base=False),
        HFClass("MistralModel", "mistral", "none", base=True),
    ),
    bases=("_mistral",),
    import_config=lambda f, cls: import_llama_like(f, cls, VARIANT),
    export_config=export_mistral,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=DENSE_BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
