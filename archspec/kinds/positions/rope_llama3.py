"""RoPE with Llama 3.1's scaling (transformers' rope_type "llama3"): long wavelengths
divided by a factor, short ones kept, a smooth blend between."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from archspec.kinds.positions.base import PositionKind, Scaling
from archspec.kinds.positions.rotary import ROTARY_DIM, Rotary, rope
from archspec.spec.fields import doc


@dataclass(frozen=True)
class Llama3Scaling(Scaling):
    type: Literal["llama3"] = field(default="llama3", metadata=doc("Llama 3.1's scaling"))
    factor: float = field(
        default=1.0, metadata=doc("long wavelengths divided by it", positive=True)
    )
    low_freq_factor: float = field(default=1.0, metadata=doc("llama3 scaling", positive=True))
    high_freq_factor: float = field(default=4.0, metadata=doc("llama3 scaling", positive=True))
    original_max_seq_len: int = field(
        default=8192, metadata=doc("the context trained on", positive=True)
    )
    entry_name = "rope_llama3"


class Llama3Rotary(Rotary):
    def helpers(self, causalities):
        return [*super().helpers(causalities), rope("llama3_rope")]

    def table(self, width):
        return [
            "scaling = (",
            "    config.rope_factor,",
            "    config.rope_low_freq_factor,",
            "    config.rope_high_freq_factor,",
            "    config.rope_original_max_seq_len,",
            ")",
            "theta = config.rope_theta",
            f"cos, sin = llama3_rope(positions, {width}, theta, scaling)",
        ]


SCALING = Llama3Scaling
ENTRIES = (
    PositionKind(
        "rope_llama3",
        "RoPE (llama3 scaling)",
        "rotary positions, long wavelengths scaled as Llama 3.1 (applied in attention)",
        acts_on="queries_keys",
        parameters=(
            ("theta", "rope_theta"),
            ("factor", "rope_factor"),
            ("low_freq_factor", "rope_low_freq_factor"),
            ("high_freq_factor", "rope_high_freq_factor"),
            ("original_max_seq_len", "rope_original_max_seq_len"),
            ROTARY_DIM,
        ),
        flops_per_element=3,
        code=Llama3Rotary(),
        length_limited=True,
    ),
)
