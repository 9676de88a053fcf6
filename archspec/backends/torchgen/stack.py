"""The generated stack classes: positions, embedding norm, the blocks and the final norm.

A stack turns token embeddings into hidden states. It owns what depends on positions (the
position table or encodings, RoPE's angles, ALiBi's or T5's bias: the code each position kind
brings, `archspec.kinds.positions`) and builds the one attention mask all its blocks share.
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
from archspec.backends.torchgen.local_rope import LOCAL_ANGLES, local_angles, local_init
from archspec.backends.torchgen.text import call, class_, indent, method
from archspec.ir.lower import lower_stack, rotary_width
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
from archspec.kinds.positions import StackContext


def _context(f: Features, stack: Stack, size: ExprPrinter) -> StackContext:
    attention = stack.block_variants[0].attn
    table = stack.pos_emb or stack.rel_bias
    return StackContext(
        causal=stack.causal,
        cache=f.cached(stack),
        heads=size(attention.n_heads),
        head_dim=size(rotary_width(attention, stack.position)),  # the channels RoPE turns
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
    if stack.local_position is not None:
        body += local_init(stack, ctx)
    body.append("self.checkpoint: str | None = None  # Model.set_checkpoint sets it")
    if stack.scale_embedding:
        body.append(f"self.embed_scale = math.sqrt({size(stack.width)})")
    # Integer terms of a table's size that are position parameters print as Config fields.
    entry = position.entry
    constants, values = {}, position.values()
    for spec, field in reversed(entry.parameters):
        value = values[spec]
        if isinstance(value, int) and not isinstance(value, bool) and value:
            constants[value] = f"config.{field}"
    for part in stack.children:
        if isinstance(part, Repeat):
            body += module_list(part, lambda block: f"{f.cls(block)}(config)", size)
            if _shared(stack):
                run = stack.blocks.runs[0]
                per_block = size(run.calls)
                if run.count != 1:
                    per_block += f" // {size(run.count)}"
                body += [
                    "# ALBERT: each block's weights serve several layers in a row.",
                    f"self.calls_per_block = {per_block}",
                ]
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
    if f.cached(stack):
        params.append("cache: list[KVCache] | None = None")
    return params


SEQ_LEN = "seq_len = x.size(1)"
# A cached stack's queries come after the cached positions, and its keys are all the
# cache's slots (fixed shapes: a compiled decode step is one graph at every position).
CACHED_PRELUDE = [
    "# Positions cached so far: a tensor, so compiled steps do not depend on it.",
    "start = cache[0].length if cache else 0",
    "queries = start + torch.arange(seq_len, device=x.device)  # the new tokens",
    "# A cache is read whole: the keys not yet written come later, hence hidden.",
    "k_len = cache[0].max_len if cache else seq_len",
    "if cache and attention_mask is not None:  # it covers the cached and new tokens",
    "    missing = k_len - attention_mask.size(1)  # slots not written yet",
    "    attention_mask = F.pad(attention_mask, (0, missing), value=1)",
]
NOTHING = frozenset[int]()


class _StackWriter(ForwardWriter):
    """The stack's ops (`lower_stack`), one line each: the embedding steps in the lowering's
    order, what the position kind computes from the positions, the mask all blocks share,
    the loop over the blocks, the final norm."""

    def __init__(self, f: Features, stack: Stack, ctx: StackContext) -> None:
        x = Value("x", "tokens", stack.emb_width)
        memory = Value("encoder_out", "memory", stack.width) if f.has_memory(stack) else None
        super().__init__(lower_stack(stack, x, memory)[0], inline=False)
        self.f, self.stack, self.ctx = f, stack, ctx
        self.code = stack.position.code
        self.masked = False  # the shared mask is written (with the score bias) or not yet
        self.cached = f.cached(stack)
        self.lines.append(SEQ_LEN)
        if self.cached:
            self.lines += CACHED_PRELUDE

    def inlines(self, op: Op) -> bool:
        # Positions added to the embeddings read as one step: x = x + self.pos_emb(positions).
        return isinstance(op, (Lookup, Sinusoids))

    def render_positions(self, op: Positions) -> Expr | None:
        if self.stack.position.from_mask:
            return self._positions_from_mask(op)
        if not self.cached:
            return Expr("torch.arange(seq_len, device=x.device)", ATOM, NOTHING)
        if not self.code.absolute:
            return Expr("queries", ATOM, NOTHING)
        # A left-padded prompt is counted from its first token, as transformers' generate
        # counts it (position_ids = attention_mask.cumsum(-1) - 1).
        assert op.out is not None
        self.lines += [
            "positions = queries",
            "if attention_mask is not None:  # counted over tokens: padding shifts none",
            "    positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)[:, queries]",
        ]
        self.names[id(op.out)] = "positions"
        return None

    def _positions_from_mask(self, op: Positions) -> None:
        arange = "queries" if self.cached else "torch.arange(seq_len, device=x.device)"
        # OPT (transformers' OPTLearnedPositionalEmbedding): each row counts its kept tokens,
        # so a left-padded sequence starts at 0 like an unpadded one; padding gets -1 (a row
        # of the table's offset; clamped to 0 where there is none). With a cache the mask
        # covers every slot: the new tokens are its columns at `queries`.
        low = "" if self.ctx.offset else ".clamp(min=0)"
        new = "queries" if self.cached else "-seq_len:"
        self.lines += [
            f"positions = {arange}",
            "if attention_mask is not None:  # count the tokens the mask keeps",
            "    kept = attention_mask.long()",
            f"    positions = (kept.cumsum(-1) * kept - 1){low}[:, {new}]",
        ]
        assert op.out is not None
        self.names[id(op.out)] = "positions"
        return None

    def render_scale(self, op: Scale) -> Expr:
        if op.factor is not None:
            return super().render_scale(op)
        x = self.arg(op.x, MUL)
        scale = Expr("self.embed_scale", ATOM, NOTHING)
        if self.stack.scale_in_dtype:
            # As transformers' Gemma: the factor is first rounded to the embeddings' dtype.
            scale = Expr(f"{x.text}.new_tensor(self.embed_scale)", ATOM, x.reads)
        return self._binary("*", MUL, x, scale)

    def render_lookup(self, op: Lookup) -> Expr:
        positions = self.arg(op.index)
        return Expr(self.code.added(self.ctx, positions.text), ATOM, positions.reads)

    def render_sinusoids(self, op: Sinusoids) -> Expr:
        positions = self.arg(op.positions)
        return Expr(self.code.added(self.ctx, positions.text), ATOM, positions.reads)

    def render_ropeangles(self, op: RopeAngles) -> None:
        assert self.code.angles is not None and op.out is not None
        positions = self.arg(op.positions).text
        if op.local:
            name, angles = LOCAL_ANGLES, local_angles(self.stack, self.ctx, positions)
        else:
            name, angles = self.code.angles[0], self.code.build_angles(self.ctx, positions)
        line = f"{name} = {angles}"
        if len(line) > self.width:
            # A call too long for one line: one argument per line with a trailing comma,
            # which ruff keeps as it is at any line length.
            function, _, args = angles.partition("(")
            listed = [f"    {arg}," for arg in args.removesuffix(")").split(", ")]
            self.lines += [f"{name} = {function}(", *listed, ")"]
        else:
            self.lines.append(line)
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
        if self.cached:
            args[-1] = "cache[i] if cache else None"
            self.lines.append(f"for i, block in enumerate({blocks}):")
        else:
            self.lines.append(f"for block in {blocks}:")
        # Full recomputation keeps each block's inputs and runs the block again in backward.
        full = 'enabled=self.checkpoint == "full"'
        checkpointed = ["block", *args, full]
        if _shared(self.stack):
            self.lines.append("    for _ in range(self.calls_per_block):")
            self.lines += indent(call(f"{x} = maybe_checkpoint", checkpointed, 4), 2).splitlines()
        else:
            self.lines += indent(call(f"{x} = maybe_checkpoint", checkpointed, 3), 1).splitlines()
        self.names[id(op.out)] = x


def _shared(stack: Stack) -> bool:
    """Its blocks share weights across layers: one run, each module called several times
    (validation allows it in encoders only, so no KV cache is indexed per layer)."""
    runs = stack.blocks.runs
    return len(runs) == 1 and runs[0].applied != 1


def _mask(f: Features, stack: Stack, ctx: StackContext) -> list[str]:
    """The additive mask every block's self-attention gets (None: plain causal attention):
    the score bias where the position kind has one, with hidden keys at the dtype's minimum."""
    biased = stack.position.entry.score_bias
    bias = "bias" if biased else "x.new_zeros(())"
    hidden_args = ["attention_mask", ctx.queries, ctx.keys]
    hidden = call("hidden = hidden_keys", hidden_args, 2)
    if not stack.causal:
        return [
            f"mask = {'bias' if biased else None}",
            "if attention_mask is not None:",
            f"    mask = mask_out(padding_keys(attention_mask), {bias})",
        ]
    if biased:
        return [hidden, "mask = mask_out(hidden, bias)"]
    condition = "attention_mask is not None"
    comment = []
    if f.prompt_unmasked(stack):
        # A written cache has more keys than queries; an empty one gets the prompt's keys.
        condition += " or (cache and cache[0].k is not None)"
        comment = [
            "# A prompt into empty caches gets none either: attention then attends the",
            "# prompt's own keys, not the caches' unwritten slots.",
        ]
    elif ctx.cache:
        condition += " or cache"  # a cache has more keys than queries
    return [
        "mask = None  # then attention applies the causal mask itself",
        *comment,
        f"if {condition}:",
        *indent(call("hidden = hidden_keys", hidden_args, 3), 1).splitlines(),
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
