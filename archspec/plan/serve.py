"""Serving: the prefill of a batch of prompts, then one token at a time against the KV cache.

The prefill is a forward over the prompts, every op on the roofline (compute-bound for long
prompts). A decode step runs the same layers for one position per sequence: each weight is read
once per step for the whole batch and each sequence's keys and values once, so at small batches
it is bound by memory bandwidth (the op costs of the decode pass carry those bytes: a linear's
weight, an attention's cache). Tensor parallelism splits both, and adds two all-reduces per
layer, which for a single position cost mostly their latency. A decode step's time is linear in
the cached positions, so the mean over the generated tokens is the step at the middle one.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from archspec.backends.count.layout import Parallelism
from archspec.backends.count.memory import COMPUTE_BYTES, memory_figures
from archspec.backends.count.passes import KV_LEN, S_DEC, B, S
from archspec.errors import SpecError
from archspec.ir.nodes import IR
from archspec.plan.collectives import all_reduce, group_link
from archspec.plan.efficiency import CALIBRATED, Efficiency
from archspec.plan.hardware import System
from archspec.plan.opcost import PassCosts, decode_costs, pass_costs
from archspec.plan.roofline import Roofline
from archspec.plan.search import USABLE_MEMORY


@dataclass(frozen=True)
class ServePrediction:
    prefill_s: float
    decode_token_s: float  # one decode step (a token for every sequence), mean over generation
    tokens_per_s: float  # generated tokens per second, all replicas
    weights_bytes: float
    kv_cache_bytes: float
    capacity_bytes: float

    @property
    def fits(self) -> bool:
        return self.weights_bytes + self.kv_cache_bytes <= self.capacity_bytes


def _pass_time(costs: PassCosts, values, tp: int, model: Roofline, per_layer_comm: float) -> float:
    total = 0.0
    runs = [(1, costs.before), *costs.layers, (1, costs.after)]  # a run's time times its layers
    for n, cost in ((n, cost) for n, each in runs for cost in each):
        if cost.label == "loss":
            continue  # serving computes no loss
        shape = tuple(float(sp.sympify(x).xreplace(values)) for x in cost.shape or ())
        item = (cost, float(sp.sympify(cost.flops).xreplace(values)),
                float(sp.sympify(cost.bytes).xreplace(values)), shape)  # fmt: skip
        total += n * model.op_time(item, tp, False)
    layers = sum(n for n, _ in costs.layers)
    return total + layers * per_layer_comm


def predict_serving(
    ir: IR,
    system: System,
    batch: int,
    prompt: int,
    new_tokens: int,
    tp: int = 1,
    gpus: int | None = None,
    dtype: str = "bf16",
    eff: Efficiency = CALIBRATED,
) -> ServePrediction:
    for name, value in (("tp", tp), ("batch", batch), ("prompt", prompt),
                        ("new-tokens", new_tokens)):  # fmt: skip
        if value < 1:
            raise SpecError(f"--{name} must be at least 1")
    gpus = gpus or tp
    if gpus % tp:
        raise SpecError(f"--gpus {gpus} is not a multiple of --tp {tp}")
    if tp > system.gpus_per_node:
        raise SpecError(
            f"--tp {tp} spans more than one node of {system.gpus_per_node} accelerators",
            hint="serving keeps a tensor-parallel group inside a node",
        )
    c = COMPUTE_BYTES[dtype]
    model = Roofline.of(system.accelerator, dtype, eff)
    link = group_link(system, tp, 1, eff.network_peak)
    d = ir.value(ir.root.d_model)
    # An encoder-decoder reads the prompt with its encoder; its decoder starts from one start
    # token and caches only the positions it generates (the encoder's are cross-attention's S).
    fed = 1 if ir.root.layout == "encoder-decoder" else prompt
    prefill_values = {B: batch, S: prompt, S_DEC: fed, KV_LEN: fed}
    prefill_comm = 2 * all_reduce(batch * prompt * d * c, tp, link)
    prefill = _pass_time(pass_costs(ir, c, "flash"), prefill_values, tp, model, prefill_comm)
    dec = decode_costs(ir, c)
    if dec is None:
        raise SpecError(f"{ir.name} is encoder-only: it generates no tokens")
    middle = fed + (new_tokens + 1) // 2
    decode_values = {B: batch, S: prompt, S_DEC: fed, KV_LEN: middle}
    decode_comm = 2 * all_reduce(batch * d * c, tp, link)
    decode = _pass_time(dec, decode_values, tp, model, decode_comm)
    figures = memory_figures(ir, dtype, parallel=Parallelism(gpus=tp, tp=tp))
    full = {**ir.env, B: batch, S: prompt, S_DEC: fed, KV_LEN: fed + new_tokens}
    weights = float(figures.weights.xreplace(full))
    kv = float(figures.kv_cache.xreplace(full))
    replicas = gpus // tp
    return ServePrediction(
        prefill_s=prefill,
        decode_token_s=decode,
        tokens_per_s=replicas * batch / decode,
        weights_bytes=weights,
        kv_cache_bytes=kv,
        capacity_bytes=system.accelerator.memory_bytes * USABLE_MEMORY,
    )
