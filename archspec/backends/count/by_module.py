"""Forward FLOPs per module (`archspec count --seq S --by module`), exact like the rest.

fvcore, calflops, DeepSpeed's profiler and torchinfo attribute FLOPs to the module that runs
them; `count` groups them by component. This is the same interpreter as `flops.py`, keeping
the module path where each op runs: a Linear's matmul goes to the Linear, the attention core
(QKᵀ, softmax, AV) to its attention module, a residual add to its block, a norm to the norm.
A run of identical blocks is interpreted once, as everywhere, and shown as one row per module
with its copies (`decoder.blocks.0-31.attn.q`, × 32), so the view does not grow with depth.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sympy as sp

from archspec.backends.count.conventions import Convention
from archspec.backends.count.flops import FlopCounter
from archspec.backends.count.flops_report import whole
from archspec.backends.count.passes import forward_pass
from archspec.ir import ops
from archspec.ir.lower import lower_block, lower_model, lower_stack
from archspec.ir.nodes import IR, Block, index_label
from archspec.ir.visit import join


class ModuleCounter(FlopCounter):
    """FlopCounter that also files every FLOP under the module path it runs in."""

    def __init__(self, ir: IR, *args, path: str = "", **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.ir = ir  # for the block indices in paths
        self.path = path
        self.rows: dict[str, list] = {}  # path -> [flops terms, copies, shape]
        # (path, shape) of the op being counted: a Linear's (in, out), a norm's label
        self._where: tuple[str, Any] | None = None

    def add(self, component: str, kind: str, flops: sp.Expr) -> None:
        super().add(component, kind, flops)
        path, shape = self._where or (self.path, "")
        entry = self.rows.setdefault(path, [[], 1, shape])
        entry[0].append(flops)

    @contextmanager
    def _at(self, name: str, shape) -> Iterator[None]:
        self._where = (join(self.path, name), shape)
        try:
            yield
        finally:
            self._where = None

    def op_linearop(self, op: ops.LinearOp) -> None:
        m = op.module
        with self._at(m.name, (m.in_features, m.out_features)):
            super().op_linearop(op)

    def op_normop(self, op: ops.NormOp) -> None:
        with self._at(op.module.name, op.module.entry.label):
            super().op_normop(op)

    def op_call(self, op: ops.Call) -> None:
        outer = self.path
        self.path = join(outer, op.module.name)
        super().op_call(op)
        self.path = outer

    def op_blocks(self, op: ops.Blocks) -> None:
        self.in_block = True
        for run in op.repeat.runs:
            assert isinstance(run.node, Block)
            index = index_label(run.indices(self.ir.value))
            count = self.ir.value(run.calls)  # a module sharing its weights runs several times
            inner = ModuleCounter(self.ir, self.conv, self.lengths, self.ctx, self.training,
                                  path=join(self.path, f"{op.repeat.name}.{index}"))  # fmt: skip
            inner.in_block = True
            inner.run(lower_block(run.node).ops)
            self.tally.merge(inner.tally, count)
            for path, (terms, copies, shape) in inner.rows.items():
                self.rows[path] = [[count * sp.Add(*terms)], copies * count, shape]
        self.in_block = False


def module_flops(ir: IR, conv: Convention, values: dict) -> list[dict[str, Any]]:
    """The forward pass's FLOPs per module at `values` (B, S, ...): one row per module path, in
    the order the forward runs them, with its copies and its share of the total."""
    model = ir.root
    run = forward_pass(model.layout)
    rows: dict[str, list] = {}
    for segment in lower_model(model):
        lengths = run.lengths(segment.role)
        if lengths is None:
            continue
        counter = ModuleCounter(ir, conv, lengths)
        counter.run(segment.embed)
        stack_ops, ctx = lower_stack(segment.stack, segment.x, segment.memory)
        counter.ctx = ctx
        counter.path = segment.stack.name
        counter.run(stack_ops.ops)
        counter.path = ""
        if conv.head:
            counter.run(segment.heads)
        for path, (terms, copies, shape) in counter.rows.items():
            rows.setdefault(path, [[], copies, shape])[0] += terms
    out = []
    for path, (terms, copies, shape) in rows.items():
        flops = whole(sp.Add(*terms), values)
        if not flops:
            continue
        if isinstance(shape, tuple):
            shape = f"{ir.value(shape[0]):,} → {ir.value(shape[1]):,}"
        out.append({"module": path, "copies": ir.value(copies), "shape": shape, "flops": flops})
    total = sum(r["flops"] for r in out)
    for r in out:
        r["share"] = r["flops"] / total if total else 0.0
    return out
