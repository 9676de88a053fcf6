"""RoPE with LongRoPE's scaling (Phi-3's long-context models; transformers' rope_type
"longrope"): per-channel factors, the short or the long ones as the sequence fits
original_max_seq_len or not. max_seq_len is the long context."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from archspec.kinds.positions.base import PositionKind, Scaling, copied
from archspec.kinds.positions.rotary import ROPE_TABLES, ROTARY_DIM, Rotary, rope
from archspec.spec.fields import doc


def longrope_attention(factor: float, original: int) -> float:
    """LongRoPE's default scale on cos and sin, as transformers' _compute_longrope_parameters:
    sqrt(1 + ln(factor) / ln(original)), 1 when factor <= 1."""
    return math.sqrt(1 + math.log(factor) / math.log(original)) if factor > 1 else 1.0


@dataclass(frozen=True)
class LongRopeScaling(Scaling):
    type: Literal["longrope"] = field(
        default="longrope",
        metadata=doc("LongRoPE (Phi-3): per-channel factors, short or long by the length"),
    )
    factor: float = field(
        default=1.0,
        metadata=doc("max_seq_len / original_max_seq_len, for the scale", positive=True),
    )
    original_max_seq_len: int = field(
        default=8192, metadata=doc("the context trained on", positive=True)
    )
    attention_factor: float | None = field(
        default=None,
        metadata=doc(
            "cos and sin scaled by it; default sqrt(1 + ln(factor) / ln(original_max_seq_len)) "
            "(1 when factor <= 1)",
            positive=True,
        ),
    )
    short_factor: tuple[float, ...] | None = field(
        default=None,
        metadata=doc(
            "each rotated channel pair's wavelength multiplied by it, for sequences up to "
            "original_max_seq_len (rotated channels / 2 numbers)",
            positive=True,
        ),
    )
    long_factor: tuple[float, ...] | None = field(
        default=None,
        metadata=doc("the same for sequences longer than original_max_seq_len", positive=True),
    )
    recompute_cache: bool = field(
        default=False,
        metadata=doc(
            "generation recomputes every cached key with the long factors when the "
            "sequence first outgrows original_max_seq_len (transformers' Phi-3); false "
            "keeps the keys the short factors rotated (transformers' Llama)"
        ),
    )
    entry_name = "rope_longrope"

    def values(self) -> dict[str, Any]:
        scale = self.attention_factor
        if scale is None:
            scale = longrope_attention(self.factor, self.original_max_seq_len)
        return super().values() | {"attention_factor": scale}


class LongRotary(Rotary):
    """LongRoPE: two pairs of tables, built once from the short and the long factors; each
    forward picks one (longrope_tables)."""

    # Generation recomputes the cache when the sequence outgrows the original context.
    recompute_cache = False

    def configured(self, position):
        code = super().configured(position)
        if not position.scaling.recompute_cache:
            return code
        code = copy.copy(code)
        code.recompute_cache = True
        return code

    def helpers(self, causalities):
        return [*super().helpers(causalities), rope("longrope_angles", "longrope_tables")]

    def generation_helpers(self):
        if not self.recompute_cache:
            return []
        return [copied("longrope_cache", ("recomputing_step",))]

    def generation(self):
        if not self.recompute_cache:
            return []
        return [
            "# As transformers' Phi-3, the keys cached before the sequence outgrows the",
            "# original context are computed again with the long factors.",
            "seen = KVCache(total, input_ids.device)",
            "original = self.config.rope_original_max_seq_len",
            "step = recomputing_step(step, cache, seen, original)",
            "reordered = [*cache, seen]",
        ]

    def init(self, ctx):
        width = "config.rope_dim" if self.partial else ctx.head_dim
        tables = []
        for name, factors in (("rope", "short"), ("rope_long", "long")):
            tables += [
                f"factors = config.rope_{factors}_factor",
                f"cos, sin = longrope_angles(positions, {width}, theta, factors, scale)",
                f'self.register_buffer("{name}_cos", cos, persistent=False)',
                f'self.register_buffer("{name}_sin", sin, persistent=False)',
            ]
        return [
            *ROPE_TABLES,
            "# LongRoPE: one pair from the short factors, one from the long ones.",
            "positions = torch.arange(config.max_seq_len)",
            "theta, scale = config.rope_theta, config.rope_attention_factor",
            *tables,
            "self.rope_original = config.rope_original_max_seq_len",
        ]

    def build_angles(self, ctx, positions):
        return f"rope_at(*longrope_tables(self, {positions}), {positions}, x.dtype)"

    def buffer_elements(self, max_seq_len, rotated):
        return 4 * max_seq_len * rotated  # the short and the long cos and sin


SCALING = LongRopeScaling
ENTRIES = (
    PositionKind(
        "rope_longrope",
        "RoPE (LongRoPE scaling)",
        "rotary positions, each channel pair's wavelength scaled by LongRoPE's short or "
        "long factors (applied in attention)",
        acts_on="queries_keys",
        parameters=(
            ("theta", "rope_theta"),
            ("original_max_seq_len", "rope_original_max_seq_len"),
            ("attention_factor", "rope_attention_factor"),
            ("short_factor", "rope_short_factor"),
            ("long_factor", "rope_long_factor"),
            ROTARY_DIM,
        ),
        flops_per_element=3,
        code=LongRotary(),
        length_limited=True,
    ),
)
