"""Memory in bytes: weights, gradients, optimizer states, activations and the KV cache.

Like the FLOPs, every figure is a sympy expression in the batch `B`, the lengths `S`, `S_dec`
and `kv_len`, and the spec's dimensions, evaluated at the end.

Activations are the tensors autograd keeps for the backward pass, counted op by op over the
lowered forward (activations.py).

Parallelism splits the figures per device (layout.py): tensor parallelism splits heads, hidden
units and the vocabulary, and with sequence parallelism what it leaves whole; pipeline stages
hold consecutive layers and the activations of the micro-batches in flight; data-parallel
replicas each run whole sequences, and ZeRO stages 1, 2 and 3 shard optimizer states, then
gradients, then weights over them (and the cp ranks beside them).

Context parallelism (`cp`): Megatron-Core runs the whole model on each rank's S / cp
positions, its ring attention keeping the rank's own chunk of keys and values (flash
attention: the fused kernel's; the eager path's S / cp × S probabilities are not counted);
the generated parallelize runs only the blocks on them, all-gathering the keys and values
(`rank_activations.layout_counter`, the figure bench checks). Expert parallelism (`ep`): a
device holds n_experts / ep of the routed experts (`layout.stage_params`), whose states ZeRO
shards over the ranks holding the same experts, as Megatron-Core's optimizer shards expert
parameters over its expert data-parallel group and dense ones over dp × cp
(NVIDIA/Megatron-LM megatron/core/optimizer/__init__.py, `get_megatron_optimizer`: the
dense states over `intra_dp_cp_group`, the experts' over `intra_expt_dp_group`, of
dp·cp·tp / (etp·ep) ranks with the expert tensor-parallel size etp defaulting to tp, as
megatron/core/transformer/moe/README.md lists `--expert-tensor-parallel-size`) and the
generated parallelize's FSDP2 shards a rank's experts over dp_shard and the rest over
dp_shard × ep (`torchgen.parallel_layouts.data_parallel`). Routing is balanced: the rows a
rank's experts receive equal what its tokens send, so Megatron's per-rank activations are one
process's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import sympy as sp

from archspec.backends.count.activations import activation_bytes, activation_parts
from archspec.backends.count.conventions import NO_RECOMPUTE
from archspec.backends.count.layout import (
    Parallelism,
    check_layout,
    layer_count,
    overlap,
    stage_params,
)
from archspec.backends.count.op_checkpoint import PLAN_RECOMPUTE
from archspec.backends.count.passes import S, decode_pass
from archspec.errors import SpecError, did_you_mean
from archspec.ir import ops
from archspec.ir.lower import Segment, lower, lower_block, lower_model, lower_stack
from archspec.ir.nodes import IR, Attention, Block, within
from archspec.ir.visit import walk

__all__ = ["Parallelism", "MemoryFigures", "activation_bytes", "kv_cache_bytes", "memory_figures"]

# Bytes per stored weight. int8 and int4 are weight-only quantisation (LLM.int8, GPTQ, AWQ):
# the weights are stored small but computed with in bf16, so activations, gradients and the KV
# cache stay 2 bytes.
# fp8 is training as torchao.float8 runs it on an H100 (convert_to_float8_training: the model
# in bf16, each nn.Linear swapped for a Float8Linear): the matmuls cast their inputs to fp8 on
# the fly, while the weights stay bf16 and are the master copy the optimizer updates, its
# states in the parameters' dtype, bf16 (torch.optim keeps them like the parameter), and
# autograd keeps the bf16 inputs (matmul_with_hp_or_float8_args saves input_hp and
# weight_hp_t). So activations and gradients are bf16 and the fp8 copies are transient.
WEIGHT_BYTES = {
    "fp32": 4, "bf16": 2, "fp16": 2, "fp8": 2, "int8": 1, "int4": sp.Rational(1, 2),
}  # fmt: skip
COMPUTE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 2, "int8": 2, "int4": 2}
FP8_TRAINING = (
    "torchao.float8's training: fp8 matmul inputs cast on the fly, bf16 weights that are "
    "their own master copy, bf16 gradients and optimizer states, bf16 activations"
)
# Optimizer state bytes per parameter: AdamW keeps two fp32 moments; 8-bit AdamW
# (bitsandbytes) two 1-byte moments (its per-block scales are left out: 4 bytes per 2048);
# SGD with momentum one fp32 buffer.
OPTIMIZER_BYTES = {"adamw": 8, "adamw8bit": 2, "sgd": 4}
MASTER_BYTES = 4  # mixed precision keeps an fp32 master copy of the weights beside the states
# Bytes per gradient: the dtype gradients are kept and reduced in (Megatron-LM accumulates and
# all-reduces them in fp32: 18 bytes per parameter with Adam and fp16 weights).
GRAD_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
ATTN = ("eager", "flash")


@dataclass(frozen=True)
class StageMemory:
    """Bytes one device of one pipeline stage holds, as expressions in the micro-batch `B` (the
    sequences the device runs at once) and the lengths."""

    stage: int
    layers: tuple[int, int]  # [first, last) of all layers, the encoder's first
    params: int  # parameters on the device, after tensor parallelism
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


@dataclass(frozen=True)
class MemoryFigures:
    """Bytes per device for every pipeline stage. The figures on the object itself are the
    first stage's (with one stage, the only one): under 1F1B it keeps the most micro-batches
    in flight. `total` is a training step's; `inference_total` the weights and the KV cache."""

    dtype: str
    optimizer: str
    recompute: str
    attn: str
    parallel: Parallelism
    grad_dtype: str
    stages: tuple[StageMemory, ...]
    device: str = "cuda"  # "cpu": PyTorch's math attention keeps its dropout mask as floats

    @property
    def first(self) -> StageMemory:
        return self.stages[0]

    @property
    def weights(self) -> sp.Expr:
        return self.first.weights

    @property
    def gradients(self) -> sp.Expr:
        return self.first.gradients

    @property
    def optimizer_states(self) -> sp.Expr:
        return self.first.optimizer_states

    @property
    def activations(self) -> sp.Expr:
        return self.first.activations

    @property
    def kv_cache(self) -> sp.Expr:
        return self.first.kv_cache

    @property
    def total(self) -> sp.Expr:
        return self.first.total

    @property
    def inference_total(self) -> sp.Expr:
        return self.first.inference_total


def check_choice(value: str, choices, option: str) -> None:
    if value not in choices:
        raise SpecError(f"--{option} takes one of: {', '.join(choices)} (got '{value}')",
                        hint=did_you_mean(value, choices))  # fmt: skip


def memory_figures(
    ir: IR,
    dtype: str = "fp32",
    optimizer: str = "adamw",
    recompute: str = NO_RECOMPUTE,
    attn: str = "eager",
    parallel: Parallelism | None = None,
    grad_dtype: str | None = None,
    device: str = "cuda",
) -> MemoryFigures:
    """Bytes per device on every pipeline stage (see `Parallelism` for the layout)."""
    check_choice(dtype, WEIGHT_BYTES, "dtype")
    check_choice(optimizer, OPTIMIZER_BYTES, "optimizer")
    check_choice(recompute, PLAN_RECOMPUTE, "recompute")
    check_choice(attn, ATTN, "attn")
    grad_dtype = grad_dtype or ("bf16" if dtype in ("int8", "int4", "fp8") else dtype)
    check_choice(grad_dtype, GRAD_BYTES, "grad-dtype")
    par = parallel or Parallelism()
    check_layout(ir, par)
    compute = COMPUTE_BYTES[dtype]
    if par.mixed_precision:  # FSDP2 computes in bf16 from fp32 parameters
        if dtype != "fp32":
            raise SpecError(f"--mixed-precision keeps fp32 parameters: --dtype fp32, not {dtype}")
        compute = COMPUTE_BYTES["bf16"]
    if dtype == "fp8":
        # The states in bf16, like the bf16 parameters (8-bit AdamW's stay one byte each); the
        # bf16 weights are the master copy.
        states = (
            OPTIMIZER_BYTES[optimizer]
            if optimizer == "adamw8bit"
            else (OPTIMIZER_BYTES[optimizer] // 2)
        )
    else:
        states = OPTIMIZER_BYTES[optimizer] + (MASTER_BYTES if dtype != "fp32" else 0)
    parts = _rank_parts(ir, compute, attn, recompute, par, device)
    # Each run of blocks with its layers, a range (never one entry per layer).
    runs = [(span, each) for span, (_, each) in zip(parts.spans, parts.layers, strict=True)]
    kv = kv_cache_bytes(ir, compute) / sp.Min(par.tp, _kv_heads(ir))
    generating = _generating_layers(ir)
    stages = []
    for st in stage_params(ir, par):
        first, last = st.layers
        chunks, per_chunk = par.in_flight(st.stage)
        layers = sp.Add(*(within(span, first, last) * each for span, each in runs))
        acts = chunks * layers / per_chunk
        if st.stage == 0:
            # The embeddings of every micro-batch the first chunk holds.
            held = (
                min(par.pp, par.micro_batches)
                if par.interleave == 1
                else min(2 * par.pp - 1, par.micro_batches)
            )
            acts += held * parts.before
        elif par.engine == "torch":
            acts += chunks * parts.shared  # each stage builds the angles and mask it keeps
        if st.stage == par.pp - 1:
            acts += parts.after  # the last stage runs each micro-batch's backward at once
        acts += parts.rebuilt
        weights = WEIGHT_BYTES[dtype] * st.params
        gradients = GRAD_BYTES[grad_dtype] * st.params
        optimizer_states = states * st.params
        # ZeRO shards over the data-parallel replicas (and cp ranks): optimizer states, then
        # gradients, then weights; a routed expert's over the ranks holding the same experts.
        shards = _zero_shards(st.params, st.experts, par)
        if par.zero >= 1:
            optimizer_states = states * shards
        if par.zero >= 2:
            gradients = GRAD_BYTES[grad_dtype] * shards
        if par.zero >= 3:
            weights = WEIGHT_BYTES[dtype] * shards
        in_stage = overlap(generating, (first, last))
        total = generating[1] - generating[0]
        cache = kv * in_stage / total if total else sp.Integer(0)
        stages.append(
            StageMemory(
                st.stage, st.layers, st.params, weights, gradients, optimizer_states, acts, cache
            )
        )
    return MemoryFigures(dtype, optimizer, recompute, attn, par, grad_dtype, tuple(stages), device)


def _zero_shards(params: sp.Expr, experts: sp.Expr, par: Parallelism) -> sp.Expr:
    """Of a device's `params` (`experts` of them routed experts'), the elements its ZeRO
    shard holds."""
    return (params - experts) / par.data_ranks + experts / par.expert_data_ranks


def _rank_parts(ir: IR, compute, attn: str, recompute: str, par: Parallelism, device: str):
    """What one rank keeps, by part (`activation_parts`), under the layout's cp and ep."""
    sequence_parallel = par.sp and par.tp > 1
    if par.engine == "torch":
        from archspec.backends.count.rank_activations import layout_counter

        counter = layout_counter(par.cp, par.ep, experts_sharded=par.dp // par.ep > 1)
        return activation_parts(
            ir, compute, attn, recompute, par.tp, sequence_parallel, device, engine="torch",
            loss_parallel=par.loss_parallel, counter_class=counter,
        )  # fmt: skip
    parts = activation_parts(ir, compute, attn, recompute, par.tp, sequence_parallel, device)
    if par.cp == 1:
        return parts
    if attn != "flash":
        raise SpecError(
            f"--cp {par.cp} with --attn {attn}: Megatron-Core's context parallelism runs "
            "the fused (flash) attention kernel",
            hint="--attn flash",
        )
    # Every op runs on the rank's S / cp positions, attention on its own chunk's keys.
    local = {S: S / par.cp}
    return replace(
        parts,
        before=parts.before.xreplace(local),
        layers=tuple((n, each.xreplace(local)) for n, each in parts.layers),
        after=parts.after.xreplace(local),
        rebuilt=sp.sympify(parts.rebuilt).xreplace(local),
        shared=parts.shared.xreplace(local),
    )


def _kv_heads(ir: IR) -> int:
    attn = next(p.node for p in walk(ir.root) if isinstance(p.node, Attention))
    return ir.value(attn.n_kv_heads)


def _generating_layers(ir: IR) -> tuple[int, int]:
    """The range of layer indices (over all layers) that cache keys and values: the generating
    stack's; empty for an encoder-only model, which caches nothing."""
    if ir.root.layout == "encoder":
        return (0, 0)
    offset = 0
    for stack in ir.root.stacks:
        n = layer_count(stack, ir)
        if stack.role != "encoder":
            return (offset, offset + n)
        offset += n
    return (0, 0)


def kv_cache_bytes(ir: IR, bytes_per_value: int | sp.Expr = 2) -> sp.Expr:
    """Keys and values cached for generation, over the batch: what the `Cached` ops of the
    generating stack's layers hold in a decode step at `kv_len` positions. The lowering says
    what each layer caches and how many positions it keeps (`Cached.capacity`; the encoder's
    `S` for cross-attention). Encoder-only models generate nothing and cache nothing."""
    model = ir.root
    step = decode_pass(model.layout)
    total = sp.Integer(0)
    if step is None:
        return total
    for segment in lower_model(model):
        lengths = step.lengths(segment.role)
        if lengths is None:
            continue  # the encoder: its output is cached by the decoder's layers
        for layers, cached in _cached_ops(segment):
            total += layers * lengths.elements(cached.out) * bytes_per_value
    return total


def _cached_ops(segment: Segment) -> Iterator[tuple[sp.Expr, ops.Cached]]:
    """Every `Cached` op of a stack's blocks, with how many layers run it."""
    stack_ops, ctx = lower_stack(segment.stack, segment.x, segment.memory)
    for blocks in (op for op in stack_ops.ops if isinstance(op, ops.Blocks)):
        for run in blocks.repeat.runs:
            assert isinstance(run.node, Block)
            for call in (op for op in lower_block(run.node).ops if isinstance(op, ops.Call)):
                for op in lower(call.module, call.args[0], ctx).ops:
                    if isinstance(op, ops.Cached):
                        yield run.count, op
