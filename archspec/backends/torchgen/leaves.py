"""Constructor calls for the IR's leaves: one PyTorch built-in module each.

Arguments that equal PyTorch's defaults are left out (`bias=True`), so a line only states what
is particular to the spec (`bias=False`).
"""

from __future__ import annotations

from archspec.backends.torchgen.exprs import ExprPrinter
from archspec.backends.torchgen.text import call
from archspec.ir.nodes import Embedding, Linear, Node, Norm, Repeat


def _args(node: Node, size: ExprPrinter, constants: dict[int, str] | None) -> tuple[str, list[str]]:
    """The class and the arguments of a leaf's constructor."""
    if isinstance(node, Embedding):
        return "nn.Embedding", [size(node.num, constants), size(node.dim)]
    if isinstance(node, Linear):
        bias = [] if node.bias else ["bias=False"]
        return "nn.Linear", [size(node.in_features), size(node.out_features), *bias]
    if isinstance(node, Norm):
        if node.kind == "rmsnorm":
            return "nn.RMSNorm", [size(node.dim), "eps=config.norm_eps"]
        bias = [] if node.bias else ["bias=False"]
        return "nn.LayerNorm", [size(node.dim), "eps=config.norm_eps", *bias]
    raise TypeError(f"not a leaf: {type(node).__name__}")


def assign(
    node: Node, size: ExprPrinter, level: int = 2, constants: dict[int, str] | None = None
) -> str:
    """`self.<name> = nn.Linear(config.d_model, config.d_ff, bias=False)` and the like, laid
    out for indentation `level` (a line in `__init__` by default)."""
    cls, args = _args(node, size, constants)
    return call(f"self.{node.name} = {cls}", args, level)


def module_list(repeat: Repeat, constructor: str, size: ExprPrinter) -> str:
    """`nn.ModuleList(MLP(config) for _ in range(config.n_experts))` for a one-run Repeat."""
    if len(repeat.runs) != 1:
        raise ValueError(f"{repeat.name}: expected one run of identical modules")
    count = size(repeat.runs[0].count)
    return f"nn.ModuleList({constructor} for _ in range({count}))"
