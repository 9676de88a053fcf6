"""The generated attention classes: one per distinct attention layer of the model.

A causal self-attention, a bidirectional one and an encoder-decoder's cross-attention are
different nodes, hence different classes (`CausalAttention`, `CrossAttention`, ...), each
with only the code it runs: no flags. Attention runs through `F.scaled_dot_product_attention`.
Positions that act inside attention (RoPE) are applied here, with the code their kind brings;
positions that act on the scores (ALiBi, T5) arrive inside the additive `mask`, which the stack
builds once for all its blocks. A causal layer given no mask lets SDPA apply the causal mask
(`is_causal`), the fast path.

The forward is written from the layer's lowering (`lower_attention`): which projections read
the encoder output, whether queries and keys are rotated. What the lowering leaves to the
generated code is spelled here: splitting into heads, the KV cache and SDPA's arguments.
"""

from __future__ import annotations

import sympy as sp

from archspec.backends.torchgen.exprs import ExprPrinter
from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.forward import ATOM, Expr, ForwardWriter
from archspec.backends.torchgen.leaves import assign
from archspec.backends.torchgen.text import call, class_, docstring, method
from archspec.ir.lower import StackValues, lower_attention
from archspec.ir.nodes import Attention, Stack
from archspec.ir.ops import Attend, Cached, LinearOp, NormOp, Op, Rope, Value


def _heads(f: Features, attend: Attend) -> str:
    """Multi-head, grouped-query (fewer key/value heads) or multi-query (one)."""
    if sp.simplify(attend.kv_heads - attend.heads) == 0:
        return "multi-head"
    return "multi-query" if f.ir.value(attend.kv_heads) == 1 else "grouped-query"


def _summary(f: Features, node: Attention, attend: Attend) -> str:
    heads = _heads(f, attend)
    if attend.from_memory:
        return (
            f"{heads.capitalize()} cross-attention: queries from the decoder, keys and values "
            "from the encoder output."
        )
    text = f"{'Causal' if attend.masking.causal else 'Bidirectional'} {heads} self-attention"
    if node.rotary:
        text += " with rotary positions"
    window = attend.masking.window
    if window is not None:
        side = "on either side" if attend.masking.two_sided else "before it"
        text += f", each query seeing its own and the {window - 1} keys {side}"
    if attend.sinks:
        text += "; a learned sink per head takes a share of each query's softmax"
    if attend.masking.bias:
        text += "; the stack's mask carries the bias on the scores"
    return text + "."


def _params(f: Features, node: Attention, stack: Stack) -> list[str]:
    params = ["x: Tensor", "encoder_out: Tensor"] if node.cross else ["x: Tensor"]
    params.append("mask: Tensor | None")
    angles = stack.position.code.angles
    if not node.cross and node.rotary and angles is not None:
        params.append(f"{angles[0]}: {angles[1]}")
    if f.cached(stack):
        params.append("cache: KVCache | None = None")
    return params


def _init(node: Attention, attend: Attend, size: ExprPrinter) -> str:
    body = ["super().__init__()", f"self.head_dim = {size(node.head_dim)}"]
    if attend.masking.window is not None:
        window = attend.masking.window
        sides = " on each side" if attend.masking.two_sided else ""
        body.append(f"self.window = {window}  # keys a query sees{sides}, its own included")
    if node.scale_dim is not None:
        body.append(f"self.scale = {node.scale_dim}**-0.5  # not head_dim's")
    elif node.scale is not None:
        body.append(f"self.scale = {node.scale!r}  # not 1/sqrt(head_dim)")
    elif attend.softcap is not None or attend.sinks:
        body.append("self.scale = self.head_dim**-0.5")
    if attend.softcap is not None:
        body.append(f"self.softcap = {attend.softcap!r}  # scores soft-capped to (-cap, cap)")
    body += [assign(part, size) for part in node.children]
    body.append("self.checkpoint: str | None = None  # Model.set_checkpoint sets it")
    return method("__init__", ["config: Config"], "None", body)


SPLIT_HEADS = method(
    "split_heads",
    ["x: Tensor"],
    "Tensor",
    '"""(B, S, heads * head_dim) -> (B, heads, S, head_dim)"""',
    "return x.unflatten(-1, (-1, self.head_dim)).transpose(1, 2)",
)


def _sdpa(f: Features, op: Attend, q: str, k: str, v: str) -> list[str]:
    """The call to scaled_dot_product_attention, after a comment on each unusual argument."""
    args = [q, k, v, "attn_mask=mask"]
    before = []
    if op.masking.causal_only:
        args.append("is_causal=mask is None")
        if f.cache:
            before.append("# Given no mask (no padding, nothing cached), SDPA masks causally.")
        else:
            before.append("# Given no mask (no padding), SDPA applies the causal mask itself.")
    if op.dropout:
        args.append(f"dropout_p={op.dropout!r} if self.training else 0.0")
    if not op.scaled:
        args.append("scale=1.0")
        before.append("# The scores are not divided by sqrt(head_dim), as in T5.")
    elif op.own_scale:
        args.append("scale=self.scale")
    heads = _heads(f, op)
    if heads != "multi-head":
        args.append("enable_gqa=True")
        if heads == "multi-query":
            before.append("# All query heads share one key/value head (multi-query).")
        else:
            before.append("# Each key/value head serves n_heads // n_kv_heads query heads.")
    # Selective recomputation: the backward pass runs the attention core again (scores,
    # softmax, dropout) from q, k, v and the mask, which are all it keeps. The mask goes by
    # position: checkpoint keeps the tensors among the positional arguments.
    before.append("# With checkpoint='selective', only q, k, v and the mask are kept.")
    sdpa = ["F.scaled_dot_product_attention", q, k, v, "mask", *args[4:]]
    code = call("y = maybe_checkpoint", [*sdpa, 'enabled=self.checkpoint == "selective"'], 2)
    return [*before, code]


class _AttentionWriter(ForwardWriter):
    """Attention's ops, step by step: projections read by head, the position kind's
    rotation, the KV cache, and SDPA, whose heads merge back as the output projection reads
    them."""

    def __init__(self, f: Features, node: Attention, stack: Stack) -> None:
        code = stack.position.code
        angles = Value(code.angles[0], "positions") if code.angles is not None else None
        mask = Value("mask", "pairs")
        memory = Value("encoder_out", "memory", node.k.in_features)
        # Whichever angles its layer rotates by, an attention receives them as `rope`.
        values = StackValues(angles, angles, mask, memory, cross_mask=mask)
        x = Value("x", "tokens", node.q.in_features)
        bound = {v: v.name for v in (angles, mask, memory) if v is not None}
        low = lower_attention(node, x, values)
        super().__init__(low, bound=bound, inline=False)
        self.f, self.node, self.stack, self.code = f, node, stack, code
        self.attend = next(op for op in low.ops if isinstance(op, Attend))
        self.cached = [op for op in low.ops if isinstance(op, Cached)]  # its keys and values
        # A cached cross-attention projects the encoder output once: its key and value
        # statements wait here, to be written under a condition before attending.
        self.memory_kv = f.cached(stack) and self.attend.from_memory
        self.projections: list[str] = []

    def inlines(self, op: Op) -> bool:
        return isinstance(op, Attend)  # the merged heads go straight into `o`

    def render_linearop(self, op: LinearOp) -> Expr | None:
        projected = super().render_linearop(op)
        if op.module is self.node.o:
            return projected
        if self._normed(op.module) and self.node.qk_norm_all:
            return projected  # normalised whole (OLMo 2), then split into heads
        if self._normed(op.module):
            # Normalised per head before the heads move to dim 1 (as transformers' Qwen3),
            # which keeps the (B, S, heads, head_dim) layout: merging SDPA's output stays a view.
            unflat = f"{projected.text}.unflatten(-1, (-1, self.head_dim))"
            return Expr(unflat, ATOM, projected.reads)
        heads = self._call("self.split_heads", [projected])
        if self.memory_kv and any(c.x is op.out for c in self.cached):
            assert op.out is not None
            self.projections.append(f"{op.out.name} = {heads.text}")
            self.names[id(op.out)] = op.out.name
            return None
        return heads

    def render_normop(self, op: NormOp) -> Expr:
        normed = super().render_normop(op)
        if self.node.qk_norm_all:
            return self._call("self.split_heads", [normed])
        return Expr(f"{normed.text}.transpose(1, 2)", ATOM, normed.reads)

    def _normed(self, module) -> bool:
        node = self.node
        return (module is node.q and node.q_norm is not None) or (
            module is node.k and node.k_norm is not None
        )

    def render_rope(self, op: Rope) -> Expr:
        x = self.arg(op.x)
        self.arg(op.angles)
        return Expr(self.code.rotate(x.text), ATOM, x.reads)

    def render_cached(self, op: Cached) -> None:
        """The keys and values the KV cache holds: with the last of them, the cache's update
        (a sliding window's ring keeps `capacity` positions), or the encoder output's,
        projected at the first step."""
        self.arg(op.x)
        assert op.out is not None
        self.names[id(op.out)] = self.names[id(op.x)]
        if op is not self.cached[-1]:
            return None  # updated with its sibling
        k, v = (self.names[id(c.out)] for c in self.cached)
        q = self.names[id(self.attend.q)]
        if self.attend.masking.windowed:
            self.lines += [
                "# The window needs the positions of the queries and the keys.",
                f"queries = torch.arange({q}.size(2), device={q}.device)",
                f"keys = torch.arange({k}.size(2), device={k}.device)",
            ]
        if self.memory_kv:
            self.lines += [
                "if cache is not None and cache.memory is not None:",
                f"    {k}, {v} = cache.memory  # projected at the first step",
                "else:",
                *(f"    {line}" for line in self.projections),
                "    if cache is not None:",
                f"        cache.keep_memory({k}, {v})",
            ]
        elif self.f.cached(self.stack):
            update = [f"    {k}, {v} = cache.update({k}, {v})"]
            if self.f.prompt_unmasked(self.stack):
                update = [
                    f"    cached = cache.update({k}, {v})",
                    "    if mask is not None:  # else: a prompt, and k and v are all the keys",
                    f"        {k}, {v} = cached",
                ]
            if op.capacity is not None:
                update = [
                    "    queries = queries + cache.length  # after the cached ones",
                    f"    {k}, {v}, keys = update_window(cache, {k}, {v}, self.window)",
                ]
            self.lines += ["if cache is not None:", *update]
        return None

    def render_attend(self, op: Attend) -> Expr:
        q, k, v = (self.arg(value).text for value in (op.q, op.k, op.v))
        if op.mask is not None:
            self.arg(op.mask)
        if op.masking.windowed:
            function = "two_sided_window" if op.masking.two_sided else "sliding_window"
            window = f"{function}(mask, queries, keys, self.window, {q}.dtype)"
            self.lines.append(f"mask = {window}")
        if op.softcap is not None:
            # With checkpoint='selective', only q, k, v and the mask are kept, as for SDPA.
            args = ["softcapped_attention", q, k, v, "mask", "self.scale", "self.softcap"]
            selective = 'enabled=self.checkpoint == "selective"'
            self.lines += call("y = maybe_checkpoint", [*args, selective], 2).splitlines()
        elif op.sinks:
            # With checkpoint='selective', only q, k, v, the mask and the sinks are kept.
            args = ["sink_attention", q, k, v, "mask", "self.scale", "self.sinks"]
            selective = 'enabled=self.checkpoint == "selective"'
            self.lines += call("y = maybe_checkpoint", [*args, selective], 2).splitlines()
        else:
            self.lines += _sdpa(self.f, op, q, k, v)
        return Expr("y.transpose(1, 2).flatten(2)", ATOM, frozenset())


def _forward(f: Features, node: Attention, stack: Stack, writer: _AttentionWriter) -> str:
    if writer.attend.from_memory:
        doc = (
            "x: (B, T, d_model) attends to encoder_out (B, S, d_model); mask: additive, "
            "broadcast to (B, heads, T, S)."
        )
    else:
        doc = "x: (B, S, d_model); mask: additive, broadcast to (B, heads, S, keys)."
    body = writer.write()
    return method("forward", _params(f, node, stack), "Tensor", docstring(doc, 2), body)


def attention_class(f: Features, node: Attention, stack: Stack, size: ExprPrinter) -> str:
    writer = _AttentionWriter(f, node, stack)
    return class_(
        f"class {f.cls(node)}(nn.Module):",
        _summary(f, node, writer.attend),
        _init(node, writer.attend, size),
        SPLIT_HEADS,
        _forward(f, node, stack, writer),
    )
