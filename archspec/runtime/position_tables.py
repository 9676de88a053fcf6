"""Position encodings that are not rotations: the fixed sinusoids added to the
embeddings, ALiBi's and T5's biases on the attention scores."""

import math

import torch
from torch import Tensor


def sinusoids(positions: Tensor, dim: int) -> Tensor:
    """The fixed position encodings of Vaswani et al., (..., S, dim) for positions
    (..., S): channel 2i holds sin(p / 10000 ** (2i / dim)) at position p, channel
    2i + 1 the cosine (an odd dim ends with a sine).
    """
    channels = torch.arange(0, dim, 2, device=positions.device).float()
    angles = positions.float()[..., None] * (1.0 / 10000 ** (channels / dim))
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)[..., :dim]


def sinusoids_halves(positions: Tensor, dim: int) -> Tensor:
    """Marian's and Pegasus' encodings (transformers'
    MarianSinusoidalPositionalEmbedding), (..., S, dim) for positions (..., S): channel
    j turns at p / 10000 ** (2 (j // 2) / dim); the sines of the even channels come
    first, the cosines of the odd ones after. Computed in float64, as that table is
    (with numpy), then rounded to float32.
    """
    channels = torch.arange(dim, device=positions.device, dtype=torch.float64)
    angles = positions.double()[..., None] / 10000 ** (2 * (channels // 2) / dim)
    return torch.cat([angles[..., 0::2].sin(), angles[..., 1::2].cos()], -1).float()


def sinusoids_fairseq(positions: Tensor, dim: int) -> Tensor:
    """fairseq's (tensor2tensor's) encodings, M2M100's and NLLB's, (..., S, dim) for
    positions (..., S): frequency i of dim // 2 is exp(-i ln(10000) / (dim // 2 - 1)),
    sines then cosines, and a zero channel last when dim is odd. In float32, as
    transformers' M2M100SinusoidalPositionalEmbedding computes them.
    """
    half = dim // 2
    step = math.log(10000) / (half - 1)
    rates = torch.exp(torch.arange(half, device=positions.device).float() * -step)
    angles = positions.float()[..., None] * rates
    encodings = torch.cat([angles.sin(), angles.cos()], -1)
    return torch.nn.functional.pad(encodings, (0, dim % 2))


def alibi_slopes(n_heads: int, device: torch.device) -> Tensor:
    """ALiBi's slope for each head, as BLOOM computes them.

    For n, the largest power of two up to n_heads, the slopes are 2 ** (-8 k / n) for
    k = 1 .. n; any further heads take every other slope of the sequence for 2n heads.
    """
    n = 2 ** math.floor(math.log2(n_heads))
    base = torch.tensor(2 ** (-8 / n), device=device)
    slopes = base ** torch.arange(1, n + 1, device=device)
    if n < n_heads:
        base = torch.tensor(2 ** (-4 / n), device=device)
        odd = torch.arange(1, 2 * (n_heads - n), 2, device=device)
        slopes = torch.cat([slopes, base**odd])
    return slopes


def alibi_bias(n_heads: int, positions: Tensor, causal: bool = True) -> Tensor:
    """ALiBi's linear penalty on distance, -slope * |key - query|, (n_heads, S, S) for
    positions (S).

    Causal attention only sees earlier keys, so slope * key position does the same under
    softmax (BLOOM's formulation), as (n_heads, 1, K), or (B, n_heads, 1, K) for key
    positions (B, K).
    """
    slopes = alibi_slopes(n_heads, positions.device)[:, None, None]
    if causal:
        return slopes * positions[..., None, None, :]
    return -slopes * (positions[None, :] - positions[:, None]).abs()


def relative_position_bucket(
    offset: Tensor, num_buckets: int, max_distance: int, bidirectional: bool
) -> Tensor:
    """T5's bucket for each key-minus-query offset.

    Half the buckets hold one distance each, the other half cover distances up to
    max_distance on a log scale (and everything beyond). Bidirectional buckets (encoder)
    are split between keys before and after the query; causal ones only look back.
    """
    bucket = torch.zeros_like(offset)
    if bidirectional:
        num_buckets //= 2
        bucket += (offset > 0).long() * num_buckets
        distance = offset.abs()
    else:
        distance = -offset.clamp(max=0)
    exact = num_buckets // 2
    log_ratio = torch.log(distance.float() / exact) / math.log(max_distance / exact)
    far = exact + (log_ratio * (num_buckets - exact)).long()
    far = far.clamp(max=num_buckets - 1)
    return bucket + torch.where(distance < exact, distance, far)
