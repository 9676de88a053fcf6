"""`archspec print`: the module tree of the generated PyTorch model, as `print(model)` shows it.

The module is not named `print.py` so that importing it does not shadow the builtin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archspec.cli.application import app
from archspec.cli.common import (
    DebugOpt,
    JsonOpt,
    SetOpt,
    SpecArg,
    compile_spec,
    print_json,
    stdout,
    user_errors,
    write_stdout,
)
from archspec.cli.options import PrintDepth, PrintParams, PrintTree

if TYPE_CHECKING:
    from archspec.backends.printer import Module


@app.command("print")
def print_tree(
    spec: SpecArg, set_: SetOpt = None, params: PrintParams = False, depth: PrintDepth = None,
    tree: PrintTree = False, json_: JsonOpt = False, debug: DebugOpt = False,
) -> None:  # fmt: skip
    """Print the module tree of the PyTorch model archspec generates for a spec: exactly what
    `print(model)` shows, without importing torch. Identical consecutive modules fold the way
    torch folds them, e.g. `(0-11): 12 x Block(`.

    `--json` prints `{"name", "params", "repr", "tree"}`: `repr` is the text (cut at
    `--depth`, without counts); `tree` is nested `{"name", "class", "params", "children"}`
    with `"repr"` on leaves, `"copies"` and `"total"` on folded entries, `"tied_to"` on a tied
    head, and `"truncated": true` where `--depth` cut the children. `params` is per copy.

    Examples:

        archspec print t5-small

        archspec print bert-base --params --depth 4

        archspec print mixtral-8x7b --tree --depth 3

        archspec print gpt2 --set n_layers=2 --json
    """
    from archspec.backends.printer import module_tree, render

    with user_errors(debug, json_):
        ir = compile_spec(spec, set_, symbolic=False)  # the tree needs numbers, not formulas
        root = module_tree(ir)
    if json_:
        print_json(
            {
                "name": ir.name,
                "overrides": list(ir.identity.overrides),
                "params": root.total,
                "repr": render(root, depth),
                "tree": root.to_dict(depth),
            }
        )
    elif tree:
        _draw_tree(root, depth, params)
    else:
        # Plain text, not a rich Console: the output must match print(model) byte for byte,
        # and rich would wrap long lines and read `[...]` as markup.
        write_stdout(render(root, depth, params) + "\n")


def _draw_tree(root: Module, depth: int | None, params: bool) -> None:
    from rich.markup import escape
    from rich.tree import Tree

    def label(module: Module) -> str:
        text = f"[bold]{escape(module.key)}[/bold]: " if module.key else ""
        if module.copies > 1:
            text += f"{module.copies} x "
        text += f"[cyan]{module.cls}[/cyan]"
        if module.args is not None:
            text += escape(f"({module.args})")
        if params:
            note = f"{module.total:,} params"
            if module.copies > 1:
                note += f" ({module.copies} x {module.params:,})"
            if module.tied_to:
                note += f" (weight tied to {module.tied_to})"
            text += f"  [dim]{note}[/dim]"
        return text

    def add(branch: Tree, module: Module, depth_left: int | None) -> None:
        if depth_left is not None and depth_left <= 0:
            if module.children:
                branch.add("[dim]...[/dim]")
            return
        inner = None if depth_left is None else depth_left - 1
        for child in module.children:
            add(branch.add(label(child)), child, inner)

    top = Tree(label(root))
    add(top, root, depth)
    stdout().print(top)
