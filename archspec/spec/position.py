"""The spec's `position` section: one parameter record per position kind and per RoPE
scaling, a tagged union chosen by `kind` (and, inside rope, by `scaling.type`):

    position: {kind: rope, theta: 1e6, scaling: {type: yarn, factor: 4, ...}}

A record holds exactly its kind's parameters, validated as a section of its own (an unknown
field is an error naming the record's fields). The IR keeps the validated record as it is;
`entry` names the catalogue entry (`archspec.kinds.POSITIONS`) whose code and costs it
selects. Adding a kind or a scaling is a record here plus its catalogue entry.

The older flat form (`scaling: yarn` beside `factor: 4`) is read by `flat_position`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from archspec import kinds
from archspec.kinds.positions import PositionKind, longrope_attention, yarn_attention
from archspec.spec.fields import doc

if TYPE_CHECKING:
    from archspec.kinds.position_code import PositionCode


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


@dataclass(frozen=True)
class NoScaling(Scaling):
    type: Literal["none"] = field(default="none", metadata=doc("the frequencies as trained"))
    entry_name = "rope"
    interleaved_entry_name = "rope_interleaved"


@dataclass(frozen=True)
class LinearScaling(Scaling):
    type: Literal["linear"] = field(default="linear", metadata=doc("positions divided"))
    factor: float = field(default=1.0, metadata=doc("positions divided by it", positive=True))
    entry_name = "rope_linear"
    interleaved_entry_name = "rope_linear_interleaved"


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
    entry_name = "rope_yarn"
    interleaved_entry_name = "rope_yarn_interleaved"  # DeepSeek-V2

    def values(self) -> dict[str, Any]:
        scale = self.attention_factor
        return super().values() | {
            "attention_factor": yarn_attention(self.factor) if scale is None else scale
        }


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
    entry_name = "rope_longrope"

    def values(self) -> dict[str, Any]:
        scale = self.attention_factor
        if scale is None:
            scale = longrope_attention(self.factor, self.original_max_seq_len)
        return super().values() | {"attention_factor": scale}


SCALINGS: dict[str, type[Scaling]] = {
    cls.type: cls
    for cls in (
        NoScaling,
        LinearScaling,
        DynamicScaling,
        Llama3Scaling,
        YarnScaling,
        LongRopeScaling,
    )
}


class Position:
    """A position kind's record. What a kind without a parameter means by it, read for
    every stack (no table offset, positions not from the mask, every channel rotated):"""

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


@dataclass(frozen=True)
class Learned(Position):
    kind: Literal["learned"] = field(default="learned", metadata=doc("a learned table"))
    offset: int = field(
        default=0,
        metadata=doc("extra table rows before position 0 (BART, RoBERTa: 2)", min=0),
    )
    from_mask: bool = field(
        default=False,
        metadata=doc(
            "positions count the tokens attention_mask keeps (OPT), so left padding does "
            "not shift them"
        ),
    )


@dataclass(frozen=True)
class Sinusoidal(Position):
    kind: Literal["sinusoidal"] = field(default="sinusoidal", metadata=doc("fixed sinusoids"))


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


@dataclass(frozen=True)
class Alibi(Position):
    kind: Literal["alibi"] = field(default="alibi", metadata=doc("ALiBi's linear bias"))


@dataclass(frozen=True)
class RelativeBias(Position):
    kind: Literal["relative_bias"] = field(
        default="relative_bias", metadata=doc("T5's bucketed relative bias")
    )
    num_buckets: int = field(default=32, metadata=doc("buckets", positive=True))
    max_distance: int = field(
        default=128, metadata=doc("distance of the last bucket", positive=True)
    )


@dataclass(frozen=True)
class NoPosition(Position):
    kind: Literal["none"] = field(default="none", metadata=doc("no position information"))


POSITION_KINDS: dict[str, type[Position]] = {
    cls.kind: cls for cls in (Learned, Sinusoidal, Rope, Alibi, RelativeBias, NoPosition)
}
