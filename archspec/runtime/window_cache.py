"""The KV cache of a layer with a sliding window: only the window, kept in a ring."""

import torch
from torch import Tensor

from .kv_cache import KVCache


def update_window(
    cache: KVCache,
    k: Tensor,
    v: Tensor,
    window: int,
) -> tuple[Tensor, Tensor, Tensor]:
    """As `cache.update`, for a layer whose queries see only `window` positions (their
    own and the window - 1 before it): the cache keeps the latest `window` in a ring,
    position p in slot p % window. Returns the keys and values attention reads, and the
    position of each (negative where none is written yet)."""
    size = min(window, cache.max_len)
    if cache.k is None or cache.v is None:
        cache.allocate(k, v, size)
    new = cache.length + torch.arange(k.size(2), device=k.device)
    slots = torch.arange(size, device=k.device)
    if k.size(2) == 1:
        # One new token, written first: the ring then holds its whole window.
        cache.k.index_copy_(2, new % size, k)
        cache.v.index_copy_(2, new % size, v)
        cache.length += 1
        return cache.k, cache.v, new - (new - slots) % size
    # Several: the first of them see keys that the later ones overwrite, so they
    # read the ring as it was beside the new keys; then the ring keeps the last.
    last = cache.length - 1  # the latest position in the ring
    positions = torch.cat([last - (last - slots) % size, new])
    k_read, v_read = torch.cat([cache.k, k], dim=2), torch.cat([cache.v, v], dim=2)
    kept = min(k.size(2), size)
    cache.k.index_copy_(2, new[-kept:] % size, k[:, :, -kept:])
    cache.v.index_copy_(2, new[-kept:] % size, v[:, :, -kept:])
    cache.length += k.size(2)
    return k_read, v_read, positions
