"""RoPE with linear scaling (transformers' rope_type "linear"): positions divided by a
factor; built on both rotations, GPT-J's interleaved pairs included."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from archspec.kinds.positions.base import PositionKind, Scaling
from archspec.kinds.positions.rotary import ROTARY_DIM, InterleavedRotary, Rotary
from archspec.spec.fields import doc


@dataclass(frozen=True)
class LinearScaling(Scaling):
    type: Literal["linear"] = field(default="linear", metadata=doc("positions divided"))
    factor: float = field(default=1.0, metadata=doc("positions divided by it", positive=True))
    entry_name = "rope_linear"
    interleaved_entry_name = "rope_linear_interleaved"


class LinearRotary(Rotary):
    """transformers' linear scaling: the frequencies divided by `factor`, i.e. the positions."""

    def positions(self) -> str:
        return "torch.arange(config.max_seq_len) / config.rope_factor"


class InterleavedLinearRotary(InterleavedRotary, LinearRotary):
    """GPT-J's rotation at positions divided by `factor` (linear scaling)."""


PARAMETERS = (("theta", "rope_theta"), ("factor", "rope_factor"), ROTARY_DIM)

SCALING = LinearScaling
ENTRIES = (
    PositionKind(
        "rope_linear",
        "RoPE (linear scaling)",
        "rotary positions, divided by a factor (applied in attention)",
        acts_on="queries_keys",
        parameters=PARAMETERS,
        flops_per_element=3,
        code=LinearRotary(),
        length_limited=True,
    ),
    PositionKind(
        "rope_linear_interleaved",
        "RoPE (linear scaling, interleaved)",
        "rotary positions on interleaved channel pairs, divided by a factor (applied in attention)",
        acts_on="queries_keys",
        parameters=PARAMETERS,
        flops_per_element=3,
        code=InterleavedLinearRotary(),
        length_limited=True,
    ),
)
