"""The IR as the module tree torch prints: one `Module` per line that opens a module.

The generated model registers, in IR order and under IR names, one module per IR node: a
composite becomes its generated class (named by `archspec.ir.classes`: `Block`, or
`EncoderBlock` and `DecoderBlock` where they differ), a `Repeat` an `nn.ModuleList`, a leaf a
torch built-in. So the tree torch walks in
`repr(model)` is the IR tree, except for one thing torch adds: `ModuleList.__repr__` folds
consecutive children whose reprs are equal into one `(1-5): 5 x Block(` entry. Here a run of
`count` identical modules is one folded entry, and adjacent runs merge when their reprs are
equal, since torch compares strings, not where the modules came from.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from archspec.backends.count.params import parameter_count
from archspec.backends.printer import leaves
from archspec.backends.printer.text import render
from archspec.errors import SpecError
from archspec.ir.classes import class_name, class_names
from archspec.ir.nodes import (
    IR,
    Attention,
    Composite,
    Embedding,
    Linear,
    MoE,
    Node,
    Norm,
    Repeat,
    Router,
    Run,
    index_label,
)
from archspec.ir.visit import Visitor
from archspec.safety.limits import MAX_LAYER_RUNS


@dataclass(frozen=True)
class Module:
    """One module as torch prints it; a folded ModuleList entry stands for `copies` modules."""

    key: str  # label inside the parent: attribute name, or index range "0-11" in a ModuleList
    cls: str  # class name, as `_get_name()` returns it
    args: str | None = None  # a leaf's one-line extra_repr; None for a container
    children: tuple[Module, ...] = ()
    copies: int = 1  # > 1 for a folded entry: `(0-11): 12 x Block(` has 12
    params: int = 0  # parameters of one copy (a tied weight counted at its owner only)
    tied_to: str | None = None  # a Linear whose weight is another module's

    @property
    def total(self) -> int:
        return self.params * self.copies

    def to_dict(self, depth: int | None = None) -> dict[str, Any]:
        """Nested JSON: name, class, params (one copy), copies and total where folded, the
        leaf repr, children (absent below `depth`, with `"truncated": true` instead)."""
        data: dict[str, Any] = {"name": self.key, "class": self.cls, "params": self.params}
        if self.copies != 1:
            data |= {"copies": self.copies, "total": self.total}
        if self.tied_to:
            data["tied_to"] = self.tied_to
        if self.args is not None:
            data["repr"] = f"{self.cls}({self.args})"
        elif self.children:
            if depth is not None and depth <= 0:
                data["truncated"] = True
            else:
                inner = None if depth is None else depth - 1
                data["children"] = [child.to_dict(inner) for child in self.children]
        return data


def module_tree(ir: IR, by_run: bool = False) -> Module:
    """The module tree of `ir` as `print(model)` shows it, with parameter counts; `by_run`:
    a ModuleList too long to list (a cycled window pattern over many layers) as one entry
    per run of identical modules, where print(model) is refused."""
    return _TreeBuilder(ir, by_run).visit(ir.root)


class _TreeBuilder(Visitor[Module]):
    def __init__(self, ir: IR, by_run: bool) -> None:
        self.ir = ir
        self.by_run = by_run
        # The generated classes, named as the code generator names them.
        self.classes = class_names(ir.root)

    def _leaf(self, node: Node, cls_args: tuple[str, str], **extra: Any) -> Module:
        cls, args = cls_args
        params = self.ir.value(parameter_count(node))
        return Module(node.name, cls, args, params=params, **extra)

    @staticmethod
    def _container(name: str, cls: str, children: tuple[Module, ...]) -> Module:
        # A container's parameters are its children's, as parameter_count sums them; adding
        # the integers here saves re-walking each subtree with sympy.
        return Module(name, cls, children=children, params=sum(c.total for c in children))

    def visit_embedding(self, node: Embedding) -> Module:
        v = self.ir.value
        return self._leaf(node, leaves.embedding(v(node.num), v(node.dim)))

    def visit_linear(self, node: Linear) -> Module:
        v = self.ir.value
        cls_args = leaves.linear(v(node.in_features), v(node.out_features), node.bias)
        return self._leaf(node, cls_args, tied_to=node.tied_to)

    def visit_router(self, node: Router) -> Module:
        """A router whose kind owns tensors beside the weight: its class, Linear's repr."""
        module = self.visit_linear(node)
        if node.entry.module is None:
            return module
        return replace(module, cls=node.entry.module)

    def visit_norm(self, node: Norm) -> Module:
        entry = node.entry
        args = entry.extra_repr(
            self.ir.value(node.dim), node.eps, node.bias, leaves.layernorm_prints_bias()
        )
        return self._leaf(node, (entry.torch_class, args))

    def visit_repeat(self, node: Repeat) -> Module:
        visited = {id(run): self.visit(run.node) for run in node.runs}
        if self.by_run and _listed(node, self.ir) > MAX_LAYER_RUNS:
            # Too long to list: one entry per run, its indices a cycle's length apart.
            value = self.ir.value
            children = tuple(
                replace(visited[id(r)], key=index_label(r.indices(value)), copies=value(r.count))
                for r in node.runs
            )
            return self._container(node.name, "ModuleList", children)
        # [module, its repr, first index, how many]; a run whose repr equals the previous
        # entry's extends it, exactly as ModuleList.__repr__ would fold the unrolled list.
        groups: list[list[Any]] = []
        index = 0
        texts = {key: render(module) for key, module in visited.items()}
        for run, count in _stretches(node, self.ir):
            text = texts[id(run)]
            if groups and groups[-1][1] == text:
                groups[-1][3] += count
            else:
                groups.append([visited[id(run)], text, index, count])
            index += count
        children = tuple(
            replace(module, key=f"{start}" if n == 1 else f"{start}-{start + n - 1}", copies=n)
            for module, _, start, n in groups
        )
        return self._container(node.name, "ModuleList", children)

    def visit_moe(self, node: MoE) -> Module:
        # The routed experts are one module, their weights stacked (`Experts`).
        children = tuple(
            self._experts(node) if part is node.experts else self.visit(part)
            for part in node.children
        )
        return self._container(node.name, class_name(self.classes, node), children)

    def _experts(self, node: MoE) -> Module:
        v, expert = self.ir.value, node.expert
        args = leaves.experts(
            v(node.n_experts),
            v(expert.up.in_features),
            v(expert.hidden),
            expert.gated,
            expert.up.bias,
        )
        return self._leaf(node.experts, args)

    def visit_attention(self, node: Attention) -> Module:
        if node.sinks is None:
            return self.generic(node)
        # The sinks are a parameter of the attention itself: print(model) lists modules only,
        # but the attention's parameters include them.
        children = tuple(self.visit(part) for part in node.children if part is not node.sinks)
        params = sum(c.total for c in children) + self.ir.value(node.sinks.heads)
        return Module(node.name, class_name(self.classes, node), children=children, params=params)

    def generic(self, node: Node) -> Module:
        if isinstance(node, Composite):
            # A generated class has no extra_repr: its line is its name.
            children = tuple(self.visit(part) for part in node.children)
            return self._container(node.name, class_name(self.classes, node), children)
        return super().generic(node)


def _listed(node: Repeat, ir: IR) -> int:
    """Entries a listing of the ModuleList has at most: a run of stride 1 folds into one."""
    return sum(ir.value(run.count) if run.stride != 1 else 1 for run in node.runs)


def _stretches(node: Repeat, ir: IR) -> list[tuple[Run, int]]:
    """The runs' modules in index order as (run, consecutive modules): a run of stride 1 is
    one stretch, a strided run (a cycled window pattern) one per module. A listing that
    long is what print(model) shows, one entry each, so it is bounded."""
    starts: list[tuple[int, Run, int]] = []
    for run in node.runs:
        count = ir.value(run.count)
        if run.stride == 1 or count == 1:
            starts.append((ir.value(run.start), run, count))
            continue
        if _listed(node, ir) > MAX_LAYER_RUNS:
            raise SpecError(
                f"{ir.name}: print lists the modules of '{node.name}' one by one where they "
                f"alternate, at most {MAX_LAYER_RUNS:,}, and this one has "
                f"{sum(ir.value(r.count) for r in node.runs):,}",
                hint="count, draw and report show a model of any depth",
            )
        starts += [(i, run, 1) for i in run.indices(ir.value)]
    return [(run, count) for _, run, count in sorted(starts, key=lambda s: s[0]) if count]
