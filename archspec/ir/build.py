"""Compile a validated Spec into the IR.

This is the only place that knows how spec choices turn into modules. Backends read the IR
alone. Sizes are written with the spec's dimension symbols so that every parameter count is a
formula first and a number second.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import TYPE_CHECKING

from archspec import kinds
from archspec.ir.nodes import (
    IR,
    MLP,
    Attention,
    Block,
    Embedding,
    Identity,
    Latent,
    Linear,
    Model,
    MoE,
    Norm,
    Repeat,
    Router,
    Run,
    Sinks,
    Stack,
    Sublayer,
)
from archspec.kinds.positions import Position
from archspec.kinds.positions.none import NoPosition
from archspec.kinds.positions.rope_yarn import yarn_attention
from archspec.spec.layer_positions import cycle
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
        # The embeddings' width: d_model, or a symbol of its own when factorised (ALBERT).
        self.d_emb = (
            self.d_model
            if spec.embedding.dim is None
            else self.symbol("d_embedding", spec.embedding.dim)
        )
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
            moe_ff = spec.moe.d_ff
            self.d_ff_expert = self.d_ff if moe_ff is None else self.symbol("d_ff_expert", moe_ff)
            if spec.moe.shared_d_ff:
                self.d_ff_shared = self.symbol("d_ff_shared", spec.moe.shared_d_ff)

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
        type_emb = Embedding("type_emb", spec.embedding.token_types, d.d_emb)
    lm_head = lm_transform = lm_norm = lm_activation = None
    score = spec.head.token_score
    if spec.head.lm_head:
        tied_to = "tok_emb.weight" if spec.head.tied else None
        around = spec.embedding.dim is not None and spec.embedding.projection == "around_stack"
        width = d.d_emb if around else d.d_model  # OPT-350m's stack returns d_emb wide
        if spec.head.transform:
            # Masked-LM heads: dense (to the embeddings' width), activation, norm, then the
            # projection, which a tied head shares with the (possibly narrower) embeddings.
            width = d.d_emb
            lm_transform = Linear("lm_transform", d.d_model, width, spec.head.transform_bias)
            lm_norm = _norm(spec, d, "lm_norm", width)
            lm_activation = spec.head.transform_activation or spec.mlp.activation
        lm_head = Linear("lm_head", width, d.vocab_size, spec.head.bias, tied_to)
    return Model(
        name="",
        layout=spec.layout,
        tok_emb=Embedding("tok_emb", d.vocab_size, d.d_emb),
        type_emb=type_emb,
        stacks=tuple(_stack(spec, d, role) for role in roles),
        pooler=Linear("pooler", d.d_model, d.d_model, bias=True) if spec.head.pooler else None,
        lm_head=lm_head,
        lm_transform=lm_transform,
        lm_norm=lm_norm,
        lm_activation=lm_activation,
        score_dense=Linear("score_dense", d.d_model, d.d_model, True) if score else None,
        score=Linear("score", d.d_model, 1, True) if score else None,
        score_activation=spec.mlp.activation if score else None,
        scale_tied_output=spec.head.scale_tied_output,
        logit_softcap=spec.head.softcap,
        logits_divisor=spec.head.logits_divisor,
        hidden_divisor=spec.head.hidden_divisor,
        logit_scale=spec.head.logit_scale,
        decoder_start_token=spec.head.decoder_start_token,
        d_model=d.d_model,
        vocab_size=d.vocab_size,
    )


def _norm(spec: Spec, d: _Dims, name: str, width: sp.Expr | None = None) -> Norm:
    dim = d.d_model if width is None else width
    return Norm(name, spec.norm.kind, dim, spec.norm.has_bias, spec.norm.eps)


def _stack(spec: Spec, d: _Dims, role: str) -> Stack:
    # In an encoder-decoder the decoder is causal and attends to the encoder; a decoder-only
    # model is a lone causal stack; an encoder sees the whole sequence.
    causal = role == "decoder"
    cross = role == "decoder" and spec.layout == "encoder-decoder"
    position = spec.position
    table = position.entry.table
    around = spec.embedding.dim is not None and spec.embedding.projection == "around_stack"
    pos_emb = rel_bias = None
    if table == "absolute":
        pos_width = d.d_model if around else d.d_emb  # OPT adds positions after project_in
        pos_emb = Embedding("pos_emb", d.max_seq_len + position.offset, pos_width)
    elif table == "relative":
        # T5: one table of biases per (distance bucket, head), shared by all blocks.
        rel_bias = Embedding("rel_bias", position.num_buckets, d.n_heads)
    runs = _runs(spec, d, role, causal, cross)
    return Stack(
        name=role,
        role=role,
        causal=causal,
        position=position,
        local_position=spec.local_position,
        scale_embedding=spec.embedding.scale,
        scale_in_dtype=spec.embedding.scale_in_dtype,
        emb_multiplier=spec.embedding.multiplier,
        max_seq_len=d.max_seq_len,
        width=d.d_model,
        blocks=Repeat("blocks", tuple(runs)),
        pos_emb=pos_emb,
        rel_bias=rel_bias,
        emb_norm=_norm(spec, d, "emb_norm", d.d_emb) if spec.embedding.norm else None,
        emb_proj=Linear("emb_proj", d.d_emb, d.d_model, not around) if spec.embedding.dim else None,
        proj_first=around,
        out_proj=Linear("out_proj", d.d_model, d.d_emb, False) if around else None,
        final_norm=_norm(spec, d, "final_norm") if spec.has_final_norm else None,
        emb_dropout=spec.dropout.embeddings,
        out_dropout=spec.dropout.output,
    )


def _runs(spec: Spec, d: _Dims, role: str, causal: bool, cross: bool) -> list[Run]:
    """The stack's blocks as runs of equal ones: all alike, a dense first stretch before the
    experts (DeepSeek, Qwen-MoE), or windowed and full attention layers in the spec's pattern
    (Gemma 2 alternates them)."""
    n_layers = d.layers(spec, role)
    dense = spec.moe.dense_layers if spec.moe is not None else 0
    window = spec.attention.sliding_window
    period = cycle(spec)
    # What tells layers apart beyond the dense first ones: their window and their positions.
    pattern = {_kind(spec, layer, 0)[1:] for layer in range(period)}

    # ModernBERT: the first block without an attention norm, a run of its own.
    bare = 0 if spec.norm.first_attention else 1

    def block(moe: bool, windowed: bool, letter: str = "P", first: bool = False) -> Block:
        position = spec.layer_position_of(letter)
        window_ = window if windowed else None
        return _block(spec, d, causal, cross, moe, window_, position, letter, bool(bare) and first)

    if spec.shares_layers:
        # ALBERT: layer_groups distinct blocks, each run n_layers / layer_groups times in a row
        # (encoders only, without windows or dense first layers: validation says so).
        assert spec.layer_groups is not None
        # One group (every real ALBERT) is the literal 1, so that the block's path reads
        # `blocks.0` however the IR is built.
        groups = 1 if spec.layer_groups == 1 else d.symbol("n_layer_groups", spec.layer_groups)
        applied = n_layers / groups if d.symbolic else spec.n_layers // spec.layer_groups
        return [Run(0, groups, block(spec.moe is not None, False), applied=applied)]

    n = spec.stack_layers(role)
    if len(pattern) == 1 and not (bare and (dense or n == 1)):
        # Every layer's attention alike: the runs stay formulas in n_layers.
        (alike,) = pattern
        if bare:
            return [
                Run(0, 1, block(spec.moe is not None, *alike, first=True)),
                Run(1, n_layers - 1, block(spec.moe is not None, *alike)),
            ]
        if dense:
            # One dense layer is a literal 1: a single module keeps its index in every view.
            n_dense = 1 if dense == 1 else d.symbol("n_dense_layers", dense)
            return [
                Run(0, n_dense, block(False, *alike)),
                Run(n_dense, n_layers - n_dense, block(True, *alike)),
            ]
        return [Run(0, n_layers, block(spec.moe is not None, *alike))]
    # Windowed and full layers, or layers with other positions, take turns: one run per
    # letter of the patterns' common cycle, its layers a cycle's length apart, in the dense
    # first stretch and in the rest: as many runs at a million layers as at twelve.
    runs: list[Run] = []
    cuts = sorted({0, bare, dense, n})
    for first, last in itertools.pairwise(cuts):
        for offset in range(period):
            layers = range(first + (offset - first) % period, last, period)
            if layers:  # each run its own node: a walk tells the runs apart by identity
                node = block(*_kind(spec, layers.start, dense), first=layers.start == 0)
                runs.append(Run(layers.start, len(layers), node, stride=period))
    return sorted(runs, key=lambda run: run.start)


def _kind(spec: Spec, layer: int, dense: int) -> tuple[bool, bool, str]:
    """(experts, windowed, position letter) of a layer: what makes its block differ from
    another's."""
    experts = spec.moe is not None and layer >= dense
    return experts, spec.windowed(layer), spec.position_letter(layer)


def _block(
    spec: Spec,
    d: _Dims,
    causal: bool,
    cross: bool,
    moe: bool,
    window: int | None = None,
    position: Position | None = None,
    letter: str = "P",
    bare: bool = False,
) -> Block:
    """A block; `bare`: without a norm before its attention (ModernBERT's first)."""
    attention = _attention(
        spec, d, "attn", causal, cross=False, window=window, position=position, letter=letter
    )
    sublayers = [("attn_norm", attention)]
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
            residual_multiplier=spec.residual_multiplier,
        )
    post = kinds.residual(spec.residual).post_norms
    pre = kinds.residual(spec.residual).norm_position != "on_output"

    def sublayer(name: str, layer) -> Sublayer:
        # A sandwich block's second norm: attn_post_norm, mlp_post_norm (an output-norm
        # block's only one).
        post_norm = _norm(spec, d, name.replace("_norm", "_post_norm")) if post else None
        normed = pre and not (bare and name == "attn_norm")
        return Sublayer(_norm(spec, d, name) if normed else None, layer, post_norm)

    return Block(
        name="",
        residual=spec.residual,
        width=d.d_model,
        sublayers=tuple(sublayer(name, layer) for name, layer in sublayers),
        dropout=spec.dropout.hidden,
        residual_multiplier=spec.residual_multiplier,
    )


def _attention(
    spec: Spec,
    d: _Dims,
    name: str,
    causal: bool,
    cross: bool,
    window: int | None = None,
    position: Position | None = None,
    letter: str = "P",
) -> Attention:
    if spec.attention.latent is not None:
        return _latent_attention(spec, d, name)
    bias = spec.attention.bias
    qkv_bias = bias if spec.attention.qkv_bias is None else spec.attention.qkv_bias
    q_width = d.n_heads * d.head_dim
    kv_width = d.n_kv_heads * d.head_dim
    qk_norm = spec.attention.qk_norm and not cross
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
        position=(position or spec.position) if not cross else NoPosition(),
        local_angles=letter == "L" and not cross,
        dropout=spec.dropout.attention,
        window=window,
        softcap=spec.attention.softcap if not cross else None,
        q_norm=_qk_norm(spec, d, "q_norm", q_width) if qk_norm else None,
        k_norm=_qk_norm(spec, d, "k_norm", kv_width) if qk_norm else None,
        qk_norm_all=spec.attention.qk_norm_scope == "all",
        scale_dim=spec.attention.scale_dim,
        scale=spec.attention.scale,
        clip=spec.attention.clip_qkv if not cross else None,
        sinks=Sinks("sinks", d.n_heads) if spec.attention.sinks and not cross else None,
    )


def _qk_norm(spec: Spec, d: _Dims, name: str, width: sp.Expr) -> Norm:
    """A norm over one head's width (Qwen3's q_norm and k_norm), or over the whole projection
    `width` (OLMo 2's)."""
    dim = width if spec.attention.qk_norm_scope == "all" else d.head_dim
    return Norm(name, spec.norm.kind, dim, spec.norm.has_bias, spec.norm.eps)


def _latent_attention(spec: Spec, d: _Dims, name: str) -> Attention:
    """DeepSeek-V2's multi-head latent attention (validation keeps it causal, unbiased,
    rotary, one key per head)."""
    lat = spec.attention.latent
    assert lat is not None
    kv_rank = d.symbol("kv_rank", lat.kv_rank)
    rope, nope = d.symbol("rope_dim", lat.rope_dim), d.symbol("nope_dim", lat.nope_dim)
    v_dim = d.symbol("v_dim", lat.v_dim)
    heads, qk_dim = d.n_heads, nope + rope
    eps = lat.eps if lat.eps is not None else spec.norm.eps
    q_down = q_norm = None
    q_in = d.d_model
    if lat.q_rank is not None:
        q_in = d.symbol("q_rank", lat.q_rank)
        q_down = Linear("q_down", d.d_model, q_in, False)
        q_norm = Norm("q_down_norm", "rmsnorm", q_in, False, eps)
    return Attention(
        name=name,
        q=Linear("q_up" if q_down is not None else "q", q_in, heads * qk_dim, False),
        k=Linear("kv_down", d.d_model, kv_rank + rope, False),
        v=Linear("kv_up", kv_rank, heads * (nope + v_dim), False),
        o=Linear("o", heads * v_dim, d.d_model, False),
        n_heads=heads,
        n_kv_heads=heads,
        head_dim=qk_dim,
        causal=True,
        cross=False,
        scale_scores=True,
        position=spec.position,
        dropout=spec.dropout.attention,
        latent=Latent(
            kv_norm=Norm("kv_down_norm", "rmsnorm", kv_rank, False, eps),
            kv_rank=kv_rank,
            rope_dim=rope,
            nope_dim=nope,
            v_dim=v_dim,
            # validation allows yarn_mscale with YaRN's scaling only
            mscale=yarn_attention(spec.position.scaling.factor, lat.yarn_mscale)
            if lat.yarn_mscale
            else 1.0,
            q_down=q_down,
            q_norm=q_norm,
        ),
    )


def _mlp(spec: Spec, d: _Dims, name: str, width: sp.Expr | None = None) -> MLP:
    bias = spec.mlp.bias
    hidden = d.d_ff if width is None else width
    return MLP(
        name=name,
        gate=Linear("gate", d.d_model, hidden, bias) if spec.mlp.gated else None,
        up=Linear("up", d.d_model, hidden, bias),
        down=Linear("down", hidden, d.d_model, bias),
        activation=spec.mlp.activation,
        dropout=spec.dropout.mlp,
    )


def _expert(spec: Spec, d: _Dims) -> MLP:
    """A routed expert: the spec's MLP at the experts' width, with gpt-oss's biases on its
    projections (moe.expert_bias) and its clamped SwiGLU (moe.swiglu_limit, swiglu_alpha)."""
    moe = spec.moe
    assert moe is not None
    mlp = _mlp(spec, d, "", d.d_ff_expert)
    if moe.expert_bias:
        mlp = replace(
            mlp,
            gate=replace(mlp.gate, bias=True) if mlp.gate is not None else None,
            up=replace(mlp.up, bias=True),
            down=replace(mlp.down, bias=True),
        )
    return replace(mlp, swiglu_limit=moe.swiglu_limit, swiglu_alpha=moe.swiglu_alpha)


def _moe(spec: Spec, d: _Dims) -> MoE:
    moe = spec.moe
    assert moe is not None
    shared = _mlp(spec, d, "shared", d.d_ff_shared) if moe.shared_d_ff else None
    return MoE(
        name="moe",
        router=Router("router", d.d_model, d.n_experts, moe.router_bias, kind=moe.router),
        experts=Repeat("experts", (Run(0, d.n_experts, _expert(spec, d)),)),
        n_experts=d.n_experts,
        top_k=d.top_k,
        normalize=moe.normalize and kinds.router(moe.router).renormalises,
        shared=shared,
        shared_gate=Linear("shared_gate", d.d_model, 1, False) if moe.shared_gate else None,
        routed_scale=moe.routed_scale,
        groups=moe.groups,
        top_groups=moe.top_groups,
    )
