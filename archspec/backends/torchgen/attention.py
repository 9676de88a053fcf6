"""The generated `Attention` class.

One class serves every attention layer of a model: self-attention, and in encoder-decoders
cross-attention (keys and values from `encoder_out`). Its constructor takes a flag only where
a model's layers differ: `causal` for an encoder-decoder's decoder, `relative_bias` where
block 0 holds T5's bias table. Attention runs through `F.scaled_dot_product_attention`.
Positions that act inside attention (RoPE) are applied here; positions that act on the scores
(ALiBi, T5) arrive inside the additive `mask`, which the stack builds once for all its blocks.
A causal layer given no mask lets SDPA apply the causal mask (`is_causal`), the fast path.
"""

from __future__ import annotations

from archspec.backends.torchgen.exprs import ExprPrinter
from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.leaves import assign
from archspec.backends.torchgen.text import call, class_, docstring, indent, method


def _summary(f: Features) -> str:
    kind = "Multi-query" if f.mqa else "Grouped-query" if f.gqa else "Multi-head"
    if f.encoder_decoder:
        text = f"{kind} self-attention, or cross-attention to the encoder output"
    elif f.decoder_only:
        text = f"Causal {kind.lower()} self-attention"
    else:
        text = f"{kind} self-attention"
    if f.rope:
        text += " with rotary positions"
    text += "."
    if f.relative_bias:
        text += " In block 0 it also holds T5's table of relative position biases."
    return text


def forward_params(f: Features) -> list[str]:
    params = ["x: Tensor", "mask: Tensor | None"]
    if f.encoder_decoder:
        params.append("encoder_out: Tensor | None = None")
        if f.rope:
            params.append("rope: tuple[Tensor, Tensor] | None = None")
    elif f.rope:
        params.append("rope: tuple[Tensor, Tensor]")
    if f.cache:
        params.append("cache: KVCache | None = None")
    return params


def _init(f: Features, size: ExprPrinter) -> str:
    params = ["config: Config"]
    if f.causal_flag:
        params.append("causal: bool = False")
    if f.relative_bias:
        params.append("relative_bias: bool = False")
    body: list[str | None] = [
        "super().__init__()",
        "self.causal = causal" if f.causal_flag else None,
        f"self.head_dim = {size(f.attention.head_dim)}",
    ]
    for part in f.attention.parts:
        if part.name == "rel_bias":
            constants = {f.position.num_buckets: "config.num_buckets"}
            body += [
                "if relative_bias:",
                "    # One learned bias per (distance bucket, head), shared by all blocks.",
                indent(assign(part, size, 3, constants), 1),
            ]
        else:
            body.append(assign(part, size))
    return method("__init__", params, "None", body)


SPLIT_HEADS = '''
def split_heads(self, x: Tensor) -> Tensor:
    """(B, S, heads * head_dim) -> (B, heads, S, head_dim)"""
    return x.unflatten(-1, (-1, self.head_dim)).transpose(1, 2)
'''


def _sdpa(f: Features) -> list[str]:
    """The call to scaled_dot_product_attention, after a comment on each unusual argument."""
    args = ["q", "k", "v", "attn_mask=mask"]
    before = []
    if f.decoder_only and not f.attention_bias:
        args.append("is_causal=mask is None")
        if f.cache:
            before.append("# Given no mask (no padding, nothing cached), SDPA masks causally.")
        else:
            before.append("# Given no mask (no padding), SDPA applies the causal mask itself.")
    if f.causal_flag:
        before += [
            "# A causal layer given no mask (no padding) lets SDPA mask causally.",
            "causal = self.causal and mask is None",
        ]
        args.append("is_causal=causal")
    if not f.attention.scale_scores:
        args.append("scale=1.0")
        before.append("# The scores are not divided by sqrt(head_dim), as in T5.")
    if f.gqa:
        args.append("enable_gqa=True")
        if f.mqa:
            before.append("# All query heads share one key/value head (multi-query).")
        else:
            before.append("# Each key/value head serves n_heads // n_kv_heads query heads.")
    code = call("y = F.scaled_dot_product_attention", args, 2)
    if code.count("\n") > 2:
        # Split one argument per line; passing the mask by position may fit on one line.
        code = call("y = F.scaled_dot_product_attention", ["q", "k", "v", "mask", *args[4:]], 2)
    return [*before, code]


def _forward(f: Features) -> str:
    source = "x"
    body: list[str] = []
    if f.encoder_decoder:
        doc = (
            "Self-attention over x, or cross-attention from x to encoder_out; mask is "
            "additive, broadcast to (B, heads, S, keys)."
        )
        body.append("source = x if encoder_out is None else encoder_out")
        source = "source"
    else:
        doc = "x: (B, S, d_model); mask: additive, broadcast to (B, heads, S, keys)."
    body += [
        "q = self.split_heads(self.q(x))",
        f"k = self.split_heads(self.k({source}))",
        f"v = self.split_heads(self.v({source}))",
    ]
    if f.rope and f.encoder_decoder:
        body += [
            "if rope is not None:  # self-attention only",
            "    q, k = apply_rope(q, rope), apply_rope(k, rope)",
        ]
    elif f.rope:
        body.append("q, k = apply_rope(q, rope), apply_rope(k, rope)")
    if f.cache:
        body += ["if cache is not None:", "    k, v = cache.update(k, v)"]
    return method(
        "forward",
        forward_params(f),
        "Tensor",
        docstring(doc, 2),
        body,
        _sdpa(f),
        "return self.o(y.transpose(1, 2).flatten(2))",
    )


def attention_class(f: Features, size: ExprPrinter) -> str:
    return class_(
        "class Attention(nn.Module):",
        _summary(f),
        _init(f, size),
        SPLIT_HEADS.strip("\n"),
        _forward(f),
    )
