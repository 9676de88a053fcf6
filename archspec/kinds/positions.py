"""Position kinds: how a stack tells its tokens apart by place.

Each kind says where it acts (added to the embeddings, rotating queries and keys, or biasing
the attention scores), which table it owns, what its spec parameters are, and what its forward
keeps for the backward pass. The FLOP and memory interpreters, the printer and the code
generator read these fields; none of them compares a position's name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from archspec.kinds.position_code import (
    Alibi,
    DynamicRotary,
    InterleavedLinearRotary,
    InterleavedRotary,
    InterleavedYarnRotary,
    Learned,
    LinearRotary,
    Llama3Rotary,
    LongRotary,
    PositionCode,
    RelativeBias,
    Rotary,
    Sinusoidal,
    YarnRotary,
)


@dataclass(frozen=True)
class PositionKind:
    name: str  # the spec's word for it
    label: str  # in tables
    description: str  # in the generated Stack's docstring and in diagrams
    # Where positions enter: added to the token embeddings, applied to q and k inside every
    # attention layer, added to every attention score, or nowhere.
    acts_on: Literal["embeddings", "queries_keys", "scores", "nothing"]
    # The learned table the stack owns: a row per position (`pos_emb`), a row per distance
    # bucket with one column per head (`rel_bias`), or none.
    table: Literal["absolute", "relative", None] = None
    learned_bias: bool = False  # the score bias has parameters (gradients flow into it)
    needs_positions: bool = True  # the stack builds a tensor of token positions
    # Its table or encodings are sized (or its angles were trained) for max_seq_len positions:
    # the generated model refuses longer inputs rather than index past a table.
    length_limited: bool = False
    # The parameters this kind reads, as (field of its record, or of its scaling's,
    # `archspec.spec.position`; generated Config field).
    parameters: tuple[tuple[str, str], ...] = ()
    flops_per_element: int = 0  # per element it acts on (an add, or RoPE's two muls and add)
    # The PyTorch code the kind contributes to a generated stack and its attention layers.
    code: PositionCode = field(default=PositionCode(), compare=False, repr=False)

    @property
    def score_bias(self) -> bool:
        return self.acts_on == "scores"

    @property
    def rotary(self) -> bool:
        return self.acts_on == "queries_keys"

    @property
    def added(self) -> bool:
        return self.acts_on == "embeddings"


# Every rope kind may rotate only the first channels of a head (GPT-NeoX, GPT-J, Phi).
ROTARY_DIM = ("rotary_dim", "rope_dim")

# YaRN's settings, for its kind and for DeepSeek-V2's interleaved one.
YARN_PARAMETERS = (
    ("theta", "rope_theta"),
    ("factor", "rope_factor"),
    ("original_max_seq_len", "rope_original_max_seq_len"),
    ("beta_fast", "rope_beta_fast"),
    ("beta_slow", "rope_beta_slow"),
    ("attention_factor", "rope_attention_factor"),
    ROTARY_DIM,
)

POSITIONS: dict[str, PositionKind] = {
    kind.name: kind
    for kind in (
        PositionKind(
            "learned",
            "learned",
            "learned position embeddings",
            acts_on="embeddings",
            table="absolute",
            parameters=(("offset", "pos_offset"),),
            flops_per_element=1,
            code=Learned(),
            length_limited=True,
        ),
        PositionKind(
            "sinusoidal",
            "sinusoidal",
            "sinusoidal position encodings",
            acts_on="embeddings",
            flops_per_element=1,
            code=Sinusoidal(),
            length_limited=True,
        ),
        PositionKind(
            "rope",
            "RoPE",
            "rotary positions (applied in attention)",
            acts_on="queries_keys",
            parameters=(("theta", "rope_theta"), ROTARY_DIM),
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
            parameters=(("theta", "rope_theta"), ROTARY_DIM),
            flops_per_element=3,  # x·cos + rotate_every_two(x)·sin
            code=InterleavedRotary(),
            length_limited=True,
        ),
        # Scaled RoPE (spec: `kind: rope` with `scaling:`), as transformers' rope_type.
        PositionKind(
            "rope_linear",
            "RoPE (linear scaling)",
            "rotary positions, divided by a factor (applied in attention)",
            acts_on="queries_keys",
            parameters=(("theta", "rope_theta"), ("factor", "rope_factor"), ROTARY_DIM),
            flops_per_element=3,
            code=LinearRotary(),
            length_limited=True,
        ),
        PositionKind(
            "rope_linear_interleaved",
            "RoPE (linear scaling, interleaved)",
            "rotary positions on interleaved channel pairs, divided by a factor (applied in "
            "attention)",
            acts_on="queries_keys",
            parameters=(("theta", "rope_theta"), ("factor", "rope_factor"), ROTARY_DIM),
            flops_per_element=3,
            code=InterleavedLinearRotary(),
            length_limited=True,
        ),
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
        PositionKind(
            "rope_yarn",
            "RoPE (YaRN scaling)",
            "rotary positions, frequencies scaled by YaRN (applied in attention)",
            acts_on="queries_keys",
            parameters=YARN_PARAMETERS,
            flops_per_element=3,
            code=YarnRotary(),
            length_limited=True,
        ),
        # LongRoPE (Phi-3's long-context models): per-channel factors, short or long ones as
        # the sequence fits original_max_seq_len or not. max_seq_len is the long context.
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
        # DeepSeek-V2's rotation: YaRN's frequencies on interleaved channel pairs.
        PositionKind(
            "rope_yarn_interleaved",
            "RoPE (YaRN scaling, interleaved)",
            "rotary positions on interleaved channel pairs, frequencies scaled by YaRN "
            "(applied in attention)",
            acts_on="queries_keys",
            parameters=YARN_PARAMETERS,
            flops_per_element=3,
            code=InterleavedYarnRotary(),
            length_limited=True,
        ),
        PositionKind(
            "alibi",
            "ALiBi",
            "ALiBi (attention scores penalised linearly with distance)",
            acts_on="scores",
            needs_positions=False,
            flops_per_element=1,
            code=Alibi(),
        ),
        PositionKind(
            "relative_bias",
            "relative bias (T5)",
            "T5's bucketed relative position bias",
            acts_on="scores",
            table="relative",
            learned_bias=True,
            parameters=(("num_buckets", "num_buckets"), ("max_distance", "max_distance")),
            flops_per_element=1,
            code=RelativeBias(),
        ),
        PositionKind(
            "none", "none", "no position information", acts_on="nothing", needs_positions=False
        ),
    )
}


def yarn_attention(factor: float, mscale: float = 1.0) -> float:
    """YaRN's default scale on cos and sin, as transformers' get_mscale: 0.1 ln(factor) + 1;
    with `mscale`, 0.1 mscale ln(factor) + 1 (DeepSeek's yarn_get_mscale; 0 gives 1)."""
    return 0.1 * mscale * math.log(factor) + 1.0 if factor > 1 and mscale else 1.0


def longrope_attention(factor: float, original: int) -> float:
    """LongRoPE's default scale on cos and sin, as transformers' _compute_longrope_parameters:
    sqrt(1 + ln(factor) / ln(original)), 1 when factor <= 1."""
    return math.sqrt(1 + math.log(factor) / math.log(original)) if factor > 1 else 1.0
