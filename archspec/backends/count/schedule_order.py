"""The order of actions each rank runs under a multi-stage schedule of
torch.distributed.pipelining, read from the schedule itself (torch imported only here, when
such a schedule is asked for: `count --schedule` and `bench --schedule` alike).

Interleaved 1F1B, looped BFS and the zero-bubble schedules are `_PipelineScheduleRuntime`s:
each builds the whole pipeline's order when it is made (`pipeline_order`, every rank's list)
and lowers it with the sends and receives into `pipeline_order_with_comms`, which its step
runs one action after another. That lowered order, less the communication, is what a rank
computes and in which order. Making the schedule needs only what it reads of its stages (their
index, count, group size and rank, and the module), so stand-ins make it here, on the
launcher's process (or count's), without a process group.

The single-stage schedules step through their micro-batches in a loop of their own; their
`pipeline_order` describes it but is not what runs (torch 2.13's 1F1B order starts the last
rank's forwards at micro-batch 1), so it is not read. GPipe's loop is written out here: every
forward in turn, then every backward in turn (ScheduleGPipe._step_microbatches); 1F1B's
micro-batches in flight are count's (`layout.Parallelism.in_flight`).
"""

from __future__ import annotations

from archspec.backends.count.schedule_walk import Action
from archspec.backends.count.schedules import SCHEDULES
from archspec.errors import SpecError

COMPUTE = ("F", "B", "I", "W")


class _StandInStage:
    """What a schedule reads of a stage when it is made."""

    def __init__(self, index: int, n_stages: int, pp: int) -> None:
        import torch

        self.stage_index, self.num_stages = index, n_stages
        self.group_size, self.group_rank = pp, 0
        self.is_first, self.is_last = index == 0, index == n_stages - 1
        self.submod = torch.nn.Module()


def schedule_order(
    schedule: str, stages: list[int], n_stages: int, pp: int, micro_batches: int,
    named: str | None = None,
) -> dict[int, list[Action]]:  # fmt: skip
    """Each pp rank's compute actions, in the order it runs them, under torch's `schedule`
    (GPipe, or a multi-stage one: Interleaved1F1B, LoopedBFS, InterleavedZeroBubble,
    ZBVZeroBubble) with rank 0 holding `stages` of `n_stages`. A micro-batch count the
    schedule refuses is the user's mistake, named as the command takes it (`named`; bench's
    `--batch N` by default)."""
    if schedule == "GPipe":
        return {
            rank: [(step, rank, i) for step in "FB" for i in range(micro_batches)]
            for rank in range(pp)
        }
    from torch.distributed.pipelining.schedules import get_schedule_class

    kind = get_schedule_class(schedule)
    stand_ins = [_StandInStage(i, n_stages, pp) for i in stages]
    try:
        made = kind(stand_ins, micro_batches)
    except ValueError as e:
        word = next(k for k, (name, _) in SCHEDULES.items() if name == schedule)
        named = named or f"--batch {micro_batches}"
        raise SpecError(f"--schedule {word} over {named}: {e}") from None
    return {
        rank: [
            (str(a.computation_type.value), a.stage_index, a.microbatch_index)
            for a in actions
            if a.computation_type.value in COMPUTE
        ]
        for rank, actions in made.pipeline_order_with_comms.items()
    }
