"""Ministral (`model_type: ministral`, Ministral-8B): Mistral's decoder whose sliding window
applies to the layers `layer_types` names (by default every layer when `sliding_window` is
set), read as the spec's `attention.window_pattern`."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import (
    DENSE_BLOCK,
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    LlamaVariant,
    export_llama_like,
    import_llama_like,
)
from archspec.hf.families._windows import check_layer_types, layer_types, window_pattern
from archspec.hf.family import Family, HFClass, NameRules
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(d_ff=14336, kv_heads=8, max_positions=4096 * 32, rms_eps=1e-6)
WINDOW = 4096  # MinistralConfig's default sliding_window


def import_ministral(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.refuse_null("head_dim", "transformers' MinistralRotaryEmbedding")
    spec = import_llama_like(f, cls, VARIANT)
    # An explicit null is no window; only an absent field takes MinistralConfig's 4096.
    window = (
        f.size("sliding_window", WINDOW) if f.data.get("sliding_window", 0) is not None else None
    )
    f.harmless("sliding_window")
    n = spec["n_layers"]
    default = ["sliding_attention" if window is not None else "full_attention"] * n
    types = check_layer_types(f, f.get("layer_types") or default, n)
    if "sliding_attention" in types:
        if window is None:
            raise f.error("sliding_window", "sliding_attention layers need a sliding_window")
        pattern = window_pattern(f, types)
        spec["attention"] |= {"sliding_window": window, "window_pattern": pattern}
    return spec


def export_ministral(spec: Spec) -> dict[str, Any]:
    types = layer_types(spec)
    window = spec.attention.sliding_window if "sliding_attention" in types else None
    return {**export_llama_like(spec), "sliding_window": window, "layer_types": types}


FAMILY = Family(
    model_type="ministral",
    classes=(
        HFClass("MinistralForCausalLM", "ministral", "lm", base=False),
        HFClass("MinistralModel", "ministral", "none", base=True),
    ),
    bases=("_mistral",),
    spec_family="ministral",
    import_config=import_ministral,
    export_config=export_ministral,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=DENSE_BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
