"""Constructor calls for the IR's leaves (one PyTorch built-in module each, a norm's from its
kind) and the `nn.ModuleList` of a Repeat.

Arguments that equal PyTorch's defaults are left out (`bias=True`), so a line only states what
is particular to the spec (`bias=False`).
"""

from __future__ import annotations

from collections.abc import Callable

from archspec.backends.torchgen.exprs import ExprPrinter
from archspec.backends.torchgen.text import INDENT, LINE_LENGTH, call
from archspec.ir.nodes import Embedding, Linear, Node, Norm, Repeat


def _args(node: Node, size: ExprPrinter, constants: dict[int, str] | None) -> tuple[str, list[str]]:
    """The class and the arguments of a leaf's constructor."""
    if isinstance(node, Embedding):
        return "nn.Embedding", [size(node.num, constants), size(node.dim)]
    if isinstance(node, Linear):
        bias = [] if node.bias else ["bias=False"]
        return "nn.Linear", [size(node.in_features), size(node.out_features), *bias]
    if isinstance(node, Norm):
        entry = node.entry
        return entry.constructor, entry.constructor_args(size(node.dim), node.bias)
    raise TypeError(f"not a leaf: {type(node).__name__}")


def assign(
    node: Node, size: ExprPrinter, level: int = 2, constants: dict[int, str] | None = None
) -> str:
    """`self.<name> = nn.Linear(config.d_model, config.d_ff, bias=False)` and the like, laid
    out for indentation `level` (a line in `__init__` by default)."""
    cls, args = _args(node, size, constants)
    return call(f"self.{node.name} = {cls}", args, level)


def module_list(repeat: Repeat, constructor: Callable[[Node], str], size: ExprPrinter) -> list[str]:
    """`self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))`, or for
    runs of different modules a list built run by run, first to last (the indices torch
    gives them). `constructor(node)` is the call that builds one module of a run."""
    target = f"self.{repeat.name}"
    if len(repeat.runs) == 1:
        run = repeat.runs[0]
        count = size(run.count)
        built = f"{constructor(run.node)} for _ in range({count})"
        code = call(f"{target} = nn.ModuleList", [built], 2)
        if "\n" in code:  # a generator argument cannot take the trailing comma of a split call
            code = call(f"{target} = nn.ModuleList", [f"[{built}]"], 2)
        return [code]
    name = repeat.name
    out = ["# Not all alike: each run of identical modules in turn, in index order."]
    for i, run in enumerate(repeat.runs):
        count, module = size(run.count), constructor(run.node)
        built = f"[{module}]" if count == "1" else f"[{module} for _ in range({count})]"
        line = f"{name} = {built}" if i == 0 else f"{name} += {built}"
        if len(INDENT * 2 + line) > LINE_LENGTH:
            line = f"for _ in range({count}):\n{INDENT}{name}.append({module})"
            out += [f"{name} = []"] if i == 0 else []
        out.append(line)
    return [*out, f"{target} = nn.ModuleList({name})"]
