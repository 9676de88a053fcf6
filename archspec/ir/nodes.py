"""IR node kinds: a typed tree of frozen dataclasses.

Each node's `name` is its attribute name inside its parent, so joining names from the root gives
the attribute path in the generated PyTorch model (`decoder.blocks.0.attn.q`). Composites name
their parts as typed fields (an attention node has `q`, `k`, `v` and `o`), and `children` lists
them in the order the generated `__init__` registers them, which is also the order
`print(model)` shows.

Kind fields (a norm's kind, a position scheme, a residual layout, an activation) carry the spec's
word for the kind, typed with the schema's Literal, and `.entry` looks it up in the catalogue
(`archspec.kinds`): backends ask the entry, they never compare the word.

Sizes are sympy expressions in the spec's dimension symbols (`d_model`, `n_heads`, ...); the
concrete values live in `IR.env`. An IR built with `symbolic=False` carries the same sizes as
plain integers instead: the same arithmetic, without importing sympy, which is most of the
start-up time of `archspec count` (see `build_ir`). A run of identical blocks is one `Repeat` with
a symbolic count, so the cost of any analysis does not grow with depth. Nodes are hashable, so
identical blocks are one node and differing blocks are distinct nodes (`archspec.ir.classes`
gives each distinct node its generated class).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from archspec import kinds
from archspec.ir.title import titled
from archspec.kinds import ActivationKind, Mask, NormKind, ResidualKind, RouterKind
from archspec.kinds.positions import Position
from archspec.spec.schema import Activation, Layout, Residual
from archspec.spec.schema import NormKind as NormName
from archspec.spec.schema import Router as RouterName

if TYPE_CHECKING:
    from collections.abc import Callable

    import sympy as sp


@dataclass(frozen=True)
class Node:
    name: str

    @property
    def children(self) -> tuple[Node, ...]:
        return ()

    @property
    def parts(self) -> tuple[Node, ...]:
        """The children, for code that walks any composite alike."""
        return self.children

    def part(self, name: str) -> Node | None:
        return next((p for p in self.children if p.name == name), None)


# Leaves: the modules that own parameters. Each is one PyTorch built-in module.


@dataclass(frozen=True)
class Embedding(Node):
    num: sp.Expr
    dim: sp.Expr


@dataclass(frozen=True)
class Linear(Node):
    in_features: sp.Expr
    out_features: sp.Expr
    bias: bool
    tied_to: str | None = None  # attribute path of the weight this one shares


@dataclass(frozen=True)
class Router(Linear):
    """A mixture's router: a Linear to one logit per expert, and whatever tensors its kind
    owns beside the weight (the sigmoid router's e_score_correction_bias, a buffer)."""

    kind: RouterName = field(kw_only=True)  # after Linear's defaults, by name

    @property
    def entry(self) -> RouterKind:
        return kinds.router(self.kind)


@dataclass(frozen=True)
class Norm(Node):
    kind: NormName
    dim: sp.Expr
    bias: bool
    eps: float

    @property
    def entry(self) -> NormKind:
        return kinds.norm(self.kind)


@dataclass(frozen=True)
class Sinks(Node):
    """Attention sinks (gpt-oss): one learned logit per query head, a parameter of the
    attention module itself (`attn.sinks`, shape (heads,)), not a module of its own:
    `print(model)` does not show it, but it is a parameter leaf to every count."""

    heads: sp.Expr


class Composite(Node):
    """A module the generated code defines as a class of its own."""


@dataclass(frozen=True)
class Latent:
    """Multi-head latent attention's own parts (DeepSeek-V2). Its Attention's `q` makes every
    head's queries (from x, or from the query latent); `k` is `kv_down`, x to the key/value
    latent and the one rotated key all heads share; `v` is `kv_up`, the normalised latent to
    every head's key part without positions and its value."""

    kv_norm: Norm  # over the key/value latent (the first kv_rank channels of kv_down's output)
    kv_rank: sp.Expr
    rope_dim: sp.Expr
    nope_dim: sp.Expr
    v_dim: sp.Expr
    mscale: float  # the scores times mscale² / sqrt(nope_dim + rope_dim) (YaRN, DeepSeek)
    q_down: Linear | None = None  # x to the query latent, when queries have one
    q_norm: Norm | None = None


@dataclass(frozen=True)
class Attention(Composite):
    q: Linear
    k: Linear
    v: Linear
    o: Linear
    n_heads: sp.Expr
    n_kv_heads: sp.Expr
    head_dim: sp.Expr
    causal: bool  # hides later keys (self-attention in a causal stack)
    cross: bool  # keys and values come from the encoder
    scale_scores: bool
    position: Position  # rope acts on q and k; a score bias arrives with the mask
    # It rotates by the stack's second angles, its local_position's (Gemma 3's local layers).
    local_angles: bool = False
    dropout: float = 0.0  # on the attention probabilities, in training
    window: int | None = None  # a sliding window: keys a query sees, its own included
    softcap: float | None = None  # scores soft-capped, cap·tanh(s / cap), before the mask
    q_norm: Norm | None = None  # over each head's queries, before RoPE (Qwen3)
    k_norm: Norm | None = None  # over each head's keys
    qk_norm_all: bool = False  # q_norm and k_norm span all heads' channels at once (OLMo 2)
    scale_dim: int | None = None  # scores divided by sqrt(scale_dim), not sqrt(head_dim)
    scale: float | None = None  # scores multiplied by this, not 1/sqrt(head_dim) (Granite)
    clip: float | None = None  # q, k and v clamped to [-clip, clip] after projecting (OLMo)
    # Multi-head latent attention: head_dim is the queries' and keys' (nope + rope), and k, v
    # are the latent's projections (see Latent).
    latent: Latent | None = None
    sinks: Sinks | None = None  # a learned logit per head, softmaxed beside the scores

    @property
    def children(self) -> tuple[Node, ...]:
        lat = self.latent
        if lat is not None:  # in DeepSeek-V2's order
            queries = (lat.q_down, lat.q_norm, self.q) if lat.q_down is not None else (self.q,)
            return (*queries, self.k, lat.kv_norm, self.v, self.o)  # type: ignore[return-value]
        # The sinks are registered last, after o, as gpt-oss's attention registers them.
        rest = tuple(n for n in (self.q_norm, self.k_norm, self.sinks) if n is not None)
        return (self.q, self.k, self.v, self.o, *rest)

    @property
    def cached_per_position(self) -> sp.Expr:
        """Elements a KV cache keeps per position: a key and a value per key/value head, or
        latent attention's latent and its one rotated key."""
        if self.latent is not None:
            return self.latent.kv_rank + self.latent.rope_dim
        return self.n_kv_heads * (self.head_dim + self.v_head_dim)

    @property
    def v_head_dim(self) -> sp.Expr:
        """The width of one head's values (below head_dim in latent attention)."""
        return self.latent.v_dim if self.latent is not None else self.head_dim

    @property
    def mask(self) -> Mask:
        entry = self.position.entry
        return Mask(
            causal=self.causal,
            bias=entry.score_bias,
            learned_bias=entry.learned_bias,
            window=self.window,
        )

    @property
    def rotary(self) -> bool:
        return self.position.entry.rotary


@dataclass(frozen=True)
class MLP(Composite):
    up: Linear
    down: Linear
    gate: Linear | None  # a gated (GLU) MLP: down(act(gate(x)) * up(x))
    activation: Activation
    dropout: float = 0.0  # on the hidden units, before `down`, in training
    # gpt-oss's experts: (clamp(up, ±limit) + 1) · g · sigmoid(alpha · g), g = gate clamped
    # to at most limit, in place of `activation` (a gated MLP's; both or neither).
    swiglu_limit: float | None = None
    swiglu_alpha: float | None = None

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.gate, self.up, self.down) if self.gate is not None else (self.up, self.down)

    @property
    def clamped(self) -> bool:
        """Whether the hidden units are gpt-oss's clamped SwiGLU."""
        return self.swiglu_limit is not None

    @property
    def gated(self) -> bool:
        return self.gate is not None

    @property
    def hidden(self) -> sp.Expr:
        return self.up.out_features

    @property
    def entry(self) -> ActivationKind:
        return kinds.activation(self.activation)


@dataclass(frozen=True)
class Run:
    """`count` identical children from index `start`, `stride` apart: consecutive (stride 1),
    or one letter of a cycled window pattern (Gemma 2's windowed layers 0, 2, 4, ...: stride
    2), so that a pattern over a million layers is as many runs as it has letters. Each runs
    `applied` times in a row (ALBERT's layers sharing weights, stride 1): parameters count
    `count` modules, the forward pass `count * applied` calls."""

    start: sp.Expr
    count: sp.Expr
    node: Node
    applied: sp.Expr | int = 1
    stride: int = 1

    @property
    def calls(self) -> sp.Expr:
        """How many times the forward pass runs a module of the run."""
        return self.count * self.applied

    def indices(self, value: Callable[[sp.Expr], int]) -> range:
        """The module indices the run holds (`value` makes a size a number)."""
        start = value(self.start)
        return range(start, start + value(self.count) * self.stride, self.stride)

    def layers(self, value: Callable[[sp.Expr], int]) -> range:
        """The layers its calls are, counted from the stack's first: its indices, or for
        ALBERT's shared blocks each module's `applied` layers in a row."""
        if self.stride != 1:
            return self.indices(value)
        first = value(self.start) * value(self.applied)
        return range(first, first + value(self.calls))


def index_label(held: range) -> str:
    """A run's indices in a path or a listing: "3", "0-31", or a cycled pattern's "0,2,…,24"."""
    if len(held) == 1:
        return f"{held[0]}"
    if held.step == 1:
        return f"{held[0]}-{held[-1]}"
    return f"{held[0]},{held[1]},…,{held[-1]}" if len(held) > 2 else f"{held[0]},{held[1]}"


def within(layers: range, first: int, last: int) -> int:
    """How many of `layers` lie in [first, last): arithmetic, never a list of the layers (a
    run may hold a billion)."""
    return len(layers[_position(layers, first) : _position(layers, last)])


def _position(layers: range, index: int) -> int:
    """Where `index` would go in the ascending range `layers`."""
    if not layers or index <= layers.start:
        return 0
    return min(len(layers), -(-(index - layers.start) // layers.step))


@dataclass(frozen=True)
class Repeat(Node):
    """A ModuleList made of runs of identical modules (blocks, experts)."""

    runs: tuple[Run, ...]

    @property
    def children(self) -> tuple[Node, ...]:
        return tuple(run.node for run in self.runs)

    def spans(self, value: Callable[[sp.Expr], int], offset: int = 0) -> list[range]:
        """Each run's layers, counted from `offset` (the layers of the stacks before)."""
        spans = [run.layers(value) for run in self.runs]
        return [range(r.start + offset, r.stop + offset, r.step) for r in spans]


@dataclass(frozen=True)
class MoE(Composite):
    """A router and `n_experts` MLPs (the `experts` Repeat); each token uses `top_k` of them."""

    router: Router
    experts: Repeat
    n_experts: sp.Expr
    top_k: sp.Expr
    normalize: bool = True  # the top_k weights renormalised to sum to 1
    # Qwen2-MoE: an MLP every token goes through, scaled by sigmoid(shared_gate(x)).
    shared: MLP | None = None
    shared_gate: Linear | None = None
    routed_scale: float = 1.0  # the top_k weights multiplied by it (DeepSeek)
    # DeepSeek's group-limited routing: experts in `groups` groups, a token's from the
    # `top_groups` groups whose best expert scores highest (groups 1: every expert).
    groups: int = 1
    top_groups: int = 1

    @property
    def children(self) -> tuple[Node, ...]:
        parts = (self.router, self.experts, self.shared, self.shared_gate)
        return tuple(p for p in parts if p is not None)

    @property
    def expert(self) -> MLP:
        node = self.experts.runs[0].node
        assert isinstance(node, MLP)
        return node


@dataclass(frozen=True)
class Sublayer:
    """A sublayer of a block and its norm (None in a parallel block, whose norm is shared, and
    in an output-norm block, which normalises only the output)."""

    norm: Norm | None
    layer: Attention | MLP | MoE
    post_norm: Norm | None = None  # on the sublayer's output, before the add (sandwich, OLMo 2)


@dataclass(frozen=True)
class Block(Composite):
    residual: Residual
    width: sp.Expr  # the residual stream
    sublayers: tuple[Sublayer, ...]  # in data-flow order: attention, cross-attention, MLP
    shared_norm: Norm | None = None  # parallel blocks: the one norm all sublayers read
    dropout: float = 0.0  # on each sublayer's output, before the residual add, in training
    residual_multiplier: float = 1.0  # each sublayer's output scaled before the add (Granite)

    @property
    def entry(self) -> ResidualKind:
        return kinds.residual(self.residual)

    @property
    def children(self) -> tuple[Node, ...]:
        if self.shared_norm is not None:
            return (self.shared_norm, *(s.layer for s in self.sublayers))
        order = self.entry.order([(s.norm, s.layer) for s in self.sublayers])
        post = {id(s.layer): s.post_norm for s in self.sublayers if s.post_norm is not None}
        out: list[Node] = []
        for _, node in order:
            if node is None:  # a pre-norm sublayer without its norm (ModernBERT's first)
                continue
            out.append(node)
            if id(node) in post:  # a sandwich's second norm follows its sublayer
                out.append(post[id(node)])
        return tuple(out)

    @property
    def bare_first(self) -> bool:
        """A pre-norm block whose attention takes its input unnormalised: a stack's first
        after an embedding norm (ModernBERT)."""
        return self.entry.norm_position == "before" and self.sublayers[0].norm is None

    @property
    def attn(self) -> Attention:
        layer = self.sublayers[0].layer
        assert isinstance(layer, Attention)
        return layer

    @property
    def cross_attn(self) -> Attention | None:
        return next(
            (s.layer for s in self.sublayers if isinstance(s.layer, Attention) and s.layer.cross),
            None,
        )

    @property
    def ff(self) -> MLP | MoE:
        layer = self.sublayers[-1].layer
        assert isinstance(layer, (MLP, MoE))
        return layer

    @property
    def norms(self) -> tuple[Norm, ...]:
        return tuple(n for n in self.children if isinstance(n, Norm))


@dataclass(frozen=True)
class Stack(Composite):
    role: str  # encoder | decoder
    causal: bool
    position: Position
    scale_embedding: bool
    max_seq_len: sp.Expr
    width: sp.Expr
    blocks: Repeat
    # The rotation of the layers marked L in the spec's position_pattern, whose angles the
    # stack builds beside `position`'s (Gemma 3's local layers); None: every layer rotates
    # by `position` or not at all.
    local_position: Position | None = None
    pos_emb: Embedding | None = None  # a learned absolute position table
    rel_bias: Embedding | None = None  # T5's relative-position bias table (buckets × heads)
    emb_norm: Norm | None = None
    final_norm: Norm | None = None
    emb_dropout: float = 0.0  # on the embeddings (after their norm), in training
    out_dropout: float = 0.0  # on the stack's output (after the final norm), in training
    # Factorised embeddings (ALBERT, ELECTRA): narrower than the stack, projected up after
    # their norm and dropout.
    emb_proj: Linear | None = None
    # OPT-350m: emb_proj comes first (positions are added at the stack's width), and out_proj
    # takes the output back to the embeddings' width.
    proj_first: bool = False
    out_proj: Linear | None = None
    scale_in_dtype: bool = False  # sqrt(d_model) rounded to the embeddings' dtype (Gemma)
    emb_multiplier: float = 1.0  # the embeddings multiplied by this (Granite)

    @property
    def children(self) -> tuple[Node, ...]:
        parts = (
            self.pos_emb,
            self.rel_bias,
            self.emb_norm,
            self.emb_proj,
            self.blocks,
            self.final_norm,
            self.out_proj,
        )
        return tuple(p for p in parts if p is not None)

    @property
    def out_width(self) -> sp.Expr:
        """The width of what the stack returns (the embeddings' when projected back)."""
        return self.out_proj.out_features if self.out_proj is not None else self.width

    @property
    def emb_width(self) -> sp.Expr:
        """The width of the embeddings the stack receives (below `width` when factorised)."""
        return self.emb_proj.in_features if self.emb_proj is not None else self.width

    @property
    def block_variants(self) -> tuple[Block, ...]:
        out: list[Block] = []
        for run in self.blocks.runs:
            assert isinstance(run.node, Block)
            if run.node not in out:
                out.append(run.node)
        return tuple(out)

    @property
    def bidirectional_buckets(self) -> bool:
        """T5's relative buckets: an encoder splits them between earlier and later keys."""
        return not self.causal


@dataclass(frozen=True)
class Model(Composite):
    layout: Layout
    tok_emb: Embedding
    stacks: tuple[Stack, ...]
    d_model: sp.Expr
    vocab_size: sp.Expr
    scale_tied_output: bool = False
    type_emb: Embedding | None = None
    pooler: Linear | None = None
    lm_head: Linear | None = None
    # A masked-LM head's transform before lm_head: norm(activation(lm_transform(x))).
    lm_transform: Linear | None = None
    lm_norm: Norm | None = None
    lm_activation: Activation | None = None
    # ELECTRA's discriminator: score(activation(score_dense(x))), one value per token.
    score_dense: Linear | None = None
    score: Linear | None = None
    score_activation: Activation | None = None
    logit_softcap: float | None = None  # logits soft-capped, cap·tanh(logits / cap) (Gemma 2)
    logits_divisor: float = 1.0  # logits divided by this, before any soft-cap (Granite)
    hidden_divisor: float = 1.0  # the LM head's input divided by this (MiniCPM3)
    logit_scale: float = 1.0  # logits multiplied by this, before any soft-cap (Cohere)
    decoder_start_token: int | None = None  # an encoder-decoder's first decoder token

    @property
    def children(self) -> tuple[Node, ...]:
        parts = (
            self.tok_emb,
            self.type_emb,
            *self.stacks,
            self.pooler,
            self.lm_transform,
            self.lm_norm,
            self.lm_head,
            self.score_dense,
            self.score,
        )
        return tuple(p for p in parts if p is not None)

    def stack(self, role: str) -> Stack | None:
        return next((s for s in self.stacks if s.role == role), None)

    @property
    def max_seq_len(self) -> sp.Expr:
        """The longest sequence the model is built for (every stack shares it)."""
        return self.stacks[0].max_seq_len


@dataclass(frozen=True)
class Identity:
    """Who the model is: the spec's name and provenance, carried beside the tree."""

    name: str
    source: str | None = None  # where the numbers come from; None when the spec does not say
    family: str = ""
    hf_class: str | None = None
    overrides: tuple[str, ...] = ()  # the `--set` options it was built with, as given

    @property
    def title(self) -> str:
        """The name with what was asked: `gpt2 (n_layers=48)`."""
        return titled(self.name, self.overrides)


@dataclass(frozen=True)
class IR:
    """A compiled spec: the module tree plus the values of its dimension symbols."""

    identity: Identity
    root: Model
    env: dict[sp.Symbol, int]
    symbolic: bool = True  # sizes are sympy expressions (else plain integers)

    @property
    def name(self) -> str:
        return self.identity.name

    def value(self, expr: sp.Expr | int) -> int:
        """The concrete integer value of a size expression."""
        # xreplace is a plain structural substitution: much faster than subs, and enough here
        # because every symbol has a value.
        if isinstance(expr, int):
            return expr
        import sympy as sp

        result = sp.sympify(sp.sympify(expr).xreplace(self.env))
        if not result.is_Integer:
            raise ValueError(f"{expr} does not evaluate to an integer: {result}")
        return int(result)
