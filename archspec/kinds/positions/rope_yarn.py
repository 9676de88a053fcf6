"""RoPE with YaRN's scaling (Peng et al. 2023; transformers' rope_type "yarn"): each
channel's frequency interpolated by how often it turns in the context trained on, cos and
sin scaled; built on both rotations (DeepSeek-V2 turns interleaved pairs)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from archspec.kinds.positions.base import PositionKind, Scaling
from archspec.kinds.positions.rotary import ROTARY_DIM, InterleavedRotary, Rotary, rope
from archspec.spec.fields import doc


def yarn_attention(factor: float, mscale: float = 1.0) -> float:
    """YaRN's default scale on cos and sin, as transformers' get_mscale: 0.1 ln(factor) + 1;
    with `mscale`, 0.1 mscale ln(factor) + 1 (DeepSeek's yarn_get_mscale; 0 gives 1)."""
    return 0.1 * mscale * math.log(factor) + 1.0 if factor > 1 and mscale else 1.0


@dataclass(frozen=True)
class YarnScaling(Scaling):
    type: Literal["yarn"] = field(default="yarn", metadata=doc("YaRN (Peng et al. 2023)"))
    factor: float = field(
        default=1.0, metadata=doc("long wavelengths divided by it", positive=True)
    )
    original_max_seq_len: int = field(
        default=8192, metadata=doc("the context trained on", positive=True)
    )
    beta_fast: float = field(
        default=32.0, metadata=doc("rotations above which a channel keeps its frequency")
    )
    beta_slow: float = field(
        default=1.0, metadata=doc("rotations below which a channel is interpolated")
    )
    attention_factor: float | None = field(
        default=None,
        metadata=doc("cos and sin scaled by it; default 0.1 ln(factor) + 1", positive=True),
    )
    truncate: bool = field(
        default=True,
        metadata=doc(
            "the ramp's ends rounded to whole channel pairs (down, up); false keeps them "
            "unrounded (transformers' truncate, gpt-oss)"
        ),
    )
    entry_name = "rope_yarn"
    interleaved_entry_name = "rope_yarn_interleaved"  # DeepSeek-V2

    def values(self) -> dict[str, Any]:
        scale = self.attention_factor
        return super().values() | {
            "attention_factor": yarn_attention(self.factor) if scale is None else scale
        }


class YarnRotary(Rotary):
    def helpers(self, causalities):
        return [*super().helpers(causalities), rope("yarn_inv_freq", "yarn_rope")]

    def table(self, width):
        return [
            "scaling = (",
            "    config.rope_factor,",
            "    config.rope_original_max_seq_len,",
            "    config.rope_beta_fast,",
            "    config.rope_beta_slow,",
            "    config.rope_attention_factor,",
            "    config.rope_truncate,",
            ")",
            "theta = config.rope_theta",
            f"cos, sin = yarn_rope(positions, {width}, theta, scaling)",
        ]


class InterleavedYarnRotary(YarnRotary):
    """DeepSeek-V2's rotation: YaRN's frequencies, turning channel pairs (2i, 2i + 1)."""

    angle_function = InterleavedRotary.angle_function
    apply = InterleavedRotary.apply

    def table(self, width):
        return [
            *super().table(width),
            "# yarn_rope pairs channel i with i + half; this rotation pairs 2i with 2i + 1.",
            "half = cos.size(-1) // 2",
            "cos = cos[..., :half].repeat_interleave(2, dim=-1)",
            "sin = sin[..., :half].repeat_interleave(2, dim=-1)",
        ]


# YaRN's settings, for both rotations.
PARAMETERS = (
    ("theta", "rope_theta"),
    ("factor", "rope_factor"),
    ("original_max_seq_len", "rope_original_max_seq_len"),
    ("beta_fast", "rope_beta_fast"),
    ("beta_slow", "rope_beta_slow"),
    ("attention_factor", "rope_attention_factor"),
    ("truncate", "rope_truncate"),
    ROTARY_DIM,
)

SCALING = YarnScaling
ENTRIES = (
    PositionKind(
        "rope_yarn",
        "RoPE (YaRN scaling)",
        "rotary positions, frequencies scaled by YaRN (applied in attention)",
        acts_on="queries_keys",
        parameters=PARAMETERS,
        flops_per_element=3,
        code=YarnRotary(),
        length_limited=True,
    ),
    # DeepSeek-V2's rotation: YaRN's frequencies on interleaved channel pairs.
    PositionKind(
        "rope_yarn_interleaved",
        "RoPE (YaRN scaling, interleaved)",
        "rotary positions on interleaved channel pairs, frequencies scaled by YaRN "
        "(applied in attention)",
        acts_on="queries_keys",
        parameters=PARAMETERS,
        flops_per_element=3,
        code=InterleavedYarnRotary(),
        length_limited=True,
    ),
)
