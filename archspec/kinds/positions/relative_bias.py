"""T5's relative position bias: a learned bias per (distance bucket, head) on the scores."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from archspec.kinds.positions.base import Position, PositionCode, PositionKind, tables
from archspec.spec.fields import doc


@dataclass(frozen=True)
class RelativeBias(Position):
    kind: Literal["relative_bias"] = field(
        default="relative_bias", metadata=doc("T5's bucketed relative bias")
    )
    num_buckets: int = field(default=32, metadata=doc("buckets", positive=True))
    max_distance: int = field(
        default=128, metadata=doc("distance of the last bucket", positive=True)
    )


class RelativeBiasCode(PositionCode):
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


RECORD = RelativeBias
ENTRIES = (
    PositionKind(
        "relative_bias",
        "relative bias (T5)",
        "T5's bucketed relative position bias",
        acts_on="scores",
        table="relative",
        learned_bias=True,
        parameters=(("num_buckets", "num_buckets"), ("max_distance", "max_distance")),
        flops_per_element=1,
        code=RelativeBiasCode(),
    ),
)
