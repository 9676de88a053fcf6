"""The attention mask as one small algebra: which keys a query may see, plus an additive bias.

A self-attention layer in a causal stack hides later keys; padding hides padded keys; a score
bias (ALiBi, T5) is added to every visible score; a sliding window (Mistral, Gemma 2's local
layers) also hides the keys `window` or more positions before the query, as transformers'
`sliding_window_overlay` does (key > query - window). In an encoder the window has two sides
(ModernBERT's local layers): a query sees the keys less than `window` positions away on either
side, as transformers' `sliding_window_bidirectional_overlay` with `window - 1` (|query - key|
<= window - 1). FLOPs under the `causal` convention count
only the pairs the mask keeps, and every elementwise pass over the scores (masking, biasing,
windowing) costs one FLOP per score.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mask:
    causal: bool  # query i sees keys up to its own position only
    bias: bool = False  # an additive bias on the scores (a score-bias position kind)
    learned_bias: bool = False  # that bias has parameters
    # A causal query sees its own and the window - 1 keys before it; a bidirectional one also
    # the window - 1 keys after it.
    window: int | None = None

    @property
    def windowed(self) -> bool:
        return self.window is not None

    @property
    def reach(self) -> int | None:
        """How many keys before its own a query sees: window - 1 (None: every earlier one)."""
        return None if self.window is None else self.window - 1

    @property
    def two_sided(self) -> bool:
        """A window on both sides of each query (an encoder's)."""
        return self.window is not None and not self.causal

    @property
    def causal_only(self) -> bool:
        """The causal mask alone (no bias, no window): what SDPA applies itself given
        `is_causal`."""
        return self.causal and not self.bias and not self.windowed

    @property
    def score_passes(self) -> int:
        """Elementwise passes over the score matrix besides the softmax: hiding later keys
        and adding the bias are one each."""
        return int(self.causal) + int(self.bias) + int(self.windowed)

    def visible_pairs(self, queries, keys):
        """Query-key pairs per head and sequence the mask keeps. The queries are the last
        `queries` of `keys` positions and query i sees keys up to its own: q·k - q(q-1)/2
        pairs, S(S+1)/2 when q = k = S, all k when q = 1. With a window W the query at
        position p sees min(p + 1, W) keys: the pairs of the first k positions less those of
        the first k - q. A two-sided window adds, for the query j positions before the last
        key, min(j, W - 1) keys after it."""
        if self.window is not None:
            w = self.window
            before = _windowed_pairs(keys, w) - _windowed_pairs(keys - queries, w)
            if self.causal:
                return before
            return before + _windowed_pairs(queries, w) - queries
        if self.causal:
            return queries * keys - queries * (queries - 1) / 2
        return queries * keys


def _windowed_pairs(n, window: int):
    """Σ_{p<n} min(p + 1, W): m(m+1)/2 + (n - m)·W with m = min(n, W)."""
    import sympy as sp

    m = sp.Min(n, window)
    return m * (m + 1) / 2 + (n - m) * window
