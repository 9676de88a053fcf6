"""`archspec bench --nproc N --pp N`: the launcher's side of a pipeline run. What is refused
before any process starts (a layout that does not divide, a model the stages cannot carry), and
the schedules by their command-line names."""

from __future__ import annotations

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
    ir: IR, nproc: int, tp: int, zero: int, pp: int, stage_layers: str | None, schedule: str
) -> tuple[tuple[int, ...], str]:
    """(layers of each stage, torch's schedule name) for `--pp`, or one clear refusal naming the
    values. Pipelines run alone: every process one pipeline rank."""
    from archspec.backends.torchgen.features import Features
    from archspec.backends.torchgen.pipeline import refusal

    if schedule not in SCHEDULES:
        raise SpecError(
            f"--schedule {schedule!r} is not one of {', '.join(SCHEDULES)}",
        )
    if pp < 1:
        raise SpecError(f"--pp takes 1 or more stages (got {pp})")
    if pp != nproc or tp != 1 or zero != 0:
        raise SpecError(
            f"--pp {pp} with --nproc {nproc}, --tp {tp}, --zero {zero}: a pipeline runs on every "
            "process, alone",
            hint=f"use --nproc {pp} --pp {pp} (pipelines with tensor or data parallelism are "
            "not launched yet)",
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
) -> list[dict[str, object] | None]:
    """archspec's figures for each rank's stage (count --engine torch --pp --stage-layers): fp32
    weights, gradients and AdamW moments of the stage, and, under 1F1B, the saved tensors of the
    micro-batches it holds at its peak (stage s: min(pp - s, micro-batches), each one sequence),
    in bytes. None where a rank holds several stages (the looped and V schedules); no
    activations under GPipe's other timing."""
    from archspec.backends.count.flops import KV_LEN, S_DEC, B, S
    from archspec.backends.count.flops_report import whole_bytes
    from archspec.backends.count.memory import Parallelism, memory_figures
    from archspec.bench.distributed import attention_that_runs

    if len(counts) != pp:
        return [None] * pp
    attn = attention_that_runs(ir, device)
    par = Parallelism(
        gpus=pp, pp=pp, engine="torch", micro_batches=batch, stage_layers=tuple(counts)
    )
    env = {**ir.env, B: 1, S: seq, S_DEC: seq, KV_LEN: seq}
    out: list[dict[str, object] | None] = []
    for stage in memory_figures(ir, attn=attn, parallel=par, device=device).stages:
        figures = {
            "weights": whole_bytes(stage.weights, env),
            "gradients": whole_bytes(stage.gradients, env),
            "optimizer": whole_bytes(stage.optimizer_states, env),
        }
        if schedule == "1F1B":
            figures["activations"] = whole_bytes(stage.activations, env)
            figures["total"] = sum(figures.values())
        out.append({**figures, "attn": attn})
    return out
