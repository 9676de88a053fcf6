"""Residual kinds: how a block wires its norms and sublayers around the residual stream.

A block has sublayers (self-attention, cross-attention in an encoder-decoder's decoder, the
feed-forward network), each with a norm, or one norm shared by all (parallel); in a parallel
block with a norm per branch (GPT-NeoX, Falcon 40B) each norm reads the block's input. The
kind says in which order they are registered (which is also the order `print(model)` shows and
the data flows) and `archspec.ir.lower` writes the block's forward from `norm_position`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class ResidualKind:
    name: str  # the spec's word for it
    label: str  # in tables
    doc: str  # the generated Block's docstring
    # Where each norm sits: before its sublayer, x + f(norm(x)); after the residual sum,
    # norm(x + f(x)); one norm shared by all sublayers, x + Σ f(norm(x)); one per sublayer,
    # all reading the block's input, x + Σ f_i(norm_i(x)); or on the output only (none before
    # the sublayer: its `post_norms`), x + post_norm(f(x)).
    norm_position: Literal["before", "after", "shared", "per_branch", "on_output"]
    final_norm_by_default: bool  # a norm after the last block, when the spec leaves it out
    allows_cross_attention: bool = True
    # A second norm on each sublayer's output, before the residual add (Gemma 2's "sandwich":
    # x + post_norm(f(norm(x)))), registered after its sublayer.
    post_norms: bool = False

    @property
    def shared_norm(self) -> bool:
        return self.norm_position == "shared"

    def order(self, sublayers: list[tuple[str, object]]) -> list[tuple[str, object]]:
        """Registration order of (norm name, sublayer) pairs: a pre-norm block registers
        each norm before its sublayer, a post-norm block after it (the data flow's order)."""
        out: list[tuple[str, object]] = []
        for norm, layer in sublayers:
            if self.norm_position == "on_output":
                out.append(("layer", layer))  # its norm is the post_norm that follows it
                continue
            out += (
                [("norm", norm), ("layer", layer)]
                if self.norm_position in ("before", "per_branch")
                else [
                    ("layer", layer),
                    ("norm", norm),
                ]
            )
        return out


RESIDUALS: dict[str, ResidualKind] = {
    kind.name: kind
    for kind in (
        ResidualKind(
            "pre",
            "pre-norm",
            "Pre-norm block: each sublayer f adds f(norm(x)) to the residual stream x.",
            norm_position="before",
            final_norm_by_default=True,
        ),
        ResidualKind(
            "post",
            "post-norm",
            "Post-norm block: each sublayer f updates x to norm(x + f(x)).",
            norm_position="after",
            final_norm_by_default=False,
        ),
        ResidualKind(
            "sandwich",
            "sandwich",
            "Sandwich-norm block (Gemma 2): each sublayer f adds post_norm(f(norm(x))) to the "
            "residual stream x.",
            norm_position="before",
            final_norm_by_default=True,
            post_norms=True,
        ),
        ResidualKind(
            "output_norm",
            "norm on each output",
            "Output-norm block (OLMo 2; Swin Transformer V2's res-post-norm): each sublayer f adds "
            "post_norm(f(x)) to the residual stream x; nothing normalises its input.",
            norm_position="on_output",
            final_norm_by_default=True,
            post_norms=True,
        ),
        ResidualKind(
            "parallel",
            "parallel",
            "Parallel block (PaLM): x + attn(norm(x)) + mlp(norm(x)), with one norm shared by "
            "attention and MLP.",
            norm_position="shared",
            final_norm_by_default=True,
            allows_cross_attention=False,
        ),
        ResidualKind(
            "parallel_two_norms",
            "parallel, a norm per branch",
            "Parallel block (GPT-NeoX): x + attn(norm_1(x)) + mlp(norm_2(x)), each branch with "
            "its own norm of the block's input.",
            norm_position="per_branch",
            final_norm_by_default=True,
            allows_cross_attention=False,
        ),
    )
}
