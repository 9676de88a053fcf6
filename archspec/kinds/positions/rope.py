"""Rotary positions (RoPE): queries and keys turned by an angle growing with the position,
applied in every attention layer. The `Rope` record holds the rotation's settings and its
scaling, a record chosen by `type` among the scaling modules listed here (one per
transformers rope_type); the record picks its catalogue entry from the two. This module is
the rotation as trained (`scaling: {type: none}`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from archspec import kinds
from archspec.kinds.positions import (
    rope_dynamic,
    rope_linear,
    rope_llama3,
    rope_longrope,
    rope_yarn,
)
from archspec.kinds.positions.base import Position, PositionKind, Scaling
from archspec.kinds.positions.rotary import ROTARY_DIM, InterleavedRotary, Rotary
from archspec.spec.fields import doc


@dataclass(frozen=True)
class NoScaling(Scaling):
    type: Literal["none"] = field(default="none", metadata=doc("the frequencies as trained"))
    entry_name = "rope"
    interleaved_entry_name = "rope_interleaved"


# One module per scaling: its record, its catalogue entries and their code.
SCALING_MODULES = (rope_linear, rope_dynamic, rope_llama3, rope_yarn, rope_longrope)

SCALINGS: dict[str, type[Scaling]] = {
    cls.type: cls for cls in (NoScaling, *(module.SCALING for module in SCALING_MODULES))
}


@dataclass(frozen=True)
class Rope(Position):
    kind: Literal["rope"] = field(default="rope", metadata=doc("rotary positions"))
    theta: float = field(default=10000.0, metadata=doc("base of the frequencies", positive=True))
    rotary_dim: int | None = field(
        default=None,
        metadata=doc(
            "channels of each head rotated, the first ones (GPT-NeoX rotary_pct, Phi "
            "partial_rotary_factor, GPT-J rotary_dim); default: all of head_dim",
            positive=True,
        ),
    )
    interleaved: bool = field(
        default=False,
        metadata=doc("rotate channel pairs (2i, 2i+1) as GPT-J, not (i, i + half)"),
    )
    scaling: Scaling = field(
        default_factory=NoScaling,
        metadata=doc(
            "frequency scaling, as transformers' rope_type: " + ", ".join(SCALINGS),
            tag="type",
            choices=SCALINGS,
        ),
    )

    @property
    def entry(self) -> PositionKind:
        s = self.scaling
        name = s.interleaved_entry_name if self.interleaved else s.entry_name
        assert name is not None, "validation refuses this rotation with this scaling"
        return kinds.position(name)

    def values(self) -> dict[str, Any]:
        return {"theta": self.theta, "rotary_dim": self.rotary_dim, **self.scaling.values()}

    def types(self) -> dict[str, str]:
        return {**super().types(), **self.scaling.types()}


PARAMETERS = (("theta", "rope_theta"), ROTARY_DIM)

RECORD = Rope
ENTRIES = (
    PositionKind(
        "rope",
        "RoPE",
        "rotary positions (applied in attention)",
        acts_on="queries_keys",
        parameters=PARAMETERS,
        flops_per_element=3,  # x·cos + rotate_half(x)·sin
        code=Rotary(),
        length_limited=True,
    ),
    # GPT-J's rotation (spec: `kind: rope` with `interleaved: true`): channel pairs
    # (2i, 2i + 1) turn together, not (i, i + half).
    PositionKind(
        "rope_interleaved",
        "RoPE (interleaved)",
        "rotary positions on interleaved channel pairs (applied in attention)",
        acts_on="queries_keys",
        parameters=PARAMETERS,
        flops_per_element=3,  # x·cos + rotate_every_two(x)·sin
        code=InterleavedRotary(),
        length_limited=True,
    ),
)
