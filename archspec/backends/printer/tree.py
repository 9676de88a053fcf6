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
from archspec.ir.classes import class_name, class_names
from archspec.ir.nodes import IR, Composite, Embedding, Linear, Node, Norm, Repeat
from archspec.ir.visit import Visitor


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


def module_tree(ir: IR) -> Module:
    """The module tree of `ir` as `print(model)` shows it, with parameter counts."""
    return _TreeBuilder(ir).visit(ir.root)


class _TreeBuilder(Visitor[Module]):
    def __init__(self, ir: IR) -> None:
        self.ir = ir
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

    def visit_norm(self, node: Norm) -> Module:
        entry = node.entry
        args = entry.extra_repr(
            self.ir.value(node.dim), node.eps, node.bias, leaves.layernorm_prints_bias()
        )
        return self._leaf(node, (entry.torch_class, args))

    def visit_repeat(self, node: Repeat) -> Module:
        # [module, its repr, first index, how many]; a run whose repr equals the previous
        # entry's extends it, exactly as ModuleList.__repr__ would fold the unrolled list.
        groups: list[list[Any]] = []
        index = 0
        for run in node.runs:
            count = self.ir.value(run.count)
            if count == 0:
                continue
            module = self.visit(run.node)
            text = render(module)
            if groups and groups[-1][1] == text:
                groups[-1][3] += count
            else:
                groups.append([module, text, index, count])
            index += count
        children = tuple(
            replace(module, key=f"{start}" if n == 1 else f"{start}-{start + n - 1}", copies=n)
            for module, _, start, n in groups
        )
        return self._container(node.name, "ModuleList", children)

    def generic(self, node: Node) -> Module:
        if isinstance(node, Composite):
            # A generated class has no extra_repr: its line is its name.
            children = tuple(self.visit(part) for part in node.children)
            return self._container(node.name, class_name(self.classes, node), children)
        return super().generic(node)
