"""`count --engine torch`'s peak of a training step per rank: the generated `parallelize`'s
layouts (tensor parallelism, FSDP2, FSDP2 beside tp, cp and ep: `rank_peak`, under balanced
routing) and the generated `pipeline`
under 1F1B (`pipeline_peak`, without tp or dp), fp32 training with AdamW and no
recomputation, on GPUs (the foreach AdamW, PyTorch's default there), with or without sequence
parallelism; without mixed precision or loss parallelism. Other settings get no per-rank
peak."""

from __future__ import annotations

from typing import Any

from archspec.backends.count.conventions import NO_RECOMPUTE
from archspec.backends.count.flops_report import Workload
from archspec.backends.count.layout import layer_count
from archspec.backends.count.passes import S
from archspec.errors import SpecError
from archspec.ir.nodes import IR


def workload_peaks(
    ir: IR, w: Workload, stages: list[dict[str, Any]] | None = None
) -> list[dict] | None:
    """[{rank, peak, moment}] for each rank, or None where the layout or settings are not
    covered. `stages`: the report's per-stage bytes (for the activations in flight; worked
    out here when not given)."""
    par = w.parallel
    micro, micro_batches = w.micro_batches()
    plain = (w.dtype, w.grad_dtype or w.dtype, w.optimizer, w.recompute) == (
        "fp32", "fp32", "adamw", NO_RECOMPUTE
    )  # fmt: skip
    # FSDP2's bf16 gathered parameters and gradients, and the loss over split logits, are not
    # in rank_peak's moments.
    options = par.mixed_precision or par.loss_parallel
    if par.engine != "torch" or not plain or par.interleave > 1 or options:
        return None
    seq = w.values(ir)[S]
    if par.pp > 1:
        if par.tp > 1 or par.dp > 1:
            return None
        from archspec.backends.count.pipeline_peak import pipeline_peak
        from archspec.backends.count.stages import stage_ranges

        ranges = [range(*span) for span in stage_ranges(_stage_layers(ir, par))]
        if stages is None:
            from archspec.backends.count.flops_report import figures, whole_bytes

            values = w.device_values(ir)
            kept = [stage.activations for stage in figures(ir, w)[1].stages]
            stages = [{"activations": whole_bytes(bytes_, values)} for bytes_ in kept]
        peaks = [
            pipeline_peak(
                ir, ranges, [s], stages[s]["activations"], micro_batches, seq, "cuda", micro
            )
            for s in range(par.pp)
        ]
    else:
        fsdp = par.dp > 1
        if micro_batches > 1 or (fsdp and par.zero != 3):
            return None
        from archspec.backends.count.rank_peak import rank_peaks

        dims = {"pp": 1, "dp_shard": par.dp // par.ep, "ep": par.ep, "cp": par.cp, "tp": par.tp}
        try:
            peaks = rank_peaks(ir, dims, micro, seq, "cuda", w.attn, par.sp)
        except SpecError:  # FSDP2 beside tp around units it does not count
            return None
    return [{"rank": p.rank, "peak": p.peak, "moment": p.moment} for p in peaks]


def _stage_layers(ir: IR, par) -> tuple[int, ...]:
    if par.stage_layers is not None:
        return tuple(par.stage_layers)
    layers = sum(layer_count(stack, ir) for stack in ir.root.stacks)
    return (layers // par.pp,) * par.pp
