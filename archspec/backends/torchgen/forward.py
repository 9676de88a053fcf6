"""Writing a `forward` body from the ops of `archspec.ir.lower`, as torch.fx writes code.

Each op type has one render method that returns a Python expression over its inputs. A value
read exactly once is inlined where it is read, so a pre-norm block reads as a person would
write it (`x = x + self.attn(self.attn_norm(x), mask)`); a value read more than once (a
parallel block's shared norm) gets a statement and a name. The last op's value is returned.
What a block computes is thus stated once, in the lowering; this module only spells it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from archspec import kinds
from archspec.backends.torchgen.text import INDENT, LINE_LENGTH
from archspec.ir.lower import Lowered
from archspec.ir.nodes import Composite
from archspec.ir.ops import (
    ActivationOp,
    Add,
    Call,
    Clamp,
    ClampedSwiGLU,
    Dropout,
    LinearOp,
    Mul,
    NormOp,
    Op,
    Scale,
    Value,
)

# Operator precedence of a rendered expression: an operand binding more loosely than its
# operator gets parentheses.
ADD, MUL, ATOM = 1, 2, 3


@dataclass(frozen=True)
class Expr:
    text: str
    precedence: int
    reads: frozenset[int]  # ids of the named values the text refers to


class ForwardWriter:
    """The statements of one forward body.

    `extra_args(module)` gives the arguments a sublayer's call takes beyond its input (the
    mask, RoPE's angles, a KV cache); `bound` names the values the body receives besides the
    lowering's inputs (a stack's shared values: the mask, the encoder output). With
    `inline=False` every value gets a statement of its own, for bodies that read better
    step by step (attention).
    """

    def __init__(
        self,
        low: Lowered,
        extra_args: Callable[[Composite], list[str]] | None = None,
        level: int = 2,
        bound: dict[Value, str] | None = None,
        inline: bool = True,
    ) -> None:
        self.low = low
        self.extra_args = extra_args or (lambda module: [])
        self.inline = inline
        self.width = LINE_LENGTH - len(INDENT) * level
        self.uses: Counter[int] = Counter(id(v) for op in low.ops for v in op.inputs)
        self.readers: dict[int, list[Op]] = {}
        for op in low.ops:
            for value in op.inputs:
                self.readers.setdefault(id(value), []).append(op)
        self.names: dict[int, str] = {id(v): v.name for v in low.inputs}
        self.names |= {id(v): name for v, name in (bound or {}).items()}
        self.pending: dict[int, Expr] = {}
        self.lines: list[str] = []

    def write(self) -> list[str]:
        ops = self.low.ops
        for i, op in enumerate(ops):
            out = op.out
            assert out is not None
            last = i == len(ops) - 1
            expr = self._render_fitting(op, "return " if last else f"{out.name} = ")
            if expr is None:  # the op wrote its own statements and named its value
                if last:
                    self.lines.append(f"return {self.names[id(out)]}")
            elif last:
                assert out is self.low.out, "the last op computes what forward returns"
                self.lines.append(self._fit("return ", expr, op))
            elif self.inlines(op):
                self.pending[id(out)] = expr
            else:
                self._assign(out, expr, op)
        return self.lines

    def _render_fitting(self, op: Op, head: str) -> Expr | None:
        """The op's expression; if inlining its operands makes the line too long, they get
        statements of their own first (a reader would name them too)."""
        state = (dict(self.pending), Counter(self.uses), len(self.lines))
        expr = self.render(op)
        inlined = [v for v in op.inputs if id(v) in state[0]]
        if expr is None or len(head) + len(expr.text) <= self.width or not inlined:
            return expr
        self.pending, self.uses = state[0], state[1]
        del self.lines[state[2] :]
        for value in inlined:
            self._assign(value, self.pending.pop(id(value)), op)
        return self.render(op)

    def inlines(self, op: Op) -> bool:
        """Whether the op's value is written where it is read rather than named."""
        assert op.out is not None
        # What dropout zeroes reads better named: `h = F.gelu(...)`, then `dropout(h, ...)`.
        read_by_dropout = any(isinstance(r, Dropout) for r in self.readers.get(id(op.out), []))
        return self.inline and self.uses[id(op.out)] == 1 and not read_by_dropout

    # One method per op type.

    def render(self, op: Op) -> Expr | None:
        """The op's expression; or None from an op that writes statements of its own (a
        loop, a conditional) and binds its value's name in `self.names`."""
        method = getattr(self, f"render_{type(op).__name__.lower()}", None)
        if method is None:
            raise NotImplementedError(f"no code for the op {type(op).__name__}")
        return method(op)

    def render_linearop(self, op: LinearOp) -> Expr:
        return self._call(f"self.{op.module.name}", [self.arg(op.x)])

    def render_normop(self, op: NormOp) -> Expr:
        return self._call(f"self.{op.module.name}", [self.arg(op.x)])

    def render_activationop(self, op: ActivationOp) -> Expr:
        x = self.arg(op.x)
        return Expr(kinds.activation(op.kind).render(x.text), ATOM, x.reads)

    def render_mul(self, op: Mul) -> Expr:
        return self._binary("*", MUL, self.arg(op.a, MUL), self.arg(op.b, MUL + 1))

    def render_scale(self, op: Scale) -> Expr:
        """x * factor (or x / factor) for a constant the op carries (Granite's multipliers)."""
        assert op.factor is not None, "a scale of the stack's own is rendered by the stack"
        factor = Expr(repr(op.factor), ATOM, frozenset())
        if op.divide:
            return self._binary("/", MUL, self.arg(op.x, MUL), factor)
        return self._binary("*", MUL, self.arg(op.x, MUL), factor)

    def render_clampedswiglu(self, op: ClampedSwiGLU) -> Expr:
        # The file's `clamped_swiglu` (archspec.runtime.experts), transformers' order of ops.
        args = [self.arg(op.gate), self.arg(op.up), *self._constants(op.limit, op.alpha)]
        return self._call("clamped_swiglu", args)

    def render_clamp(self, op: Clamp) -> Expr:
        x = self.arg(op.x, ATOM)
        return Expr(f"{x.text}.clamp({-op.limit!r}, {op.limit!r})", ATOM, x.reads)

    def render_add(self, op: Add) -> Expr:
        return self._binary("+", ADD, self.arg(op.a, ADD), self.arg(op.b, ADD + 1))

    def render_dropout(self, op: Dropout) -> Expr:
        # The file's `dropout` helper: F.dropout with the same one-byte mask on every device.
        return self._call("dropout", [self.arg(op.x), *self._constants(op.p, "self.training")])

    def render_call(self, op: Call) -> Expr:
        args = [self.arg(a) for a in op.args]
        extra = [Expr(text, ATOM, frozenset()) for text in self.extra_args(op.module)]
        return self._call(f"self.{op.module.name}", [*args, *extra])

    # Operands.

    def arg(self, value: Value, precedence: int = 0) -> Expr:
        """The expression reading `value`: inlined if it was read once, else its name."""
        key = id(value)
        if key in self.pending:
            expr = self.pending.pop(key)
        else:
            expr = Expr(self.names[key], ATOM, frozenset({key}))
        self.uses[key] -= 1
        if expr.precedence < precedence:
            return Expr(f"({expr.text})", ATOM, expr.reads)
        return expr

    @staticmethod
    def _constants(*values: object) -> list[Expr]:
        return [Expr(v if isinstance(v, str) else repr(v), ATOM, frozenset()) for v in values]

    @staticmethod
    def _call(head: str, args: list[Expr]) -> Expr:
        text = f"{head}({', '.join(a.text for a in args)})"
        return Expr(text, ATOM, frozenset().union(*(a.reads for a in args)))

    @staticmethod
    def _binary(op: str, precedence: int, a: Expr, b: Expr) -> Expr:
        return Expr(f"{a.text} {op} {b.text}", precedence, a.reads | b.reads)

    # Statements.

    def _assign(self, value: Value, expr: Expr, op: Op) -> None:
        name = self._free_name(value)
        self.lines.append(self._fit(f"{name} = ", expr, op))
        self.names[id(value)] = name

    def _free_name(self, value: Value) -> str:
        """The value's own name, unless a value still to be read holds it (then a suffix)."""

        def taken(name: str) -> bool:
            live = {k for k, n in self.names.items() if n == name and self.uses[k] > 0}
            reads = set().union(*(e.reads for e in self.pending.values()))
            return bool(live | (reads & {k for k, n in self.names.items() if n == name}))

        name, suffix = value.name, 2
        while taken(name):
            name, suffix = f"{value.name}{suffix}", suffix + 1
        return name

    def _fit(self, head: str, expr: Expr, op: Op) -> str:
        """`head + expr`, which must fit on one line."""
        if len(head) + len(expr.text) <= self.width:
            return head + expr.text
        raise ValueError(
            f"generated line too long for {type(op).__name__}: {head}{expr.text}; "
            "name an intermediate value in the lowering"
        )
