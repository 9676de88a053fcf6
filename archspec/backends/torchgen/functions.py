"""The generated file's module-level helpers: masks, positions and the KV cache.

Each helper is emitted only when the model uses it. The templates are written out in full,
already formatted; the few that vary (ALiBi's direction, the mask helper's mention of the
cache) are picked by the model's features.
"""

from __future__ import annotations

from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.text import docstring, indent

PADDING_KEYS = '''
def padding_keys(attention_mask: Tensor) -> Tensor:
    """(B, 1, 1, S): True where a key is padding (attention_mask 1 = token, 0 = pad)."""
    return attention_mask[:, None, None, :] == 0
'''

HIDDEN_KEYS = """
def hidden_keys(
    attention_mask: Tensor | None, q_len: int, k_len: int, device: torch.device
) -> Tensor:
{doc}
    later = torch.ones(q_len, k_len, dtype=torch.bool, device=device)
    later = later.triu(k_len - q_len + 1)
    if attention_mask is None:
        return later
    return later | padding_keys(attention_mask)
"""

HIDDEN_KEYS_DOC = (
    "True where a query must not see a key: a later position, or padding.\n\n"
    "Shape (q_len, k_len), or (B, 1, q_len, k_len) given an attention_mask."
)
HIDDEN_KEYS_CACHE_DOC = (
    " The queries are the last q_len of the k_len positions; the earlier ones are cached."
)

MASK_OUT = '''
def mask_out(hidden: Tensor, bias: Tensor) -> Tensor:
    """An additive attention mask: `bias` where a query may look, and the most negative
    number of the dtype where it may not (not -inf, so a query with nothing to see stays
    finite instead of turning into NaN).
    """
    return torch.where(hidden, torch.finfo(bias.dtype).min, bias)
'''

ROPE = '''
def rope_angles(
    positions: Tensor, head_dim: int, theta: float, dtype: torch.dtype
) -> tuple[Tensor, Tensor]:
    """cos and sin of the rotary angles, (S, head_dim), as in transformers' Llama.

    Channels i and i + head_dim / 2 of a head turn together, at position p by the angle
    p / theta ** (2i / head_dim).
    """
    channels = torch.arange(0, head_dim, 2, device=positions.device).float()
    inv_freq = 1.0 / theta ** (channels / head_dim)
    angles = torch.outer(positions.float(), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x: Tensor, rope: tuple[Tensor, Tensor]) -> Tensor:
    """Rotate the channel pairs (i, i + head_dim / 2) of x (B, heads, S, head_dim)."""
    cos, sin = rope
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin
'''

SINUSOIDS = '''
def sinusoids(positions: Tensor, dim: int) -> Tensor:
    """The fixed position encodings of Vaswani et al., (S, dim): channel 2i holds
    sin(p / 10000 ** (2i / dim)) at position p, channel 2i + 1 the cosine (an odd dim
    ends with a sine).
    """
    channels = torch.arange(0, dim, 2, device=positions.device).float()
    angles = torch.outer(positions.float(), 1.0 / 10000 ** (channels / dim))
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)[:, :dim]
'''

ALIBI_SLOPES = '''
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
'''

ALIBI_CAUSAL = '''
def alibi_bias(n_heads: int, k_len: int, device: torch.device) -> Tensor:
    """(n_heads, 1, k_len): slope * key position. Under softmax this equals
    slope * (key - query), ALiBi's linear penalty on distance (BLOOM's formulation).
    """
    keys = torch.arange(k_len, device=device)
    return alibi_slopes(n_heads, device)[:, None, None] * keys
'''

ALIBI_BIDIRECTIONAL = '''
def alibi_bias(n_heads: int, seq_len: int, device: torch.device) -> Tensor:
    """(n_heads, S, S): ALiBi's linear penalty, -slope * |key - query|."""
    positions = torch.arange(seq_len, device=device)
    distance = (positions[None, :] - positions[:, None]).abs()
    return -alibi_slopes(n_heads, device)[:, None, None] * distance
'''

ALIBI_BOTH = '''
def alibi_bias(n_heads: int, length: int, causal: bool, device: torch.device) -> Tensor:
    """ALiBi's linear penalty on distance, -slope * |key - query|, (n_heads, S, S).

    Causal attention only sees earlier keys, so slope * key position does the same under
    softmax (BLOOM's formulation), as (n_heads, 1, S).
    """
    slopes = alibi_slopes(n_heads, device)[:, None, None]
    positions = torch.arange(length, device=device)
    if causal:
        return slopes * positions
    return -slopes * (positions[None, :] - positions[:, None]).abs()
'''

RELATIVE_BUCKETS = '''
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
'''

KV_CACHE = '''
class KVCache:
    """The keys and values one attention layer has computed so far, so that new tokens
    attend to earlier ones without recomputing them. Generation keeps one per block.
    """

    def __init__(self) -> None:
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    @property
    def length(self) -> int:
        """Positions cached so far."""
        return 0 if self.k is None else self.k.size(2)

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append new keys and values (B, heads, S, head_dim); return all of them."""
        if self.k is not None:
            k = torch.cat([self.k, k], dim=2)
            v = torch.cat([self.v, v], dim=2)
        self.k, self.v = k, v
        return k, v
'''


def _hidden_keys(f: Features) -> str:
    doc = HIDDEN_KEYS_DOC
    if f.cache:
        doc = doc.replace("\n\n", f"\n\n{HIDDEN_KEYS_CACHE_DOC.strip()} ", 1)
    return HIDDEN_KEYS.format(doc=indent(docstring(doc, 1), 1))


def _alibi(f: Features) -> str:
    if f.any_causal and f.any_bidirectional:
        bias = ALIBI_BOTH
    elif f.any_causal:
        bias = ALIBI_CAUSAL
    else:
        bias = ALIBI_BIDIRECTIONAL
    return ALIBI_SLOPES + "\n" + bias


def helpers(f: Features) -> list[str]:
    """The module-level functions and classes the model's code calls, in reading order."""
    out = [PADDING_KEYS]
    if f.any_causal:
        out.append(_hidden_keys(f))
    out.append(MASK_OUT)
    if f.rope:
        out.append(ROPE)
    if f.position.kind == "sinusoidal":
        out.append(SINUSOIDS)
    if f.alibi:
        out.append(_alibi(f))
    if f.relative_bias:
        out.append(RELATIVE_BUCKETS)
    if f.cache:
        out.append(KV_CACHE)
    return [code.strip("\n") for code in out]
