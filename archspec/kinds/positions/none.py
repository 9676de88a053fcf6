"""No position information: the stack sees its tokens as a set."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from archspec.kinds.positions.base import Position, PositionKind
from archspec.spec.fields import doc


@dataclass(frozen=True)
class NoPosition(Position):
    kind: Literal["none"] = field(default="none", metadata=doc("no position information"))


RECORD = NoPosition
ENTRIES = (
    PositionKind(
        "none", "none", "no position information", acts_on="nothing", needs_positions=False
    ),
)
