"""Memory in bytes: weights, gradients, optimizer states, activations and the KV cache.

Like the FLOPs, every figure is a sympy expression in the batch `B`, the lengths `S`, `S_dec`
and `kv_len`, and the spec's dimensions, evaluated at the end.

Activations are the tensors autograd keeps for the backward pass, counted op by op over the
lowered forward (activations.py).

Parallelism splits the figures per device: tensor parallelism (`tp`) splits every weight matrix
and, with sequence parallelism, every activation; pipeline parallelism (`pp`) splits the layers;
data parallelism (`gpus / (tp·pp)` replicas) splits the batch, and ZeRO stages 1, 2 and 3
shard optimizer states, then gradients, then weights over the replicas.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from archspec.backends.count.activations import activation_bytes
from archspec.backends.count.conventions import NO_RECOMPUTE, RECOMPUTE
from archspec.backends.count.params import parameter_count
from archspec.backends.count.passes import KV_LEN, B, S
from archspec.errors import SpecError
from archspec.ir.nodes import IR, Attention, Stack
from archspec.ir.visit import walk

__all__ = ["Parallelism", "MemoryFigures", "activation_bytes", "kv_cache_bytes", "memory_figures"]

# Bytes per stored weight. int8 and int4 are weight-only quantisation (LLM.int8, GPTQ, AWQ):
# the weights are stored small but computed with in bf16, so activations, gradients and the KV
# cache stay 2 bytes.
WEIGHT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "int8": 1, "int4": sp.Rational(1, 2)}
COMPUTE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "int8": 2, "int4": 2}
# Optimizer state bytes per parameter: AdamW keeps two fp32 moments; 8-bit AdamW
# (bitsandbytes) two 1-byte moments (its per-block scales are left out: 4 bytes per 2048);
# SGD with momentum one fp32 buffer.
OPTIMIZER_BYTES = {"adamw": 8, "adamw8bit": 2, "sgd": 4}
MASTER_BYTES = 4  # mixed precision keeps an fp32 master copy of the weights beside the states
ATTN = ("eager", "flash")


@dataclass(frozen=True)
class Parallelism:
    gpus: int = 1
    tp: int = 1
    pp: int = 1
    zero: int = 0

    def __post_init__(self) -> None:
        for name in ("gpus", "tp", "pp"):
            if getattr(self, name) < 1:
                raise SpecError(f"--{name} must be at least 1")
        if self.zero not in (0, 1, 2, 3):
            raise SpecError("--zero takes a ZeRO stage: 0, 1, 2 or 3")
        if self.gpus % (self.tp * self.pp):
            raise SpecError(
                f"--gpus {self.gpus} is not a multiple of --tp {self.tp} × --pp {self.pp}",
                hint="the data-parallel degree is gpus / (tp·pp), a whole number",
            )

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp)


@dataclass(frozen=True)
class MemoryFigures:
    """Bytes per device, as expressions. `total` is a training step's; `inference_total` the
    weights and the KV cache."""

    dtype: str
    optimizer: str
    recompute: str
    attn: str
    parallel: Parallelism
    weights: sp.Expr
    gradients: sp.Expr
    optimizer_states: sp.Expr
    activations: sp.Expr
    kv_cache: sp.Expr

    @property
    def total(self) -> sp.Expr:
        return self.weights + self.gradients + self.optimizer_states + self.activations

    @property
    def inference_total(self) -> sp.Expr:
        return self.weights + self.kv_cache


def check_choice(value: str, choices, option: str) -> None:
    if value not in choices:
        raise SpecError(f"--{option} takes one of: {', '.join(choices)} (got '{value}')")


def memory_figures(
    ir: IR,
    dtype: str = "fp32",
    optimizer: str = "adamw",
    recompute: str = NO_RECOMPUTE,
    attn: str = "eager",
    parallel: Parallelism | None = None,
) -> MemoryFigures:
    check_choice(dtype, WEIGHT_BYTES, "dtype")
    check_choice(optimizer, OPTIMIZER_BYTES, "optimizer")
    check_choice(recompute, RECOMPUTE, "recompute")
    check_choice(attn, ATTN, "attn")
    par = parallel or Parallelism()
    params = parameter_count(ir.root)
    compute = COMPUTE_BYTES[dtype]
    states = OPTIMIZER_BYTES[optimizer] + (MASTER_BYTES if dtype != "fp32" else 0)
    # Tensor and pipeline parallelism split the model; ZeRO shards over the data replicas.
    model_shard = par.tp * par.pp
    weights = WEIGHT_BYTES[dtype] * params / model_shard
    gradients = compute * params / model_shard
    optimizer_states = states * params / model_shard
    if par.zero >= 1:
        optimizer_states /= par.dp
    if par.zero >= 2:
        gradients /= par.dp
    if par.zero >= 3:
        weights /= par.dp
    # Each replica holds B / dp sequences. Sequence parallelism splits every activation over
    # the tensor-parallel group. Under pipeline parallelism the 1F1B schedule keeps pp
    # micro-batches of L / pp layers in flight on the first stage: L layers' worth, as without.
    per_replica = {B: B / par.dp}
    activations = activation_bytes(ir, compute, attn, recompute).xreplace(per_replica) / par.tp
    kv = kv_cache_bytes(ir, compute).xreplace(per_replica) / (par.tp * par.pp)
    return MemoryFigures(
        dtype=dtype,
        optimizer=optimizer,
        recompute=recompute,
        attn=attn,
        parallel=par,
        weights=weights,
        gradients=gradients,
        optimizer_states=optimizer_states,
        activations=activations,
        kv_cache=kv,
    )


def kv_cache_bytes(ir: IR, bytes_per_value: int | sp.Expr = 2) -> sp.Expr:
    """Keys and values cached for generation, over the batch: every self-attention layer of the
    generating stack holds `kv_len` positions, every cross-attention layer the encoder's `S`.
    Encoder-only models generate nothing and cache nothing."""
    if ir.root.layout == "encoder":
        return sp.Integer(0)
    total = sp.Integer(0)
    for placed in walk(ir.root):
        node = placed.node
        if not isinstance(node, Attention):
            continue
        if any(isinstance(a, Stack) and a.role == "encoder" for a in placed.ancestors):
            continue
        positions = S if node.cross else KV_LEN
        per_position = 2 * node.n_kv_heads * node.head_dim  # one key and one value per head
        total += placed.copies * B * positions * per_position * bytes_per_value
    return total
