"""Each rank of the generated `pipeline` under a schedule of torch.distributed.pipelining:
the bytes of the stages it holds and what it keeps in flight, for `count --engine torch --pp P
--schedule S` and `bench --nproc P --pp P --schedule S` alike (one set of functions, so the
two cannot drift apart).

fp32 training with AdamW, as the bench trains: the weights, gradients and AdamW moments of the
stages a rank holds (two under the looped and V schedules, each a model copy's share, a tied
head's copy with the last), the saved tensors of the micro-batches it holds at its peak, and
the peak of its step (`pipeline_peak`). Under 1F1B, `Parallelism.in_flight`'s micro-batches
(stage s keeps min(P - s, m)); under the others, the schedule's own order walked
(`schedule_walk`; torch's order read by `schedule_order`, which alone imports torch), the
zero-bubble ones' backward in its two parts.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from archspec.errors import SpecError, did_you_mean
from archspec.ir.nodes import IR

# --schedule's words: torch.distributed.pipelining's schedules (get_schedule_class's names), and
# how many stages each puts on a rank.
SCHEDULES = {
    "1f1b": ("1F1B", 1),
    "gpipe": ("GPipe", 1),
    "interleaved-1f1b": ("Interleaved1F1B", 2),
    "looped-bfs": ("LoopedBFS", 2),
    "interleaved-zb": ("InterleavedZeroBubble", 2),
    "zbv": ("ZBVZeroBubble", 2),
}


def check_schedule(schedule: str) -> tuple[str, int]:
    """(torch's name, stages a rank holds) of a `--schedule` word, or a refusal naming it."""
    if schedule not in SCHEDULES:
        raise SpecError(f"--schedule {schedule!r} is not one of {', '.join(SCHEDULES)}",
                        hint=did_you_mean(schedule, SCHEDULES))  # fmt: skip
    return SCHEDULES[schedule]


def rank_figures(
    ir: IR, pp: int, counts: tuple[int, ...], schedule: str, micro_batches: int, seq: int,
    device: str, attn: str, micro: int = 1, named: str | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """Each of the `pp` ranks' figures in bytes, over the stages of `counts` layers each,
    under torch's `schedule` (1F1B, GPipe, Interleaved1F1B, ...), `micro_batches` of `micro`
    sequences of `seq` positions, `attn` the attention SDPA runs on `device`: the stages it
    holds, weights, gradients, optimizer (AdamW's moments), activations (its saved tensors at
    their most), total, peak and peak_moment. `named`: the micro-batch count as the command
    takes it, for a schedule's refusal."""
    from archspec.backends.count.flops import KV_LEN, S_DEC, B, S
    from archspec.backends.count.flops_report import whole_bytes
    from archspec.backends.count.memory import Parallelism, memory_figures
    from archspec.backends.count.pipeline_peak import (
        loss_saved,
        pipeline_peak,
        split_backward_gradients,
    )
    from archspec.backends.count.schedule_walk import walk
    from archspec.backends.count.stages import stage_ranges

    stages = len(counts)
    par = Parallelism(gpus=stages, pp=stages, engine="torch", micro_batches=micro_batches,
                      stage_layers=tuple(counts))  # fmt: skip
    env = {**ir.env, B: micro, S: seq, S_DEC: seq, KV_LEN: seq}
    figures = memory_figures(ir, attn=attn, parallel=par, device=device).stages
    one = memory_figures(ir, attn=attn, parallel=replace(par, micro_batches=1), device=device)
    saved = [whole_bytes(st.activations, env) for st in one.stages]  # one micro-batch each
    ranges = [range(first, last) for first, last in stage_ranges(counts)]
    held = _held_stages(schedule, pp, stages)
    rows = micro * seq  # positions of one micro-batch
    # What each rank keeps in flight: under 1F1B (count's figure) stage s keeps
    # min(pp - s, micro-batches); under the others, what the order holds at most.
    walks: list = [None] * pp
    if schedule == "1F1B":
        in_flight = [whole_bytes(st.activations, env) for st in figures]
    else:
        from archspec.backends.count.schedule_order import schedule_order

        order = schedule_order(schedule, held[0], stages, pp, micro_batches, named)
        loss = {stages - 1: loss_saved(ir, rows)} if ir.root.lm_head is not None else {}
        kept = {i: split_backward_gradients(ir, ranges, i, rows) for i in range(stages)}
        walks = [walk(order[r], saved, loss, kept) for r in range(pp)]
        in_flight = [w.held for w in walks]
    out: list[dict[str, Any]] = []
    for rank in range(pp):
        mine = [figures[i] for i in held[rank]]
        rank_bytes: dict[str, int] = {
            "weights": sum(whole_bytes(st.weights, env) for st in mine),
            "gradients": sum(whole_bytes(st.gradients, env) for st in mine),
            "optimizer": sum(whole_bytes(st.optimizer_states, env) for st in mine),
            "activations": in_flight[rank],
        }
        rank_bytes["total"] = sum(rank_bytes.values())
        backwards = walks[rank].backwards if walks[rank] else None
        peak = pipeline_peak(
            ir, ranges, held[rank], in_flight[rank], micro_batches, seq, device, micro,
            backwards=backwards,
        )  # fmt: skip
        out.append(
            {"rank": rank, "stages": held[rank], **rank_bytes, "peak": peak.peak,
             "peak_moment": peak.moment}
        )  # fmt: skip
    return out


def _held_stages(schedule: str, pp: int, stages: int) -> list[list[int]]:
    """The stages each rank holds, as the generated pipeline() places them."""
    if stages == pp:
        return [[rank] for rank in range(pp)]
    # A multi-stage schedule, whose order imports torch anyway.
    from archspec.runtime.pipeline import pipeline_stage_indices

    v_shape = schedule == "ZBVZeroBubble"
    return [pipeline_stage_indices(not v_shape, v_shape, r, pp, stages // pp) for r in range(pp)]
