"""Parameter counts over the IR, as sympy expressions in the spec's dimensions.

`parameter_count` gives a module's total; `parameter_rows` gives the breakdown table: one row per
parameter-owning module (Linear, Embedding, Norm; weight and bias together; an attention's
sinks, a parameter of its own), repeated modules
aggregated into one row with a multiplier, tied weights counted once and marked.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from archspec.ir.nodes import (
    IR,
    MLP,
    Attention,
    Composite,
    Embedding,
    Linear,
    Model,
    MoE,
    Node,
    Norm,
    Repeat,
    Sinks,
    Stack,
)
from archspec.ir.visit import Visitor, walk

if TYPE_CHECKING:
    import sympy as sp

GROUPS = ("embeddings", "attention", "mlp", "norms", "pooler", "head")


class ParameterCounter(Visitor["sp.Expr | int"]):
    """Parameters of a module. With `active=True`, MoE layers count only the top-k experts a
    token is routed to (plus the router): the parameters one token touches."""

    def __init__(self, active: bool = False) -> None:
        self.active = active

    def visit_embedding(self, node: Embedding) -> sp.Expr:
        return node.num * node.dim

    def visit_linear(self, node: Linear) -> sp.Expr:
        weight = 0 if node.tied_to else node.in_features * node.out_features
        return weight + (node.out_features if node.bias else 0)

    def visit_norm(self, node: Norm) -> sp.Expr:
        return node.entry.parameters(node.dim, node.bias)

    def visit_sinks(self, node: Sinks) -> sp.Expr:
        return node.heads

    def visit_repeat(self, node: Repeat) -> sp.Expr:
        return sum(run.count * self.visit(run.node) for run in node.runs)

    def visit_moe(self, node: MoE) -> sp.Expr:
        if not self.active:
            return self.generic(node)
        # Qwen2-MoE's shared expert and its gate serve every token.
        shared = sum(self.visit(p) for p in (node.shared, node.shared_gate) if p is not None)
        return self.visit(node.router) + node.top_k * self.visit(node.expert) + shared

    def generic(self, node: Node) -> sp.Expr:
        if isinstance(node, Composite):
            return sum(self.visit(child) for child in node.children)
        return super().generic(node)


def parameter_count(node: Node, active: bool = False) -> sp.Expr:
    return ParameterCounter(active).visit(node)


def owns_parameters(leaf: Node) -> bool:
    """Whether a leaf holds tensors: all do but a norm of a kind without parameters (OLMo)."""
    return not isinstance(leaf, Norm) or leaf.entry.affine


@dataclass(frozen=True)
class Row:
    """One line of the breakdown: a parameter-owning module, aggregated over its repeats."""

    name: str
    group: str
    per_copy: sp.Expr  # parameters of one copy
    copies: sp.Expr
    shape: sp.Expr | None  # weight shape as (rows, cols) product; None for a tied weight
    shape_terms: tuple[sp.Expr, ...]  # factors of the weight shape, for display
    bias: sp.Expr | None  # bias size, if any
    tied_to: str | None = None

    @property
    def count(self) -> sp.Expr:
        return self.per_copy * self.copies


def _group(node: Node, ancestors: tuple[Node, ...]) -> str:
    parent = ancestors[-1] if ancestors else None
    if isinstance(node, Norm):
        return "norms"
    if any(isinstance(a, Attention) for a in ancestors):
        return "attention"
    if isinstance(parent, Stack) and node is parent.rel_bias:
        return "attention"  # T5's score bias, shared by the stack's attention layers
    if any(isinstance(a, (MLP, MoE)) for a in ancestors):
        return "mlp"
    if isinstance(parent, Model) and node is parent.pooler:
        return "pooler"
    if isinstance(parent, Model) and node in (
        parent.lm_head,
        parent.lm_transform,
        parent.score_dense,
        parent.score,
    ):
        return "head"
    return "embeddings"


def _shape(node: Node) -> tuple[tuple[sp.Expr, ...], sp.Expr | None]:
    """(weight shape factors, bias size) as PyTorch stores them."""
    if isinstance(node, Embedding):
        return (node.num, node.dim), None
    if isinstance(node, Linear):
        return (node.out_features, node.in_features), node.out_features if node.bias else None
    if isinstance(node, Norm):
        return (node.dim,), node.dim if node.bias else None
    if isinstance(node, Sinks):
        return (node.heads,), None
    raise TypeError(node)


def parameter_rows(ir: IR) -> list[Row]:
    """The breakdown of `ir`, in module order; rows sum exactly to the total."""
    counter = ParameterCounter()
    merged: dict[tuple[str, sp.Expr], list] = {}
    for placed in walk(ir.root):
        node = placed.node
        if not isinstance(node, (Embedding, Linear, Norm, Sinks)) or not owns_parameters(node):
            continue
        per_copy = counter.visit(node)
        key = (placed.path, per_copy)
        entry = merged.setdefault(key, [placed, 0, []])
        entry[1] += placed.copies
        entry[2].append(placed.concrete_path)
    rows = []
    for (path, per_copy), (placed, copies, concrete_paths) in merged.items():
        # A module that exists once (a dense first layer, a one-layer stack) keeps its index.
        name = concrete_paths[0] if len(concrete_paths) == 1 and copies == 1 else path
        terms, bias = _shape(placed.node)
        tied_to = getattr(placed.node, "tied_to", None)
        rows.append(
            Row(
                name=name,
                group=_group(placed.node, placed.ancestors),
                per_copy=per_copy,
                copies=copies,
                shape=None if tied_to else math.prod(terms),
                shape_terms=terms,
                bias=bias,
                tied_to=tied_to,
            )
        )
    return rows


def group_totals(rows: Iterable[Row]) -> dict[str, sp.Expr]:
    totals = {g: 0 for g in GROUPS}
    for row in rows:
        totals[row.group] += row.count
    return {g: t for g, t in totals.items() if t != 0}
