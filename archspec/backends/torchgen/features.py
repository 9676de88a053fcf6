"""What a model uses, read off its IR: the choices every part of the generator branches on.

The generator emits code only for the features a spec uses, so each emitter asks questions
such as "is there a KV cache?" or "do attention layers need a `causal` flag?". The answers are
derived here, once, from the IR nodes (never from the spec), together with the representative
nodes each class is written from.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import sympy as sp

from archspec.ir.nodes import (
    IR,
    MLP,
    Attention,
    Block,
    Composite,
    Embedding,
    Linear,
    Model,
    MoE,
    Node,
    Norm,
    Position,
    Repeat,
    Stack,
)
from archspec.ir.visit import walk


class UnsupportedIR(ValueError):
    """The IR has a shape the code generator cannot express."""


def blocks_of(stack: Stack) -> Repeat:
    blocks = stack.part("blocks")
    assert isinstance(blocks, Repeat)
    return blocks


def _first_block(stack: Stack) -> Block:
    block = blocks_of(stack).runs[0].node
    assert isinstance(block, Block)
    return block


@dataclass(frozen=True)
class Features:
    """The IR of one model and the questions the emitters ask about it."""

    ir: IR

    @property
    def model(self) -> Model:
        return self.ir.root

    @property
    def name(self) -> str:
        return self.ir.spec.name

    @property
    def layout(self) -> str:
        return self.model.layout

    @property
    def encoder_decoder(self) -> bool:
        return self.layout == "encoder-decoder"

    @property
    def decoder_only(self) -> bool:
        return self.layout == "decoder"

    @property
    def encoder_only(self) -> bool:
        return self.layout == "encoder"

    def part(self, name: str) -> Node | None:
        return self.model.part(name)

    @cached_property
    def stacks(self) -> tuple[Stack, ...]:
        return tuple(p for p in self.model.parts if isinstance(p, Stack))

    @property
    def stack(self) -> Stack:
        """The stack the shared classes are written from: the decoder's when there is one,
        since its blocks have every part (cross-attention) an encoder's have and more."""
        return self.stacks[-1]

    @property
    def block(self) -> Block:
        """Block 0 of `stack`: with T5's relative bias it owns the bias table."""
        return _first_block(self.stack)

    @property
    def attention(self) -> Attention:
        attn = self.block.part("attn")
        assert isinstance(attn, Attention)
        return attn

    @property
    def cross_attention(self) -> Attention | None:
        attn = self.block.part("cross_attn")
        return attn if isinstance(attn, Attention) else None

    @property
    def ff(self) -> MLP | MoE:
        ff = next(p for p in self.block.parts if isinstance(p, (MLP, MoE)))
        return ff

    @property
    def mlp(self) -> MLP:
        """The MLP: the block's own, or one expert of its mixture."""
        ff = self.ff
        if isinstance(ff, MoE):
            experts = ff.part("experts")
            assert isinstance(experts, Repeat)
            ff = experts.runs[0].node
        assert isinstance(ff, MLP)
        return ff

    @property
    def moe(self) -> MoE | None:
        return self.ff if isinstance(self.ff, MoE) else None

    @cached_property
    def norms(self) -> tuple[Norm, ...]:
        return tuple(p.node for p in walk(self.model) if isinstance(p.node, Norm))

    @property
    def position(self) -> Position:
        return self.stack.position

    @property
    def residual(self) -> str:
        return self.block.residual

    # Embeddings and heads.

    @property
    def type_emb(self) -> Embedding | None:
        node = self.part("type_emb")
        return node if isinstance(node, Embedding) else None

    @property
    def pooler(self) -> Linear | None:
        node = self.part("pooler")
        return node if isinstance(node, Linear) else None

    @property
    def lm_head(self) -> Linear | None:
        node = self.part("lm_head")
        return node if isinstance(node, Linear) else None

    # Questions the emitters ask.

    @property
    def rope(self) -> bool:
        return self.position.kind == "rope"

    @property
    def alibi(self) -> bool:
        return self.position.kind == "alibi"

    @property
    def relative_bias(self) -> bool:
        return self.position.kind == "relative_bias"

    @property
    def attention_bias(self) -> bool:
        """Positions enter as a bias on the scores, so every self-attention gets a mask."""
        return self.alibi or self.relative_bias

    @property
    def needs_positions(self) -> bool:
        """Stacks build a tensor of token positions (for a table, sinusoids, RoPE or T5)."""
        return self.position.kind in ("learned", "sinusoidal", "rope", "relative_bias")

    @property
    def cache(self) -> bool:
        """Decoder-only models with a head generate text, with a KV cache."""
        return self.decoder_only and self.lm_head is not None

    @property
    def causal_flag(self) -> bool:
        """Attention takes `causal`: in encoder-decoders without a score bias, the decoder's
        self-attention given no mask (no padding) lets SDPA apply the causal mask, while the
        encoder's and cross-attention must not."""
        return self.encoder_decoder and not self.attention_bias

    @property
    def any_causal(self) -> bool:
        return any(s.causal for s in self.stacks)

    @property
    def any_bidirectional(self) -> bool:
        return any(not s.causal for s in self.stacks)

    @property
    def gqa(self) -> bool:
        """Fewer key/value heads than query heads (grouped- or multi-query attention)."""
        return sp.simplify(self.attention.n_kv_heads - self.attention.n_heads) != 0

    @property
    def mqa(self) -> bool:
        return self.gqa and self.ir.value(self.attention.n_kv_heads) == 1

    @property
    def norm_eps(self) -> float:
        return self.norms[0].eps

    def check(self) -> None:
        """Refuse IR shapes the emitters do not handle, rather than emit wrong code."""
        positions = {s.position for s in self.stacks}
        if len(positions) != 1:
            raise UnsupportedIR("stacks with different position schemes")
        if len({tuple(p.name for p in s.parts) for s in self.stacks}) != 1:
            raise UnsupportedIR("an encoder and a decoder with different parts")
        if len({n.eps for n in self.norms}) > 1:
            raise UnsupportedIR("norms with different epsilons")
        attentions = [p.node for p in walk(self.model) if isinstance(p.node, Attention)]
        if len({(a.scale_scores, a.n_heads, a.n_kv_heads, a.head_dim) for a in attentions}) > 1:
            raise UnsupportedIR("attention layers with different shapes or score scaling")
        for stack in self.stacks:
            for run in blocks_of(stack).runs:
                if not isinstance(run.node, Block) or run.node.residual != self.residual:
                    raise UnsupportedIR("blocks with different residual layouts")
        for node in (self.model, *self.stacks):
            for part in node.parts:
                if isinstance(part, Composite) and part.name == "":
                    raise UnsupportedIR(f"an unnamed part of {type(node).__name__}")
