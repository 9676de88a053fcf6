"""Learned position embeddings: a table with a row per position, added to the tokens'."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from archspec.kinds.positions.base import Position, PositionCode, PositionKind
from archspec.spec.fields import doc


@dataclass(frozen=True)
class Learned(Position):
    kind: Literal["learned"] = field(default="learned", metadata=doc("a learned table"))
    offset: int = field(
        default=0,
        metadata=doc("extra table rows before position 0 (BART, RoBERTa: 2)", min=0),
    )
    from_mask: bool = field(
        default=False,
        metadata=doc(
            "positions count the tokens attention_mask keeps (OPT), so left padding does "
            "not shift them"
        ),
    )


class LearnedCode(PositionCode):
    def config_fields(self, entry, values):
        # An offset of zero changes nothing: leave it out of Config.
        return [field for spec, field in entry.parameters if values.get(spec)]

    def init(self, ctx):
        return ["self.pos_offset = config.pos_offset"] if ctx.offset else []

    def added(self, ctx, positions):
        offset = " + self.pos_offset" if ctx.offset else ""
        return f"self.{ctx.table}({positions}{offset})"


RECORD = Learned
ENTRIES = (
    PositionKind(
        "learned",
        "learned",
        "learned position embeddings",
        acts_on="embeddings",
        table="absolute",
        parameters=(("offset", "pos_offset"),),
        flops_per_element=1,
        code=LearnedCode(),
        length_limited=True,
    ),
)
