"""The next token: the most likely one, or one drawn as transformers' logits processors
shape the distribution."""

import math

import torch
from torch import Tensor


def sampling_probs(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> Tensor:
    """The distribution (B, vocab) sampling draws from: logits (B, vocab) divided by
    temperature, then only the top_k most likely tokens kept, then only the smallest set
    whose probability reaches top_p, in the order and with the ties of transformers'
    TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper.
    """
    logits = logits.float() / temperature
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.size(-1))).values[:, -1:]
        logits = logits.masked_fill(logits < kth, -math.inf)
    if top_p is not None:
        ascending, order = logits.sort(dim=-1)
        dropped = ascending.softmax(dim=-1).cumsum(dim=-1) <= 1 - top_p
        dropped[:, -1] = False  # the most likely token always stays
        logits = logits.masked_fill(dropped.scatter(1, order, dropped), -math.inf)
    return logits.softmax(dim=-1)


def next_token(
    logits: Tensor,
    do_sample: bool,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
    generator: torch.Generator | None,
) -> Tensor:
    """(B, 1): the most likely token of logits (B, vocab), or one drawn."""
    if not do_sample:
        return logits.argmax(dim=-1, keepdim=True)
    probs = sampling_probs(logits, temperature, top_k, top_p)
    return torch.multinomial(probs, 1, generator=generator)
