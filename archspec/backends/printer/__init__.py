"""The module-tree printer: what `print(model)` shows for the PyTorch model archspec generates.

The generated model mirrors the IR one to one (classes named by IR kind, a `Repeat` as an
`nn.ModuleList`, leaves as torch built-ins), so its printout can be written from the IR alone,
character for character, without importing torch: this path stays as fast as `archspec count`.

- `leaves`: the one-line reprs of the torch built-ins (Embedding, Linear, LayerNorm, RMSNorm).
- `tree`: the IR as the tree torch prints, with ModuleList folding and parameter counts.
- `text`: rendering that tree as torch's repr, optionally cut at a depth or annotated.
"""

from __future__ import annotations

from archspec.backends.printer.text import render
from archspec.backends.printer.tree import Module, module_tree
from archspec.ir.nodes import IR

__all__ = ["Module", "module_repr", "module_tree", "render"]


def module_repr(ir: IR, depth: int | None = None, params: bool = False) -> str:
    """What `print(model)` shows for the model generated from `ir` (without the final newline);
    `depth` and `params` as in `render`."""
    return render(module_tree(ir), depth, params)
