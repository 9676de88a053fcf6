"""Attention cores SDPA cannot compute, and the soft cap they share with the logits."""

import torch
from torch import Tensor

from .masks import hidden_keys, mask_out


def softcap(x: Tensor, cap: float) -> Tensor:
    """x squashed smoothly into (-cap, cap): cap * tanh(x / cap)."""
    return torch.tanh(x / cap) * cap


def softcapped_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float, cap: float
) -> Tensor:
    """Causal attention whose scores are soft-capped, cap * tanh(scores / cap),
    before the mask (Gemma 2). SDPA cannot cap, so the scores are written out, and
    the softmax runs in float32, as transformers' eager attention. mask: additive,
    or None for plain causal.
    """
    groups = q.size(1) // k.size(1)  # query heads per key/value head
    k = k.repeat_interleave(groups, dim=1)
    v = v.repeat_interleave(groups, dim=1)
    scores = torch.matmul(q, k.transpose(2, 3)) * scale
    scores = torch.tanh(scores / cap) * cap
    if mask is None:
        hidden = hidden_keys(None, torch.arange(q.size(2), device=q.device), k.size(2))
        mask = mask_out(hidden, q.new_zeros(()))
    probs = (scores + mask).softmax(dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(probs, v)
