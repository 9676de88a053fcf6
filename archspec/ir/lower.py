"""Lowering: each composite node becomes the list of ops its forward runs (`archspec.ir.ops`).

This is the one place that says what a model computes. The FLOP counter and the activation
counter interpret these ops, and the code generator renders `forward` bodies from them. Values a
stack builds once and its blocks share (RoPE's angles, the attention mask, the encoder output a
decoder attends to) travel in a `StackValues`; a block's input is a fresh value of its own, so
what one block keeps is counted once per block.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from archspec.ir.nodes import MLP, Attention, Block, Composite, Model, MoE, Stack
from archspec.ir.ops import (
    ActivationOp,
    Add,
    Attend,
    Blocks,
    Cached,
    Call,
    Clamp,
    ClampedSwiGLU,
    Combine,
    Concat,
    Dispatch,
    Dropout,
    LinearOp,
    Lookup,
    Loss,
    Mul,
    NormOp,
    Op,
    Part,
    Positions,
    Rope,
    RopeAngles,
    Route,
    Rows,
    Scale,
    ScoreBias,
    Select,
    Sinusoids,
    Softcap,
    Value,
)
from archspec.kinds.activations import POOLER_ACTIVATION, SHARED_GATE_ACTIVATION
from archspec.kinds.positions import Position


@dataclass(frozen=True)
class StackValues:
    """What a stack builds once for all its blocks."""

    angles: Value | None = None  # RoPE's cos and sin
    local_angles: Value | None = None  # those of the stack's local_position (Gemma 3)
    mask: Value | None = None  # self-attention's additive mask (a score bias, or causal)
    memory: Value | None = None  # the encoder output cross-attention reads
    cross_mask: Value | None = None


@dataclass
class Lowered:
    """The ops of one module's forward, and the value it returns."""

    ops: list[Op] = field(default_factory=list)
    out: Value | None = None
    inputs: tuple[Value, ...] = ()

    def emit(self, op: Op) -> Value:
        self.ops.append(op)
        return op.out  # type: ignore[return-value]  # None only for Loss, whose result is unused


def rotary_width(node: Attention, position: Position | None = None):
    """The channels of each head RoPE turns: all of head_dim, or the first rotary_dim (latent
    attention: rope_dim); by the layer's own position, or by `position` (its stack's)."""
    if node.latent is not None:
        return node.latent.rope_dim
    rotary_dim = (position or node.position).rotary_dim
    return node.head_dim if rotary_dim is None else rotary_dim


def stack_angles(ctx: StackValues, node: Attention) -> Value:
    """The angles a layer rotates by: its stack's, or the stack's local ones."""
    angles = ctx.local_angles if node.local_angles else ctx.angles
    assert angles is not None
    return angles


def lower_attention(node: Attention, x: Value, ctx: StackValues) -> Lowered:
    if node.latent is not None:
        return lower_latent_attention(node, x, ctx)
    low = Lowered(inputs=(x,))
    source = ctx.memory if node.cross else x
    assert source is not None, "cross-attention needs the encoder output"
    q_width, kv_width = node.n_heads * node.head_dim, node.n_kv_heads * node.head_dim

    def heads(name: str, rows, width, limit) -> Value:
        # Column-parallel projections give each tensor-parallel rank its heads.
        return Value(name, rows, width, split=True, split_limit=limit)

    q = low.emit(LinearOp(heads("q", x.rows, q_width, node.n_heads), x, node.q, "attn_proj"))
    k_out = heads("k", source.rows, kv_width, node.n_kv_heads)
    k = low.emit(LinearOp(k_out, source, node.k, "attn_proj"))
    v_out = heads("v", source.rows, kv_width, node.n_kv_heads)
    v = low.emit(LinearOp(v_out, source, node.v, "attn_proj"))
    if node.clip is not None:
        # OLMo: each projection's output clamped to [-clip, clip], before norms and RoPE.
        q = low.emit(Clamp(_like(q, "q"), q, node.clip, "attn_proj"))
        k = low.emit(Clamp(_like(k, "k"), k, node.clip, "attn_proj"))
        v = low.emit(Clamp(_like(v, "v"), v, node.clip, "attn_proj"))
    if node.q_norm is not None and node.k_norm is not None:
        # Qwen3: each head's queries and keys are normalised over head_dim; OLMo 2: all of
        # the projection's channels together.
        q = low.emit(NormOp(_like(q, "q"), q, node.q_norm))
        k = low.emit(NormOp(_like(k, "k"), k, node.k_norm))
    if node.rotary:
        angles = stack_angles(ctx, node)
        cost = node.position.entry.flops_per_element
        q_rot, k_rot = _like(q, "q"), _like(k, "k")
        rotated = rotary_width(node)
        q = low.emit(Rope(q_rot, q, angles, node.n_heads, cost, rotated, node.head_dim))
        k = low.emit(Rope(k_rot, k, angles, node.n_kv_heads, cost, rotated, node.head_dim))
    # The KV cache keeps the keys and values, rotated: every position's, or a sliding
    # window's last `window` (a ring); cross-attention's, of the encoder output, once. An
    # encoder's two-sided window keeps no cache.
    window = node.window if node.causal else None
    rows, capacity = ("memory", None) if node.cross else ("keys", window)
    k = low.emit(Cached(_cached(k, rows, capacity), k))
    v = low.emit(Cached(_cached(v, rows, capacity), v))
    mask = ctx.cross_mask if node.cross else ctx.mask
    y = low.emit(attend(node, heads("y", x.rows, q_width, node.n_heads), q, k, v, mask))
    out = Value("out", x.rows, node.o.out_features)
    low.out = low.emit(LinearOp(out, y, node.o, "attn_proj"))
    return low


def lower_latent_attention(node: Attention, x: Value, ctx: StackValues) -> Lowered:
    """DeepSeek-V2's multi-head latent attention (arXiv:2405.04434, Section 2.1): keys and
    values come up from a normalised latent per token, which is what the KV cache keeps
    together with the one rotated key all heads share. Each head's queries and keys join a
    part without positions (nope_dim) and a rotated part (rope_dim)."""
    lat = node.latent
    assert lat is not None and ctx.angles is not None
    low = Lowered(inputs=(x,))
    h, nope, rope = node.n_heads, lat.nope_dim, lat.rope_dim
    cost = node.position.entry.flops_per_element

    def heads(name: str, width, rows=x.rows) -> Value:
        return Value(name, rows, width, split=True, split_limit=h)

    def part(name: str, of: Value, start, width, n=h) -> Value:
        out = Value(name, of.rows, width, base=of, split=of.split, split_limit=of.split_limit)
        return low.emit(Part(out, of, start, n))

    q_in = x
    if lat.q_down is not None and lat.q_norm is not None:
        q_rank = lat.q_down.out_features
        q_in = low.emit(LinearOp(Value("q_latent", x.rows, q_rank), x, lat.q_down, "attn_proj"))
        q_in = low.emit(NormOp(Value("q_latent", x.rows, q_rank), q_in, lat.q_norm))
    q = low.emit(LinearOp(heads("q", h * node.head_dim), q_in, node.q, "attn_proj"))
    q_pass, q_rot = part("q_pass", q, 0, h * nope), part("q_rot", q, nope, h * rope)
    q_rot = low.emit(Rope(heads("q_rot", h * rope), q_rot, ctx.angles, h, cost, rope, rope))
    q = low.emit(Concat(heads("q", h * node.head_dim), (q_pass, q_rot)))
    kv = low.emit(LinearOp(Value("kv", x.rows, lat.kv_rank + rope), x, node.k, "attn_proj"))
    latent, k_rot = part("latent", kv, 0, lat.kv_rank, 1), part("k_rot", kv, lat.kv_rank, rope, 1)
    latent = low.emit(NormOp(Value("latent", x.rows, lat.kv_rank), latent, lat.kv_norm))
    k_rot = low.emit(Rope(Value("k_rot", x.rows, rope), k_rot, ctx.angles, 1, cost, rope, rope))
    # Keys and values come up from every cached position's latent, at every step.
    latent = low.emit(Cached(_cached(latent, "keys"), latent))
    k_rot = low.emit(Cached(_cached(k_rot, "keys"), k_rot))
    kv_width = h * (nope + lat.v_dim)
    kv = low.emit(LinearOp(heads("kv", kv_width, "keys"), latent, node.v, "attn_proj"))
    k_pass, v = part("k_pass", kv, 0, h * nope), part("v", kv, nope, h * lat.v_dim)
    k = low.emit(Concat(heads("k", h * node.head_dim, "keys"), (k_pass, k_rot)))
    y = low.emit(attend(node, heads("y", h * lat.v_dim), q, k, v, ctx.mask))
    low.out = low.emit(LinearOp(Value("out", x.rows, node.o.out_features), y, node.o, "attn_proj"))
    return low


def attend(node: Attention, out: Value, q: Value, k: Value, v: Value, mask: Value | None) -> Attend:
    """The attention core, carrying what its readers need of the layer (they never look
    back at it): heads, widths, which keys a query sees, the scale, soft-capping, sinks,
    dropout."""
    return Attend(
        out,
        q,
        k,
        v,
        mask,
        heads=node.n_heads,
        kv_heads=node.n_kv_heads,
        head_dim=node.head_dim,
        v_head_dim=node.v_head_dim,
        masking=node.mask,
        scaled=node.scale_scores,
        own_scale=node.scale_dim is not None or node.scale is not None or node.latent is not None,
        softcap=node.softcap,
        sinks=node.sinks is not None,
        dropout=node.dropout,
    )


def lower_mlp(node: MLP, x: Value) -> Lowered:
    low = Lowered(inputs=(x,))
    hidden = node.hidden

    def linear(name: str, module, inp: Value, width, split: bool) -> Value:
        out = Value(name, inp.rows, width, copies=inp.copies, split=split)
        return low.emit(LinearOp(out, inp, module, "mlp"))

    # The hidden units are split over tensor-parallel ranks (column-parallel up and gate,
    # row-parallel down).
    if node.gate is not None and node.clamped:
        assert node.swiglu_limit is not None and node.swiglu_alpha is not None
        gate = linear("gate", node.gate, x, hidden, split=True)
        up = linear("up", node.up, x, hidden, split=True)
        glu = ClampedSwiGLU(_like(up, "h"), gate, up, node.swiglu_limit, node.swiglu_alpha)
        h = low.emit(glu)
    elif node.gate is not None:
        gate = linear("gate", node.gate, x, hidden, split=True)
        act = low.emit(ActivationOp(_like(gate, "act"), gate, node.activation))
        up = linear("up", node.up, x, hidden, split=True)
        h = low.emit(Mul(_like(up, "h"), act, up, "activations"))
    else:
        up = linear("up", node.up, x, hidden, split=True)
        h = low.emit(ActivationOp(_like(up, "h"), up, node.activation))
    if node.dropout:
        h = low.emit(Dropout(_like(h, "h"), h, node.dropout, "activations"))
    low.out = linear("out", node.down, h, node.down.out_features, split=False)
    return low


def lower_moe(node: MoE, x: Value) -> Lowered:
    low = Lowered(inputs=(x,))
    logits = Value("logits", x.rows, node.n_experts)
    low.emit(LinearOp(logits, x, node.router, "router"))
    chosen = Value("chosen", x.rows, node.top_k, dtype="index")
    weights = low.emit(
        Route(
            Value("weights", x.rows, node.top_k, node.router.entry.weights_dtype),
            logits,
            chosen,
            node.router.entry,
            node.n_experts,
            node.top_k,
            node.normalize,
            node.routed_scale,
            node.groups,
            node.top_groups,
        )
    )
    routed = low.emit(Dispatch(Value("routed", x.rows, x.width, copies=node.top_k), x, chosen))
    expert = Value("expert_out", x.rows, x.width, copies=node.top_k)
    low.emit(Call(expert, node.expert, (routed,)))
    out = low.emit(Combine(Value("out", x.rows, x.width), expert, weights, node.top_k))
    if node.shared is not None:
        # Qwen2-MoE: every token also goes through the shared expert, scaled by a sigmoid gate.
        shared = low.emit(Call(Value("shared", x.rows, x.width), node.shared, (x,)))
        if node.shared_gate is not None:
            gate = low.emit(LinearOp(Value("gate", x.rows, 1), x, node.shared_gate, "router"))
            gate = low.emit(ActivationOp(_like(gate, "gate"), gate, SHARED_GATE_ACTIVATION, "mlp"))
            shared = low.emit(Mul(Value("shared", x.rows, x.width), gate, shared, "mlp"))
        out = low.emit(Add(Value("out", x.rows, x.width), out, shared, "mlp"))
    low.out = out
    return low


def lower_block(node: Block) -> Lowered:
    """A block's forward from its residual kind. Its input is a value of its own."""
    d = node.width
    x = Value("x", "tokens", d)
    low = Lowered(inputs=(x,))

    def sublayer(layer, inp: Value) -> Value:
        out = low.emit(Call(Value(layer.name, "tokens", d), layer, (inp,)))
        if node.dropout:  # on the residual branch, before the add
            out = low.emit(Dropout(Value(layer.name, "tokens", d), out, node.dropout, "residuals"))
        return out

    def add(x: Value, out: Value) -> Value:
        """x + out, the branch first scaled by the residual multiplier (Granite)."""
        if node.residual_multiplier != 1:
            m = node.residual_multiplier
            out = low.emit(Scale(Value(out.name, "tokens", d), out, "residuals", factor=m))
        return low.emit(Add(Value("x", "tokens", d), x, out, "residuals"))

    position = node.entry.norm_position
    if position == "shared":
        assert node.shared_norm is not None
        h = low.emit(NormOp(Value("h", "tokens", d), x, node.shared_norm))
        for sub in node.sublayers:
            x = add(x, sublayer(sub.layer, h))
    block_input = x
    for sub in node.sublayers if position != "shared" else ():
        # A pre-norm block may lack a norm (ModernBERT's first: the embedding norm's output).
        assert sub.norm is not None or position in ("before", "on_output")
        if position == "per_branch":
            # Each branch normalises the block's input; their outputs add to the stream.
            h = low.emit(NormOp(Value("h", "tokens", d), block_input, sub.norm))
            x = add(x, sublayer(sub.layer, h))
        elif position in ("before", "on_output"):
            h = x if sub.norm is None else low.emit(NormOp(Value("h", "tokens", d), x, sub.norm))
            out = sublayer(sub.layer, h)
            if sub.post_norm is not None:  # sandwich, output-norm: the output is normalised
                out = low.emit(NormOp(Value(sub.layer.name, "tokens", d), out, sub.post_norm))
            x = add(x, out)
        else:
            out = sublayer(sub.layer, x)
            total = add(x, out)
            x = low.emit(NormOp(Value("x", "tokens", d), total, sub.norm))
    low.out = x
    return low


def lower_stack(node: Stack, x: Value, memory: Value | None = None) -> tuple[Lowered, StackValues]:
    """The stack's forward over embedded tokens `x`, and the values its blocks share."""
    low = Lowered(inputs=(x,))
    entry = node.position.entry
    d = node.emb_width  # the embeddings' width, until a factorised embedding's projection
    if node.proj_first:
        assert node.emb_proj is not None
        d = node.width
        x = low.emit(LinearOp(Value("x", "tokens", d), x, node.emb_proj, "embeddings"))
    positions = None
    if entry.needs_positions:
        positions = low.emit(Positions(Value("positions", "positions", 1, "index")))
    if node.scale_embedding:
        x = low.emit(Scale(Value("x", "tokens", d), x, "embeddings", tensor=node.scale_in_dtype))
    if node.emb_multiplier != 1:
        m = node.emb_multiplier
        x = low.emit(Scale(Value("x", "tokens", d), x, "embeddings", factor=m))
    if node.pos_emb is not None:
        assert positions is not None
        pos = low.emit(Lookup(Value("pos", "positions", d), node.pos_emb, positions))
        x = low.emit(Add(Value("x", "tokens", d), x, pos, "embeddings"))
    elif entry.added:
        assert positions is not None
        pos = low.emit(Sinusoids(Value("pos", "positions", d), positions))
        x = low.emit(Add(Value("x", "tokens", d), x, pos, "embeddings"))
    if node.emb_norm is not None:
        x = low.emit(NormOp(Value("x", "tokens", d), x, node.emb_norm))
    if node.emb_dropout:
        x = low.emit(Dropout(Value("x", "tokens", d), x, node.emb_dropout, "embeddings"))
    d = node.width
    if node.emb_proj is not None and not node.proj_first:
        x = low.emit(LinearOp(Value("x", "tokens", d), x, node.emb_proj, "embeddings"))
    angles = local_angles = mask = cross_mask = None
    block = node.block_variants[0]
    attn = block.attn
    if entry.rotary:
        assert positions is not None
        width = 2 * rotary_width(attn, node.position)
        angles = low.emit(RopeAngles(Value("angles", "positions", width), positions))
        if node.local_position is not None:  # a second table, local layers' (Gemma 3)
            local = Value("local_angles", "positions", width)
            local_angles = low.emit(RopeAngles(local, positions, local=True))
    if entry.score_bias:
        heads = attn.n_heads
        bias = Value("mask", "pairs", heads, split=True, split_limit=heads)
        mask = low.emit(ScoreBias(bias, node.rel_bias, heads, node.causal))
    elif node.causal and block.cross_attn is not None:
        # An encoder-decoder's decoder: its self-attention gets an explicit causal mask.
        mask = Value("mask", "pairs", 1)
    ctx = StackValues(angles, local_angles, mask, memory, cross_mask)
    x = low.emit(Blocks(Value("x", "tokens", d), x, node.blocks))
    if node.final_norm is not None:
        x = low.emit(NormOp(Value("x", "tokens", d), x, node.final_norm))
    if node.out_dropout:
        x = low.emit(Dropout(Value("x", "tokens", d), x, node.out_dropout, "residuals"))
    if node.out_proj is not None:
        x = low.emit(LinearOp(Value("x", "tokens", node.out_width), x, node.out_proj, "head"))
    low.out = x
    return low, ctx


@dataclass(frozen=True)
class Segment:
    """The model's ops that run with one stack's lengths: its embeddings, the stack and, after
    the last stack, the heads."""

    role: str
    stack: Stack
    embed: list[Op]
    x: Value  # the embedded tokens the stack starts from
    heads: list[Op]
    memory: Value | None  # the encoder output, for an encoder-decoder's decoder


def lower_model(model: Model) -> list[Segment]:
    segments: list[Segment] = []
    memory = None
    d = model.d_model
    for i, stack in enumerate(model.stacks):
        low = Lowered()
        ids = Value("input_ids", "tokens", 1, "index")
        e = model.tok_emb.dim  # below d_model when the embeddings are factorised
        x = low.emit(Lookup(Value("x", "tokens", e), model.tok_emb, ids, token_embedding=True))
        if model.type_emb is not None:
            # Without token_type_ids every token is in segment 0: one row, broadcast.
            seg = low.emit(Lookup(Value("segment", "batch", 0), model.type_emb, None))
            x = low.emit(Add(Value("x", "tokens", e), x, seg, "embeddings"))
        heads = Lowered()
        last = i == len(model.stacks) - 1
        hidden = Value("hidden", "tokens", stack.out_width)
        if last and model.pooler is not None:
            first = heads.emit(Select(Value("first", "batch", d, base=hidden), hidden))
            dense = heads.emit(LinearOp(Value("pooled", "batch", d), first, model.pooler, "head"))
            heads.emit(ActivationOp(Value("pooled", "batch", d), dense, POOLER_ACTIVATION, "head"))
        if last and model.lm_head is not None:
            h = hidden
            if model.scale_tied_output:
                h = heads.emit(Scale(Value("hidden", "tokens", d), hidden, "head"))
            if model.lm_transform is not None:
                assert model.lm_norm is not None and model.lm_activation is not None
                e = model.lm_transform.out_features
                act = model.lm_activation
                h = heads.emit(LinearOp(Value("h", "tokens", e), h, model.lm_transform, "head"))
                h = heads.emit(ActivationOp(Value("h", "tokens", e), h, act, "head"))
                h = heads.emit(NormOp(Value("h", "tokens", e), h, model.lm_norm))
            if model.hidden_divisor != 1:
                div = model.hidden_divisor
                h = heads.emit(Scale(Value("h", "tokens", h.width), h, "head", factor=div,
                                     divide=True))  # fmt: skip
            # Vocabulary-parallel: each tensor-parallel rank holds its share of the logits.
            logits = Value("logits", "tokens", model.vocab_size, split=True)
            logits = heads.emit(LinearOp(logits, h, model.lm_head, "head"))
            if model.logits_divisor != 1:
                scaled = Value("logits", "tokens", model.vocab_size, split=True)
                div = model.logits_divisor
                logits = heads.emit(Scale(scaled, logits, "head", factor=div, divide=True))
            if model.logit_scale != 1:
                scaled = Value("logits", "tokens", model.vocab_size, split=True)
                logits = heads.emit(Scale(scaled, logits, "head", factor=model.logit_scale))
            if model.logit_softcap is not None:
                capped = Value("logits", "tokens", model.vocab_size, split=True)
                logits = heads.emit(Softcap(capped, logits, model.logit_softcap, "head"))
            heads.emit(Loss(None, logits))
        if last and model.score is not None:
            assert model.score_dense is not None and model.score_activation is not None
            act = model.score_activation
            h = heads.emit(LinearOp(Value("h", "tokens", d), hidden, model.score_dense, "head"))
            h = heads.emit(ActivationOp(Value("h", "tokens", d), h, act, "head"))
            heads.emit(LinearOp(Value("scores", "tokens", 1), h, model.score, "head"))
        segments.append(Segment(stack.role, stack, low.ops, x, heads.ops, memory))
        memory = Value("encoder_out", "memory", d)
    return segments


def lower(node: Composite, x: Value, ctx: StackValues) -> Lowered:
    """The ops of a sublayer called with `x`."""
    if isinstance(node, Attention):
        return lower_attention(node, x, ctx)
    if isinstance(node, MoE):
        return lower_moe(node, x)
    if isinstance(node, MLP):
        return lower_mlp(node, x)
    raise TypeError(f"no lowering for {type(node).__name__}")


def _like(v: Value, name: str) -> Value:
    """A new tensor shaped and split like `v`."""
    return Value(
        name, v.rows, v.width, v.dtype, copies=v.copies, split=v.split, split_limit=v.split_limit
    )


def _cached(v: Value, rows: Rows, capacity: int | None = None) -> Value:
    """`v` at every position a KV cache holds: a view of it (nothing is cached in training)
    with the cache's rows, at most `capacity` positions of each sequence."""
    split, limit = v.split, v.split_limit
    return Value(
        v.name, rows, v.width, v.dtype, v, split=split, split_limit=limit, capacity=capacity
    )
