"""What the GPU's own kernels reach at the shapes plan costs: matmuls and fused attention.

    python benchmarks/kernel_shapes.py --out benchmarks/gpu-h100-sweep/kernels.json   # on a GPU
    python benchmarks/kernel_shapes.py --dry-run --out /tmp/kernels.json             # CPU, tiny

plan costs a matmul of shape (M, N, K) at a plateau times d / (d + d½) for each dimension
(archspec/plan/efficiency.py), and a fused (flash) attention as a GEMM of shape (queries,
keys, head width) under the same rule (opcost.py). This script times, with CUDA events:

- matmuls: torch.mm in bf16 of (M, N, K) with M = N = 8192 and K from 64 to 8192, and square
  ones from 256 to 8192: TFLOP/s, what the rule is checked against;
- attention: torch's scaled_dot_product_attention (bf16, causal, the flash backend), forward
  and forward + backward, head widths 64 and 128, sequences 512 to 8192 with the tokens of a
  call held at 16,384 a head: TFLOP/s counting the causal half of the pairs (4·S²·d/2 a head
  forward, 2.5 times that backward, as opcost.py counts them).

Nothing is fitted here; the figures go beside plan's (docs/plan.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F


def timed(fn, device: torch.device, repeat: int) -> float:
    """Median seconds of one call, after two warm-up calls."""
    for _ in range(2):
        fn()
    if device.type != "cuda":
        import time

        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return sorted(times)[len(times) // 2]
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return sorted(times)[len(times) // 2]


def matmuls(device: torch.device, sizes: dict, repeat: int) -> list[dict]:
    big = sizes["big"]
    shapes = [(big, big, k) for k in sizes["k"]] + [(n, n, n) for n in sizes["square"]]
    rows = []
    for m, n, k in shapes:
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=device, dtype=torch.bfloat16)
        seconds = timed(lambda a=a, b=b: torch.mm(a, b), device, repeat)
        rows.append({"m": m, "n": n, "k": k, "seconds": seconds,
                     "tflops": 2 * m * n * k / seconds / 1e12})  # fmt: skip
    return rows


def attention(device: torch.device, sizes: dict, repeat: int) -> list[dict]:
    rows = []
    for d in sizes["head_dim"]:
        for s in sizes["seq"]:
            batch = max(1, sizes["tokens"] // s)
            heads = sizes["heads"]
            q, k, v = (torch.randn(batch, heads, s, d, device=device, dtype=torch.bfloat16,
                                   requires_grad=True) for _ in range(3))  # fmt: skip
            grad = torch.randn_like(q)

            def forward(q=q, k=k, v=v):
                with torch.no_grad():
                    F.scaled_dot_product_attention(q, k, v, is_causal=True)

            def both(q=q, k=k, v=v, grad=grad):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                out.backward(grad)

            flops = 4 * batch * heads * s * s * d / 2  # the causal half of the pairs
            fwd = timed(forward, device, repeat)
            total = timed(both, device, repeat)
            rows.append({"batch": batch, "heads": heads, "seq": s, "head_dim": d,
                         "forward_s": fwd, "forward_backward_s": total,
                         "forward_tflops": flops / fwd / 1e12,
                         "forward_backward_tflops": 3.5 * flops / total / 1e12})  # fmt: skip
    return rows


GPU = {"big": 8192, "k": [64, 128, 256, 512, 1024, 2048, 4096, 8192],
       "square": [256, 512, 1024, 2048, 4096, 8192],
       "head_dim": [64, 128], "seq": [512, 1024, 2048, 4096, 8192], "tokens": 16384,
       "heads": 32, "repeat": 10}  # fmt: skip
DRY = {"big": 64, "k": [16, 32], "square": [32], "head_dim": [16], "seq": [32, 64],
       "tokens": 64, "heads": 2, "repeat": 2}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny shapes")
    args = parser.parse_args()
    sizes = DRY if args.dry_run else GPU
    device = torch.device("cpu" if args.dry_run else "cuda")
    result = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "matmuls": matmuls(device, sizes, sizes["repeat"]),
        "attention": attention(device, sizes, sizes["repeat"]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    for row in result["matmuls"]:
        print(f"mm {row['m']}x{row['n']}x{row['k']}: {row['tflops']:.0f} TFLOP/s")
    for row in result["attention"]:
        print(f"sdpa d={row['head_dim']} S={row['seq']} B={row['batch']}: fwd "
              f"{row['forward_tflops']:.0f}, fwd+bwd {row['forward_backward_tflops']:.0f} "
              "TFLOP/s")  # fmt: skip


if __name__ == "__main__":
    main()
