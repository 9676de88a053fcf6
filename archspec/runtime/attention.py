"""Attention cores SDPA cannot compute (soft-capped scores, sinks), and the soft cap the
scores share with the logits."""

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


def sink_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float, sinks: Tensor
) -> Tensor:
    """Causal attention with sinks (gpt-oss): each head's learned logit `sinks[h]` joins
    every query's scores as one more key whose value is zero, so the probabilities of
    the real keys sum to less than one. SDPA has no such key, so the scores are written
    out as transformers' eager gpt-oss attention writes them: the row's maximum
    subtracted, the softmax in the scores' dtype, the sink's column dropped. mask:
    additive, or None for plain causal.
    """
    if hasattr(sinks, "to_local"):  # tensor parallel: the sinks of the rank's heads
        sinks = sinks.to_local()
    # Each key/value head repeated for its query heads as transformers' repeat_kv does
    # (expanded, then reshaped): the same products bit for bit, multi-query included.
    b, kv_heads, length, _ = k.shape
    groups = q.size(1) // kv_heads  # query heads per key/value head
    k = k[:, :, None].expand(b, kv_heads, groups, length, -1).flatten(1, 2)
    v = v[:, :, None].expand(b, kv_heads, groups, length, -1).flatten(1, 2)
    scores = torch.matmul(q, k.transpose(2, 3)) * scale
    if mask is None:
        hidden = hidden_keys(None, torch.arange(q.size(2), device=q.device), k.size(2))
        mask = mask_out(hidden, q.new_zeros(()))
    sink = sinks.reshape(1, -1, 1, 1).expand(q.size(0), -1, q.size(2), -1)
    logits = torch.cat([scores + mask, sink], dim=-1)
    # Shifted by the row's maximum with max, as transformers shifts it: its backward
    # keeps each row's index of the maximum (amax's would keep the logits and maxima).
    logits = logits - logits.max(dim=-1, keepdim=True).values
    probs = logits.softmax(dim=-1)[..., :-1]
    return torch.matmul(probs, v)
