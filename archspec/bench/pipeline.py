"""`archspec bench --nproc N --pp N`: the launcher's side of a pipeline run. What is refused
before any process starts (a layout that does not divide, a model the stages cannot carry), and
the schedules by their command-line names."""

from __future__ import annotations

from archspec.backends.count.layout import layer_count
from archspec.backends.count.schedules import check_schedule
from archspec.backends.count.stages import parse_stage_layers
from archspec.errors import SpecError
from archspec.ir.nodes import IR


def check_pipeline(
    ir: IR, dims: dict[str, int], pp: int, stage_layers: str | None, schedule: str
) -> tuple[tuple[int, ...], str]:
    """(layers of each stage, torch's schedule name) for `--pp`, or one clear refusal naming the
    values. `dims`: the mesh (`mesh_layout.mesh_dims`, which checked that it divides --nproc);
    each stage is laid out over dp_shard (FSDP2) and tp by the generated parallelize, not over
    cp or ep."""
    from archspec.backends.torchgen.features import Features
    from archspec.backends.torchgen.pipeline import refusal

    name, per_rank = check_schedule(schedule)
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
    """archspec's figures for each rank's stages, in bytes, as `count --engine torch --pp
    --schedule` gives them (`count.schedules.rank_figures`), each micro-batch one sequence."""
    from archspec.backends.count.schedules import rank_figures
    from archspec.bench.distributed import attention_that_runs

    attn = attention_that_runs(ir, device)
    ranks = rank_figures(ir, pp, counts, schedule, batch, seq, device, attn)
    keys = ("weights", "gradients", "optimizer", "activations", "total", "peak", "peak_moment")
    return [{**{k: rank[k] for k in keys}, "attn": attn} for rank in ranks]
