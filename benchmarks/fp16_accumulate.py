"""Whether a GPU's fp16 matmuls run faster when they accumulate in fp16: torch.mm in fp16
with PyTorch's `allow_fp16_accumulation` off (cuBLAS accumulates in FP32, PyTorch's default)
and on, beside bf16, at the shapes a training step and a prompt's prefill run.

    python benchmarks/fp16_accumulate.py --out benchmarks/gpu-h100-awq/fp16_accumulate.json
    python benchmarks/fp16_accumulate.py --dry-run --out /tmp/fp16_acc.json   # CPU, tiny

The catalogue gives a part an `fp16_accumulate_tflops` only where its maker states a faster
FP16-accumulate tensor rate (the RTX 4090's 330.3 against 165.2); the H100 and H200 have
none, so plan times an fp16-accumulating engine on them at their one fp16 rate. This checks
that on the part itself. Each kernel is timed as a CUDA graph of CALLS calls
(kernel_shapes.graphed); nothing is fitted.
"""

from __future__ import annotations

import json

import torch
from kernel_shapes import graphed, kernel_cli, measurement

# (M, N, K): squares, and a prefill of 256 and 4,096 tokens through Llama-2-7B's up
# projection (hidden 4096, intermediate 11008, its config.json).
GPU = {"shapes": [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
                  (256, 11008, 4096), (4096, 11008, 4096)], "repeat": 10}  # fmt: skip
DRY = {"shapes": [(32, 48, 64)], "repeat": 2}


def rate(m: int, n: int, k: int, dtype, device, repeat: int, fp16_accumulate: bool) -> float:
    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, n, device=device, dtype=dtype)
    out = torch.empty(m, n, device=device, dtype=dtype)
    flag = torch.backends.cuda.matmul
    before = flag.allow_fp16_accumulation
    flag.allow_fp16_accumulation = fp16_accumulate
    try:
        seconds = graphed(lambda: torch.mm(a, b, out=out), device, repeat)
    finally:
        flag.allow_fp16_accumulation = before
    return 2 * m * n * k / seconds / 1e12


def against_plan(result: dict) -> str:
    lines = [f"{result['device']}, torch {result['torch']}: TFLOP/s of torch.mm", "",
             "| M × N × K | bf16 | fp16, FP32 accumulation | fp16, fp16 accumulation "
             "| fp16 accumulation / FP32 |", "|---|---:|---:|---:|---:|"]  # fmt: skip
    for r in result["rows"]:
        fp32acc, fp16acc = r["fp16_fp32acc"], r["fp16_fp16acc"]
        lines.append(f"| {r['m']}×{r['n']}×{r['k']} | {r['bf16']:.0f} | {fp32acc:.0f} "
                     f"| {fp16acc:.0f} | {fp16acc / fp32acc:.2f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    args = kernel_cli(__doc__, against_plan)
    if args is None:
        return
    sizes, device, header = measurement(args, GPU, DRY)
    result = {**header, "rows": []}
    for m, n, k in sizes["shapes"]:
        repeat = sizes["repeat"]
        row = {"m": m, "n": n, "k": k,
               "bf16": rate(m, n, k, torch.bfloat16, device, repeat, False),
               "fp16_fp32acc": rate(m, n, k, torch.float16, device, repeat, False),
               "fp16_fp16acc": rate(m, n, k, torch.float16, device, repeat, True)}  # fmt: skip
        result["rows"].append(row)
        args.out.write_text(json.dumps(result, indent=1))
        print(json.dumps(row), flush=True)
    print(against_plan(result), end="")


if __name__ == "__main__":
    main()
