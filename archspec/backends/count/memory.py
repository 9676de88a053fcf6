"""Memory in bytes: weights, gradients, optimizer states, activations and the KV cache.

Like the FLOPs, every figure is a sympy expression in the batch `B`, the lengths `S`, `S_dec`
and `kv_len`, and the spec's dimensions, evaluated at the end.

Activations are the tensors autograd keeps for the backward pass. They are counted the way
PyTorch keeps them when it runs the generated code, op by op (which operand each op saves, and
which of those share a storage), so that the prediction matches what
torch.autograd.graph.saved_tensors_hooks measures (tests/test_memory.py). Korthikanti et al.
2022 (Reducing Activation Recomputation in Large Transformer Models) count the same way for
Megatron's code; the per-op rules differ a little because the code differs.

Parallelism splits the figures per device: tensor parallelism (`tp`) splits every weight matrix
and, with sequence parallelism, every activation; pipeline parallelism (`pp`) splits the layers;
data parallelism (`gpus / (tp·pp)` replicas) splits the batch, and ZeRO stages 1, 2 and 3
shard optimizer states, then gradients, then weights over the replicas.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from archspec.backends.count.flops import KV_LEN, B, Lengths, S, forward_pass
from archspec.backends.count.params import parameter_count
from archspec.errors import SpecError
from archspec.ir.nodes import (
    IR,
    MLP,
    Attention,
    Block,
    Linear,
    Model,
    MoE,
    Node,
    Norm,
    Repeat,
    Stack,
)
from archspec.ir.visit import Visitor, walk

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
STATS = 4  # a norm's per-row mean / 1/rms and attention's log-sum-exp are fp32
INDEX = 8  # token ids and positions are int64
RECOMPUTE = ("none", "selective", "full")
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
    recompute: str = "none",
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


class ActivationCounter(Visitor[sp.Expr]):
    """Bytes autograd keeps for backward in one stack's modules, for one training forward.

    The rules follow the ops of the generated code: a Linear keeps its input, a norm its
    input (RMSNorm also the normalised input), GELU and SiLU their input, ReLU its output, a
    product both factors. Two ops that keep the same tensor keep one storage, so each tensor is
    counted once, by the first op that keeps it.
    """

    def __init__(self, lengths: Lengths, compute: int, attn: str, recompute: str) -> None:
        self.lengths = lengths
        self.c = compute
        self.attn = attn
        self.recompute = recompute
        self.rebuilt: list[sp.Expr] = []  # full recomputation: each kind of block, rebuilt

    @property
    def tokens(self) -> sp.Expr:
        return B * self.lengths.queries

    def norm(self, node: Norm) -> sp.Expr:
        """What a norm keeps: its input and per-row statistics (RMSNorm: the normalised input
        as well, for the scale's gradient). Its output is kept by whatever reads it."""
        n = self.tokens
        if node.kind == "rmsnorm":
            return 2 * n * node.dim * self.c + n * STATS
        return n * node.dim * self.c + 2 * n * STATS  # mean and 1/std

    def visit_attention(self, node: Attention) -> sp.Expr:
        L, c = self.lengths, self.c
        n, h, g, hd = self.tokens, node.n_heads, node.n_kv_heads, node.head_dim
        kv_tokens = B * (L.memory if node.cross else L.keys)
        keys = L.memory if node.cross else L.keys
        # The heads merged back, kept by the output projection: (B, S, h·hd).
        o_input = n * h * hd * c
        if self.attn == "flash" or self.recompute == "selective":
            # A fused kernel keeps q, k and v (the projections, or RoPE's rotated copies) and,
            # to rebuild the probabilities, its output and one fp32 log-sum-exp per row. The
            # output is laid out like q, (B, S, h, hd), so merging the heads is a view and the
            # output projection keeps that same tensor. Selective recomputation keeps what
            # the attention core starts from, q, k and v, and the merged heads.
            kept = n * h * hd * c + 2 * kv_tokens * g * hd * c + o_input
            if self.attn == "flash":
                kept += B * h * L.queries * STATS
            return kept
        # PyTorch's eager (math) attention keeps scaled copies of q and k, v made contiguous
        # (k and v repeated per query head under GQA), and the probabilities: B·h·S² values.
        scaled_qk = n * h * hd * c + kv_tokens * h * hd * c
        values = kv_tokens * h * hd * c
        probs = B * h * L.queries * keys * c
        return scaled_qk + values + probs + o_input

    def mlp(self, node: MLP, tokens: sp.Expr) -> sp.Expr:
        width = next(p.out_features for p in node.parts if isinstance(p, Linear) and p.name == "up")
        # Kept per hidden unit: the activation's input (GELU, SiLU) or output (ReLU, which
        # is also the next op's input); gated, the activation's output and the up projection
        # for the product, and the product for the down projection.
        if node.gated:
            per_unit = 3 if node.activation == "relu" else 4
        else:
            per_unit = 1 if node.activation == "relu" else 2
        return per_unit * tokens * width * self.c

    def visit_mlp(self, node: MLP) -> sp.Expr:
        return self.mlp(node, self.tokens)

    def visit_moe(self, node: MoE) -> sp.Expr:
        n, k, c = self.tokens, node.top_k, self.c
        router, experts = node.parts
        assert isinstance(router, Linear) and isinstance(experts, Repeat)
        expert = experts.runs[0].node
        assert isinstance(expert, MLP)
        d = router.in_features
        # The router: fp32 probabilities over the experts, the top-k indices, the top-k
        # weights and their sum (for the renormalisation).
        routing = n * node.n_experts * STATS + n * k * (INDEX + STATS) + n * STATS
        # Per routed copy of a token (k per token): its (token, slot) indices, the gathered
        # input, the expert's hidden units, its output, the fp32 weight it is scaled by, and
        # the weighted output (index_add_ keeps its source).
        routed = k * n
        per_copy = routed * (2 * INDEX + 3 * d * c + STATS)
        return routing + per_copy + self.mlp(expert, routed)

    def visit_block(self, node: Block) -> sp.Expr:
        n, c = self.tokens, self.c
        d = next(p.dim for p in node.parts if isinstance(p, Norm))
        parts = node.parts
        total = sp.Integer(0)
        if node.residual == "parallel":
            # One norm, whose output every projection of both branches reads.
            norm, attn, ff = parts
            assert isinstance(norm, Norm)
            return self.norm(norm) + n * d * c + self.visit(attn) + self.visit(ff)
        if node.residual == "pre":
            # Each sublayer: its norm (which keeps the stream) and the norm's output.
            for norm, layer in zip(parts[0::2], parts[1::2], strict=True):
                assert isinstance(norm, Norm)
                total += self.norm(norm) + n * d * c + self.visit(layer)
            return total
        # Post-norm: the block input is kept by the first projections; each norm keeps the
        # sum before it, and its output feeds the next sublayer (the last one's: next block).
        total += n * d * c
        pairs = list(zip(parts[0::2], parts[1::2], strict=True))
        for i, (layer, norm) in enumerate(pairs):
            assert isinstance(norm, Norm)
            total += self.visit(layer) + self.norm(norm)
            if i < len(pairs) - 1:
                total += n * d * c
        return total

    def block_input(self, node: Block) -> sp.Expr:
        d = next(p.dim for p in node.parts if isinstance(p, Norm))
        return self.tokens * d * self.c

    def visit_repeat(self, node: Repeat) -> sp.Expr:
        if self.recompute == "full":
            # Checkpointing keeps each block's input; backward rebuilds one block at a time,
            # so the largest block's activations come on top, once for the whole model.
            self.rebuilt += [self.visit(run.node) for run in node.runs]
            return sum((run.count * self.block_input(run.node) for run in node.runs), 0)
        return sum((run.count * self.visit(run.node) for run in node.runs), sp.Integer(0))

    def generic(self, node: Node) -> sp.Expr:
        raise TypeError(f"no activation rule for {type(node).__name__}")


def _first_attention(stack: Stack) -> Attention:
    return next(p.node for p in walk(stack) if isinstance(p.node, Attention))


def _stack_bytes(stack: Stack, counter: ActivationCounter, encoder_decoder: bool) -> sp.Expr:
    """A stack's blocks, plus what its forward keeps outside them."""
    L, c = counter.lengths, counter.c
    n = counter.tokens
    total = n * INDEX  # the token ids, kept by the embedding lookup
    attn = _first_attention(stack)
    position = stack.position.kind
    if position == "learned":
        total += L.queries * INDEX  # the positions looked up
    elif position == "rope":
        total += 2 * L.queries * attn.head_dim * c  # cos and sin, kept by RoPE's products
    elif position == "relative_bias":
        total += L.queries * L.keys * INDEX  # the bucket of every (query, key) pair
        if stack.causal:
            total += L.queries * L.keys  # the bool mask where() selects the bias with
    if counter.attn == "flash":
        # A fused kernel keeps the additive mask all blocks share: the position bias, or an
        # encoder-decoder's causal mask (a decoder-only model lets SDPA mask causally).
        if position in ("alibi", "relative_bias"):
            total += attn.n_heads * L.queries * L.keys * c
        elif stack.causal and encoder_decoder:
            total += L.queries * L.keys * c
    for part in stack.parts:
        if isinstance(part, Norm):  # the embedding norm and the final norm
            total += counter.norm(part)
        elif isinstance(part, Repeat):
            total += counter.visit(part)
    return total


def activation_bytes(
    ir: IR, compute: int | sp.Expr = 4, attn: str = "eager", recompute: str = "none"
) -> sp.Expr:
    """Bytes kept for backward by one training forward of the batch, and by its loss (the
    log-softmax over the logits, when there is an LM head)."""
    model: Model = ir.root
    run = forward_pass(model.layout)
    total = sp.Integer(0)
    last: ActivationCounter | None = None
    rebuilt: list[sp.Expr] = []
    for stack in (p for p in model.parts if isinstance(p, Stack)):
        lengths = run.lengths(stack.role)
        assert lengths is not None
        counter = ActivationCounter(lengths, compute, attn, recompute)
        total += _stack_bytes(stack, counter, model.layout == "encoder-decoder")
        # The stack's output is kept by whatever reads it next: the decoder's
        # cross-attention, the pooler (the whole tensor, though it reads one position) or
        # the head.
        d = model.d_model
        if stack.role == "encoder" and model.layout == "encoder-decoder":
            total += counter.tokens * d * compute
        last = counter
        rebuilt += counter.rebuilt
    assert last is not None
    if rebuilt:
        total += sp.Max(*rebuilt)
    names = {p.name for p in model.parts}
    if "lm_head" in names or "pooler" in names:
        total += last.tokens * model.d_model * compute
    if "pooler" in names:
        total += B * model.d_model * compute  # tanh keeps its output
    if "lm_head" in names:
        total += last.tokens * model.vocab_size * compute  # the loss's log-softmax
    return total
