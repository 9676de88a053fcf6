"""Beam search, with transformers' finishing rules.

transformers (`GenerationMixin._beam_search`, vectorised, as in 5.x) keeps, per
sequence, the `num_beams` running beams and the `num_beams` best finished hypotheses.
Each step ranks 2·num_beams candidates; those that end (eos, or the last position) and
rank among the first num_beams become hypotheses scored by log-probability /
length**length_penalty, the best num_beams that do not end continue. A sequence stops
improving when its best running beam, at the current length (or at the final one, with
early_stopping="never" and a positive length penalty), could no longer beat its worst
hypothesis; with early_stopping=True it stops as soon as it has num_beams hypotheses.
`beam_search` follows those steps in the same order and with the same arithmetic, so
that ties and rounding fall the same way.
"""

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from .kv_cache import KVCache


def beam_search(
    step: Callable[[Tensor], Tensor],
    cache: list[KVCache],
    tokens: Tensor,
    max_new_tokens: int,
    num_beams: int,
    length_penalty: float = 1.0,
    early_stopping: bool | str = False,
    eos_token_id: int | None = None,
) -> Tensor:
    """The most likely continuation of each of tokens (B, S) under beam search, as
    transformers' generate(num_beams=..., do_sample=False) finds it: the best finished
    hypothesis by sum of log-probabilities / (new tokens ** length_penalty), padded with
    eos_token_id to the longest of the batch.

    step(new) takes the newest tokens of every beam, (B * num_beams, n), and returns
    their next-token logits; the caches it fills are reordered as beams are picked.
    """
    batch, prompt = tokens.shape
    total = prompt + max_new_tokens
    pad = eos_token_id if eos_token_id is not None else -1
    # Running beams: tokens, summed log-probabilities. Only the first beam starts live,
    # so that the first step does not pick the same token num_beams times.
    running = tokens.repeat_interleave(num_beams, dim=0).view(batch, num_beams, prompt)
    running = F.pad(running, (0, max_new_tokens), value=pad)
    scores = torch.zeros(batch, num_beams, device=tokens.device)
    scores[:, 1:] = -1e9
    # Finished hypotheses: tokens, length-penalised scores, generated lengths.
    best = running.clone()
    best_scores = torch.full_like(scores, -1e9)
    best_lengths = torch.zeros_like(scores, dtype=torch.long)
    finished = torch.zeros_like(scores, dtype=torch.bool)
    improvable = torch.ones(batch, 1, dtype=torch.bool, device=tokens.device)
    keep = 2 * num_beams  # candidates ranked per sequence: enough to continue num_beams
    first = torch.arange(keep, device=tokens.device) < num_beams
    batch_rows = torch.arange(batch, device=tokens.device)[:, None] * num_beams
    new = running[:, :, :prompt].flatten(0, 1)
    for length in range(prompt, total):
        log_probs = step(new).float().log_softmax(dim=-1)
        log_probs = log_probs.view(batch, num_beams, -1) + scores[:, :, None]
        vocab = log_probs.size(-1)
        top_scores, top = log_probs.flatten(1).topk(keep)
        parent, token = top // vocab, top % vocab
        candidates = running.gather(1, parent[:, :, None].expand(-1, -1, total))
        candidates[:, :, length] = token
        ends = torch.full_like(first[None], length + 1 == total).expand(batch, -1)
        if eos_token_id is not None:
            ends = ends | (token == eos_token_id)

        # The best num_beams candidates that go on.
        live_scores = top_scores + ends.float() * -1e9
        chosen = live_scores.topk(num_beams).indices
        running = candidates.gather(1, chosen[:, :, None].expand(-1, -1, total))
        scores = live_scores.gather(1, chosen)
        rows = (parent.gather(1, chosen) + batch_rows).flatten()
        for layer in cache:
            layer.reorder(rows)

        # Candidates that end among the first num_beams join the hypotheses.
        ended = ends & first[None]
        penalised = top_scores / ((length + 1 - prompt) ** length_penalty)
        full = finished.all(dim=-1, keepdim=True) & (early_stopping is True)
        penalised = penalised + full.float() * -1e9
        penalised = penalised + (~improvable).float() * -1e9
        penalised = penalised + (~ended) * -1e9
        merged_scores = torch.cat([best_scores, penalised], dim=1)
        picked = merged_scores.topk(num_beams).indices
        best = torch.cat([best, candidates], dim=1)
        best = best.gather(1, picked[:, :, None].expand(-1, -1, total))
        best_scores = merged_scores.gather(1, picked)
        lengths = torch.full_like(token, length + 1 - prompt)
        best_lengths = torch.cat([best_lengths, lengths], dim=1).gather(1, picked)
        finished = torch.cat([finished, ended], dim=1).gather(1, picked)

        # Stop when no sequence can improve, or (early_stopping=True) all have
        # num_beams hypotheses, or every candidate ended.
        if early_stopping == "never" and length_penalty > 0.0:
            hoped = total - prompt  # the longest hypothesis scores best
        else:
            hoped = length + 1 - prompt
        best_running = scores[:, :1] / (hoped**length_penalty)
        worst_finished = best_scores.min(dim=1, keepdim=True).values
        worst = torch.where(finished, worst_finished, -1.0e9)
        improvable = improvable & (best_running > worst).any(dim=-1, keepdim=True)
        all_full = bool(finished.all()) and early_stopping is True
        if not bool(improvable.any()) or all_full or bool(ends.all()):
            break
        new = running[:, :, length : length + 1].flatten(0, 1)
    return best[:, 0, : prompt + int(best_lengths[:, 0].max())]
