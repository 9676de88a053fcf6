"""Qwen2 (`model_type: qwen2`): LLaMA's decoder with biases on q, k and v (none on the output
projection), and a sliding window that its configs switch off (`use_sliding_window: false`);
a window that masks anything is refused (see `refuse_window`)."""

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
from archspec.hf.family import Family, HFClass, NameRules
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    d_ff=22016, kv_heads=None, max_positions=32768, rms_eps=1e-6, vocab_size=151936
)


def refuse_window(f: Fields, max_positions: int) -> None:
    """Qwen2Config (and Qwen3Config) window the layers from `max_window_layers` on, only with
    use_sliding_window (or as `layer_types` says); a spec's window_pattern repeats from the
    first layer and cannot say "from layer n on", so a window that masks anything is
    refused."""
    n_layers = f.int("num_hidden_layers", 32)
    max_pos = f.int("max_position_embeddings", max_positions)
    used = f.bool("use_sliding_window", False)
    # Without use_sliding_window, Qwen2Config sets sliding_window to None whatever it says.
    window = f.get("sliding_window", 4096) if used else None
    f.harmless("sliding_window")
    first = f.int("max_window_layers", 28)
    types = f.get("layer_types") or [
        "sliding_attention" if window is not None and i >= first else "full_attention"
        for i in range(n_layers)
    ]
    unknown = set(types) - {"full_attention", "sliding_attention"}
    if unknown:
        raise f.error("layer_types", f"layer types not supported: {', '.join(sorted(unknown))}")
    if "sliding_attention" in types and window is not None and window < max_pos:
        raise f.error(
            "use_sliding_window" if used else "layer_types",
            f"sliding-window attention (window {window}) on layers "
            f"{[i for i, t in enumerate(types) if t != 'full_attention']} is not supported",
            hint="archspec builds plain causal attention; it is exact only with no window, or "
            "one covering max_position_embeddings",
        )


def import_qwen2(f: Fields, cls: HFClass) -> dict[str, Any]:
    refuse_window(f, VARIANT.max_positions)
    spec = import_llama_like(f, cls, VARIANT)
    spec["attention"] = {**spec["attention"], "bias": False, "qkv_bias": True}
    return spec


def export_qwen2(spec: Spec) -> dict[str, Any]:
    return {**export_llama_like(spec), "use_sliding_window": False}


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
