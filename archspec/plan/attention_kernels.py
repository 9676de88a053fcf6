"""cuDNN's fused attention, at its throughput measured on an H100 (`plan --attn-kernel cudnn`).

plan costs a fused (flash) attention as a GEMM of (queries, keys, head width) under the fitted
matmul rule (opcost.py, roofline.py). On an H100 that rule is FlashAttention-2's kernel within
25% at head width 128 (benchmarks/RESULTS.md, "Each attention kernel forced"), the kernel the
stacks of most published runs called. Transformer Engine calls another: since its commit
32db39288 (2023-12-07, "Integrate cuDNN frontend v1 to fused attention") it gives cuDNN's fused
attention (its `FusedAttention` backend) preference over FlashAttention on Hopper and later
("Disabling FlashAttention to give FusedAttention preference on Hopper+ for performance
reasons": `get_attention_backend` in transformer_engine/pytorch/attention/dot_product_attention/
utils.py at d0067d0), and on one H100 that kernel ran at 1.15-2.03 times the rule at head
width 128. A run known to call it is timed from the measurement, not the rule; it is not the
nemo engine's default (docs/plan.md, "Which fused attention kernel", says why).

The measurement: torch 2.11's scaled_dot_product_attention with its cuDNN backend forced,
causal, forward and backward, 16,384 tokens a head and 32 heads, bf16, on one H100 80GB HBM3
(benchmarks/gpu-h100-sweep/kernels-backends.json, `benchmarks/kernel_shapes.py`; nothing fitted
to published runs). TFLOP/s count the causal half of the pairs, 4·S²·d/2 a head forward and 2.5
times that backward, as opcost.py counts a flash kernel. Between the measured shapes the
throughput is interpolated linearly in log2(S) and in the head width; beyond them it is held at
the nearest (a longer sequence at 8,192's, a head wider than 128 at 128's), which is measured
nowhere. Only parts with an H100's tensor cores take it: Blackwell runs cuDNN's kernel too, but
it was not measured there.
"""

from __future__ import annotations

from math import log2

# Head width -> {sequence length: TFLOP/s, forward and backward}, as measured (above).
CUDNN_H100_TFLOPS: dict[int, dict[int, float]] = {
    64: {512: 104.1, 1024: 174.2, 2048: 268.2, 4096: 341.5, 8192: 386.7},
    128: {512: 129.2, 1024: 232.5, 2048: 341.8, 4096: 424.2, 8192: 471.7},
}

# The parts with an H100's tensor cores and clocks run its kernels (hardware.tensor_core_twin).
MEASURED_ON = "h100-sxm"


def _along_sequence(by_seq: dict[int, float], keys: float) -> float:
    points = sorted(by_seq)
    x = min(max(log2(max(keys, 1.0)), log2(points[0])), log2(points[-1]))
    for lo, hi in zip(points, points[1:], strict=False):
        if log2(lo) <= x <= log2(hi):
            t = (x - log2(lo)) / (log2(hi) - log2(lo))
            return by_seq[lo] + t * (by_seq[hi] - by_seq[lo])
    return by_seq[points[-1]]


def cudnn_attention_flops(keys: float, head_dim: float) -> float:
    """FLOP/s of cuDNN's fused causal attention, forward and backward, over `keys` attended
    positions at this head width, on an H100."""
    widths = sorted(CUDNN_H100_TFLOPS)
    d = min(max(head_dim, widths[0]), widths[-1])
    lo = max(w for w in widths if w <= d)
    hi = min(w for w in widths if w >= d)
    at_lo = _along_sequence(CUDNN_H100_TFLOPS[lo], keys)
    if hi == lo:
        return at_lo * 1e12
    at_hi = _along_sequence(CUDNN_H100_TFLOPS[hi], keys)
    return (at_lo + (d - lo) / (hi - lo) * (at_hi - at_lo)) * 1e12


# What sinks (gpt-oss's learned softmax offset) add to cuDNN's fused attention, forward and
# backward, per query row and head: Transformer Engine runs them only there (its FlashAttention
# backend is disabled for `softmax_type="learnable"`: get_attention_backend in transformer_
# engine/pytorch/attention/dot_product_attention/utils.py at d0067d0). Measured on one H200 with
# cuDNN 9.19 (benchmarks/attention_sinks_cudnn.py, benchmarks/gpu-h200-kernels/sinks_cudnn.json:
# GPT-OSS 120B's layer, B = 1, S = 4,096, 64 query heads of 64): with sinks the causal kernel
# took 0.400 ms longer (1.350 -> 1.750) and the 128-position window's 0.412 ms longer (0.378 ->
# 0.790), the same time over the same 262,144 rows and heads where the pairs differ 16-fold: a
# cost per row, not per pair. Their mean over those rows is charged on every part: the extra is
# the softmax's work beside the tiles, not the tensor cores', and was measured on Hopper only.
CUDNN_SINK_ROW_S = (0.400096e-3 + 0.412096e-3) / 2 / (64 * 4096)

# What --attn-kernel names: the GEMM rule (FlashAttention-2's kernel) or cuDNN's measured one.
KERNELS = ("fa2", "cudnn")


def measured_on(accelerator: str) -> bool:
    """Whether cuDNN's measured throughput holds on this part: one with an H100's tensor cores."""
    from archspec.plan.hardware import tensor_core_twin

    return tensor_core_twin(accelerator) == MEASURED_ON
