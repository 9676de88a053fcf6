"""`archspec bench --nproc N --pp N`: the launcher's side of a pipeline run. What is refused
before any process starts (a layout that does not divide, a model the stages cannot carry), and
the schedules by their command-line names."""

from __future__ import annotations

from dataclasses import replace

from archspec.backends.count.layout import layer_count
from archspec.backends.count.stages import parse_stage_layers
from archspec.errors import SpecError
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


def check_pipeline(
    ir: IR, dims: dict[str, int], pp: int, stage_layers: str | None, schedule: str
) -> tuple[tuple[int, ...], str]:
    """(layers of each stage, torch's schedule name) for `--pp`, or one clear refusal naming the
    values. `dims`: the mesh (`mesh_layout.mesh_dims`, which checked that it divides --nproc);
    each stage is laid out over dp_shard (FSDP2) and tp by the generated parallelize, not over
    cp or ep."""
    from archspec.backends.torchgen.features import Features
    from archspec.backends.torchgen.pipeline import refusal

    if schedule not in SCHEDULES:
        raise SpecError(
            f"--schedule {schedule!r} is not one of {', '.join(SCHEDULES)}",
        )
    if pp < 1:
        raise SpecError(f"--pp takes 1 or more stages (got {pp})")
    beside = {name: dims[name] for name in ("cp", "ep") if dims[name] > 1}
    if beside:
        what = ", ".join(f"--{name} {size}" for name, size in beside.items())
        raise SpecError(
            f"--pp {pp} with {what}: the generated pipeline lays its stages out over dp_shard "
            "(--zero 3) and --tp only",
        )
    if schedule in ("interleaved-zb", "zbv") and dims["dp_shard"] > 1:
        raise SpecError(
            f"--schedule {schedule} with --zero 3 over {dims['dp_shard']} data-parallel ranks: "
            "a zero-bubble schedule splits the backward in two, which FSDP2 does not follow "
            "(the sharded weights get no gradient)",
            hint="use 1f1b, gpipe, interleaved-1f1b or looped-bfs",
        )
    why = refusal(Features(ir))
    if why is not None:
        raise SpecError(why)
    name, per_rank = SCHEDULES[schedule]
    stages = pp * per_rank
    layers = sum(layer_count(stack, ir) for stack in ir.root.stacks)
    if per_rank > 1 and stage_layers is None and layers % stages:
        raise SpecError(
            f"--schedule {schedule} puts {per_rank} stages on each of the {pp} ranks: {stages} "
            f"stages do not divide the {layers} layers"
        )
    counts = parse_stage_layers(stage_layers, stages, layers)
    return counts, name


def stage_predictions(
    ir: IR, pp: int, counts: tuple[int, ...], schedule: str, batch: int, seq: int, device: str
) -> list[dict[str, object]]:
    """archspec's figures for each rank's stages (count --engine torch --pp --stage-layers), in
    bytes: fp32 weights, gradients and AdamW moments of the stages it holds (two under the
    looped and V schedules, each a model copy's share, a tied head's copy with the last), the
    saved tensors of the micro-batches it holds at its peak (each one sequence), and the peak
    of its step (`count.pipeline_peak`). Under 1F1B, count's micro-batches in flight; under
    the others, the schedule's own order walked (`count.schedule_walk`), the
    zero-bubble ones' backward in its two parts."""
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
    from archspec.bench.distributed import attention_that_runs
    from archspec.bench.pipeline_order import schedule_order
    from archspec.runtime.pipeline import pipeline_stage_indices

    attn = attention_that_runs(ir, device)
    stages = len(counts)
    par = Parallelism(gpus=stages, pp=stages, engine="torch", micro_batches=batch,
                      stage_layers=tuple(counts))  # fmt: skip
    env = {**ir.env, B: 1, S: seq, S_DEC: seq, KV_LEN: seq}
    figures = memory_figures(ir, attn=attn, parallel=par, device=device).stages
    one = memory_figures(ir, attn=attn, parallel=replace(par, micro_batches=1), device=device)
    saved = [whole_bytes(st.activations, env) for st in one.stages]  # one micro-batch each
    looped, v_shape = stages > pp and schedule != "ZBVZeroBubble", schedule == "ZBVZeroBubble"
    ranges = [range(first, last) for first, last in stage_ranges(counts)]
    held = [pipeline_stage_indices(looped, v_shape, r, pp, stages // pp) for r in range(pp)]
    # What each rank keeps in flight: under 1F1B (count's figure) stage s keeps
    # min(pp - s, micro-batches); under the others, what the order holds at most.
    walks: list = [None] * pp
    if schedule == "1F1B":
        in_flight = [whole_bytes(st.activations, env) for st in figures]
    else:
        order = schedule_order(schedule, held[0], stages, pp, batch)
        loss = {stages - 1: loss_saved(ir, seq)} if ir.root.lm_head is not None else {}
        kept = {i: split_backward_gradients(ir, ranges, i, seq) for i in range(stages)}
        walks = [walk(order[r], saved, loss, kept) for r in range(pp)]
        in_flight = [w.held for w in walks]
    out: list[dict[str, object]] = []
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
            ir, ranges, held[rank], in_flight[rank], batch, seq, device, backwards=backwards
        )
        out.append({**rank_bytes, "peak": peak.peak, "peak_moment": peak.moment, "attn": attn})
    return out
