"""`count --engine torch`'s peak of a training step per rank: the generated `parallelize`'s
layouts (tensor parallelism, FSDP2, HSDP's replicas of FSDP2, FSDP2 beside tp, cp and ep:
`rank_peak`, under balanced routing) and the generated `pipeline` under each schedule
(`schedules.rank_figures`, as bench predicts it; without tp or dp), fp32 training with AdamW
and no recomputation, on GPUs (the foreach AdamW, PyTorch's default there), with or without
sequence parallelism, and FSDP2's mixed precision (mp_policy="bf16": FSDP2 alone, without
experts); without loss parallelism. Other settings get no per-rank peak (and `--schedule`,
whose figures are all per rank, is refused with them)."""

from __future__ import annotations

from typing import Any

from archspec.backends.count.conventions import NO_RECOMPUTE
from archspec.backends.count.flops_report import Workload
from archspec.backends.count.layout import layer_count
from archspec.backends.count.passes import S
from archspec.errors import SpecError
from archspec.ir.nodes import IR


def workload_peaks(ir: IR, w: Workload) -> list[dict] | None:
    """[{rank, peak, moment}] for each rank, or None where the layout or settings are not
    covered."""
    par = w.parallel
    micro, micro_batches = w.micro_batches()
    if _unpredicted(w) is not None:
        return None
    seq = w.values(ir)[S]
    if par.pp > 1:
        if par.tp > 1 or par.dp > 1:
            return None
        return _peaks(_rank_figures(ir, w))
    else:
        fsdp = par.dp > 1
        if micro_batches > 1 or (fsdp and par.zero != 3):
            return None
        from archspec.backends.count.rank_peak import rank_peaks

        dims = _mesh(par)
        try:
            peaks = rank_peaks(
                ir, dims, micro, seq, "cuda", w.attn, par.sp,
                mixed_precision=par.mixed_precision,
            )  # fmt: skip
        except SpecError:  # FSDP2 beside tp around units it does not count, mixed precision
            return None
    return [{"rank": p.rank, "peak": p.peak, "moment": p.moment} for p in peaks]


def _mesh(par) -> dict[str, int]:
    """The generated parallelize's mesh for `par` (`bench.mesh_layout.mesh_dims`'s: HSDP's
    dp_replicate only where there are replicas)."""
    replicas = par.dp_replicate
    shard = par.dp // (par.ep * replicas)
    hsdp = {"dp_replicate": replicas} if replicas > 1 else {}
    return {"pp": 1, **hsdp, "dp_shard": shard, "ep": par.ep, "cp": par.cp, "tp": par.tp}


def _unpredicted(w: Workload) -> str | None:
    """The setting of `w` the per-rank peak does not cover, in words; None if it covers all."""
    par = w.parallel
    if par.engine != "torch":
        return "--engine megatron"
    for option, value, plain in (
        ("dtype", w.dtype, "fp32"), ("grad-dtype", w.grad_dtype or w.dtype, "fp32"),
        ("optimizer", w.optimizer, "adamw"), ("recompute", w.recompute, NO_RECOMPUTE),
    ):  # fmt: skip
        if value != plain:
            return f"--{option} {value}"
    # The loss over split logits is not in rank_peak's moments (FSDP2's mixed precision is,
    # for FSDP2 alone without experts: `rank_peaks` refuses the rest).
    if par.loss_parallel:
        return "--loss-parallel"
    if par.interleave > 1:
        return f"--interleave {par.interleave}"
    return None


def schedule_memory(ir: IR, w: Workload, stages: list[dict[str, Any]]) -> dict[str, Any]:
    """count's memory entry under `--schedule`: each rank's bytes (`ranks`: the stages it
    holds, their parameters, weights, gradients, optimizer states and KV cache, the saved
    tensors it holds at their most, the peak of its step), the most loaded rank's (training
    total) as the headline. `stages`: the report's bytes of each stage on a rank alone."""
    why = _unpredicted(w)
    if why is not None:
        raise SpecError(
            f"--schedule {w.parallel.schedule} with {why}: each rank's figures are those of "
            "fp32 training with AdamW and no recomputation, as bench trains"
        )
    ranks = []
    for r in _rank_figures(ir, w):
        mine = [stages[s] for s in r["stages"]]
        held = {k: sum(st[k] for st in mine) for k in ("params", "kv_cache", "inference_total")}
        layers = {"layers": [list(stages[s]["layers"]) for s in r["stages"]]}
        ranks.append({"rank": r["rank"], "stages": r["stages"], **layers, **held, **r})
    busiest = max(ranks, key=lambda r: r["total"])
    memory = {k: v for k, v in busiest.items() if k not in ("peak", "peak_moment", "layers")}
    memory["ranks"] = ranks
    memory["rank_peaks"] = _peaks(ranks)
    return memory


def _peaks(ranks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"rank": r["rank"], "peak": r["peak"], "moment": r["peak_moment"]} for r in ranks]


def _rank_figures(ir: IR, w: Workload) -> list[dict[str, Any]]:
    """`schedules.rank_figures` for the pipeline of `w` (1F1B where no schedule is given), on
    GPUs."""
    from archspec.backends.count.schedules import check_schedule, rank_figures

    par = w.layout()
    name, per_rank = check_schedule(par.schedule or "1f1b")
    stages = par.pp * per_rank
    if par.stage_layers is not None:
        counts = tuple(par.stage_layers)
    else:
        counts = (sum(layer_count(stack, ir) for stack in ir.root.stacks) // stages,) * stages
    micro, micro_batches = w.micro_batches()
    named = (
        f"--global-batch {w.global_batch} (--batch {micro}: {micro_batches} micro-batches)"
        if w.global_batch is not None
        else f"1 micro-batch (--batch {micro}, no --global-batch)"
    )
    seq = w.values(ir)[S]
    return rank_figures(ir, par.pp, counts, name, micro_batches, seq, "cuda", w.attn, micro, named)
