"""The generated block classes: one per distinct block (an encoder's and a decoder's, a dense
and a mixture-of-experts one), each registering its norms and sublayers in the IR's order.

The order follows the data flow (a pre-norm block registers each norm before its sublayer, a
post-norm block after it), and the forward is written from the block's lowering
(`lower_block`), which is where each residual layout's wiring is stated, once.
"""

from __future__ import annotations

from archspec.backends.torchgen.exprs import ExprPrinter
from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.forward import ForwardWriter
from archspec.backends.torchgen.leaves import assign
from archspec.backends.torchgen.text import class_, method
from archspec.ir.lower import lower_block
from archspec.ir.nodes import Block, Composite, Stack


def _init(f: Features, node: Block, size: ExprPrinter) -> str:
    body = ["super().__init__()"]
    for part in node.children:
        if isinstance(part, Composite):
            body.append(f"self.{part.name} = {f.cls(part)}(config)")
        else:
            body.append(assign(part, size))
    return method("__init__", ["config: Config"], "None", body)


def _forward(f: Features, node: Block, stack: Stack) -> str:
    body = ForwardWriter(lower_block(node), lambda layer: f.sublayer_args(stack, layer)).write()
    return method("forward", f.block_params(stack), "Tensor", body)


def block_class(f: Features, node: Block, stack: Stack, size: ExprPrinter) -> str:
    return class_(
        f"class {f.cls(node)}(nn.Module):",
        node.entry.doc,
        _init(f, node, size),
        _forward(f, node, stack),
    )
