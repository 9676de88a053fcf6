"""The generated class of a multi-head latent attention layer (DeepSeek-V2).

Its forward is written from the layer's lowering (`lower_latent_attention`), as any other
attention's: queries (through their own latent when the spec has `q_rank`), split into a part
without positions and a rotated part; one projection down to the key/value latent and the
rotated key all heads share; the latent normalised; then the KV cache, which keeps exactly
that, the latent and the rotated key (kv_rank + rope_dim values per position, DeepSeek-V2's
point); and the latent projected up to every head's key part and value. What the lowering
leaves to the generated code is spelled here: heads, the cache and SDPA's arguments.
"""

from __future__ import annotations

import sympy as sp

from archspec.backends.torchgen.attention import _params, _sdpa
from archspec.backends.torchgen.exprs import ExprPrinter
from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.forward import ATOM, Expr, ForwardWriter
from archspec.backends.torchgen.leaves import assign
from archspec.backends.torchgen.text import class_, docstring, method
from archspec.ir.lower import StackValues, lower_attention
from archspec.ir.nodes import Attention, Stack
from archspec.ir.ops import Attend, Cached, Concat, LinearOp, NormOp, Op, Part, Rope, Value

SPLIT_HEADS = method(
    "split_heads",
    ["x: Tensor"],
    "Tensor",
    '"""(B, S, heads * width) -> (B, heads, S, width)"""',
    "return x.unflatten(-1, (self.n_heads, -1)).transpose(1, 2)",
)


def _summary(node: Attention) -> str:
    lat = node.latent
    assert lat is not None
    queries = "through a latent of their own" if lat.q_down is not None else "from x"
    return (
        "Causal multi-head latent attention (DeepSeek-V2): keys and values come up from a "
        f"normalised latent per token, queries {queries}; each head's queries and keys join "
        "a part without positions and a rotated part, the rotated key shared by all heads. "
        "A KV cache keeps the latent and the rotated key."
    )


def _init(node: Attention, size: ExprPrinter) -> str:
    lat = node.latent
    assert lat is not None
    scale = ["self.scale = self.head_dim**-0.5"]
    if lat.mscale != 1.0:
        scale = [
            "# The scores also scale by YaRN's mscale squared (DeepSeek's mscale_all_dim).",
            f"mscale = {lat.mscale!r}",
            "self.scale = self.head_dim**-0.5 * mscale * mscale",
        ]
    body = [
        "super().__init__()",
        f"self.n_heads = {size(node.n_heads)}",
        f"self.nope_dim = {size(lat.nope_dim)}  # per head, without positions",
        f"self.rope_dim = {size(lat.rope_dim)}  # per head, rotated",
        f"self.kv_rank = {size(lat.kv_rank)}",
        f"self.v_dim = {size(lat.v_dim)}",
        "self.head_dim = self.nope_dim + self.rope_dim  # of queries and keys",
        *scale,
        *(assign(part, size) for part in node.children),
        "self.checkpoint: str | None = None  # Model.set_checkpoint sets it",
    ]
    return method("__init__", ["config: Config"], "None", body)


class _LatentWriter(ForwardWriter):
    """The layer's ops step by step; every value gets a statement of its own."""

    def __init__(self, f: Features, node: Attention, stack: Stack) -> None:
        code = stack.position.code
        assert code.angles is not None and node.latent is not None
        angles = Value(code.angles[0], "positions")
        mask = Value("mask", "pairs")
        x = Value("x", "tokens", node.q.in_features)
        values = StackValues(angles=angles, mask=mask)
        low = lower_attention(node, x, values)
        super().__init__(low, bound={angles: angles.name, mask: "mask"}, inline=False)
        self.f, self.node, self.stack, self.code = f, node, stack, code
        lat = node.latent
        self.widths = {
            lat.nope_dim: "self.nope_dim",
            lat.rope_dim: "self.rope_dim",
            lat.kv_rank: "self.kv_rank",
            lat.v_dim: "self.v_dim",
        }
        # What the cache keeps: the normalised latent and the rotated shared key.
        self.cached = [op for op in low.ops if isinstance(op, Cached)]

    def inlines(self, op: Op) -> bool:
        return isinstance(op, Attend)  # the merged heads go straight into `o`

    def render_linearop(self, op: LinearOp) -> Expr:
        node = self.node
        if op.module is node.v:
            x = self.arg(op.x)
            up = Expr(f"self.{op.module.name}({x.text}).squeeze(1)", ATOM, x.reads)
            return self._call("self.split_heads", [up])
        projected = super().render_linearop(op)
        if op.module is node.q:
            return self._call("self.split_heads", [projected])
        return projected

    def render_normop(self, op: NormOp) -> Expr:
        normed = super().render_normop(op)
        if self.node.latent is not None and op.module is self.node.latent.kv_norm:
            # (B, 1, S, kv_rank): laid out like one head's keys, for the cache.
            return Expr(f"{normed.text}.unsqueeze(1)", ATOM, normed.reads)
        return normed

    def render_cached(self, op: Cached) -> None:
        """The cache keeps the latent and the rotated key, as one key head would be kept."""
        self.arg(op.x)
        assert op.out is not None
        if id(op.out) in self.names:
            return None  # named with its sibling
        latent, k_rot = (self.names[id(c.x)] for c in self.cached)
        if self.f.cached(self.stack):
            self.lines += [
                "if cache is not None:",
                f"    {latent}, {k_rot} = cache.update({latent}, {k_rot})",
            ]
        for c in self.cached:
            self.names[id(c.out)] = self.names[id(c.x)]
        return None

    def render_part(self, op: Part) -> Expr | None:
        x = self.arg(op.x)
        assert op.out is not None
        if id(op.out) in self.names:
            return None  # named by its sibling's split
        parts = [p for p in self.low.ops if isinstance(p, Part) and p.x is op.x]
        widths = [self._width(sp.simplify(p.out.width / p.heads)) for p in parts]  # type: ignore[union-attr]
        names = [self._free_name(p.out) for p in parts]  # type: ignore[arg-type]
        split = f"{x.text}.split([{', '.join(widths)}], dim=-1)"
        self.lines.append(f"{', '.join(names)} = {split}")
        for p, name in zip(parts, names, strict=True):
            self.names[id(p.out)] = name
        return None

    def _width(self, width: sp.Expr) -> str:
        return next(text for expr, text in self.widths.items() if sp.simplify(expr - width) == 0)

    def render_rope(self, op: Rope) -> Expr:
        x = self.arg(op.x)
        self.arg(op.angles)
        # The shared key (B, S, rope_dim) gets an axis for its one head.
        text = f"{x.text}.unsqueeze(1)" if op.heads == 1 else x.text
        return Expr(self.code.rotate(text), ATOM, x.reads)

    def render_concat(self, op: Concat) -> Expr:
        lat = self.node.latent
        assert lat is not None
        parts, reads = [], frozenset()
        for value in op.parts:
            part = self.arg(value)
            reads |= part.reads
            if sp.simplify(value.width - lat.rope_dim) == 0:
                # The one rotated key, seen by every head (expand makes no copy).
                parts.append(f"{part.text}.expand(-1, self.n_heads, -1, -1)")
            else:
                parts.append(part.text)
        return Expr(f"torch.cat([{', '.join(parts)}], dim=-1)", ATOM, reads)

    def render_attend(self, op: Attend) -> Expr:
        q, k, v = (self.arg(value).text for value in (op.q, op.k, op.v))
        if op.mask is not None:
            self.arg(op.mask)
        self.lines += _sdpa(self.f, op, q, k, v)
        return Expr("y.transpose(1, 2).flatten(2)", ATOM, frozenset())


def latent_attention_class(f: Features, node: Attention, stack: Stack, size: ExprPrinter) -> str:
    doc = "x: (B, S, d_model); mask: additive, broadcast to (B, heads, S, keys)."
    body = _LatentWriter(f, node, stack).write()
    forward = method("forward", _params(f, node, stack), "Tensor", docstring(doc, 2), body)
    return class_(
        f"class {f.cls(node)}(nn.Module):",
        _summary(node),
        _init(node, size),
        SPLIT_HEADS,
        forward,
    )
