"""CWM (`model_type: cwm`, Meta's Code World Model): LLaMA's decoder with 128-wide heads,
Llama 3's RoPE scaling by default, and a sliding window (8192 by default) on the layers
`layer_types` names (by default all but every 4th, from the first), read as the spec's
`attention.window_pattern`."""

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
    d_ff=21504, kv_heads=8, max_positions=131072, rms_eps=1e-5, vocab_size=128256
)
# CwmConfig's defaults where they differ from what import_llama_like assumes.
DEFAULTS = {
    "hidden_size": 6144,
    "num_hidden_layers": 64,
    "num_attention_heads": 48,
    "head_dim": 128,
}
# CwmConfig's RoPE when a file gives none of its fields.
ROPE = {
    "rope_parameters": {
        "rope_theta": 1_000_000.0,
        "factor": 16.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    }
}
WINDOW = 8192


def import_cwm(f: Fields, cls: HFClass) -> dict[str, Any]:
    rope_given = any(k in f.data for k in ("rope_parameters", "rope_scaling", "rope_theta"))
    f.data = {**DEFAULTS, **({} if rope_given else ROPE), **f.data}
    f.harmless("pretraining_tp")  # a different order of the same sums
    spec = import_llama_like(f, cls, VARIANT)
    spec["mlp"] = {**spec["mlp"], "bias": f.bool("mlp_bias", False)}
    # CwmConfig keeps a window of 0 or null as None: no layer is then windowed.
    window = f.get("sliding_window", WINDOW) or None
    f.harmless("sliding_window")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int)):
        raise f.error("sliding_window", f"expected an integer or null, got {window!r}")
    n = spec["n_layers"]
    default = ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(n)]
    types = check_layer_types(f, f.get("layer_types") or default, n)
    if window is not None and "sliding_attention" in types:
        pattern = window_pattern(f, types)
        spec["attention"] |= {"sliding_window": window, "window_pattern": pattern}
    return spec


def export_cwm(spec: Spec) -> dict[str, Any]:
    types = layer_types(spec)
    window = spec.attention.sliding_window if "sliding_attention" in types else None
    return {
        **export_llama_like(spec),
        "mlp_bias": spec.mlp.bias,
        "sliding_window": window,
        "layer_types": types,
    }


FAMILY = Family(
    model_type="cwm",
    classes=(
        HFClass("CwmForCausalLM", "cwm", "lm", base=False),
        HFClass("CwmModel", "cwm", "none", base=True),
    ),
    bases=("_llama",),
    spec_family="cwm",
    import_config=import_cwm,
    export_config=export_cwm,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=DENSE_BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
