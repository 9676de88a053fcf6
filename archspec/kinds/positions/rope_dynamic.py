"""RoPE with dynamic NTK scaling (transformers' rope_type "dynamic"): the base raised once
a sequence runs past max_seq_len, the context trained on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from archspec.kinds.positions.base import PositionKind, Scaling
from archspec.kinds.positions.rotary import ROPE_TABLES, ROTARY_DIM, Rotary, rope
from archspec.spec.fields import doc


@dataclass(frozen=True)
class DynamicScaling(Scaling):
    type: Literal["dynamic"] = field(
        default="dynamic",
        metadata=doc("dynamic NTK: the base raised past max_seq_len, the context trained on"),
    )
    factor: float = field(
        default=1.0,
        metadata=doc("how fast the base grows with length past max_seq_len", positive=True),
    )
    entry_name = "rope_dynamic"


class DynamicRotary(Rotary):
    """transformers' dynamic NTK scaling: the frequencies depend on the longest sequence
    seen, so the tables are recomputed during the forward (ntk_rope_tables), and no length
    is refused: sequences beyond max_seq_len (the context trained on) are what it is for."""

    def helpers(self, causalities):
        return [*super().helpers(causalities), rope("ntk_rope_tables")]

    def init(self, ctx):
        width = "config.rope_dim" if self.partial else ctx.head_dim
        return [
            *ROPE_TABLES,
            "# Dynamic NTK scaling: they hold the frequencies for rope_length positions,",
            "# recomputed when a longer sequence comes (ntk_rope_tables).",
            f"dim, theta, original = {width}, config.rope_theta, config.max_seq_len",
            "self.rope_settings = (dim, theta, config.rope_factor, original)",
            "self.rope_length = original",
            "cos, sin = rope_angles(torch.arange(original), dim, theta)",
            'self.register_buffer("rope_cos", cos, persistent=False)',
            'self.register_buffer("rope_sin", sin, persistent=False)',
        ]

    def build_angles(self, ctx, positions):
        return f"rope_at(*ntk_rope_tables(self, {positions}), {positions}, x.dtype)"


SCALING = DynamicScaling
ENTRIES = (
    # Not length-limited: the context trained on is max_seq_len, and dynamic NTK
    # scaling exists to run past it.
    PositionKind(
        "rope_dynamic",
        "RoPE (dynamic NTK scaling)",
        "rotary positions, base raised past max_seq_len as dynamic NTK (applied in attention)",
        acts_on="queries_keys",
        parameters=(("theta", "rope_theta"), ("factor", "rope_factor"), ROTARY_DIM),
        flops_per_element=3,
        code=DynamicRotary(),
    ),
)
