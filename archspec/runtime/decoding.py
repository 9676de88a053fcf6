"""The decoding loops. They know nothing of the model: `step` feeds the newest tokens
through the decoder (filling its cache) and returns the next-token logits, so
decoder-only and encoder-decoder models, greedy decoding, sampling and beam search share
them."""

from collections.abc import Callable

import torch
from torch import Tensor

from .beam import beam_search
from .kv_cache import KVCache
from .sampling import next_token


def decode(
    step: Callable[[Tensor], Tensor],
    tokens: Tensor,
    max_new_tokens: int,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_token_id: int | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Append up to max_new_tokens tokens to tokens (B, S): the most likely one, or
    with do_sample one drawn from `sampling_probs`. step(new) feeds the newest tokens
    (first all of `tokens`, then one per sequence) and returns the next-token logits.

    A sequence that emits eos_token_id is done: its later tokens are eos_token_id, and
    decoding stops when all are done.
    """
    new = tokens
    done = torch.zeros_like(tokens[:, :1], dtype=torch.bool)
    for _ in range(max_new_tokens):
        new = next_token(step(new), do_sample, temperature, top_k, top_p, generator)
        if eos_token_id is not None:
            new = new.masked_fill(done, eos_token_id)
            done = done | (new == eos_token_id)
        tokens = torch.cat([tokens, new], dim=1)
        if eos_token_id is not None and bool(done.all()):
            break
    return tokens


def generate_tokens(
    step: Callable[[Tensor], Tensor],
    cache: list[KVCache],
    tokens: Tensor,
    max_new_tokens: int,
    num_beams: int = 1,
    length_penalty: float = 1.0,
    early_stopping: bool | str = False,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_token_id: int | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """tokens (B, S) continued by `beam_search` with num_beams > 1, else by `decode`;
    step(new) returns the next-token logits, filling `cache`."""
    if num_beams > 1 and do_sample:
        raise ValueError("beam sampling (num_beams > 1, do_sample) is unsupported")

    def settled_step(tokens: Tensor) -> Tensor:
        # Each cache takes over what the step allocated in it: a compiled step's new
        # tensors can live in its CUDA graph's memory (KVCache.settle).
        logits = step(tokens)
        for layer in cache:
            layer.settle()
        return logits

    if num_beams > 1:
        return beam_search(
            settled_step,
            cache,
            tokens,
            max_new_tokens,
            num_beams,
            length_penalty,
            early_stopping,
            eos_token_id,
        )
    return decode(
        settled_step,
        tokens,
        max_new_tokens,
        do_sample,
        temperature,
        top_k,
        top_p,
        eos_token_id,
        generator,
    )
