"""EXAONE 4 (`model_type: exaone4`, EXAONE-4.0-1.2B): OLMo 2's block (its norms on the
sublayers' outputs) with a RMSNorm per head on queries and keys before RoPE (Qwen3's).

With a sliding window EXAONE 4 is a hybrid (EXAONE-4.0-32B): its windowed layers rotate and
its global layers have no positions at all, which a spec, one position setting per stack,
cannot say; such configs are refused naming `sliding_window`. Without one (`sliding_window:
null`, `layer_types` all full_attention) every layer is global and rotated, as in the 1.2B
model."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields, shown
from archspec.hf.families._llama_like import (
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    LlamaVariant,
    export_llama_like,
    import_llama_like,
)
from archspec.hf.families.olmo2 import BLOCK
from archspec.hf.family import Family, HFClass, NameRules
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(d_ff=16384, kv_heads=32, max_positions=2048, rms_eps=1e-5, vocab_size=102400)
WINDOW = 4096  # Exaone4Config's default sliding_window


def import_exaone4(f: Fields, cls: HFClass) -> dict[str, Any]:
    window = f.get("sliding_window") if "sliding_window" in f.data else WINDOW
    types = f.get("layer_types")
    if types is not None and not isinstance(types, list):
        raise f.error("layer_types", f"expected a list of layer types, got {shown(types)}")
    if window is not None or (types and any(t != "full_attention" for t in types)):
        raise f.error(
            "sliding_window",
            f"sliding_window = {window}: EXAONE 4's windowed layers rotate and its global "
            "layers have no positions, and a spec has one position setting per stack",
            hint="an EXAONE 4 without a window (sliding_window: null, EXAONE-4.0-1.2B) imports",
        )
    if not types:  # Exaone4Config divides by its pattern, 0 without a window
        raise f.error("layer_types", "without a sliding_window, Exaone4Config needs layer_types")
    f.harmless("sliding_window_pattern")  # Exaone4Config sets it to 0 without a window
    spec = import_llama_like(f, cls, VARIANT)
    spec["residual"] = "output_norm"
    spec["attention"] = {**spec["attention"], "qk_norm": True, "qk_norm_scope": "head"}
    return spec


def export_exaone4(spec: Spec) -> dict[str, Any]:
    if spec.residual != "output_norm" or spec.attention.qk_norm_scope != "head":
        raise SpecError(
            "EXAONE 4 blocks normalise the sublayers' outputs and each head's q and k",
            path="residual" if spec.residual != "output_norm" else "attention.qk_norm_scope",
        )
    return {
        **export_llama_like(spec),
        "sliding_window": None,
        "layer_types": ["full_attention"] * spec.n_layers,
    }


FAMILY = Family(
    model_type="exaone4",
    classes=(
        HFClass("Exaone4ForCausalLM", "exaone4", "lm", base=False),
        HFClass("Exaone4Model", "exaone4", "none", base=True),
    ),
    bases=("_olmo2",),
    spec_family="exaone4",
    import_config=import_exaone4,
    export_config=export_exaone4,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
