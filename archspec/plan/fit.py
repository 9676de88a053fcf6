"""Memory per device for many layouts at once: count's memory model, evaluated fast.

`archspec.backends.count.memory.memory_figures` builds every figure as a formula (tens of
milliseconds a layout); a search asks for thousands. The pieces it combines depend on few of
the layout's knobs: the activations of each layer on (tp, sp, recompute), the parameters of each
stage on (tp, pp). This module evaluates those pieces once, as numbers linear in the
micro-batch, and combines them as memory_figures does; tests/test_plan.py checks the two agree
byte for byte on a spread of layouts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import sympy as sp

from archspec.backends.count.activations import activation_parts
from archspec.backends.count.layout import Parallelism, stage_params
from archspec.backends.count.memory import (
    COMPUTE_BYTES,
    GRAD_BYTES,
    MASTER_BYTES,
    OPTIMIZER_BYTES,
    WEIGHT_BYTES,
)
from archspec.backends.count.passes import B, whole_sequences
from archspec.ir.nodes import IR
from archspec.plan.layers import stage_runs


@dataclass(frozen=True)
class Linear:
    """a + b·B: bytes at micro-batch B."""

    a: float
    b: float

    def at(self, batch: int) -> float:
        return self.a + self.b * batch


def _linear(expr, values) -> Linear:
    e = sp.sympify(expr).xreplace(values)
    at1, at2 = float(e.xreplace({B: 1})), float(e.xreplace({B: 2}))
    return Linear(2 * at1 - at2, at2 - at1)


@dataclass(frozen=True)
class StageBytes:
    stage: int
    params: int
    weights: float
    gradients: float
    optimizer: float
    activations: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations


class MemoryModel:
    def __init__(self, ir: IR, seq: int, dtype: str, grad_dtype: str, attn: str,
                 optimizer: str = "adamw"):  # fmt: skip
        self.ir = ir
        self.values = {**ir.env, **whole_sequences(seq)}
        self.dtype, self.grad_dtype, self.attn, self.optimizer = dtype, grad_dtype, attn, optimizer
        self.parts = lru_cache(maxsize=None)(self._parts)
        self.params = lru_cache(maxsize=None)(self._params)

    def _parts(self, tp: int, sp_: bool, recompute: str):
        parts = activation_parts(
            self.ir, COMPUTE_BYTES[self.dtype], self.attn, recompute, tp, sp_ and tp > 1
        )
        runs = [(self.ir.value(count), _linear(each, self.values)) for count, each in parts.layers]
        return (
            _linear(parts.before, self.values),
            runs,
            _linear(parts.after, self.values),
            _linear(parts.rebuilt, self.values),
            list(parts.spans),
        )

    def _params(self, tp: int, pp: int):
        par = Parallelism(gpus=tp * pp, tp=tp, pp=pp)
        return [(s.layers, int(s.params.xreplace(self.values))) for s in stage_params(self.ir, par)]

    def stages(self, par: Parallelism, micro: int, recompute: str) -> list[StageBytes]:
        """Bytes per device on every stage, as memory_figures counts them."""
        before, runs, after, rebuilt, spans = self.parts(par.tp, par.sp, recompute)
        states = OPTIMIZER_BYTES[self.optimizer] + (MASTER_BYTES if self.dtype != "fp32" else 0)
        out = []
        for stage, ((first, last), params) in enumerate(self.params(par.tp, par.pp)):
            chunks, per_chunk = par.in_flight(stage)
            layers = stage_runs(runs, spans, first, last)
            acts = chunks * sum(n * x.at(micro) for n, x in layers) / per_chunk
            if stage == 0:
                if par.interleave == 1:
                    held = min(par.pp, par.micro_batches)
                else:
                    held = min(2 * par.pp - 1, par.micro_batches)
                acts += held * before.at(micro)
            if stage == par.pp - 1:
                acts += after.at(micro)
            acts += rebuilt.at(micro)
            weights = float(WEIGHT_BYTES[self.dtype] * params)
            grads = float(GRAD_BYTES[self.grad_dtype] * params)
            opt = float(states * params)
            if par.zero >= 1:
                opt /= par.dp
            if par.zero >= 2:
                grads /= par.dp
            if par.zero >= 3:
                weights /= par.dp
            out.append(StageBytes(stage, params, weights, grads, opt, acts))
        return out

    def busiest(self, par: Parallelism, micro: int, recompute: str) -> StageBytes:
        return max(self.stages(par, micro, recompute), key=lambda s: s.total)


def with_micro_batches(par: Parallelism, m: int) -> Parallelism:
    return replace(par, micro_batches=m)
