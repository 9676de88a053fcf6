"""archspec.runtime.longrope_cache: the step that empties the caches and feeds every token
again once, when the sequence first outgrows the original context, as transformers' Phi-3
(Phi3ForCausalLM.prepare_inputs_for_generation: the cache is dropped when input_ids has
original + 1 tokens and the cache at most original)."""

from __future__ import annotations

import torch

from archspec.runtime.kv_cache import KVCache
from archspec.runtime.longrope_cache import recomputing_step


def test_every_token_is_fed_again_once_when_the_sequence_outgrows_the_original() -> None:
    fed: list[list[int]] = []
    cache = [KVCache(10), KVCache(10)]

    def step(new: torch.Tensor) -> torch.Tensor:
        fed.append(new[0].tolist())
        for layer in cache:  # what a decoder's attention layers do
            layer.update(*(new[:, None, :, None].float(),) * 2)
        return torch.zeros(1, 5)

    recomputing = recomputing_step(step, cache, KVCache(10), original=4)
    recomputing(torch.tensor([[1, 2, 3]]))
    for token in (4, 5, 6):
        recomputing(torch.tensor([[token]]))
    # 3 + 1 fit the original 4; the fifth token crosses it: all five again; then one by one.
    assert fed == [[1, 2, 3], [4], [1, 2, 3, 4, 5], [6]]
    assert int(cache[0].length) == 6


def test_a_prompt_longer_than_the_original_is_fed_once() -> None:
    fed: list[int] = []
    cache = [KVCache(10)]
    recomputing = recomputing_step(
        lambda new: fed.append(new.size(1)) or torch.zeros(1, 5), cache, KVCache(10), 4
    )
    recomputing(torch.tensor([[1, 2, 3, 4, 5]]))
    recomputing(torch.tensor([[6]]))
    assert fed == [5, 1]


def test_beam_search_reorders_the_tokens_with_the_caches() -> None:
    """The tokens fed again are each row's own, after beam search moved rows."""
    fed: list[torch.Tensor] = []
    seen = KVCache(10)
    recomputing = recomputing_step(lambda new: fed.append(new) or new, [], seen, 2)
    recomputing(torch.tensor([[1, 2], [3, 4]]))
    seen.reorder(torch.tensor([1, 1]))
    recomputing(torch.tensor([[5], [6]]))
    assert fed[-1].tolist() == [[3, 4, 5], [3, 4, 6]]
