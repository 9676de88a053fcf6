"""LongRoPE's cache as transformers' Phi-3 keeps it: recomputed once, when the sequence
outgrows the original context."""

from collections.abc import Callable

from torch import Tensor

from .kv_cache import KVCache


def recomputing_step(
    step: Callable[[Tensor], Tensor],
    cache: list[KVCache],
    seen: KVCache,
    original: int,
) -> Callable[[Tensor], Tensor]:
    """step, with the caches emptied and every token so far fed again when the sequence
    first outgrows `original` positions (LongRoPE's original context), as transformers'
    Phi3ForCausalLM.prepare_inputs_for_generation does: every key is then rotated by the
    long factors, as the queries are, not kept as the short factors rotated it.

    `seen` keeps the tokens fed so far (as its keys), so that beam search, which
    reorders it with the caches, keeps them with their beam.
    """
    fed = 0  # tokens fed so far: a Python int, read without waiting on the device

    def recomputing(new: Tensor) -> Tensor:
        nonlocal fed
        tokens = new[:, None, :, None]
        seen.update(tokens, tokens)
        past, fed = fed, fed + new.size(1)
        if 0 < past <= original < fed:
            for layer in cache:
                layer.length.zero_()
            new = seen.k[:, 0, :fed, 0]
        return step(new)

    return recomputing
