"""Position kinds: how a stack tells its tokens apart by place.

A kind is one module of this package holding its three parts (see `base`): its parameter
record (the spec's `position: {kind: ...}`, a frozen dataclass subclassing `Position`), its
catalogue entry or entries (`PositionKind`: where it acts, its table, FLOPs, parameters) and
the code it generates (a `PositionCode`). RoPE's scalings are modules too, listed in `rope`
(each a `Scaling` record, `scaling: {type: ...}`, with its entries). The older flat form of
the section is read by `archspec.spec.flat_position`.
"""

from __future__ import annotations

from archspec.kinds.positions import alibi, learned, none, relative_bias, rope, sinusoidal
from archspec.kinds.positions.base import (
    Position,
    PositionCode,
    PositionKind,
    Scaling,
    StackContext,
)

__all__ = [
    "POSITIONS",
    "POSITION_KINDS",
    "SCALINGS",
    "Position",
    "PositionCode",
    "PositionKind",
    "Scaling",
    "StackContext",
]

# One module per kind, in the order the schema lists them.
KINDS = (learned, sinusoidal, rope, alibi, relative_bias, none)

POSITION_KINDS: dict[str, type[Position]] = {module.RECORD.kind: module.RECORD for module in KINDS}
SCALINGS: dict[str, type[Scaling]] = rope.SCALINGS

# Every catalogue entry, a kind's and each of RoPE's scalings'.
POSITIONS: dict[str, PositionKind] = {
    entry.name: entry for module in (*KINDS, *rope.SCALING_MODULES) for entry in module.ENTRIES
}
