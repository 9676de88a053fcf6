"""Qwen2 (`model_type: qwen2`): LLaMA's decoder with biases on q, k and v (none on the output
projection), and a sliding window on the layers `layer_types` names (by default those from
`max_window_layers` on) when `use_sliding_window` is set (see `read_window`)."""

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

VARIANT = LlamaVariant(
    d_ff=22016, kv_heads=32, max_positions=32768, rms_eps=1e-6, vocab_size=151936
)


def read_window(f: Fields) -> dict[str, Any]:
    """Qwen2Config's (and Qwen3Config's) sliding window as attention fields. With
    use_sliding_window the layers `layer_types` names windowed (transformers 5 writes the list
    out; without it, the layers from `max_window_layers` on) see the last `sliding_window`
    keys; without use_sliding_window, Qwen2Config sets sliding_window to None and no layer is
    windowed, whatever the other fields say."""
    n_layers = f.int("num_hidden_layers", 32)
    used = f.bool("use_sliding_window", False)
    # An explicit null is no window: Qwen2Config keeps it, and every layer is then full.
    window = f.get("sliding_window", 4096) if used and not f.is_null("sliding_window") else None
    if window is not None and (not isinstance(window, int) or window < 1):
        raise f.error("sliding_window", f"expected a positive integer or null, got {window!r}")
    f.harmless("sliding_window")
    first = f.int("max_window_layers", 28)
    default = [
        "sliding_attention" if window is not None and i >= first else "full_attention"
        for i in range(n_layers)
    ]
    types = f.get("layer_types") or default
    types = check_layer_types(f, types, n_layers)
    if window is None or "sliding_attention" not in types:
        return {}
    return {"sliding_window": window, "window_pattern": window_pattern(f, types)}


def export_window(spec: Spec) -> dict[str, Any]:
    """`read_window`'s inverse: the windowed layers as layer_types (transformers 5) and, where
    they are the last ones, as max_window_layers too (transformers 4.x reads only that)."""
    types = layer_types(spec)
    if "sliding_attention" not in types:
        return {"use_sliding_window": False}
    first = types.index("sliding_attention")
    fields = {
        "use_sliding_window": True,
        "sliding_window": spec.attention.sliding_window,
        "layer_types": types,
    }
    if all(t == "sliding_attention" for t in types[first:]):
        fields["max_window_layers"] = first
    return fields


def import_qwen2(f: Fields, cls: HFClass) -> dict[str, Any]:
    # Qwen2.5's files say use_mrope: false; the multimodal rotation is Qwen2-VL's (model_type
    # qwen2_vl), which Qwen2's classes never build.
    f.ignored("use_mrope", "Qwen2Config and Qwen2Model")
    # Qwen2Attention builds q, k and v with biases and o without, whatever attention_bias says
    # (neither Qwen2Config nor the model names it).
    f.ignored("attention_bias", "Qwen2Config and Qwen2Attention")
    return import_qwen2_like(f, cls, VARIANT)


def import_qwen2_like(f: Fields, cls: HFClass, variant: LlamaVariant) -> dict[str, Any]:
    """Qwen2's block (biases on q, k and v only; its sliding window) over a config class's
    defaults (`variant`): Qwen2's, or its vision-language models' text models'."""
    window = read_window(f)
    spec = import_llama_like(f, cls, variant)
    spec["attention"] = {**spec["attention"], "bias": False, "qkv_bias": True, **window}
    return spec


def export_qwen2(spec: Spec) -> dict[str, Any]:
    return {**export_llama_like(spec), **export_window(spec)}


FAMILY = Family(
    model_type="qwen2",
    classes=(
        HFClass("Qwen2ForCausalLM", "qwen2", "lm", base=False),
        HFClass("Qwen2Model", "qwen2", "none", base=True),
    ),
    bases=("_qwen2",),
    import_config=import_qwen2,
    export_config=export_qwen2,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=DENSE_BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
