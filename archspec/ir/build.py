"""Compile a validated Spec into the IR.

This is the only place that knows how spec choices turn into modules. Backends read the IR
alone. Sizes are written with the spec's dimension symbols so that every parameter count is a
formula first and a number second.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from archspec import kinds
from archspec.ir.nodes import (
    IR,
    MLP,
    Attention,
    Block,
    Embedding,
    Identity,
    Linear,
    Model,
    MoE,
    Norm,
    Position,
    Repeat,
    Run,
    Stack,
    Sublayer,
)
from archspec.kinds.positions import NO_POSITION, scaled_kind
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
            (self.d_model / self.n_heads if symbolic else spec.resolved_head_dim)
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
    identity = Identity(spec.name, spec.source, spec.family, spec.hf_class)
    return IR(identity, _model(spec, dims), dims.env, symbolic)


def _model(spec: Spec, d: _Dims) -> Model:
    roles = ["encoder", "decoder"] if spec.layout == "encoder-decoder" else [spec.layout]
    type_emb = None
    if spec.embedding.token_types:
        type_emb = Embedding("type_emb", spec.embedding.token_types, d.d_model)
    lm_head = None
    if spec.head.lm_head:
        tied_to = "tok_emb.weight" if spec.head.tied else None
        lm_head = Linear("lm_head", d.d_model, d.vocab_size, spec.head.bias, tied_to)
    return Model(
        name="",
        layout=spec.layout,
        tok_emb=Embedding("tok_emb", d.vocab_size, d.d_model),
        type_emb=type_emb,
        stacks=tuple(_stack(spec, d, role) for role in roles),
        pooler=Linear("pooler", d.d_model, d.d_model, bias=True) if spec.head.pooler else None,
        lm_head=lm_head,
        scale_tied_output=spec.head.scale_tied_output,
        decoder_start_token=spec.head.decoder_start_token,
        d_model=d.d_model,
        vocab_size=d.vocab_size,
    )


def _norm(spec: Spec, d: _Dims, name: str) -> Norm:
    return Norm(name, spec.norm.kind, d.d_model, spec.norm.has_bias, spec.norm.eps)


def _position(spec: Spec) -> Position:
    p = spec.position
    return Position(
        scaled_kind(p.kind, p.scaling),
        p.offset,
        p.theta,
        p.factor,
        p.low_freq_factor,
        p.high_freq_factor,
        p.original_max_seq_len,
        num_buckets=p.num_buckets,
        max_distance=p.max_distance,
    )


def _stack(spec: Spec, d: _Dims, role: str) -> Stack:
    # In an encoder-decoder the decoder is causal and attends to the encoder; a decoder-only
    # model is a lone causal stack; an encoder sees the whole sequence.
    causal = role == "decoder"
    cross = role == "decoder" and spec.layout == "encoder-decoder"
    position = _position(spec)
    table = position.entry.table
    pos_emb = rel_bias = None
    if table == "absolute":
        pos_emb = Embedding("pos_emb", d.max_seq_len + position.offset, d.d_model)
    elif table == "relative":
        # T5: one table of biases per (distance bucket, head), shared by all blocks.
        rel_bias = Embedding("rel_bias", position.num_buckets, d.n_heads)
    n_layers = d.layers(spec, role)
    block = _block(spec, d, causal, cross, moe=spec.moe is not None)
    runs = [Run(0, n_layers, block)]
    dense = spec.moe.dense_layers if spec.moe is not None else 0
    if dense:
        # DeepSeek, Qwen-MoE: the first layers keep a dense MLP, the rest route to experts.
        n_dense = d.symbol("n_dense_layers", dense)
        runs = [
            Run(0, n_dense, _block(spec, d, causal, cross, moe=False)),
            Run(n_dense, n_layers - n_dense, block),
        ]
    return Stack(
        name=role,
        role=role,
        causal=causal,
        position=position,
        scale_embedding=spec.embedding.scale,
        max_seq_len=d.max_seq_len,
        width=d.d_model,
        blocks=Repeat("blocks", tuple(runs)),
        pos_emb=pos_emb,
        rel_bias=rel_bias,
        emb_norm=_norm(spec, d, "emb_norm") if spec.embedding.norm else None,
        final_norm=_norm(spec, d, "final_norm") if spec.has_final_norm else None,
        emb_dropout=spec.dropout.embeddings,
        out_dropout=spec.dropout.output,
    )


def _block(spec: Spec, d: _Dims, causal: bool, cross: bool, moe: bool) -> Block:
    sublayers = [("attn_norm", _attention(spec, d, "attn", causal, cross=False))]
    if cross:
        sublayers.append(("cross_norm", _attention(spec, d, "cross_attn", False, cross=True)))
    sublayers.append(("mlp_norm", _moe(spec, d) if moe else _mlp(spec, d, "mlp")))
    if kinds.residual(spec.residual).shared_norm:
        # PaLM / GPT-J: x + attn(norm(x)) + mlp(norm(x)), one norm shared by both branches.
        return Block(
            name="",
            residual=spec.residual,
            width=d.d_model,
            sublayers=tuple(Sublayer(None, layer) for _, layer in sublayers),
            shared_norm=_norm(spec, d, "norm"),
            dropout=spec.dropout.hidden,
        )
    return Block(
        name="",
        residual=spec.residual,
        width=d.d_model,
        sublayers=tuple(Sublayer(_norm(spec, d, name), layer) for name, layer in sublayers),
        dropout=spec.dropout.hidden,
    )


def _attention(spec: Spec, d: _Dims, name: str, causal: bool, cross: bool) -> Attention:
    bias = spec.attention.bias
    qkv_bias = bias if spec.attention.qkv_bias is None else spec.attention.qkv_bias
    q_width = d.n_heads * d.head_dim
    kv_width = d.n_kv_heads * d.head_dim
    return Attention(
        name=name,
        q=Linear("q", d.d_model, q_width, qkv_bias),
        k=Linear("k", d.d_model, kv_width, qkv_bias),
        v=Linear("v", d.d_model, kv_width, qkv_bias),
        o=Linear("o", q_width, d.d_model, bias),
        n_heads=d.n_heads,
        n_kv_heads=d.n_kv_heads,
        head_dim=d.head_dim,
        causal=causal and not cross,
        cross=cross,
        scale_scores=spec.attention.scale_scores,
        position=_position(spec) if not cross else Position(NO_POSITION),
        dropout=spec.dropout.attention,
    )


def _mlp(spec: Spec, d: _Dims, name: str) -> MLP:
    bias = spec.mlp.bias
    return MLP(
        name=name,
        gate=Linear("gate", d.d_model, d.d_ff, bias) if spec.mlp.gated else None,
        up=Linear("up", d.d_model, d.d_ff, bias),
        down=Linear("down", d.d_ff, d.d_model, bias),
        activation=spec.mlp.activation,
        dropout=spec.dropout.mlp,
    )


def _moe(spec: Spec, d: _Dims) -> MoE:
    assert spec.moe is not None
    return MoE(
        name="moe",
        router=Linear("router", d.d_model, d.n_experts, spec.moe.router_bias),
        experts=Repeat("experts", (Run(0, d.n_experts, _mlp(spec, d, "")),)),
        n_experts=d.n_experts,
        top_k=d.top_k,
    )
