"""The generated `Block` class: attention, cross-attention (decoders of encoder-decoders) and
the feed-forward network, with norms placed as the residual layout says.

Submodules are registered in the IR's order, which also follows the data flow: a pre-norm
block registers each norm before its sublayer, a post-norm block after it.
"""

from __future__ import annotations

from archspec.backends.torchgen.exprs import ExprPrinter
from archspec.backends.torchgen.features import Features, blocks_of
from archspec.backends.torchgen.leaves import assign
from archspec.backends.torchgen.text import call, class_, indent, method
from archspec.ir.nodes import MLP, Attention, MoE, Node, Norm

DOCS = {
    "pre": "Pre-norm block: each sublayer f adds f(norm(x)) to the residual stream x.",
    "post": "Post-norm block: each sublayer f updates x to norm(x + f(x)).",
    "parallel": (
        "Parallel block (PaLM): x + attn(norm(x)) + mlp(norm(x)), with one norm shared by "
        "attention and MLP."
    ),
}


def _constructor(f: Features, part: Node) -> str:
    if isinstance(part, Attention):
        args = ["config"]
        if part.name == "attn" and f.causal_flag:
            args.append("causal=decoder")
        if part.name == "attn" and f.relative_bias:
            args.append("relative_bias")
        return f"self.{part.name} = Attention({', '.join(args)})"
    if isinstance(part, MoE):
        return f"self.{part.name} = MoE(config)"
    if isinstance(part, MLP):
        return f"self.{part.name} = MLP(config)"
    raise TypeError(f"unexpected block part {type(part).__name__}")


def _init(f: Features, size: ExprPrinter) -> str:
    params = ["config: Config"]
    if f.encoder_decoder:
        params.append("decoder: bool = False")
    if f.relative_bias:
        params.append("relative_bias: bool = False")
    encoder_parts = {p.name for p in blocks_of(f.stacks[0]).runs[0].node.children}
    body = ["super().__init__()"]
    in_decoder_branch = False
    for part in f.block.parts:
        decoder_only_part = part.name not in encoder_parts
        if decoder_only_part and not in_decoder_branch:
            body.append("if decoder:  # cross-attention to the encoder output")
        in_decoder_branch = decoder_only_part
        if isinstance(part, Norm):
            code = assign(part, size, 3 if decoder_only_part else 2)
        else:
            code = _constructor(f, part)
        body.append(indent(code, 1) if decoder_only_part else code)
    return method("__init__", params, "None", body)


def forward_params(f: Features) -> list[str]:
    params = ["x: Tensor", "mask: Tensor | None"]
    if f.rope:
        params.append("rope: tuple[Tensor, Tensor]")
    if f.encoder_decoder:
        params += ["encoder_out: Tensor | None = None", "cross_mask: Tensor | None = None"]
    if f.cache:
        params.append("cache: KVCache | None = None")
    return params


def _sublayer_args(f: Features, part: Node) -> list[str]:
    if isinstance(part, Attention) and part.cross:
        return ["cross_mask", "encoder_out"]
    if isinstance(part, Attention):
        args = ["mask"]
        if f.rope:
            args.append("rope=rope" if f.encoder_decoder else "rope")
        if f.cache:
            args.append("cache")
        return args
    return []


def _forward(f: Features) -> str:
    parts = f.block.parts
    if f.residual == "parallel":
        norm, attn, ff = parts
        attn_call = f"self.{attn.name}({', '.join(['h', *_sublayer_args(f, attn)])})"
        body = [f"h = self.{norm.name}(x)", f"return x + {attn_call} + self.{ff.name}(h)"]
        return method("forward", forward_params(f), "Tensor", body)
    # Pair each sublayer with its norm: the part just before it (pre) or just after (post).
    step = -1 if f.residual == "pre" else 1
    body = []
    for i, part in enumerate(parts):
        if isinstance(part, Norm):
            continue
        norm = parts[i + step]
        args = _sublayer_args(f, part)
        cross = isinstance(part, Attention) and part.cross
        if cross:
            body.append("if encoder_out is not None:")
        level = 3 if cross else 2
        if f.residual == "pre":
            code = call(f"x = x + self.{part.name}", [f"self.{norm.name}(x)", *args], level)
        else:
            sub = f"self.{part.name}({', '.join(['x', *args])})"
            code = call(f"x = self.{norm.name}", [f"x + {sub}"], level)
        body.append(indent(code, 1) if cross else code)
    body.append("return x")
    return method("forward", forward_params(f), "Tensor", body)


def block_class(f: Features, size: ExprPrinter) -> str:
    return class_("class Block(nn.Module):", DOCS[f.residual], _init(f, size), _forward(f))
