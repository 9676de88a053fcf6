"""The generated `Stack` class: positions, embedding norm, the blocks and the final norm.

A stack turns token embeddings into hidden states. It owns what depends on positions (the
position table or encodings, RoPE's angles, ALiBi's or T5's bias) and builds the one attention
mask all its blocks share. In an encoder-decoder one class serves both stacks; `decoder=True`
makes it causal and gives its blocks cross-attention.
"""

from __future__ import annotations

import sympy as sp

from archspec.backends.torchgen.exprs import ExprPrinter
from archspec.backends.torchgen.features import Features, UnsupportedIR, blocks_of
from archspec.backends.torchgen.leaves import assign
from archspec.backends.torchgen.text import call, class_, method
from archspec.ir.nodes import Attention, Block, Repeat, Stack

POSITIONS = {
    "learned": "learned position embeddings",
    "sinusoidal": "sinusoidal position encodings",
    "rope": "rotary positions (applied in attention)",
    "alibi": "ALiBi (attention scores penalised linearly with distance)",
    "relative_bias": "T5's bucketed relative position bias",
    "none": "no position information",
}


def _summary(f: Features) -> str:
    stack = f.stack
    parts = []
    if stack.scale_embedding:
        parts.append("embeddings scaled by sqrt(d_model)")
    parts.append(POSITIONS[f.position.kind])
    if stack.part("emb_norm") is not None:
        parts.append("a norm over the embeddings")
    parts.append("the blocks")
    if stack.part("final_norm") is not None:
        parts.append("a final norm")
    listed = ", ".join(parts[:-1]) + " and " + parts[-1]
    if f.encoder_decoder:
        return (
            f"The encoder, or with decoder=True the decoder: {listed}. The decoder is causal "
            "and its blocks attend to the encoder output."
        )
    return f"The {f.layout}: {listed}."


def _has_rel_bias(block: Block) -> bool:
    attn = block.part("attn")
    return isinstance(attn, Attention) and attn.part("rel_bias") is not None


def _layer_count(f: Features, stack: Stack, size: ExprPrinter) -> str:
    blocks = blocks_of(stack)
    runs = blocks.runs
    if f.relative_bias:
        ok = _has_rel_bias(runs[0].node) and runs[0].count == 1
        ok = ok and all(not _has_rel_bias(r.node) for r in runs[1:]) and len(runs) <= 2
    else:
        ok = len(runs) == 1
    if not ok:
        raise UnsupportedIR(f"{stack.role}: blocks that differ in unexpected ways")
    total = sp.simplify(sum(run.count for run in runs))
    if total.is_Integer:
        # A one-layer T5 stack is a single run of one block: find its layer-count symbol.
        values = {symbol.name: (symbol, value) for symbol, value in f.ir.env.items()}
        for name in (f"n_{stack.role}_layers", "n_layers"):
            if name in values and values[name][1] == int(total):
                return size(values[name][0])
    return size(total)


def _blocks(f: Features, size: ExprPrinter) -> list[str]:
    counts = [_layer_count(f, stack, size) for stack in f.stacks]
    out = []
    count = counts[0]
    if len(set(counts)) > 1:
        out.append(f"n_layers = {counts[1]} if decoder else {counts[0]}")
        count = "n_layers"
    args = ["config", "decoder"] if f.encoder_decoder else ["config"]
    block = f"Block({', '.join(args)})"
    if not f.relative_bias:
        blocks = f"{block} for _ in range({count})"
        code = call("self.blocks = nn.ModuleList", [blocks], 2)
        if "\n" in code:  # a generator argument cannot take the trailing comma of a split call
            code = call("self.blocks = nn.ModuleList", [f"[{blocks}]"], 2)
        return [*out, code]
    # Mirror the IR's two runs: block 0 with the bias table, then the others.
    first = f"Block({', '.join([*args, 'relative_bias=True'])})"
    return out + [
        "# T5: block 0 holds the relative position bias table for all blocks.",
        f"self.blocks = nn.ModuleList([{first}])",
        call("self.blocks.extend", [f"{block} for _ in range({count} - 1)"], 2),
    ]


def _init(f: Features, size: ExprPrinter) -> str:
    params = ["config: Config"]
    if f.encoder_decoder:
        params.append("decoder: bool = False")
    stack = f.stack
    position = f.position
    body = ["super().__init__()"]
    if f.encoder_decoder:
        body.append("self.causal = decoder")
    if position.kind == "learned" and position.offset:
        body.append("self.pos_offset = config.pos_offset")
    if stack.scale_embedding:
        body.append(f"self.embed_scale = math.sqrt({size(f.model.d_model)})")
    if f.rope:
        body.append(f"self.head_dim = {size(f.attention.head_dim)}")
        body.append("self.rope_theta = config.rope_theta")
    if f.alibi:
        body.append(f"self.n_heads = {size(f.attention.n_heads)}")
    if f.relative_bias:
        body.append("self.num_buckets = config.num_buckets")
        body.append("self.max_distance = config.max_distance")
    for part in stack.parts:
        if isinstance(part, Repeat):
            body += _blocks(f, size)
        elif part.name == "pos_emb":
            body.append(assign(part, size, constants={position.offset: "config.pos_offset"}))
        else:
            body.append(assign(part, size))
    return method("__init__", params, "None", body)


def forward_params(f: Features) -> list[str]:
    params = ["x: Tensor", "attention_mask: Tensor | None = None"]
    if f.encoder_decoder:
        params += [
            "encoder_out: Tensor | None = None",
            "encoder_attention_mask: Tensor | None = None",
        ]
    if f.cache:
        params.append("cache: list[KVCache] | None = None")
    return params


def _embeddings(f: Features) -> list[str]:
    """Scaling, positions and the embedding norm."""
    stack = f.stack
    out = []
    if f.cache:
        out.append("start = cache[0].length if cache else 0  # positions already cached")
    out.append("seq_len = x.size(1)")
    if stack.scale_embedding:
        out.append("x = x * self.embed_scale")
    if f.needs_positions:
        span = "start, start + seq_len" if f.cache else "seq_len"
        out.append(f"positions = torch.arange({span}, device=x.device)")
    kind = f.position.kind
    if kind == "learned":
        offset = " + self.pos_offset" if f.position.offset else ""
        out.append(f"x = x + self.pos_emb(positions{offset})")
    elif kind == "sinusoidal":
        out.append("x = x + sinusoids(positions, x.size(-1)).to(x.dtype)")
    if stack.part("emb_norm") is not None:
        out.append("x = self.emb_norm(x)")
    if f.rope:
        out.append("rope = rope_angles(positions, self.head_dim, self.rope_theta, x.dtype)")
    return out


def _bias(f: Features) -> list[str]:
    """ALiBi's or T5's bias on the attention scores, shared by all blocks."""
    keys = "start + seq_len" if f.cache else "seq_len"
    if f.alibi:
        if f.encoder_decoder:
            args = ["self.n_heads", "seq_len", "self.causal", "x.device"]
        else:
            args = ["self.n_heads", keys, "x.device"]
        return [call("bias = alibi_bias", args, 2, ".to(x.dtype)")]
    if f.relative_bias:
        out = []
        if f.cache:
            out.append("keys = torch.arange(start + seq_len, device=x.device)")
            out.append("offsets = keys[None, :] - positions[:, None]  # key - query")
        else:
            out.append("offsets = positions[None, :] - positions[:, None]  # key - query")
        direction = "not self.causal" if f.encoder_decoder else str(f.encoder_only)
        args = ["offsets", "self.num_buckets", "self.max_distance", f"bidirectional={direction}"]
        out.append(call("buckets = relative_position_bucket", args, 2))
        out.append("bias = self.blocks[0].attn.rel_bias(buckets).permute(2, 0, 1).unsqueeze(0)")
        return out
    return []


def _mask(f: Features) -> list[str]:
    """The additive mask every block's self-attention gets (None: plain causal attention)."""
    keys = "start + seq_len" if f.cache else "seq_len"
    hidden = f"hidden = hidden_keys(attention_mask, seq_len, {keys}, x.device)"
    bias = "bias" if f.attention_bias else "x.new_zeros(())"
    padded = f"mask = mask_out(padding_keys(attention_mask), {bias})"
    if f.encoder_only:
        return [
            f"mask = {bias if f.attention_bias else None}",
            "if attention_mask is not None:",
            f"    {padded}",
        ]
    if f.encoder_decoder and f.attention_bias:
        return [
            "mask = bias",
            "if self.causal:",
            f"    {hidden}",
            "    mask = mask_out(hidden, bias)",
            "elif attention_mask is not None:",
            f"    {padded}",
        ]
    if f.encoder_decoder:
        return [
            "mask = None  # then causal attention applies the causal mask itself",
            "if attention_mask is not None:",
            "    if self.causal:",
            f"        {hidden}",
            "    else:",
            "        hidden = padding_keys(attention_mask)",
            f"    mask = mask_out(hidden, {bias})",
        ]
    if f.attention_bias:
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


def _forward(f: Features) -> str:
    body = _embeddings(f) + _bias(f) + _mask(f)
    args = ["x", "mask"]
    if f.rope:
        args.append("rope")
    if f.encoder_decoder:
        body += [
            "cross_mask = None",
            "if encoder_attention_mask is not None:",
            "    keys = padding_keys(encoder_attention_mask)",
            "    cross_mask = mask_out(keys, x.new_zeros(()))",
        ]
        args += ["encoder_out", "cross_mask"]
    if f.cache:
        args.append("cache[i] if cache else None")
        body.append("for i, block in enumerate(self.blocks):")
    else:
        body.append("for block in self.blocks:")
    body.append(f"    x = block({', '.join(args)})")
    body.append("return self.final_norm(x)" if f.stack.part("final_norm") else "return x")
    return method("forward", forward_params(f), "Tensor", body)


def stack_class(f: Features, size: ExprPrinter) -> str:
    return class_("class Stack(nn.Module):", _summary(f), _init(f, size), _forward(f))
