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
    """`visit(node)` calls `visit_<kind>` (e.g. `visit_linear`), falling back to `generic`."""

    def visit(self, node: Node) -> T:
        method = getattr(self, f"visit_{type(node).__name__.lower()}", None)
        return method(node) if method is not None else self.generic(node)

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
