"""The rules of positions that differ per layer (`position_pattern`, `local_position`).

A pattern cycles over the layers as `attention.window_pattern` does: P rotates by `position`,
L by `local_position` (Gemma 3's and ModernBERT's local layers: a base of their own), N not at
all (SmolLM3's NoPE layers, Cohere 2's full layers). Only rotations can differ per layer: a
stack adds learned or sinusoidal positions to its embeddings once, before any layer, and a
score bias is one table for the stack. The two rotations share how they turn a head (the same
channels, the same pairs), so each layer's attention runs the same code on its own angles.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from archspec.kinds.positions.rope import Rope

if TYPE_CHECKING:
    from archspec.spec.schema import Spec

LONGEST_CYCLE = 64  # window and position patterns together: runs per stack stay few
# Scalings whose tables change with the sequence's length (recomputed as it grows).
_LENGTH_DEPENDENT = ("dynamic", "longrope")


def cycle(spec: Spec) -> int:
    """Layers after which the window pattern and the position pattern both start again."""
    window = len(spec.attention.window_pattern) if spec.attention.sliding_window else 1
    return math.lcm(window, len(spec.position_pattern))


def varies(spec: Spec) -> bool:
    """Some layers' positions differ from `position`."""
    return set(spec.position_pattern) != {"P"}


def check_position_pattern(spec: Spec, v) -> None:
    """Refuse a pattern archspec cannot build, naming the field; `v` is the validator."""
    pattern, local = spec.position_pattern, spec.local_position
    if "L" in pattern and local is None:
        raise v.error(
            ("position_pattern",),
            f"position_pattern {pattern!r} has L layers: give their positions as local_position",
        )
    if local is not None and "L" not in pattern:
        raise v.error(
            ("local_position",),
            f"local_position is used by no layer: position_pattern {pattern!r} has no L",
        )
    if not varies(spec):
        return
    if "P" not in pattern:
        raise v.error(
            ("position_pattern",),
            f"position_pattern {pattern!r} uses `position` on no layer: write the L layers' "
            "settings as position and mark those layers P",
        )
    if not isinstance(spec.position, Rope):
        raise v.error_between(
            [("position_pattern",), ("position", "kind")],
            f"positions per layer are rotations: position.kind must be rope, not "
            f"{spec.position.kind} (a stack adds {spec.position.kind} positions once, for "
            "every layer)",
        )
    if local is not None:
        _check_local(spec, local, v)
    for section, record in (("position", spec.position), ("local_position", local)):
        if isinstance(record, Rope) and record.scaling.type in _LENGTH_DEPENDENT:
            raise v.error(
                (section, "scaling"),
                f"{record.scaling.type} scaling recomputes its tables as a sequence grows; "
                "it is not supported with a position_pattern",
            )
    others = {
        "layout": spec.layout == "encoder-decoder",
        "layer_groups": spec.shares_layers,
        "attention.latent": spec.attention.latent is not None,
    }
    for name, used in others.items():
        if used:
            raise v.error_between(
                [("position_pattern",), tuple(name.split("."))],
                f"a position_pattern is not supported with {name}"
                + (f" {spec.layout}" if name == "layout" else ""),
            )
    if cycle(spec) > LONGEST_CYCLE:
        raise v.error_between(
            [("position_pattern",), ("attention", "window_pattern")],
            f"window_pattern ({len(spec.attention.window_pattern)} letters) and "
            f"position_pattern ({len(pattern)}) repeat together every {cycle(spec)} layers; "
            f"archspec builds at most {LONGEST_CYCLE}",
        )


def _check_local(spec: Spec, local, v) -> None:
    """local_position is a rotation turning a head as `position` does."""
    if not isinstance(local, Rope):
        hint = (
            " (layers without positions are N in position_pattern)" if local.kind == "none" else ""
        )
        raise v.error(
            ("local_position", "kind"),
            f"local_position must be a rotation (rope), not {local.kind}{hint}",
        )
    position = spec.position
    assert isinstance(position, Rope)
    for name in ("rotary_dim", "interleaved"):
        if getattr(local, name) != getattr(position, name):
            raise v.error_between(
                [("local_position", name), ("position", name)],
                f"local_position.{name} ({getattr(local, name)}) differs from position.{name} "
                f"({getattr(position, name)}): both rotations turn a head's channels alike",
            )
