"""Attention masks: which keys a query must not see, and the additive masks SDPA
takes."""

import torch
from torch import Tensor


def padding_keys(attention_mask: Tensor) -> Tensor:
    """(B, 1, 1, S): True where a key is padding (attention_mask 1 = token, 0 = pad)."""
    return attention_mask[:, None, None, :] == 0


def hidden_keys(attention_mask: Tensor | None, queries: Tensor, k_len: int) -> Tensor:
    """True where a query must not see a key: a later position, or padding.

    queries (q_len,) are the queries' positions, the keys are at 0 .. k_len - 1. Shape
    (q_len, k_len), or (B, 1, q_len, k_len) given an attention_mask (B, k_len). With a
    cache, the keys are all its slots: those not written yet come after every query.
    """
    later = torch.arange(k_len, device=queries.device) > queries[:, None]
    if attention_mask is None:
        return later
    return later | padding_keys(attention_mask)


def mask_out(hidden: Tensor, bias: Tensor) -> Tensor:
    """An additive attention mask: `bias` where a query may look, and the most negative
    number of the dtype where it may not (not -inf, so a query with nothing to see stays
    finite instead of turning into NaN).
    """
    return torch.where(hidden, torch.finfo(bias.dtype).min, bias)


def sliding_window(
    mask: Tensor | None,
    queries: Tensor,
    keys: Tensor,
    window: int,
    dtype: torch.dtype,
) -> Tensor:
    """The additive mask of a windowed layer: `mask` (None: plain causal), which has
    a column per position, taken at the keys' positions `keys` (k_len,), with what a
    query at positions `queries` (q_len,) does not see hidden: later keys, keys
    `window` or more positions before it, and cache slots not written yet (negative).
    """
    query = queries[:, None]
    outside = (keys < 0) | (keys > query) | (keys <= query - window)
    if mask is None:
        return mask_out(outside, torch.zeros((), dtype=dtype, device=keys.device))
    return mask_out(outside, mask[..., keys.clamp(min=0)])


def two_sided_window(
    mask: Tensor | None, queries: Tensor, keys: Tensor, window: int, dtype: torch.dtype
) -> Tensor:
    """The additive mask of an encoder's windowed layer: `mask` (None: none), which has
    a column per key, with the keys `window` or more positions away from a query at
    `queries` (q_len,), on either side, hidden (ModernBERT's local layers: |query -
    key| <= local_attention // 2).
    """
    outside = (keys - queries[:, None]).abs() >= window
    if mask is None:
        return mask_out(outside, torch.zeros((), dtype=dtype, device=keys.device))
    return mask_out(outside, mask[..., keys])
