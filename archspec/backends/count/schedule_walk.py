"""The saved tensors a pipeline rank holds at its peak, walked along its schedule's own order.

A schedule that keeps several stages on a rank (interleaved 1F1B, looped BFS) decides by its
order of actions which micro-batches of which stage are in flight at once; no one formula
covers them all (torch's interleaved 1F1B, for one, relaxes Megatron-LM's rule that the
micro-batches be a multiple of the stages). The order says it exactly: a rank runs its actions
one after another, a forward of (stage, micro-batch) saves what that stage saves for one
micro-batch, and its full backward frees it. The most held after any action is the rank's
saved tensors at its peak. Each backward also makes its stage's gradients (the first) or adds
into them (the others): what else is alive as each backward runs, the saved tensors and the
gradients made so far, is where the step's peak can fall (`pipeline_peak`). Under looped
BFS every forward runs before the first backward: the saved tensors peak before any gradient
exists.

An action is (kind, stage, micro-batch), kind "F" (forward) or "B" (full backward), as
torch.distributed.pipelining writes them (`bench.pipeline_order` reads them from the schedule
itself). A backward split in two, "I" (input gradients) and "W" (weight gradients), as the
zero-bubble schedules run it, is refused: what each part frees is not walked here.
"""

from __future__ import annotations

from dataclasses import dataclass

Action = tuple[str, int, int]


@dataclass(frozen=True)
class Backward:
    """One full backward of a rank's order: its `stage`, the saved bytes `alive` as it
    starts (its own micro-batch's among them), and the stages whose gradients exist by its
    end (`with_gradients`: its own and those of every stage with an earlier backward)."""

    stage: int
    alive: int
    with_gradients: frozenset[int]


@dataclass(frozen=True)
class Walk:
    held: int  # the most saved bytes alive at once
    backwards: list[Backward]


def walk(order: list[Action], saved: dict[int, int]) -> Walk:
    """A rank's saved tensors and gradients along `order`, where a forward of stage `s` saves
    `saved[s]` bytes for its micro-batch."""
    live = held = 0
    in_flight: set[tuple[int, int]] = set()
    made: frozenset[int] = frozenset()
    backwards: list[Backward] = []
    for kind, stage, micro_batch in order:
        if kind == "F":
            in_flight.add((stage, micro_batch))
            live += saved[stage]
            held = max(held, live)
        elif kind == "B":
            made |= {stage}
            backwards.append(Backward(stage, live, made))
            in_flight.remove((stage, micro_batch))
            live -= saved[stage]
        else:
            raise ValueError(
                f"action {kind}{stage} of micro-batch {micro_batch}: only forwards (F) and "
                "full backwards (B) are walked"
            )
    if in_flight:
        raise ValueError(f"the order never runs the backward of {sorted(in_flight)}")
    return Walk(held, backwards)
