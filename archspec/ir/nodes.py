"""IR node kinds.

The IR is a tree of frozen dataclasses. Each node's `name` is its attribute name inside its
parent, so joining names from the root gives the attribute path in the generated PyTorch model
(`decoder.blocks.0.attn.q`). Children are kept in the order the generated `__init__` registers
them, which is also the order `print(model)` shows.

Sizes are sympy expressions in the spec's dimension symbols (`d_model`, `n_heads`, ...); the
concrete values live in `IR.env`. An IR built with `symbolic=False` carries the same sizes as
plain integers instead: the same arithmetic, without importing sympy, which is most of the start-up
time of `archspec count` (see `build_ir`). A run of identical blocks is one `Repeat` with a symbolic
count, so the cost of any analysis does not grow with depth.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sympy as sp

from archspec.spec.schema import Spec


@dataclass(frozen=True)
class Node:
    name: str

    @property
    def children(self) -> tuple[Node, ...]:
        return ()


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
class Norm(Node):
    kind: str  # layernorm | rmsnorm
    dim: sp.Expr
    bias: bool
    eps: float


# Composites: modules the generated code defines. `parts` are the children in order.


@dataclass(frozen=True)
class Composite(Node):
    parts: tuple[Node, ...]

    @property
    def children(self) -> tuple[Node, ...]:
        return self.parts

    def part(self, name: str) -> Node | None:
        return next((p for p in self.parts if p.name == name), None)


@dataclass(frozen=True)
class Position:
    """How positions enter a stack; shared by the stack and its attention layers."""

    kind: str  # learned | sinusoidal | rope | alibi | relative_bias | none
    offset: int = 0
    theta: float = 10000.0
    num_buckets: int = 32
    max_distance: int = 128


@dataclass(frozen=True)
class Attention(Composite):
    n_heads: sp.Expr
    n_kv_heads: sp.Expr
    head_dim: sp.Expr
    causal: bool
    cross: bool  # keys and values come from the encoder
    scale_scores: bool
    position: Position  # rope / alibi / relative_bias act inside attention
    bidirectional_buckets: bool = True  # relative_bias: encoder buckets are two-sided


@dataclass(frozen=True)
class MLP(Composite):
    activation: str
    gated: bool


@dataclass(frozen=True)
class MoE(Composite):
    """A router and `n_experts` MLPs (the `experts` Repeat); each token uses `top_k` of them."""

    n_experts: sp.Expr
    top_k: sp.Expr


@dataclass(frozen=True)
class Block(Composite):
    residual: str  # pre | post | parallel


@dataclass(frozen=True)
class Run:
    """`count` consecutive identical children starting at index `start`."""

    start: sp.Expr
    count: sp.Expr
    node: Node


@dataclass(frozen=True)
class Repeat(Node):
    """A ModuleList made of runs of identical modules (blocks, experts)."""

    runs: tuple[Run, ...]

    @property
    def children(self) -> tuple[Node, ...]:
        return tuple(run.node for run in self.runs)


@dataclass(frozen=True)
class Stack(Composite):
    role: str  # encoder | decoder
    causal: bool
    position: Position
    scale_embedding: bool
    max_seq_len: sp.Expr


@dataclass(frozen=True)
class Model(Composite):
    layout: str
    scale_tied_output: bool
    d_model: sp.Expr
    vocab_size: sp.Expr


@dataclass(frozen=True)
class IR:
    """A compiled spec: the module tree plus the values of its dimension symbols."""

    spec: Spec
    root: Model
    env: dict[sp.Symbol, int]
    symbolic: bool = True  # sizes are sympy expressions (else plain integers)

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
