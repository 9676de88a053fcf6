"""What every position kind is made of: its parameter record (`Position`, and a RoPE
scaling's `Scaling`), its catalogue entry (`PositionKind`) and its code (`PositionCode`,
written for one stack's `StackContext`). Each kind's module in this package defines the
three for its kind; `archspec.kinds.positions` gathers them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from importlib import import_module
from typing import Any, ClassVar, Literal

from archspec import kinds


class Scaling:
    """A RoPE scaling's record: the frequencies transformers' rope_type computes."""

    type: str
    # The catalogue entries of the rotation it scales: pairs (i, i + half), and interleaved
    # pairs (2i, 2i + 1) as GPT-J; None where that rotation is not built with it.
    entry_name: ClassVar[str]
    interleaved_entry_name: ClassVar[str | None] = None

    def values(self) -> dict[str, Any]:
        """The parameters the generated code reads, defaults resolved."""
        return {name: value for name, value in asdict(self).items() if name != "type"}

    def types(self) -> dict[str, str]:
        """The parameters' types, as written (`float`, `int | None`)."""
        return {f.name: str(f.type) for f in fields(self) if f.name != "type"}


class Position:
    """A position kind's record: the spec's `position` section, a tagged union chosen by
    `kind` (inside rope, by `scaling.type`), validated as a section of its own. The IR keeps
    the validated record as it is; `entry` names the catalogue entry whose code and costs it
    selects. What a kind without a parameter means by it, read for every stack (no table
    offset, positions not from the mask, every channel rotated):"""

    kind: str
    offset: ClassVar[int] = 0
    from_mask: ClassVar[bool] = False
    rotary_dim: ClassVar[int | None] = None

    @property
    def entry(self) -> PositionKind:
        return kinds.position(self.kind)

    @property
    def code(self) -> PositionCode:
        """The kind's PyTorch code for these values (a partial rotation rotates fewer
        channels)."""
        return self.entry.code.configured(self)

    def values(self) -> dict[str, Any]:
        """The parameters the generated code reads, by spec name, defaults resolved."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "kind"}

    def types(self) -> dict[str, str]:
        """The parameters' types, as written (`float`, `int | None`)."""
        return {f.name: str(f.type) for f in fields(self) if f.name != "kind"}


def tables(*names: str) -> str:
    """The source of functions of `archspec.runtime.position_tables`, for the generated
    file."""
    return copied("position_tables", names)


def copied(module: str, names: tuple[str, ...]) -> str:
    """The source of functions of the runtime module `module`."""
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
    """The PyTorch code a kind contributes to a generated model; this base, the code of a
    kind that needs none: every slot is empty.

    A generated stack's forward is written from its lowering (`lower_stack`), whose position
    ops (positions added to the embeddings, the angles attention rotates by, the bias on the
    scores) the kind's code spells; it also brings the module-level helper functions it
    calls. The lines are written already in `ruff format` style for the indentation of a
    method body.
    """

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

    def generation(self) -> list[str]:
        """Lines of a decoder's `generate` between its `step` and the decoding loop, for a
        kind whose cached keys go stale as the sequence grows: they may wrap `step` and
        end by naming `reordered`, the KV caches beam search reorders. None by default."""
        return []

    def generation_helpers(self) -> list[str]:
        """The module-level functions `generation`'s lines call, placed after the KV
        cache."""
        return []

    def buffer_elements(self, max_seq_len, rotated):
        """Elements of the buffers `init` registers (tables built once), given the stack's
        max_seq_len and the channels of a head that turn."""
        return 0


@dataclass(frozen=True)
class PositionKind:
    """A position kind's catalogue entry: how a stack tells its tokens apart by place.

    It says where the kind acts (added to the embeddings, rotating queries and keys, or
    biasing the attention scores), which table it owns, what its spec parameters are, and
    what its forward keeps for the backward pass. The FLOP and memory interpreters, the
    printer and the code generator read these fields; none of them compares a position's
    name."""

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
    # The parameters this kind reads, as (field of its record, or of its scaling's;
    # generated Config field).
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
