"""The plan as plain data: what `archspec plan --json` prints and the tables render."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import sympy as sp

from archspec.backends.count.conventions import NO_RECOMPUTE, get_convention
from archspec.backends.count.flops import flop_figures
from archspec.backends.count.flops_report import Workload, whole
from archspec.backends.count.memory import COMPUTE_BYTES
from archspec.backends.count.op_checkpoint import OP
from archspec.backends.count.passes import B, whole_sequences
from archspec.backends.count.peak_report import workload_peaks
from archspec.backends.count.recompute_modules import CORE_ATTN, selective_modules
from archspec.backends.count.replay import NON_REENTRANT, full_replays
from archspec.errors import SpecError
from archspec.ir.nodes import IR
from archspec.plan.hardware import System
from archspec.plan.mtp import depth_flops
from archspec.plan.opcost import pass_costs
from archspec.plan.recompute_block import FULL, block_layers, full_share
from archspec.plan.search import Candidate, SearchResult, usable_memory
from archspec.plan.serve import ServePrediction
from archspec.plan.step import Layout, Training, checkpoint_of


def step_flops(ir: IR, run: Training, recompute: str,
               layout: Layout | None = None) -> tuple[int, int]:  # fmt: skip
    """(model FLOPs, hardware FLOPs) of one step over the global batch. Model FLOPs are the
    forward and backward as executed (every query-key pair, as FlopCounterMode counts them),
    without recomputation: the MFU of Chowdhery et al. 2022 (Appendix B) and Korthikanti et al.
    2022. Hardware FLOPs add what recomputation and the attention kernel replay: under `full:N`
    those of full recomputation over the share of the layers it checkpoints (`layout`'s
    chunks, recompute_block.py)."""
    if block_layers(recompute) is not None:
        if layout is None:
            raise ValueError(f"recompute {recompute} replays per pipeline chunk: give the layout")
        model, full = step_flops(ir, run, FULL)
        _, none = step_flops(ir, run, NO_RECOMPUTE)
        # The layers the pipeline splits, as the step counts them.
        stages = layout.bounds(sum(n for n, _ in pass_costs(ir, COMPUTE_BYTES[run.dtype],
                                                             run.attn).layers))  # fmt: skip
        layers = sum(b - a for a, b in stages)
        checkpointed = sum(full_share(recompute, (b - a) / layout.interleave) * (b - a)
                           for a, b in stages)  # fmt: skip
        return model, round(none + (full - none) * checkpointed / layers)
    values = {**ir.env, B: run.global_batch, **whole_sequences(run.seq)}
    conv = get_convention("executed")
    model = flop_figures(ir, conv, "eager", NO_RECOMPUTE).train_step
    modules = selective_modules(recompute)
    if recompute == OP or modules - {CORE_ATTN}:
        # Per-op checkpointing and Megatron-Core's recomputed modules replay ops, not
        # components: the ops the policy replays (the attention core through count's figures).
        costs = pass_costs(ir, COMPUTE_BYTES[run.dtype], run.attn)

        def replays(c) -> bool:
            return c.replayed_by_op_checkpoint if recompute == OP else c.recompute_module in modules

        replayed = sp.Add(*(n * c.flops for n, block in costs.layers for c in block
                            if replays(c)))  # fmt: skip
        core = "selective" if CORE_ATTN in modules else NO_RECOMPUTE
        hardware = flop_figures(ir, conv, run.attn, core).train_step + replayed
    else:
        hardware = flop_figures(ir, conv, run.attn, recompute).train_step
    checkpoint = checkpoint_of(run)
    if recompute == "full" and checkpoint != NON_REENTRANT:
        # count's full recomputation replays up to torch's early stop; a reentrant
        # checkpoint also what comes after it, a pruned one what the backward reads
        # (replay.py).
        costs = pass_costs(ir, COMPUTE_BYTES[run.dtype], run.attn)
        hardware += sp.Add(*(
            n * c.flops * (full_replays(c.past_early_stop, checkpoint, c.unread)
                           - full_replays(c.past_early_stop, NON_REENTRANT))
            for n, block in costs.layers for c in block))  # fmt: skip
    if run.mtp_layers:
        # Multi-token prediction's depths (mtp.py): forward and backward, three times the
        # forward's FLOPs; the model's every query-key pair, the hardware's as the kernel runs.
        depths = 3 * run.mtp_layers
        model += depths * depth_flops(ir, COMPUTE_BYTES[run.dtype], "eager")
        hardware += depths * depth_flops(ir, COMPUTE_BYTES[run.dtype], run.attn)
    return whole(model, values), whole(hardware, values)


def candidate_report(ir: IR, system: System, run: Training, c: Candidate) -> dict[str, Any]:
    t = c.time
    # MFU against the bf16 peak when training in fp8 (only the projections run in fp8, so
    # no single peak is the run's; NeMo's "model TFLOP/s" reads the same way).
    peak = system.accelerator.peak("bf16" if run.dtype == "fp8" else run.dtype) * run.gpus
    model_flops, hardware_flops = step_flops(ir, run, t.layout.recompute, t.layout)
    mem = c.memory
    peaks = layout_peaks(ir, run, t.layout, t.micro_batches)
    return {
        "step_time_s": t.seconds,
        "tokens_per_s": run.global_batch * run.seq / t.seconds,
        "mfu": model_flops / t.seconds / peak,
        "hfu": hardware_flops / t.seconds / peak,
        "layout": {
            **t.layout.as_dict(run.gpus),
            "micro_batches": t.micro_batches,
            **({"expert_load": t.expert_load} if t.layout.ep > 1 else {}),
        },
        "fits": c.fits,
        "memory": {
            "stage": mem.stage,
            "weights": round(mem.weights),
            "gradients": round(mem.gradients),
            "optimizer": round(mem.optimizer),
            "activations": round(mem.activations),
            "total": round(mem.total),
            "capacity": round(system.accelerator.memory_bytes),
            "usable": round(usable_memory(system.accelerator.memory_bytes)),
            **({"rank_peaks": peaks} if peaks is not None else {}),
        },
        "breakdown": dict(t.breakdown),
        "flops": {"model": model_flops, "hardware": hardware_flops},
    }


def layout_peaks(ir: IR, run: Training, layout: Layout, micro_batches: int) -> list | None:
    """Under the fsdp engine (torchtitan's FSDP2), each rank's peak of a training step as
    count gives it for the generated parallelize's layout (`workload_peaks`), where count
    covers the layout and settings; else None."""
    if run.engine != "fsdp":
        return None
    try:
        par = replace(
            layout.parallelism(run.gpus, micro_batches), engine="torch",
            stage_layers=layout.stage_layers, cp=layout.cp, ep=layout.ep,
        )  # fmt: skip
        w = Workload(
            batch=layout.micro_batch, global_batch=run.global_batch, seq=run.seq,
            dtype=run.dtype, grad_dtype=run.grad_dtype, recompute=layout.recompute,
            attn=run.attn, parallel=par,
        )  # fmt: skip
        return workload_peaks(ir, w)
    except SpecError:  # a layout the generated parallelize does not take
        return None


def header(ir: IR, system: System, run: Training) -> dict[str, Any]:
    return {
        "model": ir.name,
        "overrides": list(ir.identity.overrides),
        "system": system.key,
        "accelerator": system.accelerator.name,
        "gpus_per_node": system.gpus_per_node,
        "gpus": run.gpus,
        "global_batch": run.global_batch,
        "seq": run.seq,
        "dtype": run.dtype,
        "grad_dtype": run.grad_dtype,
        "attn": run.attn,
        "engine": run.engine,
        "checkpoint": checkpoint_of(run),  # what --recompute full runs (replay.py)
        **({"async_tp": True} if run.async_tp else {}),
        **({"fp8_all_gather": True} if run.fp8_all_gather else {}),
        "ep_dispatch": run.ep_dispatch,  # how --ep dispatches tokens (engines.py)
        # the busiest ep rank's routed rows over the mean; None: uniform routing's
        "moe_imbalance": run.moe_imbalance,
        "attn_kernel": run.attn_kernel,  # the fused attention kernel timed (attention_kernels.py)
        **({"mtp_layers": run.mtp_layers} if run.mtp_layers else {}),  # mtp.py's depths
    }


def search_report(
    ir: IR, system: System, run: Training, result: SearchResult, top: int
) -> dict[str, Any]:
    best = candidate_report(ir, system, run, result.ranked[0])
    ranked = [candidate_report(ir, system, run, c) for c in result.ranked[:top]]
    return {
        **header(ir, system, run),
        **best,
        "ranked": ranked,
        "search": {
            "considered": result.considered,
            "fit": len(result.ranked),
            "dropped": dict(result.dropped.most_common()),
        },
    }


def serve_report(ir: IR, system: System, p: ServePrediction, settings: dict) -> dict[str, Any]:
    return {
        "model": ir.name,
        "overrides": list(ir.identity.overrides),
        "system": system.key,
        "accelerator": system.accelerator.name,
        **settings,
        "prefill_s": p.prefill_s,
        "decode_token_s": p.decode_token_s,
        "generate_s": p.generate_s,
        "tokens_per_s": p.tokens_per_s,
        "batch_tokens_per_s": p.batch_tokens_per_s,
        "batch_tokens_per_s_per_gpu": p.batch_tokens_per_s_per_gpu,
        "memory": {
            "weights": round(p.weights_bytes),
            "kv_cache": round(p.kv_cache_bytes),
            "total": round(p.weights_bytes + p.kv_cache_bytes),
            "capacity": round(system.accelerator.memory_bytes),
            "usable": round(p.capacity_bytes),
        },
        "fits": p.fits,
    }
