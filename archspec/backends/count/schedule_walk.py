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

An action is (kind, stage, micro-batch), kind "F" (forward), "B" (full backward), or the two
parts the zero-bubble schedules split a backward into, "I" (input gradients) and "W" (weight
gradients), as torch.distributed.pipelining writes them (`schedule_order` reads them
from the schedule itself). torch's input backward (`stage_backward_input`) runs with
retain_graph=True: it frees none of the micro-batch's saved tensors, but on the last stage it
detaches the loss, whose own (the log-softmax, the targets) go with it; it keeps the gradients
the weight backward starts from (`pipeline_peak.split_backward_gradients`) until then. The
weight backward frees the rest of the micro-batch's saved tensors and those gradients, and
makes (or adds into) the stage's gradients. On the first stage the input backward does nothing
(its input needs no gradient) and the weight backward is the whole backward.
"""

from __future__ import annotations

from dataclasses import dataclass

Action = tuple[str, int, int]


@dataclass(frozen=True)
class Backward:
    """One backward (or part of one) of a rank's order: its `stage`, the bytes `alive` as it
    starts (saved tensors, its own micro-batch's among them, and the gradients kept for weight
    backwards still to run), and the stages whose gradients exist by its end
    (`with_gradients`: its own, from a full or weight backward, and those of every stage with
    an earlier one). `makes`: the bytes of its micro-batch's saved tensors it frees, where it
    is the first of its stage to make the stage's gradients (0 otherwise): it makes them block
    by block from the last as it frees those blocks' saved tensors."""

    stage: int
    alive: int
    with_gradients: frozenset[int]
    makes: int = 0


@dataclass(frozen=True)
class Walk:
    held: int  # the most saved bytes alive at once
    backwards: list[Backward]


def walk(
    order: list[Action],
    saved: dict[int, int],
    loss: dict[int, int] | None = None,
    kept: dict[int, int] | None = None,
) -> Walk:
    """A rank's saved tensors and gradients along `order`, where a forward of stage `s` saves
    `saved[s]` bytes for its micro-batch, `loss[s]` of them the loss's, and an input backward
    keeps `kept[s]` bytes of gradients for its weight backward."""
    loss, kept = loss or {}, kept or {}
    live = held = waiting = 0
    in_flight: set[tuple[int, int]] = set()
    made: frozenset[int] = frozenset()
    backwards: list[Backward] = []
    for kind, stage, micro_batch in order:
        if kind == "F":
            in_flight.add((stage, micro_batch))
            live += saved[stage]
            held = max(held, live)
        elif kind == "I":
            waiting += kept.get(stage, 0)
            backwards.append(Backward(stage, live + waiting, made))
            live -= loss.get(stage, 0)
        elif kind in ("B", "W"):
            frees = saved[stage] - (loss.get(stage, 0) if kind == "W" else 0)
            first = stage not in made
            made |= {stage}
            backwards.append(Backward(stage, live + waiting, made, frees if first else 0))
            in_flight.remove((stage, micro_batch))
            live -= frees
            waiting -= kept.get(stage, 0) if kind == "W" else 0
        else:
            raise ValueError(f"action {kind}{stage} of micro-batch {micro_batch} is not walked")
    if in_flight:
        raise ValueError(f"the order never runs the backward of {sorted(in_flight)}")
    return Walk(held, backwards)
