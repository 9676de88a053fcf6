"""Rendering a module tree as torch's repr, optionally cut at a depth or annotated with counts.

torch builds the repr recursively (torch/nn/modules/module.py and container.py): a module with
children prints `Name(`, then one `(key): child` line per child, then `)`; `_addindent` shifts
every line of a child by two spaces; a leaf prints `Name(extra_repr)` on one line; a module
with neither prints `Name()`; a folded ModuleList entry prints `(start-end): n x child` and a
single one `(i): child`. Working line by line gives the same text and lets each line that
opens a module carry a note.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from archspec.backends.printer.tree import Module

Line = tuple[str, "Module | None"]  # text, and the module it opens (None for a closing `)`)


def render(module: Module, depth: int | None = None, params: bool = False) -> str:
    """`module` as torch prints it. With `depth`, modules that deep show their children as
    `Name(...)`; with `params`, each module's line ends in a right-aligned parameter count."""
    lines = _lines(module, depth)
    if not params:
        return "\n".join(text for text, _ in lines)
    return "\n".join(_annotate(lines))


def _lines(module: Module, depth: int | None) -> list[Line]:
    if module.args is not None:
        return [(f"{module.cls}({module.args})", module)]
    if not module.children:
        return [(f"{module.cls}()", module)]
    if depth is not None and depth <= 0:
        return [(f"{module.cls}(...)", module)]
    inner = None if depth is None else depth - 1
    lines: list[Line] = [(f"{module.cls}(", module)]
    for child in module.children:
        (head, owner), *rest = _lines(child, inner)
        fold = f"{child.copies} x " if child.copies > 1 else ""
        lines.append((f"  ({child.key}): {fold}{head}", owner))
        lines += [("  " + text, owner) for text, owner in rest]
    lines.append((")", None))
    return lines


def _annotate(lines: list[Line]) -> list[str]:
    # One column for every note, so the counts line up and the tree stays readable; counts
    # inside a folded entry are per copy, the entry's own line gives the multiplication.
    width = max(len(text) for text, _ in lines)
    digits = max(len(f"{m.total:,}") for _, m in lines if m is not None)
    out = []
    for text, module in lines:
        if module is None:
            out.append(text)
            continue
        note = f"# {module.total:>{digits},} params"
        if module.copies > 1:
            note += f"  ({module.copies} x {module.params:,})"
        if module.tied_to:
            note += f"  (weight tied to {module.tied_to})"
        out.append(f"{text:<{width}}  {note}")
    return out
