"""The generated stack classes: positions, embedding norm, the blocks and the final norm.

A stack turns token embeddings into hidden states. It owns what depends on positions (the
position table or encodings, RoPE's angles, ALiBi's or T5's bias: the code each position kind
brings, `archspec.kinds.position_code`) and builds the one attention mask all its blocks share.
An encoder-decoder's encoder and decoder are different nodes, hence two classes.
"""

from __future__ import annotations

from archspec.backends.torchgen.exprs import ExprPrinter
from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.leaves import assign, module_list
from archspec.backends.torchgen.text import class_, method
from archspec.ir.nodes import Repeat, Stack
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


def _embeddings(f: Features, stack: Stack, ctx: StackContext) -> list[str]:
    """Scaling, positions and the embedding norm; then what attention rotates by."""
    code = f.position_code(stack)
    out = []
    if f.cache:
        out.append("start = cache[0].length if cache else 0  # positions already cached")
    out.append(SEQ_LEN)
    if stack.scale_embedding:
        out.append("x = x * self.embed_scale")
    if stack.position.entry.needs_positions:
        span = "start, start + seq_len" if f.cache else "seq_len"
        out.append(f"positions = torch.arange({span}, device=x.device)")
    out += code.embed(ctx)
    if stack.emb_norm is not None:
        out.append(f"x = self.{stack.emb_norm.name}(x)")
    if stack.emb_dropout:
        out.append(f"x = F.dropout(x, {stack.emb_dropout!r}, self.training)")
    out += code.build_angles(ctx)
    return out


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
    ctx = _context(f, stack, size)
    body = _embeddings(f, stack, ctx) + f.position_code(stack).bias(ctx) + _mask(f, stack, ctx)
    if not any("seq_len" in line for line in body if not line.startswith("seq_len =")):
        body.remove(SEQ_LEN)  # nothing here depends on the length
    if f.has_memory(stack):
        body += [
            "cross_mask = None",
            "if encoder_attention_mask is not None:",
            "    keys = padding_keys(encoder_attention_mask)",
            "    cross_mask = mask_out(keys, x.new_zeros(()))",
        ]
    args = f.block_args(stack)
    if f.cache:
        args[-1] = "cache[i] if cache else None"
        body.append(f"for i, block in enumerate(self.{stack.blocks.name}):")
    else:
        body.append(f"for block in self.{stack.blocks.name}:")
    body.append(f"    x = block({', '.join(args)})")
    final = stack.final_norm
    out = f"self.{final.name}(x)" if final is not None else "x"
    if stack.out_dropout:
        out = f"F.dropout({out}, {stack.out_dropout!r}, self.training)"
    body.append(f"return {out}")
    return method("forward", forward_params(f, stack), "Tensor", body)


def stack_class(f: Features, stack: Stack, size: ExprPrinter) -> str:
    return class_(
        f"class {f.cls(stack)}(nn.Module):",
        _summary(f, stack),
        _init(f, stack, size),
        _forward(f, stack, size),
    )
