"""Figures across sequence lengths, for the FLOPs-per-token chart and `count --seq a,b,c`.

Each point is one call of the count backend's own functions at that length, so a point of a
sweep is the number `archspec count --seq S` prints for that S.
"""

from __future__ import annotations

from typing import Any

from archspec.backends.count.flops_report import Workload, flops_report, forward_flops_per_token
from archspec.ir.nodes import IR
from archspec.safety.limits import MAX_SIZE

SHORTEST = 128  # the charts start here: below it every model's cost is flat


def chart_lengths(longest: int) -> list[int]:
    """Powers of two from 128 up to the first at or beyond `longest` (log axes want doublings).
    The last stops at MAX_SIZE, the longest length a count takes: past a context over 2**29
    (which a spec may have) the next doubling would be refused as a --seq."""
    end = min(longest, MAX_SIZE)
    lengths = [SHORTEST]
    while lengths[-1] < end:
        lengths.append(min(lengths[-1] * 2, MAX_SIZE))
    return lengths


def curve_lengths(longest: int, context: int) -> list[int]:
    """The chart's lengths for one model: the doublings, plus its context window if it is not
    one of them, so its solid line ends exactly there."""
    lengths = chart_lengths(longest)
    return sorted({*lengths, context}) if context <= lengths[-1] else lengths


def forward_curve(
    ir: IR, lengths: list[int], convention: str = "executed"
) -> list[tuple[int, int]]:
    """[(S, forward FLOPs per token at S)] for each S in `lengths`."""
    return [(s, forward_flops_per_token(ir, s, convention)) for s in lengths]


def seq_sweep(ir: IR, workload: Workload, lengths: list[int]) -> list[dict[str, Any]]:
    """`flops_report` at each sequence length, the rest of the workload unchanged: one entry
    per length, each as `count --json --seq S` reports it."""
    from dataclasses import replace

    return [flops_report(ir, replace(workload, seq=s)) for s in lengths]


def forward_curves(irs: list[IR], seq: int | None) -> dict[str, list]:
    """Each spec's forward FLOPs per token by spec name, at the doublings up to the longest
    context (or `seq`, if longer) and at its own context."""
    contexts = [ir.value(ir.root.max_seq_len) for ir in irs]
    longest = max([*contexts, seq or 0])
    return {
        ir.name: forward_curve(ir, curve_lengths(longest, context))
        for ir, context in zip(irs, contexts, strict=True)
    }
