"""Rotary position embeddings (RoPE): the cos and sin tables of each scaling, as
transformers computes them, and the rotations of queries and keys by them."""

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn


def rope_angles(
    positions: Tensor,
    head_dim: int,
    theta: float,
) -> tuple[Tensor, Tensor]:
    """cos and sin of the rotary angles, (..., S, head_dim) for positions (..., S), in
    float32, as in transformers' Llama.

    Channels i and i + head_dim / 2 of a head turn together, at position p by the angle
    p / theta ** (2i / head_dim).
    """
    channels = torch.arange(0, head_dim, 2, device=positions.device).float()
    inv_freq = 1.0 / theta ** (channels / head_dim)
    angles = positions.float()[..., None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def apply_rope(x: Tensor, rope: tuple[Tensor, Tensor]) -> Tensor:
    """Rotate the channel pairs (i, i + head_dim / 2) of x (B, heads, S, head_dim)."""
    cos, sin = rope
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def interleaved_rope_angles(
    positions: Tensor,
    dim: int,
    theta: float,
) -> tuple[Tensor, Tensor]:
    """cos and sin of the rotary angles, (..., S, dim) for positions (..., S), in
    float32, as in transformers' GPT-J.

    Channels 2i and 2i + 1 of a head turn together, at position p by the angle
    p / theta ** (2i / dim).
    """
    channels = torch.arange(0, dim, 2, device=positions.device).float()
    inv_freq = 1.0 / theta ** (channels / dim)
    angles = (positions.float()[..., None] * inv_freq).repeat_interleave(2, dim=-1)
    return angles.cos(), angles.sin()


def apply_interleaved_rope(x: Tensor, rope: tuple[Tensor, Tensor]) -> Tensor:
    """Rotate the channel pairs (2i, 2i + 1) of x (B, heads, S, dim)."""
    cos, sin = rope
    turned = torch.stack([-x[..., 1::2], x[..., ::2]], dim=-1).flatten(-2)
    return x * cos + turned * sin


def rope_at(
    cos: Tensor, sin: Tensor, positions: Tensor, dtype: torch.dtype
) -> tuple[Tensor, Tensor]:
    """The tables' rows at positions (S) or (B, S) (a padded batch), with an axis for
    the heads: (1, S, dim) or (B, 1, S, dim), in dtype.
    """
    cos, sin = cos[positions].unsqueeze(-3), sin[positions].unsqueeze(-3)
    return cos.to(dtype), sin.to(dtype)


def apply_partially(
    apply: Callable[[Tensor, tuple[Tensor, Tensor]], Tensor],
    x: Tensor,
    rope: tuple[Tensor, Tensor],
) -> Tensor:
    """Rotate the first channels of each head of x by `apply`, as many as the angles
    have, and keep the rest (GPT-NeoX's rotary_pct, Phi's partial_rotary_factor, GPT-J's
    rotary_dim).

    Written into a copy of x, which keeps x's memory layout (torch.cat would not), so
    that attention's output still merges its heads without a copy.
    """
    width = rope[0].size(-1)
    out = x.clone()
    out[..., :width] = apply(x[..., :width], rope)
    return out


def llama3_rope(
    positions: Tensor,
    head_dim: int,
    theta: float,
    scaling: tuple[float, float, float, int],
) -> tuple[Tensor, Tensor]:
    """RoPE's cos and sin with Llama 3.1's frequency scaling, as transformers computes
    it (float32, like rope_angles).

    Wavelengths shorter than original / high_freq_factor keep their frequency, those
    longer than original / low_freq_factor are divided by `factor`, and those between
    blend the two.
    """
    factor, low, high, original = scaling
    channels = torch.arange(0, head_dim, 2, device=positions.device).float()
    inv_freq = 1.0 / theta ** (channels / head_dim)
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > original / low, inv_freq / factor, inv_freq)
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= original / high) & (wavelen <= original / low)
    inv_freq = torch.where(medium, smoothed, scaled)
    angles = positions.float()[..., None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def yarn_inv_freq(
    dim: int,
    theta: float,
    scaling: tuple[float, int, float, float, float, bool],
    device: torch.device | None = None,
) -> Tensor:
    """The rotation frequencies of YaRN's scaling (Peng et al. 2023), (dim / 2,) in
    float32, computed as transformers' _compute_yarn_parameters computes them.

    Channels turning more than beta_fast times over the original context keep their
    frequency, those turning fewer than beta_slow times are divided by `factor`, a
    linear ramp blends the channels between; its ends are rounded down and up to whole
    channel pairs when `truncate`.
    """
    factor, original, beta_fast, beta_slow, _, truncate = scaling

    def channel(rotations: float) -> float:
        turns = math.log(original / (rotations * 2 * math.pi))
        return dim * turns / (2 * math.log(theta))

    low, high = channel(beta_fast), channel(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    high = high + 0.001 if low == high else high
    channels = torch.arange(0, dim, 2, device=device).float()
    frequencies = theta ** (channels / dim)
    pairs = torch.arange(dim // 2, device=device).float()
    kept = 1 - ((pairs - low) / (high - low)).clamp(0, 1)
    interpolated, extrapolated = 1.0 / (factor * frequencies), 1.0 / frequencies
    return interpolated * (1 - kept) + extrapolated * kept


def yarn_rope(
    positions: Tensor,
    dim: int,
    theta: float,
    scaling: tuple[float, int, float, float, float, bool],
) -> tuple[Tensor, Tensor]:
    """RoPE's cos and sin with YaRN's scaling (float32, like rope_angles): the angles
    of yarn_inv_freq's frequencies, cos and sin multiplied by attention_factor."""
    attention_factor = scaling[4]
    inv_freq = yarn_inv_freq(dim, theta, scaling, positions.device)
    angles = positions.float()[..., None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos() * attention_factor, angles.sin() * attention_factor


def ntk_rope_tables(stack: nn.Module, positions: Tensor) -> tuple[Tensor, Tensor]:
    """The stack's RoPE tables under dynamic NTK scaling, kept as transformers'
    dynamic_rope_update keeps its frequencies: a sequence (its last position + 1) longer
    than the context trained on and than any sequence before gets frequencies for its
    length; one that fits that context again after longer ones gets the original
    frequencies back. A sequence in between keeps those of the longest so far.

    The scaling raises the base to theta * (factor * length / original - (factor - 1))
    ** (dim / (dim - 2)), computed in float32 as transformers computes it.
    """
    dim, theta, factor, original = stack.rope_settings
    length = int(positions.max()) + 1
    if length > stack.rope_length:
        stretch = factor * torch.tensor(length) / original - (factor - 1)
        theta = theta * stretch ** (dim / (dim - 2))
        stack.rope_length = length
    elif length < original < stack.rope_length:
        stack.rope_length = original
    else:
        return stack.rope_cos, stack.rope_sin
    rows = torch.arange(max(length, stack.rope_cos.size(0)), device=positions.device)
    stack.rope_cos, stack.rope_sin = rope_angles(rows, dim, theta)
    return stack.rope_cos, stack.rope_sin


def longrope_angles(
    positions: Tensor,
    dim: int,
    theta: float,
    factors: tuple[float, ...],
    attention_factor: float,
) -> tuple[Tensor, Tensor]:
    """RoPE's cos and sin with LongRoPE's per-channel factors, as transformers computes
    them (float32, like rope_angles): channel pair i turns at position p by the angle
    p / (factors[i] * theta ** (2i / dim)); cos and sin are multiplied by
    attention_factor.
    """
    channels = torch.arange(0, dim, 2, device=positions.device).float()
    scale = torch.tensor(factors, dtype=torch.float32, device=positions.device)
    inv_freq = 1.0 / (scale * theta ** (channels / dim))
    angles = positions.float()[..., None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos() * attention_factor, angles.sin() * attention_factor


def longrope_tables(stack: nn.Module, positions: Tensor) -> tuple[Tensor, Tensor]:
    """The stack's tables for this call: the long factors' when the sequence (its last
    position + 1) is longer than the context trained on, else the short factors'. As in
    transformers' longrope_frequency_update, the choice is made anew for every forward
    call, with no memory of earlier ones.
    """
    if int(positions.max()) + 1 > stack.rope_original:
        return stack.rope_long_cos, stack.rope_long_sin
    return stack.rope_cos, stack.rope_sin
