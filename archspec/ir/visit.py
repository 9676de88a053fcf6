"""Walking the IR: a visitor with one method per node kind (like torch.fx.Interpreter)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from archspec.ir.nodes import Node, Repeat

if TYPE_CHECKING:
    import sympy as sp

T = TypeVar("T")

# Names for the index of a repeated module, outermost first: blocks.i.moe.experts.j.up
INDEX_NAMES = "ijklmn"


class Visitor(Generic[T]):
    """`visit(node)` calls `visit_<kind>` (e.g. `visit_linear`), that of the nearest kind it
    extends (a Router is a Linear) when its own has none, falling back to `generic`."""

    def visit(self, node: Node) -> T:
        for kind in type(node).__mro__[:-2]:  # not Node's own, nor object's
            method = getattr(self, f"visit_{kind.__name__.lower()}", None)
            if method is not None:
                return method(node)
        return self.generic(node)

    def generic(self, node: Node) -> T:
        raise NotImplementedError(f"{type(self).__name__} has no rule for {type(node).__name__}")


def join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix and name else prefix or name


@dataclass(frozen=True)
class Placed:
    """A node placed in the tree: its attribute path and how many copies of it exist."""

    node: Node
    path: str  # with repeated indices written as i, j, ...
    concrete_path: str  # with the index where a run holds a single module, else as `path`
    copies: sp.Expr
    ancestors: tuple[Node, ...]


def walk(root: Node) -> Iterator[Placed]:
    """Every node once per distinct position, parents before children; runs are not unrolled."""

    def go(node: Node, path: str, concrete: str, copies: sp.Expr, ancestors: tuple, depth: int):
        yield Placed(node, path, concrete, copies, ancestors)
        inner = (*ancestors, node)
        if isinstance(node, Repeat):
            index = INDEX_NAMES[depth]
            for run in node.runs:
                single = run.count == 1
                yield from go(
                    run.node,
                    join(path, index),
                    join(concrete, str(run.start) if single else index),
                    copies * run.count,
                    inner,
                    depth + 1,
                )
            return
        for child in node.children:
            yield from go(
                child, join(path, child.name), join(concrete, child.name), copies, inner, depth
            )

    yield from go(root, root.name, root.name, 1, (), 0)
