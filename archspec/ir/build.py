"""Compile a validated Spec into the IR.

This is the only place that knows how spec choices turn into modules. Backends read the IR
alone. Sizes are written with the spec's dimension symbols so that every parameter count is a
formula first and a number second.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archspec.ir.nodes import (
    IR,
    MLP,
    Attention,
    Block,
    Embedding,
    Linear,
    Model,
    MoE,
    Node,
    Norm,
    Position,
    Repeat,
    Run,
    Stack,
)
from archspec.spec.schema import Spec

if TYPE_CHECKING:
    import sympy as sp


class _Dims:
    """The symbols a spec's sizes are written in, and their values."""

    def __init__(self, spec: Spec, symbolic: bool) -> None:
        self.symbolic = symbolic
        self.env: dict[sp.Symbol, int] = {}
        self.d_model = self.symbol("d_model", spec.d_model)
        self.n_heads = self.symbol("n_heads", spec.n_heads)
        self.d_ff = self.symbol("d_ff", spec.d_ff)
        self.vocab_size = self.symbol("vocab_size", spec.vocab_size)
        self.max_seq_len = self.symbol("max_seq_len", spec.max_seq_len)
        # Derived defaults stay formulas, so a symbolic total reads naturally:
        # with head_dim = d_model / n_heads, n_heads * head_dim simplifies to d_model.
        self.n_kv_heads = (
            self.n_heads if spec.n_kv_heads is None else self.symbol("n_kv_heads", spec.n_kv_heads)
        )
        self.head_dim = (
            (self.d_model / self.n_heads if symbolic else spec.d_model // spec.n_heads)
            if spec.head_dim is None
            else self.symbol("head_dim", spec.head_dim)
        )
        if spec.moe is not None:
            self.n_experts = self.symbol("n_experts", spec.moe.n_experts)
            self.top_k = self.symbol("top_k", spec.moe.top_k)

    def symbol(self, name: str, value: int) -> sp.Symbol | int:
        if not self.symbolic:
            return value
        import sympy as sp

        sym = sp.Symbol(name, positive=True, integer=True)
        self.env[sym] = value
        return sym

    def layers(self, spec: Spec, role: str) -> sp.Symbol:
        override = getattr(spec, role).n_layers
        if override is None:
            return self.symbol("n_layers", spec.n_layers)
        return self.symbol(f"n_{role}_layers", override)


def build_ir(spec: Spec, symbolic: bool = True) -> IR:
    """The module tree of `spec`, with the values of its symbols.

    With `symbolic=False` every size is a plain integer: the same tree and the same counts,
    without importing sympy (a third of a second). `archspec count`, `list` and `print` use it
    when no formula is asked for.
    """
    dims = _Dims(spec, symbolic)
    return IR(spec=spec, root=_model(spec, dims), env=dims.env, symbolic=symbolic)


def _model(spec: Spec, d: _Dims) -> Model:
    parts: list[Node] = [Embedding("tok_emb", d.vocab_size, d.d_model)]
    if spec.embedding.token_types:
        parts.append(Embedding("type_emb", spec.embedding.token_types, d.d_model))
    roles = ["encoder", "decoder"] if spec.layout == "encoder-decoder" else [spec.layout]
    for role in roles:
        parts.append(_stack(spec, d, role))
    if spec.head.pooler:
        parts.append(Linear("pooler", d.d_model, d.d_model, bias=True))
    if spec.head.lm_head:
        tied_to = "tok_emb.weight" if spec.head.tied else None
        parts.append(Linear("lm_head", d.d_model, d.vocab_size, spec.head.bias, tied_to))
    return Model(
        name="",
        parts=tuple(parts),
        layout=spec.layout,
        scale_tied_output=spec.head.scale_tied_output,
        d_model=d.d_model,
        vocab_size=d.vocab_size,
    )


def _norm(spec: Spec, d: _Dims, name: str) -> Norm:
    return Norm(name, spec.norm.kind, d.d_model, spec.norm.has_bias, spec.norm.eps)


def _position(spec: Spec) -> Position:
    p = spec.position
    return Position(p.kind, p.offset, p.theta, p.num_buckets, p.max_distance)


def _stack(spec: Spec, d: _Dims, role: str) -> Stack:
    # In an encoder-decoder the decoder is causal and attends to the encoder; a decoder-only
    # model is a lone causal stack; an encoder sees the whole sequence.
    causal = role == "decoder"
    cross = role == "decoder" and spec.layout == "encoder-decoder"
    position = _position(spec)
    parts: list[Node] = []
    if position.kind == "learned":
        parts.append(Embedding("pos_emb", d.max_seq_len + position.offset, d.d_model))
    if spec.embedding.norm:
        parts.append(_norm(spec, d, "emb_norm"))
    n_layers = d.layers(spec, role)
    block = _block(spec, d, causal, cross, first=False)
    if position.kind == "relative_bias":
        # T5: only the first block owns the relative-position bias table; the others reuse it.
        runs = [Run(0, 1, _block(spec, d, causal, cross, first=True))]
        if spec.stack_layers(role) > 1:
            runs.append(Run(1, n_layers - 1, block))
    else:
        runs = [Run(0, n_layers, block)]
    parts.append(Repeat("blocks", tuple(runs)))
    if spec.has_final_norm:
        parts.append(_norm(spec, d, "final_norm"))
    return Stack(
        name=role,
        parts=tuple(parts),
        role=role,
        causal=causal,
        position=position,
        scale_embedding=spec.embedding.scale,
        max_seq_len=d.max_seq_len,
    )


def _block(spec: Spec, d: _Dims, causal: bool, cross: bool, first: bool) -> Block:
    attn = _attention(spec, d, "attn", causal, cross=False, rel_bias=first)
    ff = _moe(spec, d) if spec.moe is not None else _mlp(spec, d, "mlp")
    if spec.residual == "parallel":
        # PaLM / GPT-J: x + attn(norm(x)) + mlp(norm(x)), one norm shared by both branches.
        parts: list[Node] = [_norm(spec, d, "norm"), attn, ff]
    else:
        sublayers: list[tuple[str, Node]] = [("attn_norm", attn)]
        if cross:
            cross_attn = _attention(spec, d, "cross_attn", causal=False, cross=True, rel_bias=False)
            sublayers.append(("cross_norm", cross_attn))
        sublayers.append(("mlp_norm", ff))
        parts = []
        for norm_name, layer in sublayers:
            # Pre-norm normalises the sublayer's input, post-norm the residual sum after it;
            # registration order follows the data flow.
            norm = _norm(spec, d, norm_name)
            parts += [norm, layer] if spec.residual == "pre" else [layer, norm]
    return Block(name="", parts=tuple(parts), residual=spec.residual)


def _attention(
    spec: Spec, d: _Dims, name: str, causal: bool, cross: bool, rel_bias: bool
) -> Attention:
    bias = spec.attention.bias
    q_width = d.n_heads * d.head_dim
    kv_width = d.n_kv_heads * d.head_dim
    parts: list[Node] = [
        Linear("q", d.d_model, q_width, bias),
        Linear("k", d.d_model, kv_width, bias),
        Linear("v", d.d_model, kv_width, bias),
        Linear("o", q_width, d.d_model, bias),
    ]
    if rel_bias:
        parts.append(Embedding("rel_bias", spec.position.num_buckets, d.n_heads))
    return Attention(
        name=name,
        parts=tuple(parts),
        n_heads=d.n_heads,
        n_kv_heads=d.n_kv_heads,
        head_dim=d.head_dim,
        causal=causal and not cross,
        cross=cross,
        scale_scores=spec.attention.scale_scores,
        position=_position(spec) if not cross else Position("none"),
        bidirectional_buckets=not causal,
    )


def _mlp(spec: Spec, d: _Dims, name: str) -> MLP:
    bias = spec.mlp.bias
    parts: list[Node] = []
    if spec.mlp.gated:
        parts.append(Linear("gate", d.d_model, d.d_ff, bias))
    parts += [Linear("up", d.d_model, d.d_ff, bias), Linear("down", d.d_ff, d.d_model, bias)]
    return MLP(name=name, parts=tuple(parts), activation=spec.mlp.activation, gated=spec.mlp.gated)


def _moe(spec: Spec, d: _Dims) -> MoE:
    assert spec.moe is not None
    router = Linear("router", d.d_model, d.n_experts, spec.moe.router_bias)
    experts = Repeat("experts", (Run(0, d.n_experts, _mlp(spec, d, "")),))
    return MoE(name="moe", parts=(router, experts), n_experts=d.n_experts, top_k=d.top_k)
