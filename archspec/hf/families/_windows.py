"""transformers 5's `layer_types` (which layers attend through the sliding window) as the
spec's `attention.window_pattern`, for the families whose configs carry it (Gemma 2, Qwen2,
Qwen3), and back."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.spec.schema import Spec

LONGEST_PATTERN = 64  # the spec's window_pattern
LAYER_TYPES = {"sliding_attention": "L", "full_attention": "G"}


def check_layer_types(f: Fields, types: object, n_layers: int) -> list[str]:
    """`types` as one layer type per layer, each one archspec knows; else an error naming
    layer_types."""
    if (
        not isinstance(types, list)
        or len(types) != n_layers
        or any(not isinstance(t, str) or t not in LAYER_TYPES for t in types)
    ):
        raise f.error(
            "layer_types",
            f"expected {n_layers} of sliding_attention / full_attention, got {types!r}",
        )
    return types


def alternating(n_layers: int) -> list[str]:
    """Windowed and full layers alternating, windowed first: the default `layer_types` of
    Gemma2Config and GptOssConfig."""
    return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n_layers)]


def windows(f: Fields, types: list[str], default_window: int) -> dict[str, Any]:
    """The spec's attention fields for one layer type per layer and the config's
    `sliding_window` (an explicit null: no window; left out: the config class's
    `default_window`). Written either way: a family base's windows are not the config's when
    none of its layers is sliding_attention. Sliding layers without a window are refused."""
    pattern = window_pattern(f, types)
    window = (
        f.size("sliding_window", default_window)
        if f.data.get("sliding_window", 0) is not None
        else None
    )
    f.harmless("sliding_window")
    if "L" not in pattern:
        return {"sliding_window": None}
    if window is None:
        raise f.error("sliding_window", "sliding_attention layers need a sliding_window")
    return {"sliding_window": window, "window_pattern": pattern}


def window_pattern(f: Fields, types: list[str]) -> str:
    """The layer types as a window_pattern: their shortest repeating prefix, L for a sliding
    layer and G for a full one (Gemma 2's alternation is `LG`; Qwen2's window from
    max_window_layers on is as long as the stack, `GGLL`)."""
    return shortest_cycle(f, "layer_types", "".join(LAYER_TYPES[t] for t in types))


def shortest_cycle(f: Fields, key: str, letters: str) -> str:
    """The shortest prefix of one letter per layer that, cycled, gives them all (a spec's
    window_pattern or position_pattern); else an error naming `key`."""
    n = len(letters)
    period = next(p for p in range(1, n + 1) if all(letters[i] == letters[i % p] for i in range(n)))
    if period > LONGEST_PATTERN:
        raise f.error(
            key,
            f"the layers' pattern repeats only every {period} layers; a spec's pattern holds "
            f"at most {LONGEST_PATTERN}",
        )
    return letters[:period]


def layer_types(spec: Spec) -> list[str]:
    """The spec's windowed layers as transformers' layer_types."""
    return [
        "sliding_attention" if spec.windowed(i) else "full_attention" for i in range(spec.n_layers)
    ]
