"""The forward pass as ops: what each module computes, written once.

`archspec.ir.lower` turns each composite node into a short list of ops over named values, like
the graph torch.fx records. Three readers interpret the same list: the FLOP counter (what each op
costs), the activation-memory counter (what autograd keeps for each op's backward) and the code
generator (the line each op becomes in a `forward`). A value's `rows` say how many rows it has in
a pass (tokens through the stack, encoder positions, sequences, ...) and `width` the elements
per row, so one lowering serves every batch size and sequence length; a repeated stack of blocks
stays one `Blocks` op with a symbolic count.

Values are compared by identity: the same tensor read by two ops (a norm's output read by the
q, k and v projections) is one value, kept once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from archspec.ir.nodes import Composite, Embedding, Linear, Norm, Repeat
from archspec.kinds.routers import Routing

if TYPE_CHECKING:
    import sympy as sp

    from archspec.kinds.masks import Mask
    from archspec.kinds.routers import RouterKind

# How many rows a value has in one pass, per the lengths of the stack it belongs to:
# tokens: B·queries; memory: B·(encoder positions); batch: B; positions: queries (shared by the
# batch); pairs: queries·keys (shared by the batch); keys: B·keys (what a KV cache holds: the
# queries' positions, and in a decode step the cached ones before them, at most the value's
# `capacity`).
Rows = Literal["tokens", "memory", "batch", "positions", "pairs", "keys"]
# Bytes per element: the compute dtype, int64 indices, fp32 statistics, or bool.
DType = Literal["compute", "index", "stats", "bool"]


@dataclass(frozen=True, eq=False)
class Value:
    """A tensor of the forward pass: `copies` × rows × width elements. `copies` is top_k for
    the tokens routed to experts. `base`: the tensor this one is a view of."""

    name: str
    rows: Rows
    width: sp.Expr | int = 1
    dtype: DType = "compute"
    base: Value | None = None
    copies: sp.Expr | int = 1
    # Split over tensor-parallel ranks (Megatron-LM): a tensor over attention heads or MLP
    # hidden units, each rank holding its share. `split_limit`: the parts it can be split into
    # at most (the kv heads: beyond them ranks hold copies). Tensors of the residual stream
    # are whole on every rank unless sequence parallelism splits them along the sequence.
    split: bool = False
    split_limit: sp.Expr | int | None = None
    # Rows `keys`: the most positions per sequence the KV cache holding them keeps (a sliding
    # window's ring keeps its window); None: every position.
    capacity: int | None = None

    @property
    def storage(self) -> Value:
        return self.base.storage if self.base is not None else self


@dataclass(frozen=True, eq=False)
class Op:
    out: Value | None

    @property
    def inputs(self) -> tuple[Value, ...]:
        return ()


# Ops on leaves: one PyTorch built-in module or function each.


@dataclass(frozen=True, eq=False)
class Lookup(Op):
    """out = table(index): an embedding gather."""

    table: Embedding
    index: Value
    token_embedding: bool = False  # the vocabulary table (a one-hot matmul to some conventions)

    @property
    def inputs(self):
        return (self.index,)


@dataclass(frozen=True, eq=False)
class LinearOp(Op):
    x: Value
    module: Linear
    component: str  # the FLOP table row it is counted under

    @property
    def inputs(self):
        return (self.x,)


@dataclass(frozen=True, eq=False)
class NormOp(Op):
    x: Value
    module: Norm

    @property
    def inputs(self):
        return (self.x,)


@dataclass(frozen=True, eq=False)
class ActivationOp(Op):
    x: Value
    kind: str  # an entry of archspec.kinds.ACTIVATIONS
    component: str = "activations"

    @property
    def inputs(self):
        return (self.x,)


@dataclass(frozen=True, eq=False)
class Mul(Op):
    """out = a * b, elementwise (a gated MLP's product)."""

    a: Value
    b: Value
    component: str

    @property
    def inputs(self):
        return (self.a, self.b)


@dataclass(frozen=True, eq=False)
class ClampedSwiGLU(Op):
    """out = (u + 1) · g · sigmoid(alpha · g), g = gate clamped to at most `limit`, u = up
    clamped to [-limit, limit]: gpt-oss's experts' hidden units (transformers'
    GptOssExperts._apply_gate), in place of a gated MLP's activation and product."""

    gate: Value
    up: Value
    limit: float
    alpha: float
    component: str = "activations"

    @property
    def inputs(self):
        return (self.gate, self.up)


@dataclass(frozen=True, eq=False)
class Add(Op):
    """out = a + b (a residual, or positions added to embeddings)."""

    a: Value
    b: Value
    component: str

    @property
    def inputs(self):
        return (self.a, self.b)


@dataclass(frozen=True, eq=False)
class Scale(Op):
    """out = x * a constant (embeddings × sqrt(d_model), T5's output × d_model**-0.5), or
    x * factor / x / factor for a constant the op carries (Granite's multipliers)."""

    x: Value
    component: str
    # The constant is a 0-d tensor in x's dtype (Gemma's sqrt(d_model), rounded to it), which
    # the product keeps for its backward.
    tensor: bool = False
    factor: float | None = None  # None: the stack's or the head's own scale
    divide: bool = False  # x / factor, not x * factor (as transformers writes it)

    @property
    def inputs(self):
        return (self.x,)


@dataclass(frozen=True, eq=False)
class Clamp(Op):
    """out = x clamped to [-limit, limit] (OLMo's clip_qkv on q, k and v)."""

    x: Value
    limit: float
    component: str

    @property
    def inputs(self):
        return (self.x,)


@dataclass(frozen=True, eq=False)
class Softcap(Op):
    """out = cap · tanh(x / cap): values squashed smoothly into (-cap, cap) (Gemma 2's logits;
    its attention scores are capped inside `Attend`, by its `softcap`)."""

    x: Value
    cap: float
    component: str

    @property
    def inputs(self):
        return (self.x,)


@dataclass(frozen=True, eq=False)
class Select(Op):
    """out = x[:, 0]: the first position of every sequence, a view."""

    x: Value

    @property
    def inputs(self):
        return (self.x,)


# Attention.


@dataclass(frozen=True, eq=False)
class Rope(Op):
    """out = x rotated by RoPE's angles; `heads` of `head_dim` channels per token."""

    x: Value
    angles: Value
    heads: sp.Expr
    flops_per_element: int  # the position kind's: x·cos + rotate_half(x)·sin
    # The channels of each head rotated, of head_dim (a partial rotation leaves the rest).
    rotated: sp.Expr | int = 1
    head_dim: sp.Expr | int = 1

    @property
    def inputs(self):
        return (self.x, self.angles)


@dataclass(frozen=True, eq=False)
class Part(Op):
    """out = channels [start, start + out.width / heads) of each of x's `heads` heads: a
    view (latent attention splits its projections into parts without and with positions)."""

    x: Value
    start: sp.Expr | int
    heads: sp.Expr | int = 1

    @property
    def inputs(self):
        return (self.x,)


@dataclass(frozen=True, eq=False)
class Cached(Op):
    """out = x at every position the KV cache holds (rows `keys`, or `memory` for the encoder
    output's keys and values, projected once): x itself when nothing is cached, else the
    cache appended with x. The cache keeps the last `capacity` positions (a sliding window's
    ring). What a layer caches is what its Cached ops make: its keys and values, or latent
    attention's latent and rotated key, which it projects up again at every step."""

    x: Value

    @property
    def capacity(self) -> int | None:
        assert self.out is not None
        return self.out.capacity

    @property
    def inputs(self):
        return (self.x,)


@dataclass(frozen=True, eq=False)
class Concat(Op):
    """out = the heads' channels of `parts` side by side, a new tensor; a part with one head
    is repeated for every head (latent attention's rotated key, shared by all heads)."""

    parts: tuple[Value, ...]

    @property
    def inputs(self):
        return self.parts


@dataclass(frozen=True, eq=False)
class Attend(Op):
    """out = softmax(q kᵀ · scale + mask) v, heads merged back: (rows of q, heads·head_dim).

    q, k and v are the projections (rotated by RoPE where it applies), split into heads; k's
    rows say which keys the queries see: `keys` (the KV cache's positions) or `memory` (the
    encoder output's, cross-attention).
    """

    q: Value
    k: Value
    v: Value
    mask: Value | None  # the additive mask or score bias (None: none, or causal in-kernel)
    heads: sp.Expr  # query heads
    kv_heads: sp.Expr  # key/value heads (fewer: grouped-query; one: multi-query)
    head_dim: sp.Expr  # each head's queries and keys
    v_head_dim: sp.Expr  # each head's values (narrower in latent attention)
    masking: Mask  # which keys a query sees (causal, a window) and whether a bias is added
    scaled: bool = True  # the scores are multiplied by a scale (T5's are not)
    own_scale: bool = False  # the layer's own scale, not 1/sqrt(head_dim)
    softcap: float | None = None  # scores soft-capped, cap·tanh(s / cap), before the mask
    # A learned logit per head (the layer's `sinks`) softmaxed as one more key per query,
    # whose value is zero: softmax([scores + mask, sink])[:-1] · v (gpt-oss).
    sinks: bool = False
    dropout: float = 0.0  # on the probabilities, in training

    @property
    def from_memory(self) -> bool:
        """The keys and values come from the encoder output (cross-attention)."""
        return self.k.rows == "memory"

    @property
    def inputs(self):
        return (self.q, self.k, self.v) + ((self.mask,) if self.mask is not None else ())


# Mixture of experts.


@dataclass(frozen=True, eq=False)
class Route(Op):
    """`out` the top-k routing weights and `chosen` the experts of every token, as the
    router's kind computes them from its logits (`kind`: Mixtral's float32 softmax, top-k,
    division by their sum; DeepSeek-V3's sigmoid, chosen with the bias correction the
    router module holds, `kind.buffers`)."""

    logits: Value
    chosen: Value
    kind: RouterKind
    n_experts: sp.Expr
    top_k: sp.Expr
    normalize: bool = True  # divide the top_k weights by their sum
    scale: float = 1.0  # then multiply them by this (DeepSeek's routed_scaling_factor)
    groups: int = 1  # group-limited: only the experts of the top_groups best groups compete
    top_groups: int = 1

    def routing(self, tokens: sp.Expr, compute: sp.Expr | int = 4) -> Routing:
        """What the kind's formulas read, for `tokens` routed tokens whose logits take
        `compute` bytes an element (the FLOP formulas read no bytes)."""
        return Routing(
            tokens,
            self.n_experts,
            self.top_k,
            self.normalize,
            self.scale,
            self.groups,
            self.top_groups,
            compute,
        )

    @property
    def inputs(self):
        return (self.logits,)


@dataclass(frozen=True, eq=False)
class Dispatch(Op):
    """out = the copy of each token routed to each of its experts (top_k rows per token)."""

    x: Value
    chosen: Value

    @property
    def inputs(self):
        return (self.x, self.chosen)


@dataclass(frozen=True, eq=False)
class Combine(Op):
    """out = Σ over a token's experts of weight × expert output (scaled, then index_add_)."""

    expert_out: Value
    weights: Value
    top_k: sp.Expr

    @property
    def inputs(self):
        return (self.expert_out, self.weights)


# Training only.


@dataclass(frozen=True, eq=False)
class Dropout(Op):
    """out = x with a random fraction p of its elements zeroed and the rest scaled by
    1 / (1 - p), in training; x itself in evaluation."""

    x: Value
    p: float
    component: str

    @property
    def inputs(self):
        return (self.x,)


# Structure.


@dataclass(frozen=True, eq=False)
class Call(Op):
    """out = module(args): a sublayer, interpreted through its own lowering."""

    module: Composite
    args: tuple[Value, ...]

    @property
    def inputs(self):
        return self.args


@dataclass(frozen=True, eq=False)
class Blocks(Op):
    """out = the blocks applied in turn to x; each run of identical blocks counts once, times
    its count (the cost of analysis does not grow with depth)."""

    x: Value
    repeat: Repeat

    @property
    def inputs(self):
        return (self.x,)


# Positions and masks, built once per stack and shared by its blocks.


@dataclass(frozen=True, eq=False)
class Positions(Op):
    """out = the positions of the queries, int64 (shared by the batch)."""


@dataclass(frozen=True, eq=False)
class Sinusoids(Op):
    """out = the fixed sinusoidal encodings of the positions."""

    positions: Value


@dataclass(frozen=True, eq=False)
class RopeAngles(Op):
    """out = cos and sin of RoPE's angles for the positions: the stack's position's, or its
    local_position's (`local`: Gemma 3's local layers rotate by a base of their own)."""

    positions: Value
    local: bool = False


@dataclass(frozen=True, eq=False)
class ScoreBias(Op):
    """out = the bias every score gets (ALiBi's slopes × distance, or T5's table looked up by
    distance bucket: `table`), with the hidden keys masked out (`mask_out`)."""

    table: Embedding | None
    heads: sp.Expr
    causal: bool


@dataclass(frozen=True, eq=False)
class Loss(Op):
    """Cross-entropy over the logits (part of a training step: it keeps the log-softmax)."""

    logits: Value

    @property
    def inputs(self):
        return (self.logits,)
