"""EXAONE 4 (`model_type: exaone4`, EXAONE-4.0-1.2B and -32B): OLMo 2's block (its norms on
the sublayers' outputs) with a RMSNorm per head on queries and keys before RoPE (Qwen3's).

With a sliding window EXAONE 4 is a hybrid (EXAONE-4.0-32B): Exaone4Attention rotates only the
windowed layers (`if self.sliding_window is None or self.is_sliding`), so its global layers
have no positions at all: the spec's `window_pattern`, and `position_pattern` marking the
global layers N (`exaone_windows`, which EXAONE-MoE shares). Without one (`sliding_window:
null`) every layer is global and rotated, as in the 1.2B model."""

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
from archspec.hf.families._windows import check_layer_types, layer_types, window_pattern
from archspec.hf.families.olmo2 import BLOCK
from archspec.hf.family import Family, HFClass, NameRules
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(d_ff=16384, kv_heads=32, max_positions=2048, rms_eps=1e-5, vocab_size=102400)
WINDOW, EVERY = 4096, 4  # Exaone4Config's (and ExaoneMoeConfig's) sliding_window and pattern


def _layer_types(f: Fields, n_layers: int) -> list[str]:
    """`layer_types`, or the config class's from sliding_window_pattern (every n-th layer
    full); the pattern is read only then (an "LLLG" string, which the docstring allows, fails
    in the config's __post_init__)."""
    if f.get("layer_types") is not None:
        f.harmless("sliding_window_pattern")  # stored on the attention, read by nothing
        return check_layer_types(f, f.get("layer_types"), n_layers)
    every = f.int("sliding_window_pattern", EVERY)
    if every < 1:
        raise f.error("sliding_window_pattern", f"expected a positive integer, got {every}")
    return ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(n_layers)]


def exaone_windows(f: Fields, n_layers: int, window: int) -> tuple[dict[str, Any], str]:
    """The attention's window fields and the position_pattern of an EXAONE with a window:
    its windowed layers rotate, its full ones have no positions."""
    pattern = window_pattern(f, _layer_types(f, n_layers))
    if "L" not in pattern:
        raise f.error(
            "layer_types",
            "no layer slides: EXAONE rotates its windowed layers alone, so none would have "
            "positions, which this import does not express",
            hint="give sliding_attention layers, or sliding_window: null for every layer "
            "global and rotated",
        )
    positions = pattern.replace("L", "P").replace("G", "N")
    return {"sliding_window": window, "window_pattern": pattern}, positions


def check_rotated_windows(spec: Spec, model: str) -> None:
    """An exporter's check: the spec rotates exactly its windowed layers, some of them."""
    windowed = [spec.windowed(i) for i in range(spec.n_layers)]
    rotated = [spec.layer_position(i).entry.rotary for i in range(spec.n_layers)]
    if windowed != rotated or not any(windowed):
        raise SpecError(
            f"{model} rotates exactly its windowed layers (some): the spec's position_pattern "
            f"{spec.position_pattern!r} and window_pattern {spec.attention.window_pattern!r} "
            "differ",
            path="position_pattern",
        )


def import_exaone4(f: Fields, cls: HFClass) -> dict[str, Any]:
    window = f.get("sliding_window") if "sliding_window" in f.data else WINDOW
    spec = import_llama_like(f, cls, VARIANT)
    spec["residual"] = "output_norm"
    spec["attention"] = {**spec["attention"], "qk_norm": True, "qk_norm_scope": "head"}
    if window is None:
        # every layer global and rotated: layer_types says nothing more
        types = f.get("layer_types")
        if types is not None and not isinstance(types, list):
            raise f.error("layer_types", f"expected a list of layer types, got {shown(types)}")
        if types and any(t != "full_attention" for t in types):
            raise f.error(
                "layer_types",
                f"{shown(types)} with sliding_window null: Exaone4Attention then attends and "
                "rotates every layer alike, so sliding_attention here says nothing archspec "
                "would keep",
                hint="write every layer full_attention, or give a sliding_window",
            )
        if not types:  # Exaone4Config divides by its pattern, 0 without a window
            raise f.error(
                "layer_types", "without a sliding_window, Exaone4Config needs layer_types"
            )
        f.harmless("sliding_window_pattern")  # Exaone4Config sets it to 0 without a window
        return spec
    windows, positions = exaone_windows(f, spec["n_layers"], f.size("sliding_window", WINDOW))
    spec["attention"].update(windows)
    spec["position_pattern"] = positions
    return spec


def export_exaone4(spec: Spec) -> dict[str, Any]:
    if spec.residual != "output_norm" or spec.attention.qk_norm_scope != "head":
        raise SpecError(
            "EXAONE 4 blocks normalise the sublayers' outputs and each head's q and k",
            path="residual" if spec.residual != "output_norm" else "attention.qk_norm_scope",
        )
    if not any(spec.windowed(i) for i in range(spec.n_layers)):  # every layer global
        return {
            **export_llama_like(spec),
            "sliding_window": None,
            "layer_types": ["full_attention"] * spec.n_layers,
        }
    check_rotated_windows(spec, "EXAONE 4")
    return {
        **export_llama_like(spec),
        "sliding_window": spec.attention.sliding_window,
        "layer_types": layer_types(spec),
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
