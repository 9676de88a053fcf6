"""What a fused attention kernel costs over a sliding window, as a share of its causal cost.

plan costs a fused (flash) attention by the causal half of its query-key pairs (opcost.py). A
kernel given a window (FlashAttention's `window_size`, cuDNN's sliding window, which Transformer
Engine passes for a windowed layer) skips the key tiles wholly outside it, but not in proportion
to the pairs it keeps: on an H200 cuDNN's kernel over GPT-OSS's 128 positions at S = 4,096 took
a third of its causal time where it keeps 6% of the pairs (benchmarks/gpu-h200-kernels/). The cost
follows the tiles the kernel visits: each query tile of TILE rows walks the key tiles its rows
see, and pays a fixed share besides (loading its queries, writing its output and, backward,
its gradients), worth TILE_OVERHEAD key tiles:

    share = (T_window + k·Q) / (T_causal + k·Q),  Q = S / TILE query tiles,

T_causal = Q(Q + 1)/2 the causal mask's tiles, T_window = Q + m(m - 1)/2 + (Q - m)·m with
m = min(ceil((W - 1) / TILE), Q) the key tiles before the diagonal one that a query tile's rows
reach. A window as long as the sequence gives 1.

k was fitted to cuDNN's forward and backward through JAX
(`benchmarks/attention_window_cudnn.py --sweep`, one H200, 2026-11-28: S 4,096 and 8,192, head
widths 64 and 128, windows 128 to 2,048 and causal, 64 query heads over 8 key/value heads,
B = 1), with each width's time a tile and one constant a call (0.50 ms: JAX's dispatch and
the host's clock, which CUDA events leave out: torch's cuDNN causal kernel at GPT-OSS's shape
took 1.44 ms by events on an H100, JAX's 1.87-1.89 ms by the host clock on the H200) fitted
beside it: the 24 times within 3.2% on average, 9.1% at most. Held out, the same machine's
later run over batches and heads (`--scaling`) at B·H = 128 and 256, where the constant
weighs least, measured windowed over causal 0.374 and 0.336 where the fit gives 0.377 and
0.323 (tests/test_plan_window_tiles.py). At B = 1 that run's windowed times are 23-45%
above the fit (64 down to 16 heads), where the constant, which moved by 0.1 ms between runs,
is most of the time, and few heads leave the GPU part idle: not modelled.
"""

from __future__ import annotations

import sympy as sp

TILE = 128  # query and key rows a tile: FlashAttention-2's and cuDNN's at these head widths
TILE_OVERHEAD = 3.1  # key tiles' worth of work each query tile pays besides (fitted, above)


def window_share(seq: sp.Expr, reach: int) -> sp.Expr:
    """A causal fused kernel's cost over a sliding window in which each query sees its own key
    and the `reach` before it (window - 1), as a share of its cost over the causal mask, when
    the queries are the sequence's `seq` positions."""
    q = seq / TILE
    m = sp.Min(sp.ceiling(sp.Integer(reach) / TILE), q)
    causal = q * (q + 1) / 2
    windowed = q + m * (m - 1) / 2 + (q - m) * m
    return (windowed + TILE_OVERHEAD * q) / (causal + TILE_OVERHEAD * q)
