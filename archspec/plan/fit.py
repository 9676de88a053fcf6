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
from archspec.backends.count.conventions import NO_RECOMPUTE
from archspec.backends.count.layout import Parallelism, layer_count, stage_params
from archspec.backends.count.memory import (
    COMPUTE_BYTES,
    GRAD_BYTES,
    MASTER_BYTES,
    OPTIMIZER_BYTES,
    WEIGHT_BYTES,
)
from archspec.backends.count.passes import B, whole_sequences
from archspec.backends.count.routed_load import routed_load_counter
from archspec.backends.count.te_activations import transformer_engine_counter
from archspec.ir.nodes import IR
from archspec.plan.layers import stage_runs
from archspec.plan.mtp import NORM_INPUTS_PER_POSITION
from archspec.plan.recompute_block import FULL, block_layers, full_share

KERNELS = ("pytorch", "transformer_engine")


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
                 optimizer: str = "adamw", kernels: str = "pytorch",
                 mtp_layers: int = 0):  # fmt: skip
        """`kernels`: whose layers keep the activations: "pytorch" (the generated code's, and
        Megatron-LM's of 2022: activations.py) or "transformer_engine" (Megatron-Core's with
        Transformer Engine's layers: te_activations.py). `mtp_layers`: multi-token
        prediction's depths on the last stage (mtp.py)."""
        if kernels not in KERNELS:
            raise ValueError(f"kernels is one of {', '.join(KERNELS)}, not {kernels!r}")
        self.kernels = kernels
        self.ir = ir
        self.values = {**ir.env, **whole_sequences(seq)}
        self.dtype, self.grad_dtype, self.attn, self.optimizer = dtype, grad_dtype, attn, optimizer
        self.seq, self.mtp_layers = seq, mtp_layers
        self.parts = lru_cache(maxsize=None)(self._parts)
        self.params = lru_cache(maxsize=None)(self._stage_params)
        self.expert_runs = expert_params_by_run(ir)

    def _parts(self, tp: int, sp_: bool, recompute: str, load: int = 1):
        """The activations' parts, the routed rows' at `load` times balanced routing's
        (routed_load.py: linear in it, so two loads give all)."""
        counter = None
        if self.kernels == "transformer_engine":
            counter = transformer_engine_counter(fp8=self.dtype == "fp8")
        if load != 1:
            counter = routed_load_counter(counter, load)
        parts = activation_parts(self.ir, COMPUTE_BYTES[self.dtype], self.attn, recompute, tp,
                                 sp_ and tp > 1, counter_class=counter)  # fmt: skip
        runs = [(self.ir.value(count), _linear(each, self.values)) for count, each in parts.layers]
        return (
            _linear(parts.before, self.values),
            runs,
            _linear(parts.after, self.values),
            _linear(parts.rebuilt, self.values),
            list(parts.spans),
        )

    def expert_share(self, bounds: tuple[int, int], tp: int, ep: int,
                     etp: int | None = None) -> float:  # fmt: skip
        """Expert parameters a device on the stage of `bounds` does not hold, of the 1/tp it
        would under tensor parallelism alone, with the experts dealt over `ep` ranks (each
        holds n_experts / ep of them) and split over `etp` (None: tp); negative where it holds
        more (etp below tp: its experts whole)."""
        etp = tp if etp is None else etp
        return self.experts_in(bounds) * (1 / tp - 1 / (ep * etp))

    def experts_in(self, bounds: tuple[int, int]) -> float:
        """The routed experts' parameters in the layers of `bounds`, whole."""
        return sum(max(0, min(last, bounds[1]) - max(first, bounds[0])) * each
                   for first, last, each in self.expert_runs)  # fmt: skip

    def _stage_params(self, tp: int, pp: int, stage_layers: tuple[int, ...] | None = None,
                      ep: int = 1, etp: int | None = None):  # fmt: skip
        """Parameters a device of each stage holds: its layers', and on the last stage those
        of multi-token prediction's depths (mtp.py)."""
        stages = self._params(tp, pp, stage_layers, ep, etp)
        if not self.mtp_layers:
            return stages
        layers = sum(layer_count(s, self.ir) for s in self.ir.root.stacks)
        # One layer of the decoder's last run: the middle stage of a split that leaves the
        # last but one layer alone on it (count deals the runs out: no cost grows with depth).
        alone = Parallelism(gpus=3 * tp, tp=tp, pp=3, stage_layers=(layers - 2, 1, 1))
        middle = stage_params(self.ir, alone)[1]
        layer = int(middle.params.xreplace(self.values)) - self.expert_share(
            (layers - 2, layers - 1), tp, ep, etp
        )
        d = self.ir.value(self.ir.root.d_model)
        depth = layer + 2 * d * d // tp + 3 * d
        table = self.ir.root.tok_emb
        head = self.ir.root.lm_head
        untied = head is not None and head.tied_to is None
        embedding = self.ir.value(table.num * table.dim) // tp if pp > 1 and untied else 0
        *rest, (bounds, last) = stages
        return [*rest, (bounds, last + self.mtp_layers * depth + embedding)]

    def _params(self, tp: int, pp: int, stage_layers: tuple[int, ...] | None = None,
                ep: int = 1, etp: int | None = None):  # fmt: skip
        if ep > 1:
            return [(bounds, int(p - self.expert_share(bounds, tp, ep, etp)))
                    for bounds, p in self._params(tp, pp, stage_layers)]  # fmt: skip
        if stage_layers is None:
            par = Parallelism(gpus=tp * pp, tp=tp, pp=pp)
            return [(s.layers, int(s.params.xreplace(self.values)))
                    for s in stage_params(self.ir, par)]  # fmt: skip
        # Uneven stages: count deals layers out evenly, so take it one layer per stage (the
        # embeddings on the first, the head on the last) and add the layers up.
        per_layer = self._params(tp, sum(stage_layers))
        out, first = [], 0
        for n in stage_layers:
            params = sum(p for _, p in per_layer[first : first + n])
            out.append(((first, first + n), params))
            first += n
        return out

    def stages(self, par: Parallelism, micro: int, recompute: str,
               stage_layers: tuple[int, ...] | None = None,
               ep: int = 1, offload: int = 0, etp: int | None = None,
               load: float = 1.0) -> list[StageBytes]:  # fmt: skip
        """Bytes per device on every stage, as memory_figures counts them. With expert
        parallelism a device holds 1/ep of the experts' weights and gradients; ZeRO shards the
        experts' optimizer states over the dp/ep replicas of each expert, which comes to the
        same 1/dp of all states. With `offload` layers' activations offloaded to the host (one
        stage, checked by request.py), the device holds at most the other layers' worth at any
        time (offloaded_activations). `load`: the rows the busiest expert-parallel rank's
        experts receive over balanced routing's, which its routed activations scale with."""
        states = OPTIMIZER_BYTES[self.optimizer] + (MASTER_BYTES if self.dtype != "fp32" else 0)
        out = []
        whole = self.params(par.tp, par.pp, stage_layers)
        own = self.params(par.tp, par.pp, stage_layers, ep, etp)  # less the others' experts
        for stage, (((first, last), params), (_, full)) in enumerate(zip(own, whole, strict=True)):
            acts = self.activations(par, micro, recompute, stage, (first, last), offload)
            if load != 1:  # linear in the load: balanced routing's and the routed rows' share
                doubled = self.activations(par, micro, recompute, stage, (first, last), offload,
                                           load=2)  # fmt: skip
                acts += (load - 1) * (doubled - acts)
            weights = float(WEIGHT_BYTES[self.dtype] * params)
            grads = float(GRAD_BYTES[self.grad_dtype] * params)
            opt = float(states * params)
            # ZeRO shards over the ranks holding the same weights: dp·cp.
            if par.zero >= 1:
                opt = float(states * full) / par.data_ranks
            if par.zero >= 2:
                grads /= par.data_ranks
            if par.zero >= 3:
                weights /= par.data_ranks
            out.append(StageBytes(stage, params, weights, grads, opt, acts))
        return out

    def activations(self, par: Parallelism, micro: int, recompute: str, stage: int,
                    bounds: tuple[int, int], offload: int = 0, load: int = 1) -> float:  # fmt: skip
        """Activation bytes a device of `stage` (its layers in `bounds`) holds at its peak.
        Under `full:N` (recompute_block.py) the chunks' layers keep what full recomputation
        keeps over the share it checkpoints and the rest what none keeps, and the one layer
        replayed at a time its working set."""
        if block_layers(recompute) is not None:
            share = full_share(recompute, (bounds[1] - bounds[0]) / par.interleave)
            full = self.activations(par, micro, FULL, stage, bounds, load=load)
            none = self.activations(par, micro, NO_RECOMPUTE, stage, bounds, load=load)
            rebuilt = self.parts(par.tp, par.sp, FULL, load)[3].at(micro)
            return none + share * (full - rebuilt - none) + rebuilt
        before, runs, after, rebuilt, spans = self.parts(par.tp, par.sp, recompute, load)
        chunks, per_chunk = par.in_flight(stage)
        layers = stage_runs(runs, spans, *bounds)
        acts = chunks * sum(n * x.at(micro) for n, x in layers) / per_chunk
        if offload:
            acts = offloaded_activations(layers, micro, offload)
        if stage == 0:
            if par.interleave == 1:
                held = min(par.pp, par.micro_batches)
            else:
                held = min(2 * par.pp - 1, par.micro_batches)
            acts += held * before.at(micro)
        if stage == par.pp - 1:
            acts += after.at(micro)
            if self.mtp_layers:
                # Each depth: the decoder's last layer, the head and loss again, and its norms'
                # and projection's inputs (mtp.py).
                d = self.ir.value(self.ir.root.d_model)
                positions = micro * self.seq / (par.tp if par.sp else 1)
                inputs = NORM_INPUTS_PER_POSITION * d * positions * COMPUTE_BYTES[self.dtype]
                acts += self.mtp_layers * (runs[-1][1].at(micro) + after.at(micro) + inputs)
        return acts + rebuilt.at(micro)

    def busiest(self, par: Parallelism, micro: int, recompute: str,
                stage_layers: tuple[int, ...] | None = None,
                ep: int = 1, offload: int = 0, etp: int | None = None,
                load: float = 1.0) -> StageBytes:  # fmt: skip
        return max(self.stages(par, micro, recompute, stage_layers, ep, offload, etp, load),
                   key=lambda s: s.total)  # fmt: skip

    def layer_activations(self, tp: int, sp_: bool, micro: int) -> list[float]:
        """Each layer's activation bytes at micro-batch `micro`, first layer first, without
        recomputation (what activation offloading moves to the host and back)."""
        _, runs, _, _, spans = self.parts(tp, sp_, NO_RECOMPUTE)
        return each_layer(stage_runs(runs, spans, 0, sum(n for n, _ in runs)), micro)


def each_layer(layers: list[tuple[int, Linear]], micro: int) -> list[float]:
    """(count, bytes) runs of layers as one figure per layer, at micro-batch `micro`."""
    return [x.at(micro) for n, x in layers for _ in range(n)]


def offloaded_activations(layers: list[tuple[int, Linear]], micro: int, offload: int) -> float:
    """The most activation bytes a device holds when the first `offload` of its layers are
    offloaded to the host: at most (layers - offload) layers' sets are on the device at any
    time (Transformer Engine's CPU offloading, which Megatron-Core's `cpu_offloading_num_layers`
    runs: "At most (model_layers - num_layers) sets of activations are on GPU at any time",
    docs/features/other_optimizations/cpu_offloading at TransformerEngine d0067d0), so the
    most of any window of that many consecutive layers."""
    each = each_layer(layers, micro)
    window = len(each) - offload
    return max(sum(each[i : i + window]) for i in range(len(each) - window + 1))


def expert_params_by_run(ir: IR) -> list[tuple[int, int, float]]:
    """(first layer, last layer, the routed experts' parameters in each) of every run of
    layers, in pipeline order: 0 in a dense run (DeepSeek-V3's first three layers, whose stage
    holds no experts). A run is one entry however deep."""
    from archspec.backends.count.params import parameter_count
    from archspec.ir.nodes import MoE
    from archspec.ir.visit import walk

    out: list[tuple[int, int, float]] = []
    first = 0
    for stack in ir.root.stacks:
        for run in stack.blocks.runs:
            experts = sum(
                float((placed.copies * parameter_count(placed.node.experts)).xreplace(ir.env))
                for placed in walk(run.node)
                if isinstance(placed.node, MoE)
            )
            calls = ir.value(run.calls)
            out.append((first, first + calls, experts))
            first += calls
    return out


def with_micro_batches(par: Parallelism, m: int) -> Parallelism:
    return replace(par, micro_batches=m)
