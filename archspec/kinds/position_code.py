"""The PyTorch code each position kind contributes to a generated model.

A generated stack's forward is written from its lowering (`lower_stack`), whose position ops
(positions added to the embeddings, the angles attention rotates by, the bias on the scores)
the kind's `PositionCode` spells. The kind also brings the module-level helper functions it
calls. Each entry of `archspec.kinds.positions.POSITIONS`
holds its code object (`PositionKind.code`), so a new position kind is an entry there plus,
if it needs code, a class here; the code generator does not change.
The lines are written already in `ruff format` style for the indentation of a method body.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from archspec.ir.nodes import Position
    from archspec.kinds.positions import PositionKind


@dataclass(frozen=True)
class StackContext:
    """What a kind's code may depend on in one generated stack."""

    causal: bool  # the stack's self-attention hides later keys
    cache: bool  # the stack takes a KV cache: queries at `queries`, keys at 0 .. k_len - 1
    heads: str  # Python for the number of attention heads (`config.n_heads`)
    head_dim: str  # Python for the width of one head
    offset: int  # rows of a position table before position 0
    table: str | None  # attribute name of the stack's position table (`pos_emb`, `rel_bias`)
    bidirectional: bool  # relative positions look both ways (an encoder)
    causalities: frozenset[bool]  # of all the model's stacks: one helper may serve both

    @property
    def keys(self) -> str:
        """Python for the number of keys: all of a cache's slots, or the new tokens."""
        return "k_len" if self.cache else "seq_len"

    @property
    def queries(self) -> str:
        """Python for the queries' positions (q_len,)."""
        return "queries" if self.cache else "torch.arange(seq_len, device=x.device)"


class PositionCode:
    """The code of a kind that needs none: every slot is empty."""

    # The value a stack hands every attention layer (RoPE's cos and sin), its name and type.
    angles: tuple[str, str] | None = None
    # Positions are absolute: a left-padded prompt's count from its first token (taken
    # from the attention mask in a generating decoder). Relative ones need no shift.
    absolute: bool = True

    def configured(self, position: Position) -> PositionCode:
        """The code for one stack's values of the kind's parameters (itself, by default)."""
        return self

    def helpers(self, causalities: frozenset[bool]) -> list[str]:
        """Module-level functions, given which causalities the model's stacks have."""
        return []

    def config_fields(self, entry: PositionKind, values: dict[str, object]) -> list[str]:
        """The Config fields among the kind's parameters (all of them, by default)."""
        return [field for _, field in entry.parameters]

    def init(self, ctx: StackContext) -> list[str]:
        """Lines of the stack's `__init__` (constants the forward reads)."""
        return []

    def added(self, ctx: StackContext, positions: str) -> str:
        """The expression added to the embeddings `x` for the tensor `positions`."""
        raise NotImplementedError(f"{type(self).__name__} adds nothing to the embeddings")

    def build_angles(self, ctx: StackContext, positions: str) -> str:
        """The expression of what attention rotates by (named `angles[0]`)."""
        raise NotImplementedError(f"{type(self).__name__} rotates nothing")

    def rotate(self, x: str) -> str:
        """The expression rotating `x` (queries or keys, by head) by the angles."""
        raise NotImplementedError(f"{type(self).__name__} rotates nothing")

    def bias(self, ctx: StackContext) -> list[str]:
        """Lines ending in `bias = ...`: the additive bias on every attention score."""
        return []

    def buffer_elements(self, max_seq_len, rotated):
        """Elements of the buffers `init` registers (tables built once), given the stack's
        max_seq_len and the channels of a head that turn."""
        return 0


class Learned(PositionCode):
    def config_fields(self, entry, values):
        # An offset of zero changes nothing: leave it out of Config.
        return [field for spec, field in entry.parameters if values.get(spec)]

    def init(self, ctx):
        return ["self.pos_offset = config.pos_offset"] if ctx.offset else []

    def added(self, ctx, positions):
        offset = " + self.pos_offset" if ctx.offset else ""
        return f"self.{ctx.table}({positions}{offset})"


SINUSOIDS = '''
def sinusoids(positions: Tensor, dim: int) -> Tensor:
    """The fixed position encodings of Vaswani et al., (..., S, dim) for positions
    (..., S): channel 2i holds sin(p / 10000 ** (2i / dim)) at position p, channel
    2i + 1 the cosine (an odd dim ends with a sine).
    """
    channels = torch.arange(0, dim, 2, device=positions.device).float()
    angles = positions.float()[..., None] * (1.0 / 10000 ** (channels / dim))
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)[..., :dim]
'''


class Sinusoidal(PositionCode):
    def helpers(self, causalities):
        return [SINUSOIDS]

    def added(self, ctx, positions):
        return f"sinusoids({positions}, x.size(-1)).to(x.dtype)"


ROPE = '''
def rope_angles(
    positions: Tensor,
    head_dim: int,
    theta: float,
) -> tuple[Tensor, Tensor]:
    """cos and sin of the rotary angles, (..., S, head_dim) for positions (..., S), in
    float32, as in transformers' Llama.

    Channels i and i + head_dim / 2 of a head turn together, at position p by the angle
    p / theta ** (2i / head_dim).
    """
    channels = torch.arange(0, head_dim, 2, device=positions.device).float()
    inv_freq = 1.0 / theta ** (channels / head_dim)
    angles = positions.float()[..., None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def apply_rope(x: Tensor, rope: tuple[Tensor, Tensor]) -> Tensor:
    """Rotate the channel pairs (i, i + head_dim / 2) of x (B, heads, S, head_dim)."""
    cos, sin = rope
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin
'''

ROPE_AT = '''
def rope_at(
    cos: Tensor, sin: Tensor, positions: Tensor, dtype: torch.dtype
) -> tuple[Tensor, Tensor]:
    """The tables' rows at positions (S) or (B, S) (a padded batch), with an axis for
    the heads: (1, S, dim) or (B, 1, S, dim), in dtype.
    """
    cos, sin = cos[positions].unsqueeze(-3), sin[positions].unsqueeze(-3)
    return cos.to(dtype), sin.to(dtype)
'''

# The tables' comment, in a stack's __init__.
ROPE_TABLES = [
    "# cos and sin at every position, computed once: buffers follow the model's",
    "# device and dtype, and stay out of the state_dict (persistent=False).",
]


def _partially(apply: str) -> str:
    return f'''
def {apply}_partially(x: Tensor, rope: tuple[Tensor, Tensor]) -> Tensor:
    """Rotate the first channels of each head of x, as many as the angles have, and
    keep the rest (GPT-NeoX's rotary_pct, Phi's partial_rotary_factor, GPT-J's
    rotary_dim).

    Written into a copy of x, which keeps x's memory layout (torch.cat would not), so
    that attention's output still merges its heads without a copy.
    """
    width = rope[0].size(-1)
    out = x.clone()
    out[..., :width] = {apply}(x[..., :width], rope)
    return out
'''


class Rotary(PositionCode):
    angles = ("rope", "tuple[Tensor, Tensor]")
    functions = ROPE  # the angle and rotation helpers
    angle_function = "rope_angles"
    apply = "apply_rope"
    # Only the first `rope_dim` channels of a head turn (a partial rotation).
    partial = False

    def configured(self, position):
        if position.rotary_dim is None:
            return self
        code = copy.copy(self)
        code.partial = True
        return code

    def config_fields(self, entry, values):
        # Rotating every channel needs no rope_dim in Config.
        return [f for spec, f in entry.parameters if spec != "rotary_dim" or self.partial]

    def helpers(self, causalities):
        partially = [_partially(self.apply)] if self.partial else []
        return [self.functions, ROPE_AT, *partially]

    def positions(self) -> str:
        """The positions the table rows are computed at."""
        return "torch.arange(config.max_seq_len)"

    def table(self, width: str) -> list[str]:
        """Lines computing `cos, sin` for `positions`, over `width` rotated channels."""
        return [
            "theta = config.rope_theta",
            f"cos, sin = {self.angle_function}(positions, {width}, theta)",
        ]

    def init(self, ctx):
        width = "config.rope_dim" if self.partial else ctx.head_dim
        return [
            *ROPE_TABLES,
            f"positions = {self.positions()}",
            *self.table(width),
            'self.register_buffer("rope_cos", cos, persistent=False)',
            'self.register_buffer("rope_sin", sin, persistent=False)',
        ]

    def build_angles(self, ctx, positions):
        return f"rope_at(self.rope_cos, self.rope_sin, {positions}, x.dtype)"

    def buffer_elements(self, max_seq_len, rotated):
        return 2 * max_seq_len * rotated  # rope_cos and rope_sin

    def rotate(self, x):
        return f"{self.apply}_partially({x}, rope)" if self.partial else f"{self.apply}({x}, rope)"


ROPE_INTERLEAVED = '''
def interleaved_rope_angles(
    positions: Tensor,
    dim: int,
    theta: float,
) -> tuple[Tensor, Tensor]:
    """cos and sin of the rotary angles, (..., S, dim) for positions (..., S), in
    float32, as in transformers' GPT-J.

    Channels 2i and 2i + 1 of a head turn together, at position p by the angle
    p / theta ** (2i / dim).
    """
    channels = torch.arange(0, dim, 2, device=positions.device).float()
    inv_freq = 1.0 / theta ** (channels / dim)
    angles = (positions.float()[..., None] * inv_freq).repeat_interleave(2, dim=-1)
    return angles.cos(), angles.sin()


def apply_interleaved_rope(x: Tensor, rope: tuple[Tensor, Tensor]) -> Tensor:
    """Rotate the channel pairs (2i, 2i + 1) of x (B, heads, S, dim)."""
    cos, sin = rope
    turned = torch.stack([-x[..., 1::2], x[..., ::2]], dim=-1).flatten(-2)
    return x * cos + turned * sin
'''


class InterleavedRotary(Rotary):
    """GPT-J's rotation: pairs of neighbouring channels (rotate_every_two)."""

    functions = ROPE_INTERLEAVED
    angle_function = "interleaved_rope_angles"
    apply = "apply_interleaved_rope"


class LinearRotary(Rotary):
    """transformers' linear scaling: the frequencies divided by `factor`, i.e. the positions."""

    def positions(self) -> str:
        return "torch.arange(config.max_seq_len) / config.rope_factor"


ROPE_LLAMA3 = '''
def llama3_rope(
    positions: Tensor,
    head_dim: int,
    theta: float,
    scaling: tuple[float, float, float, int],
) -> tuple[Tensor, Tensor]:
    """RoPE's cos and sin with Llama 3.1's frequency scaling, as transformers computes
    it (float32, like rope_angles).

    Wavelengths shorter than original / high_freq_factor keep their frequency, those
    longer than original / low_freq_factor are divided by `factor`, and those between
    blend the two.
    """
    factor, low, high, original = scaling
    channels = torch.arange(0, head_dim, 2, device=positions.device).float()
    inv_freq = 1.0 / theta ** (channels / head_dim)
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > original / low, inv_freq / factor, inv_freq)
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= original / high) & (wavelen <= original / low)
    inv_freq = torch.where(medium, smoothed, scaled)
    angles = positions.float()[..., None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()
'''


class Llama3Rotary(Rotary):
    def helpers(self, causalities):
        return [*super().helpers(causalities), ROPE_LLAMA3]

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


ROPE_YARN = '''
def yarn_rope(
    positions: Tensor,
    dim: int,
    theta: float,
    scaling: tuple[float, int, float, float, float],
) -> tuple[Tensor, Tensor]:
    """RoPE's cos and sin with YaRN's scaling (Peng et al. 2023), as transformers
    computes it (float32, like rope_angles).

    Channels turning more than beta_fast times over the original context keep their
    frequency, those turning fewer than beta_slow times are divided by `factor`, a
    linear ramp blends the channels between; cos and sin are multiplied by
    attention_factor.
    """
    factor, original, beta_fast, beta_slow, attention_factor = scaling

    def channel(rotations: float) -> float:
        turns = math.log(original / (rotations * 2 * math.pi))
        return dim * turns / (2 * math.log(theta))

    low = max(math.floor(channel(beta_fast)), 0)
    high = min(math.ceil(channel(beta_slow)), dim - 1)
    high = high + 0.001 if low == high else high
    channels = torch.arange(0, dim, 2, device=positions.device).float()
    frequencies = theta ** (channels / dim)
    pairs = torch.arange(dim // 2, device=positions.device).float()
    kept = 1 - ((pairs - low) / (high - low)).clamp(0, 1)
    inv_freq = (1 - kept) / (factor * frequencies) + kept / frequencies
    angles = positions.float()[..., None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos() * attention_factor, angles.sin() * attention_factor
'''


class YarnRotary(Rotary):
    def helpers(self, causalities):
        return [*super().helpers(causalities), ROPE_YARN]

    def table(self, width):
        return [
            "scaling = (",
            "    config.rope_factor,",
            "    config.rope_original_max_seq_len,",
            "    config.rope_beta_fast,",
            "    config.rope_beta_slow,",
            "    config.rope_attention_factor,",
            ")",
            "theta = config.rope_theta",
            f"cos, sin = yarn_rope(positions, {width}, theta, scaling)",
        ]


ROPE_DYNAMIC = '''
def ntk_rope_tables(stack: nn.Module, positions: Tensor) -> tuple[Tensor, Tensor]:
    """The stack's RoPE tables under dynamic NTK scaling, kept as transformers'
    dynamic_rope_update keeps its frequencies: a sequence (its last position + 1) longer
    than the context trained on and than any sequence before gets frequencies for its
    length; one that fits that context again after longer ones gets the original
    frequencies back. A sequence in between keeps those of the longest so far.

    The scaling raises the base to theta * (factor * length / original - (factor - 1))
    ** (dim / (dim - 2)), computed in float32 as transformers computes it.
    """
    dim, theta, factor, original = stack.rope_settings
    length = int(positions.max()) + 1
    if length > stack.rope_length:
        stretch = factor * torch.tensor(length) / original - (factor - 1)
        theta = theta * stretch ** (dim / (dim - 2))
        stack.rope_length = length
    elif length < original < stack.rope_length:
        stack.rope_length = original
    else:
        return stack.rope_cos, stack.rope_sin
    rows = torch.arange(max(length, stack.rope_cos.size(0)), device=positions.device)
    stack.rope_cos, stack.rope_sin = rope_angles(rows, dim, theta)
    return stack.rope_cos, stack.rope_sin
'''


class DynamicRotary(Rotary):
    """transformers' dynamic NTK scaling: the frequencies depend on the longest sequence
    seen, so the tables are recomputed during the forward (ntk_rope_tables), and no length
    is refused: sequences beyond max_seq_len (the context trained on) are what it is for."""

    def helpers(self, causalities):
        return [*super().helpers(causalities), ROPE_DYNAMIC]

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


ROPE_LONG = '''
def longrope_angles(
    positions: Tensor,
    dim: int,
    theta: float,
    factors: tuple[float, ...],
    attention_factor: float,
) -> tuple[Tensor, Tensor]:
    """RoPE's cos and sin with LongRoPE's per-channel factors, as transformers computes
    them (float32, like rope_angles): channel pair i turns at position p by the angle
    p / (factors[i] * theta ** (2i / dim)); cos and sin are multiplied by
    attention_factor.
    """
    channels = torch.arange(0, dim, 2, device=positions.device).float()
    scale = torch.tensor(factors, dtype=torch.float32, device=positions.device)
    inv_freq = 1.0 / (scale * theta ** (channels / dim))
    angles = positions.float()[..., None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos() * attention_factor, angles.sin() * attention_factor


def longrope_tables(stack: nn.Module, positions: Tensor) -> tuple[Tensor, Tensor]:
    """The stack's tables for this call: the long factors' when the sequence (its last
    position + 1) is longer than the context trained on, else the short factors'. As in
    transformers' longrope_frequency_update, the choice is made anew for every forward
    call, with no memory of earlier ones.
    """
    if int(positions.max()) + 1 > stack.rope_original:
        return stack.rope_long_cos, stack.rope_long_sin
    return stack.rope_cos, stack.rope_sin
'''


class LongRotary(Rotary):
    """LongRoPE (Phi-3's long-context models): two pairs of tables, built once from the
    short and the long factors; each forward picks one (longrope_tables)."""

    def helpers(self, causalities):
        return [*super().helpers(causalities), ROPE_LONG]

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


class InterleavedYarnRotary(YarnRotary):
    """DeepSeek-V2's rotation: YaRN's frequencies, turning channel pairs (2i, 2i + 1)."""

    functions = ROPE_INTERLEAVED
    angle_function = "interleaved_rope_angles"
    apply = "apply_interleaved_rope"

    def table(self, width):
        return [
            *super().table(width),
            "# yarn_rope pairs channel i with i + half; this rotation pairs 2i with 2i + 1.",
            "half = cos.size(-1) // 2",
            "cos = cos[..., :half].repeat_interleave(2, dim=-1)",
            "sin = sin[..., :half].repeat_interleave(2, dim=-1)",
        ]


ALIBI_SLOPES = '''
def alibi_slopes(n_heads: int, device: torch.device) -> Tensor:
    """ALiBi's slope for each head, as BLOOM computes them.

    For n, the largest power of two up to n_heads, the slopes are 2 ** (-8 k / n) for
    k = 1 .. n; any further heads take every other slope of the sequence for 2n heads.
    """
    n = 2 ** math.floor(math.log2(n_heads))
    base = torch.tensor(2 ** (-8 / n), device=device)
    slopes = base ** torch.arange(1, n + 1, device=device)
    if n < n_heads:
        base = torch.tensor(2 ** (-4 / n), device=device)
        odd = torch.arange(1, 2 * (n_heads - n), 2, device=device)
        slopes = torch.cat([slopes, base**odd])
    return slopes
'''

ALIBI_CAUSAL = '''
def alibi_bias(n_heads: int, keys: Tensor) -> Tensor:
    """slope * key position for key positions (K) or (B, K): (n_heads, 1, K) or
    (B, n_heads, 1, K). Under softmax this equals slope * (key - query), ALiBi's linear
    penalty on distance (BLOOM's formulation).
    """
    return alibi_slopes(n_heads, keys.device)[:, None, None] * keys[..., None, None, :]
'''

ALIBI_BIDIRECTIONAL = '''
def alibi_bias(n_heads: int, positions: Tensor) -> Tensor:
    """ALiBi's linear penalty, -slope * |key - query|: (n_heads, S, S) for positions
    (S).
    """
    distance = (positions[None, :] - positions[:, None]).abs()
    return -alibi_slopes(n_heads, positions.device)[:, None, None] * distance
'''

ALIBI_BOTH = '''
def alibi_bias(n_heads: int, positions: Tensor, causal: bool) -> Tensor:
    """ALiBi's linear penalty on distance, -slope * |key - query|, (n_heads, S, S) for
    positions (S).

    Causal attention only sees earlier keys, so slope * key position does the same under
    softmax (BLOOM's formulation), as (n_heads, 1, K), or (B, n_heads, 1, K) for key
    positions (B, K).
    """
    slopes = alibi_slopes(n_heads, positions.device)[:, None, None]
    if causal:
        return slopes * positions[..., None, None, :]
    return -slopes * (positions[None, :] - positions[:, None]).abs()
'''


class Alibi(PositionCode):
    def helpers(self, causalities):
        if len(causalities) > 1:
            bias = ALIBI_BOTH
        elif True in causalities:
            bias = ALIBI_CAUSAL
        else:
            bias = ALIBI_BIDIRECTIONAL
        return [ALIBI_SLOPES, bias]

    def init(self, ctx):
        return [f"self.n_heads = {ctx.heads}"]

    def bias(self, ctx):
        # The helper takes `causal` only when the model has stacks of both kinds; the
        # stack's own direction is then a constant of its class.
        causal = f", causal={ctx.causal}" if len(ctx.causalities) > 1 else ""
        lines = [f"keys = torch.arange({ctx.keys}, device=x.device)"]
        if ctx.cache:
            lines += [
                "if attention_mask is not None:  # BLOOM counts positions over tokens only",
                "    keys = (attention_mask.cumsum(-1) - 1) * attention_mask",
            ]
        return [*lines, f"bias = alibi_bias(self.n_heads, keys{causal}).to(x.dtype)"]


RELATIVE_BUCKETS = '''
def relative_position_bucket(
    offset: Tensor, num_buckets: int, max_distance: int, bidirectional: bool
) -> Tensor:
    """T5's bucket for each key-minus-query offset.

    Half the buckets hold one distance each, the other half cover distances up to
    max_distance on a log scale (and everything beyond). Bidirectional buckets (encoder)
    are split between keys before and after the query; causal ones only look back.
    """
    bucket = torch.zeros_like(offset)
    if bidirectional:
        num_buckets //= 2
        bucket += (offset > 0).long() * num_buckets
        distance = offset.abs()
    else:
        distance = -offset.clamp(max=0)
    exact = num_buckets // 2
    log_ratio = torch.log(distance.float() / exact) / math.log(max_distance / exact)
    far = exact + (log_ratio * (num_buckets - exact)).long()
    far = far.clamp(max=num_buckets - 1)
    return bucket + torch.where(distance < exact, distance, far)
'''


class RelativeBias(PositionCode):
    absolute = False

    def helpers(self, causalities):
        return [RELATIVE_BUCKETS]

    def init(self, ctx):
        return ["self.num_buckets = config.num_buckets", "self.max_distance = config.max_distance"]

    def bias(self, ctx):
        if ctx.cache:
            offsets = [
                "keys = torch.arange(k_len, device=x.device)",
                "offsets = keys[None, :] - positions[:, None]  # key - query",
            ]
        else:
            offsets = ["offsets = positions[None, :] - positions[:, None]  # key - query"]
        return [
            *offsets,
            "buckets = relative_position_bucket(",
            f"    offsets, self.num_buckets, self.max_distance, bidirectional={ctx.bidirectional}",
            ")",
            "# One learned bias per (distance bucket, head), shared by all blocks.",
            f"bias = self.{ctx.table}(buckets).permute(2, 0, 1).unsqueeze(0)",
        ]
