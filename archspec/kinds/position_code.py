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
from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from archspec.ir.nodes import Position
    from archspec.kinds.positions import PositionKind


def rope(*names: str) -> str:
    """The source of functions of `archspec.runtime.rope`, for the generated file."""
    return _copied("rope", names)


def tables(*names: str) -> str:
    """The source of functions of `archspec.runtime.position_tables`."""
    return _copied("position_tables", names)


def _copied(module: str, names: tuple[str, ...]) -> str:
    # Imported when code is generated only: counting and comparing do not import torch.
    from archspec.backends.torchgen.copied import source_of

    runtime = import_module(f"archspec.runtime.{module}")
    return source_of(*(getattr(runtime, name) for name in names))


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


class Sinusoidal(PositionCode):
    def helpers(self, causalities):
        return [tables("sinusoids")]

    def added(self, ctx, positions):
        return f"sinusoids({positions}, x.size(-1)).to(x.dtype)"


# The tables' comment, in a stack's __init__.
ROPE_TABLES = [
    "# cos and sin at every position, computed once: buffers follow the model's",
    "# device and dtype, and stay out of the state_dict (persistent=False).",
]


class Rotary(PositionCode):
    angles = ("rope", "tuple[Tensor, Tensor]")
    # The angle and rotation functions.
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
        partially = [rope("apply_partially")] if self.partial else []
        return [rope(self.angle_function, self.apply), rope("rope_at"), *partially]

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
        apply = self.apply
        return f"apply_partially({apply}, {x}, rope)" if self.partial else f"{apply}({x}, rope)"


class InterleavedRotary(Rotary):
    """GPT-J's rotation: pairs of neighbouring channels (rotate_every_two)."""

    angle_function = "interleaved_rope_angles"
    apply = "apply_interleaved_rope"


class LinearRotary(Rotary):
    """transformers' linear scaling: the frequencies divided by `factor`, i.e. the positions."""

    def positions(self) -> str:
        return "torch.arange(config.max_seq_len) / config.rope_factor"


class InterleavedLinearRotary(InterleavedRotary, LinearRotary):
    """GPT-J's rotation at positions divided by `factor` (linear scaling)."""


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


class YarnRotary(Rotary):
    def helpers(self, causalities):
        return [*super().helpers(causalities), rope("yarn_rope")]

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


class LongRotary(Rotary):
    """LongRoPE (Phi-3's long-context models): two pairs of tables, built once from the
    short and the long factors; each forward picks one (longrope_tables)."""

    def helpers(self, causalities):
        return [*super().helpers(causalities), rope("longrope_angles", "longrope_tables")]

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


class Alibi(PositionCode):
    def helpers(self, causalities):
        return [tables("alibi_slopes", "alibi_bias")]

    def init(self, ctx):
        return [f"self.n_heads = {ctx.heads}"]

    def bias(self, ctx):
        # The stack's direction is a constant of its class; causal is the helper's default.
        causal = "" if ctx.causal else ", causal=False"
        lines = [f"keys = torch.arange({ctx.keys}, device=x.device)"]
        if ctx.cache:
            lines += [
                "if attention_mask is not None:  # BLOOM counts positions over tokens only",
                "    keys = (attention_mask.cumsum(-1) - 1) * attention_mask",
            ]
        return [*lines, f"bias = alibi_bias(self.n_heads, keys{causal}).to(x.dtype)"]


class RelativeBias(PositionCode):
    absolute = False

    def helpers(self, causalities):
        return [tables("relative_position_bucket")]

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
