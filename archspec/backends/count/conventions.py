"""FLOP-counting conventions: what a FLOP count counts.

Published FLOP figures differ less in arithmetic than in bookkeeping: whether the masked half of
causal attention counts, whether the embedding lookup is a matmul, whether norms and softmax
count at all, whether a training step recomputes activations. Each convention below is one set
of such choices. The FLOP visitor (flops.py) applies it to the IR, so a preset is not a formula
typed in once per model: it is the paper's bookkeeping, and on the paper's own models it
reproduces the paper's formula exactly (tests/test_flops.py checks each one).

One FLOP is one multiply or one add, so a multiply-accumulate is 2 FLOPs everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from archspec.errors import SpecError

Attention = Literal["dense", "causal", "half"]


# What a training step recomputes in its backward pass (Korthikanti et al. 2022): nothing, the
# attention core, or every block's forward.
NO_RECOMPUTE = "none"
RECOMPUTE = (NO_RECOMPUTE, "selective", "full")


@dataclass(frozen=True)
class Convention:
    name: str
    summary: str  # one line, for the README table and `--help`
    source: str
    # Which query-key pairs the QKᵀ and AV matmuls (and softmax) count: every pair (`dense`,
    # as a kernel runs it), only the pairs a causal mask keeps (`causal`), or half of every
    # pair (`half`: Kaplan's 2·n_ctx·d_attn per token, whatever the mask).
    attention: Attention = "dense"
    # Count non-matmul work (norms, softmax, activations, bias and residual adds, RoPE) with
    # the per-element cost table in flops.py.
    elementwise: bool = True
    # FLOPs per attention score for the softmax when `elementwise` is off (Chinchilla: 3).
    softmax: int = 0
    # Count the token-embedding lookup as a one-hot matmul, 2·vocab·d_model per token.
    embedding_matmul: bool = False
    # Count the output projection (logits) and the pooler.
    head: bool = True
    # Every parameter costs 2 FLOPs per token it touches (PaLM's 2N, with N all parameters,
    # embeddings and norms included) instead of 2 per weight of each matmul.
    per_parameter: bool = False
    # A fixed recomputation policy for the training step: the presets are their papers'
    # formulas, which assume none (or, Megatron's, full activation recomputation) whatever the
    # kernel. None follows `--recompute` and `--attn`.
    recompute: str | None = None


CONVENTIONS: dict[str, Convention] = {
    c.name: c
    for c in (
        Convention(
            "executed",
            "dense attention, as the generated code runs it; matmul FLOPs equal "
            "torch.utils.flop_counter.FlopCounterMode",
            "the generated PyTorch code",
        ),
        Convention(
            "causal",
            "as executed, but causal attention counts only the pairs the mask keeps "
            "(S·(S+1)/2 per head, not S²)",
            "mask-aware counting",
            attention="causal",
        ),
        Convention(
            "kaplan",
            "C_forward = 2N + 2·n_layer·n_ctx·d_attn per token; N without embeddings, "
            "biases or norms; no logits",
            "Kaplan et al. 2020, Scaling Laws for Neural Language Models, Table 1",
            attention="half",
            elementwise=False,
            head=False,
            recompute=NO_RECOMPUTE,
        ),
        Convention(
            "chinchilla",
            "matmuls incl. the embedding as a matmul, dense attention, softmax 3 FLOPs per "
            "score; backward = 2 × forward",
            "Hoffmann et al. 2022, Training Compute-Optimal LLMs, Appendix F",
            elementwise=False,
            softmax=3,
            embedding_matmul=True,
            recompute=NO_RECOMPUTE,
        ),
        Convention(
            "palm",
            "6N + 12·L·H·Q·T per token for training; N all parameters",
            "Chowdhery et al. 2022, PaLM, Appendix B",
            elementwise=False,
            per_parameter=True,
            recompute=NO_RECOMPUTE,
        ),
        Convention(
            "megatron",
            "96·B·s·l·h²·(1 + s/6h + V/16lh) per step: matmuls only, full recomputation",
            "Narayanan et al. 2021, Efficient Large-Scale LM Training on GPU Clusters, §5.1",
            elementwise=False,
            recompute="full",
        ),
    )
}


def get_convention(name: str) -> Convention:
    try:
        return CONVENTIONS[name]
    except KeyError:
        raise SpecError(
            f"unknown FLOP convention '{name}'",
            hint=f"choose one of: {', '.join(CONVENTIONS)}",
        ) from None
