"""ALiBi (BLOOM): attention scores penalised linearly with distance, a slope per head."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from archspec.kinds.positions.base import Position, PositionCode, PositionKind, tables
from archspec.spec.fields import doc


@dataclass(frozen=True)
class Alibi(Position):
    kind: Literal["alibi"] = field(default="alibi", metadata=doc("ALiBi's linear bias"))


class AlibiCode(PositionCode):
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


RECORD = Alibi
ENTRIES = (
    PositionKind(
        "alibi",
        "ALiBi",
        "ALiBi (attention scores penalised linearly with distance)",
        acts_on="scores",
        needs_positions=False,
        flops_per_element=1,
        code=AlibiCode(),
    ),
)
