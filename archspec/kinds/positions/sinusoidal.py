"""Fixed sinusoidal position encodings (the original Transformer), added to the tokens'."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from archspec.kinds.positions.base import Position, PositionCode, PositionKind, tables
from archspec.spec.fields import doc


@dataclass(frozen=True)
class Sinusoidal(Position):
    kind: Literal["sinusoidal"] = field(default="sinusoidal", metadata=doc("fixed sinusoids"))


class SinusoidalCode(PositionCode):
    def helpers(self, causalities):
        return [tables("sinusoids")]

    def added(self, ctx, positions):
        return f"sinusoids({positions}, x.size(-1)).to(x.dtype)"


RECORD = Sinusoidal
ENTRIES = (
    PositionKind(
        "sinusoidal",
        "sinusoidal",
        "sinusoidal position encodings",
        acts_on="embeddings",
        flops_per_element=1,
        code=SinusoidalCode(),
        length_limited=True,
    ),
)
