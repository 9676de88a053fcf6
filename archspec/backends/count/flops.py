"""FLOPs over the IR, as sympy expressions in the batch, the sequence lengths and the dimensions.

An interpreter runs the ops each module lowers to (`archspec.ir.lower`, the same ops the code
generator renders) once per pass (a forward over whole sequences, or one decode step against a
KV cache) and tallies the FLOPs of every op by component (attention projections, QKᵀ, AV,
softmax, MLP, ...), by kind (matmul, or everything else) and by place (inside the repeated
blocks, or outside them: recomputation only replays blocks). A run of identical blocks is
interpreted once and multiplied by its count, so the cost of counting does not grow with depth,
and the result stays a formula: `B·S²·...` until numbers are put in. This is tinygrad's
symbolic cost model over the ops it renders, one level up: modules' ops instead of kernels.

The bookkeeping (which attention pairs count, whether a norm counts) is a `Convention`
(conventions.py). Under `executed`, the default, the matmul FLOPs are exactly what
torch.utils.flop_counter.FlopCounterMode counts for the generated code: 2 per multiply-add of
every nn.Linear (biases are adds, not matmul FLOPs), and QKᵀ and AV over every query-key pair
(FlopCounterMode does not look at masks). The embedding lookup is a gather: no FLOPs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import sympy as sp

from archspec.backends.count.conventions import NO_RECOMPUTE, RECOMPUTE, Convention
from archspec.backends.count.params import parameter_count
from archspec.backends.count.passes import (
    KV_LEN,
    S_DEC,
    B,
    Lengths,
    Pass,
    S,
    decode_pass,
    forward_pass,
)
from archspec.backends.count.replay import early_stop
from archspec.errors import SpecError, did_you_mean
from archspec.ir import ops
from archspec.ir.lower import StackValues, lower, lower_block, lower_model, lower_stack
from archspec.ir.nodes import IR, Block, Model
from archspec.kinds import ACTIVATIONS, NORMS
from archspec.kinds.activations import CLAMPED_SWIGLU_ACTIVATION

__all__ = ["KV_LEN", "S_DEC", "B", "S", "FlopFigures", "flop_figures", "count_pass"]

MATMUL, OTHER = "matmul", "other"

# Components in display order, with their labels.
COMPONENTS = {
    "embeddings": "embeddings",
    "attn_proj": "attention projections",
    "attn_scores": "attention scores QKᵀ",
    "attn_values": "attention AV",
    "softmax": "softmax",
    "router": "MoE router",
    "mlp": "MLP",
    "activations": "activations",
    "norms": "norms",
    "residuals": "residual adds",
    "head": "head",
}

# FLOPs per element of work no kind owns: softmax is max, subtract, exp, sum, divide. Work done
# once per row (a norm's square root, a softmax's reciprocal) is left out: it is O(B·S) beside
# the O(B·S·d) around it.
SOFTMAX = 5
# Soft-capping, cap·tanh(x / cap): a divide, a tanh and a multiply per element.
SOFTCAP = 3
# Attention sinks shift each row of logits by its maximum before the softmax (as gpt-oss's
# eager attention does): a max and a subtract per logit.
SINK_SHIFT = 2
# Dropout in training: multiply by the mask and by 1 / (1 - p).
DROPOUT = 2
# Clamping to [-c, c]: a max and a min per element.
CLAMP = 2
# gpt-oss's clamped SwiGLU, per hidden unit: the gate's clamp (a min), the up's (CLAMP), alpha
# times the gate, the sigmoid, the gate times it, up + 1, and the product.
CLAMPED_SWIGLU = 1 + CLAMP + 1 + ACTIVATIONS[CLAMPED_SWIGLU_ACTIVATION].flops_per_element + 3


# (component, MATMUL | OTHER, inside the repeated blocks, replayed by full recomputation under
# torch's non-reentrant checkpoint, which stops early: replay.py)
Key = tuple[str, str, bool, bool]


@dataclass
class Tally:
    """FLOPs by component, kind and place, as lists of sympy terms (summed once, at the end)."""

    terms: dict[Key, list[sp.Expr]] = field(default_factory=dict)

    def add(
        self, component: str, kind: str, flops: sp.Expr, in_block: bool, replayed: bool = True
    ) -> None:
        if flops != 0:
            key = (component, kind, in_block, in_block and replayed)
            self.terms.setdefault(key, []).append(flops)

    def merge(self, other: Tally, times: sp.Expr | int = 1) -> None:
        for key, exprs in other.terms.items():
            self.terms.setdefault(key, []).append(times * sp.Add(*exprs))

    def marked(self, replayed: bool) -> Tally:
        """These in-block FLOPs, marked as replayed or not by an early-stopping checkpoint."""
        out = Tally()
        for (c, k, b, r), exprs in self.terms.items():
            out.terms[(c, k, b, b and r and replayed)] = list(exprs)
        return out

    def total(
        self,
        component: str | Iterable[str] | None = None,
        kind: str | None = None,
        in_block: bool | None = None,
        replayed: bool | None = None,
    ) -> sp.Expr:
        wanted = {component} if isinstance(component, str) else component
        return sp.Add(
            *(
                sp.Add(*exprs)
                for (c, k, b, r), exprs in self.terms.items()
                if (wanted is None or c in wanted)
                and (kind is None or k == kind)
                and (in_block is None or b == in_block)
                and (replayed is None or r == replayed)
            )
        )


class FlopCounter:
    """The FLOPs of a stack's ops in one pass: one method per op kind, as torch.fx's
    Interpreter has one per node. `Call` and `Blocks` interpret the ops of the module they run,
    a run of identical blocks once, times its count."""

    def __init__(
        self,
        conv: Convention,
        lengths: Lengths,
        ctx: StackValues | None = None,
        training: bool = False,
    ):
        self.conv = conv
        self.lengths = lengths
        self.ctx = ctx or StackValues()
        self.training = training  # dropout runs
        self.in_block = False  # inside a Repeat: work that full recomputation replays
        self.tally = Tally()
        # Inside a block: each leaf op, in forward order, with what it added (replay.py reads
        # the ops, and says which of them the early stop leaves out).
        self.leaves: list[tuple[ops.Op, Tally]] | None = None

    @property
    def tokens(self) -> sp.Expr:
        """Positions through this stack, over the whole batch."""
        return B * self.lengths.queries

    def run(self, op_list: Iterable[ops.Op]) -> None:
        for op in op_list:
            method = getattr(self, f"op_{type(op).__name__.lower()}")
            if self.leaves is None or isinstance(op, (ops.Call, ops.Blocks)):
                method(op)
                continue
            whole, self.tally = self.tally, Tally()
            method(op)
            self.leaves.append((op, self.tally))
            whole.merge(self.tally)
            self.tally = whole

    def add(self, component: str, kind: str, flops: sp.Expr) -> None:
        self.tally.add(component, kind, flops, self.in_block)

    def elementwise(self, component: str, flops: sp.Expr) -> None:
        if self.conv.elementwise:
            self.add(component, OTHER, flops)

    def elements(self, value: ops.Value) -> sp.Expr:
        return self.lengths.elements(value, computed=True)

    # Leaves.

    def op_lookup(self, op: ops.Lookup) -> None:
        """A gather (no FLOPs) unless the convention says matmul or counts parameters."""
        if self.conv.per_parameter:
            self.add("embeddings", MATMUL, 2 * self.tokens * parameter_count(op.table))
        elif self.conv.embedding_matmul and op.token_embedding:
            self.add("embeddings", MATMUL, 2 * self.tokens * op.table.num * op.table.dim)

    def op_linearop(self, op: ops.LinearOp) -> None:
        rows = self.lengths.rows(op.x, computed=True)
        module = op.module
        if self.conv.per_parameter:
            # 2 FLOPs per parameter per token: biases included, a tied weight counted where
            # it is looked up (the embedding), not again at the head.
            self.add(op.component, MATMUL, 2 * rows * parameter_count(module))
            return
        self.add(op.component, MATMUL, 2 * rows * module.in_features * module.out_features)
        if module.bias:
            self.elementwise(op.component, rows * module.out_features)

    def op_normop(self, op: ops.NormOp) -> None:
        if self.conv.per_parameter:
            self.add("norms", OTHER, 2 * self.tokens * parameter_count(op.module))
            return
        entry = NORMS[op.module.kind]
        per_element = entry.flops_per_element + (1 if op.module.bias else 0)
        self.elementwise("norms", per_element * self.elements(op.x))

    def op_activationop(self, op: ops.ActivationOp) -> None:
        entry = ACTIVATIONS[op.kind]
        self.elementwise(op.component, entry.flops_per_element * self.elements(op.x))

    def op_mul(self, op: ops.Mul) -> None:
        self.elementwise(op.component, self.elements(op.out))

    def op_add(self, op: ops.Add) -> None:
        self.elementwise(op.component, self.elements(op.out))

    def op_scale(self, op: ops.Scale) -> None:
        self.elementwise(op.component, self.elements(op.out))

    def op_clamp(self, op: ops.Clamp) -> None:
        self.elementwise(op.component, CLAMP * self.elements(op.out))

    def op_clampedswiglu(self, op: ops.ClampedSwiGLU) -> None:
        self.elementwise(op.component, CLAMPED_SWIGLU * self.elements(op.out))

    def op_softcap(self, op: ops.Softcap) -> None:
        self.elementwise(op.component, SOFTCAP * self.elements(op.out))

    def op_select(self, op: ops.Select) -> None:
        pass  # a view

    def op_part(self, op: ops.Part) -> None:
        pass  # a view

    def op_cached(self, op: ops.Cached) -> None:
        pass  # the cache's update: a copy

    def op_concat(self, op: ops.Concat) -> None:
        pass  # a copy

    def op_loss(self, op: ops.Loss) -> None:
        pass  # not part of the model's forward

    # Attention.

    def op_rope(self, op: ops.Rope) -> None:
        if self.conv.elementwise:
            # The projection's elements, of which a partial rotation turns rotated / head_dim
            # (the heads' width divides exactly, so integer sizes stay integers).
            elements = self.elements(op.out) * op.rotated
            elements = (
                elements // op.head_dim if isinstance(elements, int) else elements / op.head_dim
            )
            self.add("attn_proj", OTHER, op.flops_per_element * elements)

    def op_attend(self, op: ops.Attend) -> None:
        L = self.lengths
        keys = L.attended(op.k)
        if self.conv.attention == "half":
            pairs = L.queries * keys / 2
        elif self.conv.attention == "causal":
            pairs = op.masking.visible_pairs(L.queries, keys)
        else:
            pairs = L.queries * keys
        pairs = B * op.heads * pairs
        self.add("attn_scores", MATMUL, 2 * pairs * op.head_dim)
        self.add("attn_values", MATMUL, 2 * pairs * op.v_head_dim)
        if self.conv.elementwise:
            # Per score: the softmax, the scale, and each pass of the mask (hiding later
            # keys, adding a position bias).
            per_score = SOFTMAX + int(op.scaled) + op.masking.score_passes
            per_score += SOFTCAP if op.softcap is not None else 0
            self.add("softmax", OTHER, per_score * pairs)
            if op.sinks:
                # The sink is one more logit in every row; every logit is shifted first.
                rows = B * op.heads * L.queries
                self.add("softmax", OTHER, SOFTMAX * rows + SINK_SHIFT * (pairs + rows))
        elif self.conv.softmax:
            self.add("softmax", OTHER, self.conv.softmax * pairs)
        if self.training and op.dropout:
            self.elementwise("dropout", DROPOUT * pairs)

    def op_dropout(self, op: ops.Dropout) -> None:
        if self.training:
            self.elementwise("dropout", DROPOUT * self.elements(op.x))

    # Mixture of experts.

    def op_route(self, op: ops.Route) -> None:
        self.elementwise("router", op.kind.flops(op.routing(self.tokens)))

    def op_dispatch(self, op: ops.Dispatch) -> None:
        pass  # a gather

    def op_combine(self, op: ops.Combine) -> None:
        # The weighted sum of the top_k expert outputs: top_k multiplies, top_k - 1 adds.
        self.elementwise("mlp", (2 * op.top_k - 1) * self.elements(op.out))

    # Structure.

    def op_call(self, op: ops.Call) -> None:
        self.run(lower(op.module, op.args[0], self.ctx).ops)

    def op_blocks(self, op: ops.Blocks) -> None:
        outer, self.in_block = self.in_block, True
        for run in op.repeat.runs:
            assert isinstance(run.node, Block)
            inner = FlopCounter(self.conv, self.lengths, self.ctx, self.training)
            inner.in_block, inner.leaves = True, []
            inner.run(lower_block(run.node).ops)
            end = early_stop([op for op, _ in inner.leaves])
            for i, (_, leaf) in enumerate(inner.leaves):
                self.tally.merge(leaf.marked(replayed=i < end), run.calls)
        self.in_block = outer

    # What a stack builds once for its blocks: positions, encodings, angles, the mask.

    def op_positions(self, op: ops.Positions) -> None:
        pass

    def op_sinusoids(self, op: ops.Sinusoids) -> None:
        pass  # a function of the positions alone, computed once per sequence length

    def op_ropeangles(self, op: ops.RopeAngles) -> None:
        pass

    def op_scorebias(self, op: ops.ScoreBias) -> None:
        if op.table is not None and self.conv.per_parameter:
            # T5's relative-position bias table: looked up once per score, but as parameters
            # it is 2 FLOPs per token like any other.
            self.add("softmax", OTHER, 2 * self.tokens * parameter_count(op.table))


def count_pass(model: Model, conv: Convention, run: Pass, training: bool = False) -> Tally:
    """The FLOPs of one pass of the whole model (`training`: with dropout)."""
    t = Tally()
    for segment in lower_model(model):
        lengths = run.lengths(segment.role)
        if lengths is None:
            continue
        counter = FlopCounter(conv, lengths, training=training)
        counter.run(segment.embed)
        stack_ops, ctx = lower_stack(segment.stack, segment.x, segment.memory)
        counter.ctx = ctx
        counter.run(stack_ops.ops)
        if conv.head:
            counter.run(segment.heads)
        t.merge(counter.tally)
    return t


@dataclass(frozen=True)
class FlopFigures:
    """Every FLOP figure of a model under one convention, as expressions."""

    convention: Convention
    attn: str
    recompute: str
    components: dict[str, tuple[sp.Expr, sp.Expr]]  # forward (matmul, other) per component
    forward: sp.Expr  # inference (= prefill): no dropout
    forward_matmul: sp.Expr
    dropout: sp.Expr  # what a training forward adds: dropout's masking
    backward: sp.Expr
    backward_matmul: sp.Expr
    recomputed: sp.Expr  # forward work replayed in the backward pass
    recomputed_matmul: sp.Expr
    tokens: sp.Expr
    decode: sp.Expr | None  # one decode step over the batch; None for encoder-only models
    decode_matmul: sp.Expr | None

    @property
    def train_step(self) -> sp.Expr:
        return self.forward + self.dropout + self.backward + self.recomputed

    @property
    def train_step_matmul(self) -> sp.Expr:
        return self.forward_matmul + self.backward_matmul + self.recomputed_matmul

    @property
    def forward_per_token(self) -> sp.Expr:
        return self.forward / self.tokens


ATTN_CORE = ("attn_scores", "attn_values", "softmax")


def flop_figures(
    ir: IR, conv: Convention, attn: str = "eager", recompute: str = NO_RECOMPUTE
) -> FlopFigures:
    """Forward, backward and training-step FLOPs, per component, and one decode step.

    The backward pass costs twice the forward: a matmul's input gradient and its weight
    gradient are each one matmul of the forward's size (every convention here agrees, and so
    does FlopCounterMode on an eager run). Beyond that, work recomputed during the backward
    pass counts again: flash attention (`attn="flash"`) recomputes QKᵀ and the softmax from
    its saved statistics (FlopCounterMode counts 5 matmuls for its backward, not 4); selective
    recomputation (Korthikanti et al. 2022) replays the attention core and full recomputation
    the forward of every block as the generated code's non-reentrant checkpoint does: up to its
    early stop, without a pre-norm block's last projection and residual adds (replay.py). A
    preset with its own policy (Megatron) ignores both options.
    """
    model = ir.root
    inference = count_pass(model, conv, forward_pass(model.layout))
    # A training forward also drops out: its extra work counts in the step, and the backward
    # pass (twice the forward) scales its mask too.
    fwd = count_pass(model, conv, forward_pass(model.layout), training=True)
    components = {
        c: (inference.total(c, MATMUL), inference.total(c, OTHER))
        for c in COMPONENTS
        if inference.total(c) != 0
    }
    policy = conv.recompute if conv.recompute is not None else recompute
    if policy not in RECOMPUTE:  # `op` is timed by plan from its op costs, not counted here
        raise SpecError(f"--recompute takes one of: {', '.join(RECOMPUTE)} (got '{policy}')",
                        hint=did_you_mean(policy, RECOMPUTE))  # fmt: skip
    flash = attn == "flash" and conv.recompute is None
    extra = Tally()
    if flash:
        for c in ("attn_scores", "softmax"):
            for kind in (MATMUL, OTHER):
                extra.add(c, kind, fwd.total(c, kind, in_block=True), True)
    if policy == "full":
        # What the generated code replays: torch's non-reentrant checkpoint stops early.
        extra.merge(_only(fwd, in_block=True, replayed=True))
    elif policy == "selective" and not flash:
        # With flash attention there is nothing left to recompute: no probabilities are kept.
        extra.merge(_only(fwd, in_block=True, components=ATTN_CORE))
    if model.layout == "encoder-decoder":
        tokens = B * (S + S_DEC)
    else:
        tokens = B * S
    step = decode_pass(model.layout)
    dec = count_pass(model, conv, step) if step is not None else None
    return FlopFigures(
        convention=conv,
        attn=attn,
        recompute=policy,
        components=components,
        forward=inference.total(),
        forward_matmul=inference.total(kind=MATMUL),
        dropout=fwd.total("dropout"),
        backward=2 * fwd.total(),
        backward_matmul=2 * fwd.total(kind=MATMUL),
        recomputed=extra.total(),
        recomputed_matmul=extra.total(kind=MATMUL),
        tokens=tokens,
        decode=dec.total() if dec is not None else None,
        decode_matmul=dec.total(kind=MATMUL) if dec is not None else None,
    )


def _only(
    t: Tally, in_block: bool, components: Iterable[str] | None = None, replayed: bool | None = None
) -> Tally:
    out = Tally()
    for (c, kind, b, r), exprs in t.terms.items():
        if b == in_block and (components is None or c in components):
            if replayed is None or r == replayed:
                out.terms[(c, kind, b, r)] = list(exprs)
    return out
