"""The generated stack classes: positions, embedding norm, the blocks and the final norm.

A stack turns token embeddings into hidden states. It owns what depends on positions (the
position table or encodings, RoPE's angles, ALiBi's or T5's bias: the code each position kind
brings, `archspec.kinds.position_code`) and builds the one attention mask all its blocks share.
An encoder-decoder's encoder and decoder are different nodes, hence two classes.

The forward is written from the stack's lowering (`lower_stack`), so the order of its steps
(scaling, positions, norm, dropout) is stated once; the mask built from `attention_mask` and
the KV cache's offsets are the generated code's own.
"""

from __future__ import annotations

from archspec.backends.torchgen.exprs import ExprPrinter
from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.forward import ATOM, MUL, Expr, ForwardWriter
from archspec.backends.torchgen.leaves import assign, module_list
from archspec.backends.torchgen.text import call, class_, indent, method
from archspec.ir.lower import lower_stack
from archspec.ir.nodes import Repeat, Stack
from archspec.ir.ops import (
    Blocks,
    Lookup,
    Op,
    Positions,
    RopeAngles,
    Scale,
    ScoreBias,
    Sinusoids,
    Value,
)
from archspec.kinds.position_code import StackContext


def _context(f: Features, stack: Stack, size: ExprPrinter) -> StackContext:
    attention = stack.block_variants[0].attn
    table = stack.pos_emb or stack.rel_bias
    return StackContext(
        causal=stack.causal,
        cache=f.cache,
        heads=size(attention.n_heads),
        head_dim=size(attention.head_dim),
        offset=stack.position.offset,
        table=table.name if table is not None else None,
        bidirectional=stack.bidirectional_buckets,
        causalities=f.causalities,
    )


def _summary(f: Features, stack: Stack) -> str:
    parts = []
    if stack.scale_embedding:
        parts.append("embeddings scaled by sqrt(d_model)")
    parts.append(stack.position.entry.description)
    if stack.emb_norm is not None:
        parts.append("a norm over the embeddings")
    parts.append("the blocks")
    if stack.final_norm is not None:
        parts.append("a final norm")
    listed = ", ".join(parts[:-1]) + " and " + parts[-1]
    text = f"The {stack.role}: {listed}."
    if f.has_memory(stack):
        text += " Its blocks attend to the encoder output."
    return text


def _init(f: Features, stack: Stack, size: ExprPrinter) -> str:
    ctx = _context(f, stack, size)
    position = stack.position
    body = ["super().__init__()"]
    body += f.position_code(stack).init(ctx)
    body.append("self.checkpoint: str | None = None  # Model.set_checkpoint sets it")
    if stack.scale_embedding:
        body.append(f"self.embed_scale = math.sqrt({size(stack.width)})")
    # Integer terms of a table's size that are position parameters print as Config fields.
    entry = position.entry
    constants = {}
    for spec, field in reversed(entry.parameters):
        value = getattr(position, spec)
        if isinstance(value, int) and value:
            constants[value] = f"config.{field}"
    for part in stack.children:
        if isinstance(part, Repeat):
            body += module_list(part, lambda block: f"{f.cls(block)}(config)", size)
        elif part is stack.pos_emb or part is stack.rel_bias:
            body.append(assign(part, size, constants=constants))
        else:
            body.append(assign(part, size))
    return method("__init__", ["config: Config"], "None", body)


def forward_params(f: Features, stack: Stack) -> list[str]:
    params = ["x: Tensor"]
    if f.has_memory(stack):
        params.append("encoder_out: Tensor")
    params.append("attention_mask: Tensor | None = None")
    if f.has_memory(stack):
        params.append("encoder_attention_mask: Tensor | None = None")
    if f.cache:
        params.append("cache: list[KVCache] | None = None")
    return params


SEQ_LEN = "seq_len = x.size(1)"
NOTHING = frozenset[int]()


class _StackWriter(ForwardWriter):
    """The stack's ops (`lower_stack`), one line each: the embedding steps in the lowering's
    order, what the position kind computes from the positions, the mask all blocks share,
    the loop over the blocks, the final norm."""

    def __init__(self, f: Features, stack: Stack, ctx: StackContext) -> None:
        x = Value("x", "tokens", stack.width)
        memory = Value("encoder_out", "memory", stack.width) if f.has_memory(stack) else None
        super().__init__(lower_stack(stack, x, memory)[0], inline=False)
        self.f, self.stack, self.ctx = f, stack, ctx
        self.code = stack.position.entry.code
        self.masked = False  # the shared mask is written (with the score bias) or not yet
        if f.cache:
            self.lines.append("start = cache[0].length if cache else 0  # positions already cached")
        self.lines.append(SEQ_LEN)

    def inlines(self, op: Op) -> bool:
        # Positions added to the embeddings read as one step: x = x + self.pos_emb(positions).
        return isinstance(op, (Lookup, Sinusoids))

    def render_positions(self, op: Positions) -> Expr:
        span = "start, start + seq_len" if self.f.cache else "seq_len"
        return Expr(f"torch.arange({span}, device=x.device)", ATOM, NOTHING)

    def render_scale(self, op: Scale) -> Expr:
        scale = Expr("self.embed_scale", ATOM, NOTHING)
        return self._binary("*", MUL, self.arg(op.x, MUL), scale)

    def render_lookup(self, op: Lookup) -> Expr:
        positions = self.arg(op.index)
        return Expr(self.code.added(self.ctx, positions.text), ATOM, positions.reads)

    def render_sinusoids(self, op: Sinusoids) -> Expr:
        positions = self.arg(op.positions)
        return Expr(self.code.added(self.ctx, positions.text), ATOM, positions.reads)

    def render_ropeangles(self, op: RopeAngles) -> None:
        assert self.code.angles is not None and op.out is not None
        name = self.code.angles[0]
        angles = self.code.build_angles(self.ctx, self.arg(op.positions).text)
        self.lines.append(f"{name} = {angles}")
        self.names[id(op.out)] = name

    def render_scorebias(self, op: ScoreBias) -> None:
        assert op.out is not None
        self.lines += self.code.bias(self.ctx)
        self.lines += _mask(self.f, self.stack, self.ctx)
        self.names[id(op.out)] = "mask"
        self.masked = True

    def render_blocks(self, op: Blocks) -> None:
        assert op.out is not None
        x = self.arg(op.x).text
        if not self.masked:
            self.lines += _mask(self.f, self.stack, self.ctx)
        if self.f.has_memory(self.stack):
            self.lines += [
                "cross_mask = None",
                "if encoder_attention_mask is not None:",
                "    keys = padding_keys(encoder_attention_mask)",
                "    cross_mask = mask_out(keys, x.new_zeros(()))",
            ]
        args = self.f.block_args(self.stack)
        args[0] = x
        blocks = f"self.{op.repeat.name}"
        if self.f.cache:
            args[-1] = "cache[i] if cache else None"
            self.lines.append(f"for i, block in enumerate({blocks}):")
        else:
            self.lines.append(f"for block in {blocks}:")
        # Full recomputation keeps each block's inputs and runs the block again in backward.
        full = 'enabled=self.checkpoint == "full"'
        self.lines.append(indent(call(f"{x} = maybe_checkpoint", ["block", *args, full], 3), 1))
        self.names[id(op.out)] = x


def _mask(f: Features, stack: Stack, ctx: StackContext) -> list[str]:
    """The additive mask every block's self-attention gets (None: plain causal attention):
    the score bias where the position kind has one, with hidden keys at the dtype's minimum."""
    biased = stack.position.entry.score_bias
    bias = "bias" if biased else "x.new_zeros(())"
    hidden = f"hidden = hidden_keys(attention_mask, seq_len, {ctx.keys}, x.device)"
    if not stack.causal:
        return [
            f"mask = {'bias' if biased else None}",
            "if attention_mask is not None:",
            f"    mask = mask_out(padding_keys(attention_mask), {bias})",
        ]
    if biased:
        return [hidden, "mask = mask_out(hidden, bias)"]
    condition = "attention_mask is not None"
    if f.cache:
        condition += " or start > 0"
    return [
        "mask = None  # then attention applies the causal mask itself",
        f"if {condition}:",
        f"    {hidden}",
        f"    mask = mask_out(hidden, {bias})",
    ]


def _forward(f: Features, stack: Stack, size: ExprPrinter) -> str:
    body = _StackWriter(f, stack, _context(f, stack, size)).write()
    if not any("seq_len" in line for line in body if line != SEQ_LEN):
        body.remove(SEQ_LEN)  # nothing here depends on the length
    return method("forward", forward_params(f, stack), "Tensor", body)


def stack_class(f: Features, stack: Stack, size: ExprPrinter) -> str:
    return class_(
        f"class {f.cls(stack)}(nn.Module):",
        _summary(f, stack),
        _init(f, stack, size),
        _forward(f, stack, size),
    )
