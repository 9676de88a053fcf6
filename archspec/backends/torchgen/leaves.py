"""Constructor calls for the IR's leaves (one PyTorch built-in module each, a norm's from its
kind; attention sinks an `nn.Parameter`) and the `nn.ModuleList` of a Repeat.

Arguments that equal PyTorch's defaults are left out (`bias=True`), so a line only states what
is particular to the spec (`bias=False`).
"""

from __future__ import annotations

from collections.abc import Callable

from archspec.backends.torchgen.exprs import ExprPrinter
from archspec.backends.torchgen.text import INDENT, LINE_LENGTH, call
from archspec.ir.nodes import Embedding, Linear, Node, Norm, Repeat, Router, Sinks


def _args(node: Node, size: ExprPrinter, constants: dict[int, str] | None) -> tuple[str, list[str]]:
    """The class and the arguments of a leaf's constructor."""
    if isinstance(node, Embedding):
        return "nn.Embedding", [size(node.num, constants), size(node.dim)]
    if isinstance(node, Linear):
        bias = [] if node.bias else ["bias=False"]
        # a router whose kind owns more tensors than the weight is a class of the file's own
        cls = node.entry.module if isinstance(node, Router) else None
        return cls or "nn.Linear", [size(node.in_features), size(node.out_features), *bias]
    if isinstance(node, Norm):
        entry = node.entry
        own = None if node.eps == size.norm_eps else node.eps
        return entry.constructor, entry.constructor_args(size(node.dim), node.bias, own)
    if isinstance(node, Sinks):  # a parameter of the attention itself, one logit per head
        return "nn.Parameter", [f"torch.zeros({size(node.heads)})"]
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
    if any(run.stride != 1 for run in repeat.runs):
        return _cycled(repeat, constructor)
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


def _cycled(repeat: Repeat, constructor: Callable[[Node], str]) -> list[str]:
    """A cycled window pattern's modules (Gemma 2: windowed, full, windowed, ...), each
    index's from the run whose indices hold it: as long at a million layers as at twelve.
    Runs of one class share a branch, the class with the most runs takes the `else`, and a
    run that holds every index of its residue is tested by the residue (`i % 6 == 5`)."""
    target, name = f"self.{repeat.name}", repeat.name
    total = sum(int(run.count) for run in repeat.runs)
    out = [
        "# Not all alike: runs of like modules a cycle's length apart; i's run builds i.",
        f"{name} = []",
        f"for i in range({total}):",
    ]
    groups: dict[str, list] = {}
    for run in repeat.runs:
        groups.setdefault(constructor(run.node), []).append(run)
    if len(groups) == 1:  # a pattern whose other letters fall past the last layer
        (module,) = groups
        return [
            "# All alike: the window pattern's other letters fall past the last layer.",
            f"{name} = []",
            f"for _ in range({total}):",
            f"{INDENT}{name}.append({module})",
            f"{target} = nn.ModuleList({name})",
        ]
    # the class most runs build is the else branch (the last of equals: the pattern's last)
    rest = max(reversed(groups), key=lambda module: len(groups[module]))
    tested = [module for module in groups if module != rest]
    branches = []
    for module in tested:
        condition = _indices(groups[module], total)
        if len(f"{INDENT * 3}elif {condition}:") <= LINE_LENGTH:
            branches.append((condition, module))
        else:  # too long for one line: a branch for each run
            branches += [(_indices([run], total), module) for run in groups[module]]
    for k, (condition, module) in enumerate(branches):
        out.append(f"{INDENT}{'if' if k == 0 else 'elif'} {condition}:")
        out.append(f"{INDENT * 2}{name}.append({module})")
    out += [f"{INDENT}else:", f"{INDENT * 2}{name}.append({rest})"]
    return [*out, f"{target} = nn.ModuleList({name})"]


def _indices(runs: list, total: int) -> str:
    """The condition on i that holds for the indices of `runs` and for no other index."""
    stride = runs[0].stride
    residues = [int(run.start) for run in runs]
    whole = all(
        run.stride == stride and int(run.start) < stride
        and int(run.start) + int(run.count) * stride >= total
        for run in runs
    )  # fmt: skip
    if whole and stride > 1:
        if len(residues) == 1:
            return f"i % {stride} == {residues[0]}"
        return f"i % {stride} in ({', '.join(map(str, residues))})"
    return " or ".join(
        f"i in range({int(run.start)}, {int(run.start) + int(run.count) * run.stride}, "
        f"{run.stride})"
        for run in runs
    )
