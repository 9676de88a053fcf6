"""What a model uses, read off its IR: the questions every emitter asks, answered once.

The generator writes one class per distinct composite node (`archspec.ir.classes`), so most
questions are about one node and its typed fields. What is left here is model-wide: the layout
and its forward contract, whether decoding keeps a KV cache, the generated class of each node
and the arguments a stack hands each of its blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from archspec.backends.torchgen.local_rope import LOCAL_ANGLES
from archspec.ir.classes import class_name, class_names
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
    Stack,
)
from archspec.ir.visit import walk
from archspec.kinds.positions import PositionCode


class UnsupportedIR(ValueError):
    """The IR has a shape the code generator cannot express."""


@dataclass(frozen=True)
class Features:
    """The IR of one model and the questions the emitters ask about it."""

    ir: IR

    @property
    def model(self) -> Model:
        return self.ir.root

    @property
    def name(self) -> str:
        return self.ir.identity.name

    @property
    def layout(self) -> str:
        return self.model.layout

    @property
    def roles(self) -> list[str]:
        return [stack.role for stack in self.stacks]

    @property
    def encoder_decoder(self) -> bool:
        return self.roles == ["encoder", "decoder"]

    @property
    def encoder_only(self) -> bool:
        return self.roles == ["encoder"]

    @property
    def decoder_only(self) -> bool:
        return self.roles == ["decoder"]

    @property
    def stacks(self) -> tuple[Stack, ...]:
        return self.model.stacks

    @property
    def type_emb(self) -> Embedding | None:
        return self.model.type_emb

    @property
    def pooler(self) -> Linear | None:
        return self.model.pooler

    @property
    def lm_head(self) -> Linear | None:
        return self.model.lm_head

    @cached_property
    def names(self) -> dict[Node, str]:
        return class_names(self.model)

    def cls(self, node: Node) -> str:
        """The generated class of a composite node."""
        return class_name(self.names, node)

    @property
    def cache(self) -> bool:
        """The model generates text: an LM head over a causal decoder (alone or after an
        encoder), whose self-attention keeps a KV cache."""
        last = self.stacks[-1]
        return self.model.lm_head is not None and last.role == "decoder" and last.causal

    def cached(self, stack: Stack) -> bool:
        """The stack takes a KV cache: the decoder of a model that generates."""
        return self.cache and stack is self.stacks[-1]

    def prompt_unmasked(self, stack: Stack) -> bool:
        """The stack's prompt, written into empty caches without padding, gets no mask:
        every self-attention is plain causal SDPA (no score bias, window, soft cap, sinks or
        latent), which given no mask attends the prompt's own keys with `is_causal`
        (skipping the scores above the diagonal) instead of all the cache's slots."""
        return self.cached(stack) and all(
            a.mask.causal_only and a.softcap is None and a.sinks is None and a.latent is None
            for a in (block.attn for block in stack.block_variants)
        )

    @cached_property
    def norms(self) -> tuple[Norm, ...]:
        return tuple(p.node for p in walk(self.model) if isinstance(p.node, Norm))

    @property
    def norm_eps(self) -> float | None:
        """The Config's `norm_eps`: the first norm's; a norm with another states its own."""
        return self.norms[0].eps if self.norms else None

    @cached_property
    def dropout(self) -> bool:
        """Some module drops activations outside attention (which SDPA does itself)."""
        nodes = [p.node for p in walk(self.model)]
        dropped = [n.dropout for n in nodes if isinstance(n, (MLP, Block))]
        dropped += [d for s in self.stacks for d in (s.emb_dropout, s.out_dropout)]
        return any(dropped)

    @property
    def causalities(self) -> frozenset[bool]:
        return frozenset(s.causal for s in self.stacks)

    @property
    def windowed(self) -> bool:
        """Some attention layer has a sliding window."""
        return any(isinstance(p.node, Attention) and p.node.mask.windowed for p in walk(self.model))

    @property
    def window_sides(self) -> frozenset[bool]:
        """The windows' kinds: two-sided (True, an encoder's) or causal (False)."""
        attentions = (p.node for p in walk(self.model) if isinstance(p.node, Attention))
        return frozenset(a.mask.two_sided for a in attentions if a.mask.windowed)

    @property
    def softcapped(self) -> bool:
        """Some attention layer soft-caps its scores."""
        return any(
            isinstance(p.node, Attention) and p.node.softcap is not None for p in walk(self.model)
        )

    @property
    def sinks(self) -> bool:
        """Some attention layer has attention sinks."""
        return any(
            isinstance(p.node, Attention) and p.node.sinks is not None for p in walk(self.model)
        )

    def position_code(self, stack: Stack) -> PositionCode:
        return stack.position.code

    def classes(self, kind: type) -> list[tuple[Composite, Stack | None]]:
        """One node per generated class of `kind`, in order of appearance, with the stack it
        sits in (None above the stacks)."""
        out: dict[str, tuple[Composite, Stack | None]] = {}
        for placed in walk(self.model):
            node = placed.node
            if isinstance(node, kind) and isinstance(node, Composite):
                stack = next((a for a in placed.ancestors if isinstance(a, Stack)), None)
                out.setdefault(self.cls(node), (node, stack))
        return list(out.values())

    # The arguments a stack hands its blocks, and a block its sublayers.

    def block_params(self, stack: Stack) -> list[str]:
        params = ["x: Tensor", "mask: Tensor | None"]
        angles = self.position_code(stack).angles
        if angles is not None:
            params.append(f"{angles[0]}: {angles[1]}")
            if stack.local_position is not None:  # the local layers' (Gemma 3)
                params.append(f"{LOCAL_ANGLES}: {angles[1]}")
        if self.has_memory(stack):
            params += ["encoder_out: Tensor", "cross_mask: Tensor | None"]
        if self.cached(stack):
            params.append("cache: KVCache | None = None")
        return params

    def block_args(self, stack: Stack) -> list[str]:
        return [param.split(":")[0] for param in self.block_params(stack)]

    def sublayer_args(self, stack: Stack, layer: Composite) -> list[str]:
        """What a block passes a sublayer besides its input."""
        if isinstance(layer, Attention) and layer.cross:
            # The cache holds the keys and values of the encoder output too.
            return ["encoder_out", "cross_mask", *(["cache"] if self.cached(stack) else [])]
        if isinstance(layer, Attention):
            args = ["mask"]
            angles = self.position_code(stack).angles
            if layer.rotary and angles is not None:
                args.append(LOCAL_ANGLES if layer.local_angles else angles[0])
            if self.cached(stack):
                args.append("cache")
            return args
        return []

    @staticmethod
    def has_memory(stack: Stack) -> bool:
        """The stack's blocks attend to an encoder output."""
        return any(block.cross_attn is not None for block in stack.block_variants)

    def check(self) -> None:
        """Refuse IR shapes the emitters do not handle, rather than emit wrong code."""
        for stack in self.stacks:
            for block in stack.block_variants:
                for sub in block.sublayers:
                    if not isinstance(sub.layer, (Attention, MLP, MoE)):
                        raise UnsupportedIR(f"a block sublayer {type(sub.layer).__name__}")
            if not stack.block_variants or not isinstance(stack.block_variants[0], Block):
                raise UnsupportedIR(f"{stack.role}: a stack without blocks")
