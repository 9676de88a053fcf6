"""transformers 5's `layer_types` (which layers attend through the sliding window) as the
spec's `attention.window_pattern`, for the families whose configs carry it (Gemma 2, Qwen2,
Qwen3), and back."""

from __future__ import annotations

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
