"""A stack's layers as runs of identical ones, and a pipeline stage's share of them.

The plan keeps a run as (layers, what one layer costs) and multiplies, never listing one entry
per layer: a search over a model of ten million layers costs what one of ten does.
"""

from __future__ import annotations

from typing import TypeVar

from archspec.ir.nodes import within

T = TypeVar("T")


def stage_runs(
    runs: list[tuple[int, T]], spans: list[range], first: int, last: int
) -> list[tuple[int, T]]:
    """The runs of layers `first` to `last` (excluded), each with how many of its layers
    fall there (`spans`: each run's layers; a cycled window pattern's runs interleave)."""
    out = []
    for (_, each), span in zip(runs, spans, strict=True):
        inside = within(span, first, last)
        if inside > 0:
            out.append((inside, each))
    return out
