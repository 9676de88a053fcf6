"""FLOPs over the IR, as sympy expressions in the batch, the sequence lengths and the dimensions.

A visitor walks the module tree once per pass (a forward over whole sequences, or one decode
step against a KV cache) and tallies the FLOPs of every operation by component (attention
projections, QKᵀ, AV, softmax, MLP, ...), by kind (matmul, or everything else) and by place
(inside the repeated blocks, or outside them: recomputation only replays blocks). A `Repeat`
multiplies the FLOPs of its module by its count, so the cost of counting does not grow with
depth, and the result stays a formula: `B·S²·...` until `evaluate` puts numbers in. This is
tinygrad's symbolic cost model applied one level up, to modules instead of kernels.

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

from archspec.backends.count.conventions import Convention
from archspec.backends.count.params import parameter_count
from archspec.ir.nodes import (
    IR,
    MLP,
    Attention,
    Block,
    Composite,
    Embedding,
    Linear,
    Model,
    MoE,
    Node,
    Norm,
    Repeat,
    Stack,
)
from archspec.ir.visit import Visitor

# The symbols FLOPs and memory are written in, beside the spec's own dimensions.
B = sp.Symbol("B", positive=True, integer=True)  # sequences in the batch
S = sp.Symbol("S", positive=True, integer=True)  # positions per sequence (the encoder's)
S_DEC = sp.Symbol("S_dec", positive=True, integer=True)  # decoder positions (encoder-decoders)
KV_LEN = sp.Symbol("kv_len", positive=True, integer=True)  # cached positions in a decode step

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

# FLOPs per element of the non-matmul work. A transcendental (exp, tanh, erf) counts as one:
# what matters at this scale is that the cost grows with the tensor, not the cycles of each op.
# Work done once per row (a norm's square root, a softmax's reciprocal) is left out: it is
# O(B·S) beside the O(B·S·d) around it.
NORM = {
    # mean (add), centre (sub), variance (mul, add), normalise (mul), scale (mul) [, shift (add)]
    "layernorm": 6,
    # square (mul), mean (add), normalise (mul), scale (mul)
    "rmsnorm": 4,
}
SOFTMAX = 5  # max, subtract, exp, sum, divide
ACTIVATION = {"relu": 1, "gelu": 5, "gelu_tanh": 8, "silu": 4, "tanh": 1}
ROPE = 3  # x·cos + rotate_half(x)·sin: two multiplies and an add per channel


@dataclass(frozen=True)
class Lengths:
    """The positions one stack sees in one pass, per sequence."""

    queries: sp.Expr  # positions run through the stack
    keys: sp.Expr  # positions a self-attention query attends over (queries are the last ones)
    memory: sp.Expr = sp.Integer(0)  # encoder positions cross-attention attends over
    project_memory: bool = True  # False in a decode step: the encoder's K and V are cached


@dataclass(frozen=True)
class Pass:
    """One run of the model: the lengths of each stack that runs (None: it does not run)."""

    name: str
    encoder: Lengths | None
    decoder: Lengths | None

    def lengths(self, role: str) -> Lengths | None:
        return self.encoder if role == "encoder" else self.decoder


def forward_pass(layout: str) -> Pass:
    """A forward over whole sequences: training, or the prefill of inference."""
    if layout == "encoder-decoder":
        return Pass("forward", Lengths(S, S), Lengths(S_DEC, S_DEC, S))
    return Pass("forward", Lengths(S, S), Lengths(S, S))


def decode_pass(layout: str) -> Pass | None:
    """One generated token per sequence, attending over `kv_len` cached positions (its own
    included). An encoder-decoder's encoder has run already and its K and V are cached."""
    if layout == "encoder":
        return None
    if layout == "encoder-decoder":
        return Pass("decode", None, Lengths(sp.Integer(1), KV_LEN, S, project_memory=False))
    return Pass("decode", None, Lengths(sp.Integer(1), KV_LEN))


Key = tuple[str, str, bool]  # (component, MATMUL | OTHER, inside the repeated blocks)


@dataclass
class Tally:
    """FLOPs by component, kind and place, as lists of sympy terms (summed once, at the end)."""

    terms: dict[Key, list[sp.Expr]] = field(default_factory=dict)

    def add(self, component: str, kind: str, flops: sp.Expr, in_block: bool) -> None:
        if flops != 0:
            self.terms.setdefault((component, kind, in_block), []).append(flops)

    def merge(self, other: Tally, times: sp.Expr | int = 1) -> None:
        for key, exprs in other.terms.items():
            self.terms.setdefault(key, []).append(times * sp.Add(*exprs))

    def total(
        self,
        component: str | Iterable[str] | None = None,
        kind: str | None = None,
        in_block: bool | None = None,
    ) -> sp.Expr:
        wanted = {component} if isinstance(component, str) else component
        return sp.Add(
            *(
                sp.Add(*exprs)
                for (c, k, b), exprs in self.terms.items()
                if (wanted is None or c in wanted)
                and (kind is None or k == kind)
                and (in_block is None or b == in_block)
            )
        )


def attended_pairs(conv: Convention, queries: sp.Expr, keys: sp.Expr, causal: bool) -> sp.Expr:
    """Query-key pairs per head and sequence whose score the convention counts."""
    if conv.attention == "half":
        return queries * keys / 2
    if conv.attention == "causal" and causal:
        # The queries are the last `queries` of `keys` positions and query i sees the keys up to
        # its own: q·k - q(q-1)/2 pairs, S(S+1)/2 when q = k = S, all k when q = 1.
        return queries * keys - queries * (queries - 1) / 2
    return queries * keys


class FlopCounter(Visitor[Tally]):
    """The FLOPs of one pass of a module, with the batch and lengths of the stack it sits in."""

    def __init__(self, conv: Convention, lengths: Lengths) -> None:
        self.conv = conv
        self.lengths = lengths
        self.in_block = False  # inside a Repeat: work that full recomputation replays

    @property
    def tokens(self) -> sp.Expr:
        """Positions through this stack, over the whole batch."""
        return B * self.lengths.queries

    def linear(self, t: Tally, node: Linear, tokens: sp.Expr, component: str) -> None:
        if self.conv.per_parameter:
            # 2 FLOPs per parameter per token: biases included, a tied weight counted where
            # it is looked up (the embedding), not again at the head.
            t.add(component, MATMUL, 2 * tokens * parameter_count(node), self.in_block)
            return
        t.add(component, MATMUL, 2 * tokens * node.in_features * node.out_features, self.in_block)
        if node.bias and self.conv.elementwise:
            t.add(component, OTHER, tokens * node.out_features, self.in_block)

    def elementwise(self, t: Tally, component: str, flops: sp.Expr) -> None:
        if self.conv.elementwise:
            t.add(component, OTHER, flops, self.in_block)

    def lookup(self, t: Tally, node: Embedding, tokens: sp.Expr, token_embedding: bool) -> None:
        """An embedding lookup: a gather (no FLOPs) unless the convention says matmul."""
        if self.conv.per_parameter:
            t.add("embeddings", MATMUL, 2 * tokens * parameter_count(node), self.in_block)
        elif self.conv.embedding_matmul and token_embedding:
            t.add("embeddings", MATMUL, 2 * tokens * node.num * node.dim, self.in_block)

    # Leaves reached through `generic`: norms only; Linear and Embedding are costed by their
    # parent, which knows how many tokens pass through them.

    def visit_norm(self, node: Norm) -> Tally:
        t = Tally()
        if self.conv.per_parameter:
            t.add("norms", OTHER, 2 * self.tokens * parameter_count(node), self.in_block)
        else:
            per_element = NORM[node.kind] + (1 if node.bias else 0)
            self.elementwise(t, "norms", per_element * self.tokens * node.dim)
        return t

    def visit_attention(self, node: Attention) -> Tally:
        t = Tally()
        L = self.lengths
        if node.cross:
            keys = L.memory
            kv_tokens = B * L.memory if L.project_memory else sp.Integer(0)
        else:
            keys, kv_tokens = L.keys, self.tokens
        for part in node.parts:
            if isinstance(part, Linear):
                tokens = kv_tokens if part.name in ("k", "v") else self.tokens
                self.linear(t, part, tokens, "attn_proj")
            elif isinstance(part, Embedding) and self.conv.per_parameter:
                # T5's relative-position bias table: looked up once per score, but as
                # parameters it is 2 FLOPs per token like any other.
                t.add("softmax", OTHER, 2 * self.tokens * parameter_count(part), self.in_block)
        pairs = B * node.n_heads * attended_pairs(self.conv, L.queries, keys, node.causal)
        t.add("attn_scores", MATMUL, 2 * pairs * node.head_dim, self.in_block)
        t.add("attn_values", MATMUL, 2 * pairs * node.head_dim, self.in_block)
        if self.conv.elementwise:
            # Per score: the softmax, the 1/sqrt(d) scale, the causal mask and an ALiBi or
            # relative-position bias are each one elementwise pass over the score matrix.
            per_score = SOFTMAX + int(node.scale_scores) + int(node.causal)
            per_score += int(node.position.kind in ("alibi", "relative_bias"))
            t.add("softmax", OTHER, per_score * pairs, self.in_block)
            if node.position.kind == "rope":
                rotated = self.tokens * node.n_heads + kv_tokens * node.n_kv_heads
                t.add("attn_proj", OTHER, ROPE * rotated * node.head_dim, self.in_block)
        elif self.conv.softmax:
            t.add("softmax", OTHER, self.conv.softmax * pairs, self.in_block)
        return t

    def mlp(self, node: MLP, tokens: sp.Expr) -> Tally:
        t = Tally()
        width = sp.Integer(0)
        for part in node.parts:
            assert isinstance(part, Linear)
            self.linear(t, part, tokens, "mlp")
            if part.name == "up":
                width = part.out_features
        per_element = ACTIVATION[node.activation] + (1 if node.gated else 0)  # act(gate) * up
        self.elementwise(t, "activations", per_element * tokens * width)
        return t

    def visit_mlp(self, node: MLP) -> Tally:
        return self.mlp(node, self.tokens)

    def visit_moe(self, node: MoE) -> Tally:
        t = Tally()
        router, experts = node.parts
        assert isinstance(router, Linear) and isinstance(experts, Repeat)
        self.linear(t, router, self.tokens, "router")
        self.elementwise(t, "router", SOFTMAX * self.tokens * node.n_experts)
        # Each token runs through top_k experts: top_k·tokens rows through one expert's MLP,
        # however they are spread over the experts.
        expert = experts.runs[0].node
        assert isinstance(expert, MLP)
        t.merge(self.mlp(expert, node.top_k * self.tokens))
        # The weighted sum of the top_k expert outputs: top_k multiplies, top_k - 1 adds.
        self.elementwise(t, "mlp", (2 * node.top_k - 1) * self.tokens * router.in_features)
        return t

    def visit_block(self, node: Block) -> Tally:
        t = Tally()
        sublayers = 0
        for part in node.parts:
            t.merge(self.visit(part))
            sublayers += isinstance(part, (Attention, MLP, MoE))
        # Pre- and post-norm add each sublayer's output to the stream; parallel adds both
        # branches in two adds as well.
        self.elementwise(t, "residuals", sublayers * self.tokens * _d_model(node))
        return t

    def visit_repeat(self, node: Repeat) -> Tally:
        t = Tally()
        outer, self.in_block = self.in_block, True
        for run in node.runs:
            t.merge(self.visit(run.node), run.count)
        self.in_block = outer
        return t

    def visit_stack(self, node: Stack) -> Tally:
        t = Tally()
        d_model = _stack_width(node)
        for part in node.parts:
            if isinstance(part, Embedding):  # learned positions: lookup, then add
                self.lookup(t, part, self.tokens, token_embedding=False)
                self.elementwise(t, "embeddings", self.tokens * d_model)
            else:
                t.merge(self.visit(part))
        if node.position.kind == "sinusoidal":
            self.elementwise(t, "embeddings", self.tokens * d_model)
        if node.scale_embedding:
            self.elementwise(t, "embeddings", self.tokens * d_model)
        return t

    def generic(self, node: Node) -> Tally:
        if isinstance(node, Composite):
            t = Tally()
            for part in node.parts:
                t.merge(self.visit(part))
            return t
        return super().generic(node)


def _d_model(block: Block) -> sp.Expr:
    norm = next(p for p in block.parts if isinstance(p, Norm))
    return norm.dim


def _stack_width(stack: Stack) -> sp.Expr:
    blocks = stack.part("blocks")
    assert isinstance(blocks, Repeat)
    block = blocks.runs[0].node
    assert isinstance(block, Block)
    return _d_model(block)


def count_pass(model: Model, conv: Convention, run: Pass) -> Tally:
    """The FLOPs of one pass of the whole model."""
    t = Tally()
    stacks = [p for p in model.parts if isinstance(p, Stack)]
    last: FlopCounter | None = None
    for stack in stacks:
        lengths = run.lengths(stack.role)
        if lengths is None:
            continue
        counter = FlopCounter(conv, lengths)
        for part in model.parts:  # the shared embeddings each stack looks its tokens up in
            if isinstance(part, Embedding):
                counter.lookup(t, part, counter.tokens, token_embedding=part.name == "tok_emb")
                if part.name != "tok_emb":  # segment embeddings are added to the tokens'
                    counter.elementwise(t, "embeddings", counter.tokens * model.d_model)
        t.merge(counter.visit(stack))
        last = counter
    assert last is not None
    if not conv.head:
        return t
    for part in model.parts:
        if isinstance(part, Linear) and part.name == "lm_head":
            # The generated code projects every position to logits, as transformers does.
            last.linear(t, part, last.tokens, "head")
            if model.scale_tied_output:
                last.elementwise(t, "head", last.tokens * model.d_model)
        elif isinstance(part, Linear) and part.name == "pooler":
            # BERT's pooler: tanh(dense(first token)), once per sequence.
            last.linear(t, part, B, "head")
            last.elementwise(t, "head", ACTIVATION["tanh"] * B * part.out_features)
    return t


@dataclass(frozen=True)
class FlopFigures:
    """Every FLOP figure of a model under one convention, as expressions."""

    convention: Convention
    attn: str
    recompute: str
    components: dict[str, tuple[sp.Expr, sp.Expr]]  # forward (matmul, other) per component
    forward: sp.Expr
    forward_matmul: sp.Expr
    backward: sp.Expr
    backward_matmul: sp.Expr
    recomputed: sp.Expr  # forward work replayed in the backward pass
    recomputed_matmul: sp.Expr
    tokens: sp.Expr
    decode: sp.Expr | None  # one decode step over the batch; None for encoder-only models
    decode_matmul: sp.Expr | None

    @property
    def train_step(self) -> sp.Expr:
        return self.forward + self.backward + self.recomputed

    @property
    def train_step_matmul(self) -> sp.Expr:
        return self.forward_matmul + self.backward_matmul + self.recomputed_matmul

    @property
    def forward_per_token(self) -> sp.Expr:
        return self.forward / self.tokens


ATTN_CORE = ("attn_scores", "attn_values", "softmax")


def flop_figures(
    ir: IR, conv: Convention, attn: str = "eager", recompute: str = "none"
) -> FlopFigures:
    """Forward, backward and training-step FLOPs, per component, and one decode step.

    The backward pass costs twice the forward: a matmul's input gradient and its weight
    gradient are each one matmul of the forward's size (every convention here agrees, and so
    does FlopCounterMode on an eager run). Beyond that, work recomputed during the backward
    pass counts again: flash attention (`attn="flash"`) recomputes QKᵀ and the softmax from
    its saved statistics (FlopCounterMode counts 5 matmuls for its backward, not 4); selective
    recomputation (Korthikanti et al. 2022) replays the attention core and full recomputation
    the forward of every block. A preset with its own policy (Megatron) ignores both options.
    """
    model = ir.root
    fwd = count_pass(model, conv, forward_pass(model.layout))
    components = {
        c: (fwd.total(c, MATMUL), fwd.total(c, OTHER)) for c in COMPONENTS if fwd.total(c) != 0
    }
    policy = conv.recompute if conv.recompute is not None else recompute
    flash = attn == "flash" and conv.recompute is None
    extra = Tally()
    if flash:
        for c in ("attn_scores", "softmax"):
            for kind in (MATMUL, OTHER):
                extra.add(c, kind, fwd.total(c, kind, in_block=True), True)
    if policy == "full":
        extra.merge(_only(fwd, in_block=True))
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
        forward=fwd.total(),
        forward_matmul=fwd.total(kind=MATMUL),
        backward=2 * fwd.total(),
        backward_matmul=2 * fwd.total(kind=MATMUL),
        recomputed=extra.total(),
        recomputed_matmul=extra.total(kind=MATMUL),
        tokens=tokens,
        decode=dec.total() if dec is not None else None,
        decode_matmul=dec.total(kind=MATMUL) if dec is not None else None,
    )


def _only(t: Tally, in_block: bool, components: Iterable[str] | None = None) -> Tally:
    out = Tally()
    for (c, kind, b), exprs in t.terms.items():
        if b == in_block and (components is None or c in components):
            out.terms[(c, kind, b)] = list(exprs)
    return out
