"""One training step's time under one layout: the ops on the roofline, plus communication.

Per micro-batch, the slowest pipeline stage runs its layers' forward and backward (each op at
max(FLOPs / (peak × efficiency), bytes / (bandwidth × efficiency)), backward twice the forward,
a flash kernel's 2.5 times), tensor-parallel collectives after every row-parallel projection
(an all-reduce, or with sequence parallelism a reduce-scatter then an all-gather of the same
volume, in forward and backward: Korthikanti et al. 2022, Section 4.2.2), the replayed forward
of recomputation, and pipeline sends to the next stage (1/tp of the activations each, as
Megatron-LM's scatter-gather optimisation sends them: Narayanan et al. 2021, Section 4.1).
A step runs m micro-batches plus the pipeline bubble, (p - 1)/(V·m) of them (Narayanan et al.
2021, Section 2.2), then reduces gradients over data-parallel replicas (not overlapped, as in
the published Megatron-LM runs), and updates the weights (Adam reads and writes every state).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import sympy as sp

from archspec.backends.count.conventions import NO_RECOMPUTE
from archspec.backends.count.layout import Parallelism
from archspec.backends.count.memory import COMPUTE_BYTES, GRAD_BYTES
from archspec.backends.count.passes import B, whole_sequences
from archspec.ir.nodes import IR
from archspec.plan.collectives import all_gather, all_reduce, group_link, reduce_scatter, send
from archspec.plan.efficiency import CALIBRATED, Efficiency
from archspec.plan.hardware import System
from archspec.plan.layers import stage_runs
from archspec.plan.opcost import OpCost, PassCosts, pass_costs
from archspec.plan.roofline import Roofline

# Adam's update touches, per parameter: fp32 master weight, gradient and two moments read, the
# three written back, and the low-precision weight copy written (mixed precision).
OPTIMIZER_BYTES_PER_PARAM = 4 + 4 + 8 + 4 + 8 + 2

BREAKDOWN = ("compute", "recompute", "tp_comm", "pp_comm", "bubble", "dp_comm", "optimizer")


@dataclass(frozen=True)
class Layout:
    tp: int = 1
    pp: int = 1
    interleave: int = 1
    micro_batch: int = 1
    sp: bool = False
    recompute: str = NO_RECOMPUTE
    zero: int = 0

    def parallelism(self, gpus: int, micro_batches: int) -> Parallelism:
        return Parallelism(gpus, self.tp, self.pp, self.zero, self.sp, self.interleave,
                           micro_batches)  # fmt: skip

    def as_dict(self, gpus: int) -> dict[str, Any]:
        return {
            "tp": self.tp,
            "pp": self.pp,
            "dp": gpus // (self.tp * self.pp),
            "interleave": self.interleave,
            "micro_batch": self.micro_batch,
            "sp": self.sp,
            "recompute": self.recompute,
            "zero": self.zero,
        }


@dataclass(frozen=True)
class Training:
    """What a step runs beyond the layout."""

    gpus: int
    global_batch: int
    seq: int
    dtype: str = "bf16"
    grad_dtype: str = "fp32"
    attn: str = "flash"


@dataclass
class StepTime:
    layout: Layout
    micro_batches: int
    seconds: float
    breakdown: dict[str, float] = field(default_factory=dict)


class StepModel:
    """Times training steps of one model on one system, layout after layout. The op costs are
    lowered once; each micro-batch size evaluates them once."""

    def __init__(self, ir: IR, system: System, run: Training, eff: Efficiency = CALIBRATED):
        self.ir, self.system, self.run, self.eff = ir, system, run, eff
        self.c = COMPUTE_BYTES[run.dtype]
        self.roofline = Roofline.of(system.accelerator, run.dtype, eff)
        self.bandwidth = self.roofline.bandwidth
        self.costs: PassCosts = pass_costs(ir, self.c, run.attn)
        self.d_model = ir.value(ir.root.d_model)
        self.layers = sum(n for n, _ in self.costs.layers)
        self.numbers = lru_cache(maxsize=None)(self._numbers)

    # Costs as numbers.

    def _numbers(self, micro: int):
        values = {B: micro, **whole_sequences(self.run.seq)}

        def num(cost: OpCost):
            shape = tuple(float(sp.sympify(x).xreplace(values)) for x in cost.shape or ())
            return (cost, float(sp.sympify(cost.flops).xreplace(values)),
                    float(sp.sympify(cost.bytes).xreplace(values)), shape)  # fmt: skip

        runs = [(n, [num(c) for c in costs]) for n, costs in self.costs.layers]
        return [num(c) for c in self.costs.before], runs, [num(c) for c in self.costs.after]

    # The step.

    def step(self, layout: Layout) -> StepTime:
        run, sysm = self.run, self.system
        tp, pp, v = layout.tp, layout.pp, layout.interleave
        dp = run.gpus // (tp * pp)
        m = run.global_batch // (layout.micro_batch * dp)
        before, runs, after = self.numbers(layout.micro_batch)
        net = self.eff.network_peak
        tp_link = group_link(sysm, tp, 1, net)
        activation = layout.micro_batch * run.seq * self.d_model * self.c
        # Tensor-parallel collectives: one per row-parallel projection, forward and backward.
        row_parallel = sum(1 for c, *_ in runs[0][1] if c.tp == "row") if runs else 0
        if layout.sp and tp > 1:
            one = reduce_scatter(activation, tp, tp_link) + all_gather(activation, tp, tp_link)
        else:
            one = all_reduce(activation, tp, tp_link)
        layer_tp = 2 * row_parallel * one
        layer_tp_recompute = row_parallel * one if layout.recompute == "full" else 0.0
        per_stage = self.layers // pp
        # The embedding's forward and the head's backward all-reduce over the vocabulary.
        vocab_tp = all_reduce(activation, tp, tp_link)
        stages = []
        for st in range(pp):
            layers = stage_runs(runs, self.costs.spans, st * per_stage, (st + 1) * per_stage)
            ends = (before if st == 0 else []) + (after if st == pp - 1 else [])
            compute = rec = 0.0
            # Recomputation replays the blocks' forward only, not the embeddings or the head.
            for n, item, in_block in [(n, op, True) for n, ops in layers for op in ops] + [
                (1, op, False) for op in ends
            ]:
                t = self.roofline.op_time(item, tp, layout.sp)
                compute += n * (1 + item[0].backward) * t
                replay = layout.recompute == "full" or (
                    layout.recompute == "selective" and item[0].attn_core and run.attn != "flash"
                )
                if replay and in_block:
                    rec += n * t
            tp_comm = per_stage * layer_tp + vocab_tp * ((st == 0) + (st == pp - 1))
            rec_comm = per_stage * layer_tp_recompute
            stages.append((compute, rec + rec_comm, tp_comm, rec_comm))
        # p2p: each micro-batch crosses every chunk boundary forward and back.
        if pp > 1:
            pp_link = group_link(sysm, pp, tp * dp, net)
            share = activation / tp
            p2p = 2 * v * (send(share, pp_link) + all_gather(activation, tp, tp_link))
        else:
            p2p = 0.0
        compute, rec, tp_comm, rec_comm = max(stages, key=lambda st: st[0] + st[1] + st[2])
        per_micro = compute + rec + tp_comm + p2p
        bubble = (pp - 1) / v * per_micro
        # Data parallelism: gradients reduced once per step over the replicas (ZeRO 1-2: a
        # reduce-scatter and an all-gather of the updated weights, the same volume).
        dp_link = group_link(sysm, dp, tp, net)
        params = max(self.params_per_device(tp, pp))
        grads = params * GRAD_BYTES[run.grad_dtype]
        dp_comm = all_reduce(grads, dp, dp_link)
        if layout.zero >= 3:
            # Weights gathered for the forward and again for the backward of every micro-batch,
            # gradients reduce-scattered after each backward.
            weights = params * self.c
            gather, scatter = all_gather(weights, dp, dp_link), reduce_scatter(grads, dp, dp_link)
            dp_comm = m * (2 * gather + scatter)
        shard = dp if layout.zero >= 1 else 1
        optimizer = params / shard * OPTIMIZER_BYTES_PER_PARAM / self.bandwidth
        breakdown = {
            "compute": m * compute,
            "recompute": m * rec,
            "tp_comm": m * tp_comm,
            "pp_comm": m * p2p,
            "bubble": bubble,
            "dp_comm": dp_comm,
            "optimizer": optimizer,
        }
        return StepTime(layout, m, sum(breakdown.values()), breakdown)

    def params_per_device(self, tp: int, pp: int) -> list[int]:
        from archspec.plan.fit import MemoryModel  # the cached stage parameters

        if not hasattr(self, "_memory"):
            self._memory = MemoryModel(self.ir, self.run.seq, self.run.dtype,
                                       self.run.grad_dtype, self.run.attn)  # fmt: skip
        return [p for _, p in self._memory.params(tp, pp)]
