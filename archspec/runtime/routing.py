"""Routers beyond Mixtral's softmax (archspec.kinds.routers): DeepSeek-V3's sigmoid
router with its bias correction, as transformers' DeepseekV3TopkRouter computes it,
gpt-oss's softmax over the top_k logits, as its GptOssTopKRouter does, ERNIE 4.5's
softmax with a bias correction, as its Ernie4_5_MoeTopKRouter does, and DBRX's softmax
in the logits' dtype, as its DbrxFFN does.
"""

import torch
from torch import Tensor, nn


class BiasCorrectedRouter(nn.Linear):
    """The router's Linear (one logit per expert) and its e_score_correction_bias: one
    float32 offset per expert, added to the scores when choosing experts only. A buffer,
    saved with the weights, as transformers stores it: a balancing rule sets it during
    training, not gradients."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__(in_features, out_features, bias)
        correction = torch.zeros(out_features, dtype=torch.float32)
        self.register_buffer("e_score_correction_bias", correction)


def sigmoid_route(
    logits: Tensor,
    correction: Tensor,
    top_k: int,
    groups: int,
    top_groups: int,
    normalize: bool,
    scale: float,
) -> tuple[Tensor, Tensor]:
    """(weights, chosen), each (tokens, top_k): float32 sigmoid scores, the top_k
    experts by score plus correction, weighted by their scores without it (renormalised
    to sum to 1 if normalize, then times scale). With groups > 1, only the experts of
    the top_groups groups whose two best biased scores sum highest compete."""
    scores = logits.float().sigmoid()
    choice = scores + correction
    if groups > 1:
        best = choice.unflatten(-1, (groups, -1)).topk(2, dim=-1).values.sum(dim=-1)
        top = best.topk(top_groups, dim=-1).indices
        kept = torch.zeros_like(best, dtype=torch.bool).scatter(-1, top, True)
        kept = kept.repeat_interleave(choice.size(-1) // groups, dim=-1)
        # -inf, not 0: a biased score may be negative
        choice = choice.masked_fill(~kept, float("-inf"))
    chosen = choice.topk(top_k, dim=-1).indices
    weights = scores.gather(-1, chosen)
    if normalize:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    if scale != 1.0:
        weights = weights * scale
    return weights, chosen


class RowBiasCorrectedRouter(nn.Linear):
    """The router's Linear and its e_score_correction_bias as one row, (1, experts), as
    ERNIE 4.5 stores it: one float32 offset per expert, added to the probabilities when
    choosing experts only. A buffer, saved with the weights: no gradient trains it."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__(in_features, out_features, bias)
        correction = torch.zeros(1, out_features, dtype=torch.float32)
        self.register_buffer("e_score_correction_bias", correction)


def softmax_bias_route(
    logits: Tensor,
    correction: Tensor,
    top_k: int,
    normalize: bool,
    scale: float,
) -> tuple[Tensor, Tensor]:
    """(weights, chosen), each (tokens, top_k): float32 softmax probabilities, the top_k
    experts by probability plus correction, weighted by their probabilities without it
    (renormalised if normalize: divided by their sum clamped to at least 1e-12, ERNIE's
    moe_norm_min; then times scale). Every expert competes."""
    probs = logits.float().softmax(dim=-1)
    chosen = (probs + correction).topk(top_k, dim=-1).indices
    weights = probs.gather(-1, chosen)
    if normalize:
        weights = weights / weights.sum(dim=-1, keepdim=True).clamp(min=1e-12)
    if scale != 1.0:
        weights = weights * scale
    return weights, chosen


def softmax_in_dtype_route(
    logits: Tensor,
    top_k: int,
    normalize: bool,
    scale: float,
) -> tuple[Tensor, Tensor]:
    """(weights, chosen), each (tokens, top_k): a softmax over every expert in the
    logits' dtype (DBRX's, not float32: in bf16 the weights are bf16), the top_k kept
    and, if normalize, divided by their 1-norm as DBRX divides them (torch.norm with
    p=1), then times scale."""
    weights, chosen = logits.softmax(dim=-1).topk(top_k, dim=-1)
    if normalize:
        weights = weights / torch.norm(weights, p=1, dim=-1, keepdim=True)
    if scale != 1.0:
        weights = weights * scale
    return weights, chosen


def topk_softmax_route(
    logits: Tensor,
    top_k: int,
    scale: float,
) -> tuple[Tensor, Tensor]:
    """(weights, chosen), each (tokens, top_k): the top_k experts by logit, weighted by
    a softmax over their k logits in the logits' dtype (gpt-oss's, not float32: in bf16
    the weights are bf16), then times scale. They sum to 1: nothing to renormalise."""
    values, chosen = logits.topk(top_k, dim=-1)
    weights = values.softmax(dim=-1)
    if scale != 1.0:
        weights = weights * scale
    return weights, chosen
