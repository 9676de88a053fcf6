"""Fixed sinusoidal position encodings (the original Transformer), added to the tokens'.

Three tables are in use, told apart by `layout`: Vaswani et al.'s, sines and cosines
interleaved; Marian's and Pegasus' (transformers' `MarianSinusoidalPositionalEmbedding`), the
same frequencies with the sines first and the cosines after; and fairseq's (tensor2tensor's,
M2M100's and NLLB's), sines then cosines at frequencies spaced over dim / 2 - 1 steps. fairseq
counts positions from its padding index + 1 (`offset`) and over the tokens the attention
mask keeps (`from_mask`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Literal

from archspec.kinds.positions.base import Position, PositionCode, PositionKind, tables
from archspec.spec.fields import doc

SinusoidLayout = Literal["interleaved", "halves", "fairseq"]

# The runtime function (archspec.runtime.position_tables) that builds each layout's table.
FUNCTIONS: dict[str, str] = {
    "interleaved": "sinusoids",
    "halves": "sinusoids_halves",
    "fairseq": "sinusoids_fairseq",
}


@dataclass(frozen=True)
class Sinusoidal(Position):
    kind: Literal["sinusoidal"] = field(default="sinusoidal", metadata=doc("fixed sinusoids"))
    layout: SinusoidLayout = field(
        default="interleaved",
        metadata=doc(
            "interleaved: sin and cos alternate (Vaswani et al.); halves: sines first, "
            "cosines after (Marian, Pegasus); fairseq: sines then cosines at fairseq's "
            "frequencies (M2M100, NLLB)"
        ),
    )
    offset: int = field(
        default=0,
        metadata=doc(
            "added to every position before encoding it (M2M100: pad_token_id + 1)", min=0
        ),
    )
    from_mask: bool = field(
        default=False,
        metadata=doc(
            "positions count the tokens attention_mask keeps, so left padding does not "
            "shift them (M2M100 numbers positions from the input's non-padding tokens)"
        ),
    )


class SinusoidalCode(PositionCode):
    function = FUNCTIONS["interleaved"]

    def configured(self, position):
        code = copy.copy(self)
        code.function = FUNCTIONS[position.layout]
        return code

    def config_fields(self, entry, values):
        # An offset of zero changes nothing: leave it out of Config.
        return [field for spec, field in entry.parameters if values.get(spec)]

    def helpers(self, causalities):
        return [tables(self.function)]

    def init(self, ctx):
        return ["self.pos_offset = config.pos_offset"] if ctx.offset else []

    def added(self, ctx, positions):
        offset = " + self.pos_offset" if ctx.offset else ""
        return f"{self.function}({positions}{offset}, x.size(-1)).to(x.dtype)"


RECORD = Sinusoidal
ENTRIES = (
    PositionKind(
        "sinusoidal",
        "sinusoidal",
        "sinusoidal position encodings",
        acts_on="embeddings",
        parameters=(("offset", "pos_offset"),),
        flops_per_element=1,
        code=SinusoidalCode(),
        length_limited=True,
    ),
)
