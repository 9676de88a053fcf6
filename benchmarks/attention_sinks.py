"""What GPT-OSS's attention costs a training step on a GPU, fused and unfused: one layer's
attention, forward and backward, at GPT-OSS 120B's shape and NeMo's sequence (4,096).

    python benchmarks/attention_sinks.py --out benchmarks/gpu-h100-awq/attention_sinks.json
    python benchmarks/attention_sinks.py --dry-run --out /tmp/sinks.json    # CPU, tiny

GPT-OSS adds a learned logit a head (a "sink") to every softmax's denominator, and every
other layer sees only its 128 latest positions. Transformer Engine (d0067d0) runs learnable
sinks only in its FusedAttention (cuDNN) or its unfused attention; which one NeMo's
published GPT-OSS runs took is not stated. This measures what each way costs, so that the
gap between them is a measured figure, not a guess:

- flash: SDPA's FlashAttention, causal and over the whole sequence, no sinks (the floor);
- cudnn: SDPA's cuDNN attention, the same;
- unfused: the scores materialised (bf16 matmul, fp32 softmax with the sink logit appended,
  as an unfused attention computes it), causal and with the 128-position window;
- flex: torch's flex_attention compiled, causal and windowed block masks, no sinks (what a
  block-sparse fused kernel gains from the window).

Each is one call's forward and backward, timed by CUDA events (median of `repeat`); the
FLOPs reported are the causal attention's (4·S²·H·d/2 forward, 2.5 times that backward), the
same figure for every way, so TFLOP/s compare time alone.
"""

from __future__ import annotations

import json
import math

import torch
import torch.nn.functional as F
from kernel_shapes import kernel_cli, measurement, timed

# openai/gpt-oss-120b's config.json (archspec/specs/gpt-oss-120b.yaml): 64 query heads of 64,
# 8 key/value heads, 128-position windows; NeMo's GPT-OSS presets: sequence 4096, micro-batch 1.
GPU = {"batch": 1, "seq": 4096, "heads": 64, "kv_heads": 8, "head_dim": 64, "window": 128,
       "repeat": 10}  # fmt: skip
DRY = {"batch": 1, "seq": 64, "heads": 4, "kv_heads": 2, "head_dim": 16, "window": 8,
       "repeat": 2}  # fmt: skip


def unfused(q, k, v, sinks, window: int | None):
    """Attention with a sink logit a head, every score materialised: what an unfused
    attention runs (scores in the inputs' dtype, softmax in fp32)."""
    b, h, s, d = q.shape
    groups = h // k.shape[1]
    k, v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
    scores = torch.matmul(q, k.transpose(-2, -1)) * (1 / math.sqrt(d))
    pos = torch.arange(s, device=q.device)
    allowed = pos[None, :] <= pos[:, None]
    if window is not None:
        allowed &= pos[None, :] > pos[:, None] - window
    scores = scores.float().masked_fill(~allowed, float("-inf"))
    sink = sinks.float().view(1, h, 1, 1).expand(b, h, s, 1)
    probs = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
    return torch.matmul(probs.to(v.dtype), v)


def sdpa(backend):
    from torch.nn.attention import sdpa_kernel

    def run(q, k, v, sinks, window):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    return run


def flex(device, seq: int):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    compiled = torch.compile(flex_attention)
    masks = {}

    def run(q, k, v, sinks, window):
        if window not in masks:

            def keep(b, h, qi, ki):
                causal = ki <= qi
                return causal if window is None else causal & (ki > qi - window)

            masks[window] = create_block_mask(keep, None, None, seq, seq, device=device)
        return compiled(q, k, v, block_mask=masks[window], enable_gqa=True)

    return run


def step_seconds(fn, sizes: dict, device, window) -> float:
    b, s, h, kv, d = (sizes[x] for x in ("batch", "seq", "heads", "kv_heads", "head_dim"))
    dtype = torch.bfloat16

    def leaf(*shape):
        return torch.randn(*shape, device=device, dtype=dtype).requires_grad_(True)

    q, k, v = leaf(b, h, s, d), leaf(b, kv, s, d), leaf(b, kv, s, d)
    sinks = leaf(h)
    grad = torch.randn(b, h, s, d, device=device, dtype=dtype)

    def forward_backward():
        fn(q, k, v, sinks, window).backward(grad)

    return timed(forward_backward, device, sizes["repeat"])


def against_plan(result: dict) -> str:
    s = result["sizes"]
    flops = 3.5 * 4 * s["seq"] ** 2 * s["heads"] * s["head_dim"] / 2 * s["batch"]
    lines = [f"{result['device']}, torch {result['torch']}: one layer's attention, forward and "
             f"backward, B={s['batch']}, S={s['seq']}, {s['heads']} heads of {s['head_dim']}, "
             f"{s['kv_heads']} key/value heads; TFLOP/s over the causal attention's "
             f"{flops / 1e9:.0f} GFLOP", "", "| way | mask | ms | TFLOP/s |",
             "|---|---|---:|---:|"]  # fmt: skip
    for r in result["rows"]:
        if "s" not in r:
            lines.append(f"| {r['way']} | {r['mask']} | {r.get('error', '')} | |")
            continue
        lines.append(f"| {r['way']} | {r['mask']} | {r['s'] * 1e3:.3f} "
                     f"| {flops / r['s'] / 1e12:.0f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    args = kernel_cli(__doc__, against_plan)
    if args is None:
        return
    sizes, device, header = measurement(args, GPU, DRY)
    result = {**header, "sizes": sizes, "rows": []}
    from torch.nn.attention import SDPBackend

    ways = [("flash", sdpa(SDPBackend.FLASH_ATTENTION), [None]),
            ("cudnn", sdpa(SDPBackend.CUDNN_ATTENTION), [None]),
            ("unfused, sinks", unfused, [None, sizes["window"]]),
            ("flex", flex(device, sizes["seq"]), [None, sizes["window"]])]  # fmt: skip
    if device.type == "cpu":  # CPU has neither fused kernel
        ways = [w for w in ways if w[0] not in ("flash", "cudnn")]
    for way, fn, windows in ways:
        for window in windows:
            row = {"way": way, "mask": "causal" if window is None else f"window {window}"}
            try:
                row["s"] = step_seconds(fn, sizes, device, window)
            except Exception as e:  # noqa: BLE001 (a way the device or torch lacks)
                row["error"] = (str(e).splitlines() or [type(e).__name__])[0][:200]
            result["rows"].append(row)
            args.out.write_text(json.dumps(result, indent=1))
            print(json.dumps(row), flush=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    print(against_plan(result), end="")


if __name__ == "__main__":
    main()
