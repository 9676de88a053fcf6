"""What an fp8 projection and a rank's experts cost on the GPU: fp8 GEMMs with their casts,
and grouped expert GEMMs, at the shapes plan costs.

    python benchmarks/kernel_fp8_moe.py --out benchmarks/gpu-h100-sweep/fp8_moe.json   # on a GPU
    python benchmarks/kernel_fp8_moe.py --dry-run --out /tmp/fp8_moe.json             # CPU, tiny

plan times an fp8 projection at the fp8 peak times one fitted share (`fp8_matmul`,
archspec/plan/efficiency.py) whatever its shape, and a rank's experts as one GEMM of all
their rows. This script measures both assumptions, timing every kernel as a CUDA graph of
20 calls (kernel_shapes.graphed), nothing fitted:

- fp8: for the bf16 shapes kernel_shapes.py times (M = N = 8192, K 64-8192; squares
  256-8192), torch.mm in bf16 beside torch._scaled_mm in float8_e4m3fn with one scale a
  tensor and with a scale a row (torchao.float8's "tensorwise" and "rowwise" recipes), and
  the dynamic casts a training step adds in front of each: amax, scale and cast of the
  input (M × K) and of the weight (N × K), eager and compiled by torch.compile (what
  torchao's float8 training runs);
- experts: for three MoE shapes (Mixtral 8x7B's 8 experts of 4096 → 14336 on one rank;
  Qwen3-30B-A3B's 128 of 2048 → 768 over 8 ranks, 16 a rank; DeepSeek-V3's 256 of
  7168 → 2048 over 8 ranks, 32 a rank), the first projection of a rank's experts at 128 to
  8192 rows an expert: torch._grouped_mm (the grouped GEMM torchtitan runs), a loop of one
  torch.mm an expert (what a plain expert loop runs), and one torch.mm of all the rows
  against one expert's weight (what plan's cost assumes: one GEMM of the rows).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from kernel_shapes import graphed

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # float8_e4m3fn's largest finite value

# (name, experts a rank holds, d_model, the expert's hidden width), from each model's
# config.json: Mixtral-8x7B-v0.1, Qwen3-30B-A3B, DeepSeek-V3 (moe_intermediate_size).
EXPERT_SHAPES = [("mixtral-8x7b, ep 1", 8, 4096, 14336),
                 ("qwen3-30b-a3b, ep 8", 16, 2048, 768),
                 ("deepseek-v3, ep 8", 32, 7168, 2048)]  # fmt: skip


def cast_tensorwise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic fp8 cast with one scale (torchao.float8's tensorwise recipe): the tensor's
    amax sets the scale that maps it onto fp8's range; returns the fp8 tensor and the
    inverse scale _scaled_mm multiplies back."""
    amax = x.abs().amax().float().clamp(min=1e-12)
    scale = FP8_MAX / amax
    return (x.float() * scale).clamp(-FP8_MAX, FP8_MAX).to(FP8), scale.reciprocal()


def cast_rowwise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """As cast_tensorwise with one scale a row (the rowwise recipe)."""
    amax = x.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12)
    scale = FP8_MAX / amax
    return (x.float() * scale).clamp(-FP8_MAX, FP8_MAX).to(FP8), scale.reciprocal()


def _try(fn) -> dict:
    """fn's result, or the first line of why the device or torch took no such call."""
    try:
        return fn()
    except (RuntimeError, NotImplementedError, TypeError, ValueError) as e:
        return {"error": str(e).splitlines()[0][:200] if str(e) else type(e).__name__}


def fp8_row(device, m: int, n: int, k: int, repeat: int, compiled: dict) -> dict:
    a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    w = torch.randn(n, k, device=device, dtype=torch.bfloat16)  # a linear's weight, (out, in)
    flops = 2 * m * n * k
    out = torch.empty(m, n, device=device, dtype=torch.bfloat16)
    row: dict = {"m": m, "n": n, "k": k}
    row["bf16_s"] = graphed(lambda: torch.mm(a, w.t(), out=out), device, repeat)
    for recipe, cast in (("tensorwise", cast_tensorwise), ("rowwise", cast_rowwise)):
        a8, sa = cast(a)
        w8, sw = cast(w)
        scale_b = sw if recipe == "tensorwise" else sw.t().contiguous()  # (1, N) rowwise

        def gemm(a8=a8, w8=w8, sa=sa, scale_b=scale_b):
            torch._scaled_mm(a8, w8.t(), scale_a=sa, scale_b=scale_b, out_dtype=torch.bfloat16)

        row[f"{recipe}_gemm"] = _try(lambda gemm=gemm: {"s": graphed(gemm, device, repeat)})
        for how, fn in (("eager", cast), ("compiled", compiled.get(recipe))):
            if fn is None:
                continue
            row[f"{recipe}_cast_{how}"] = _try(
                lambda fn=fn: {"input_s": graphed(lambda: fn(a), device, repeat),
                               "weight_s": graphed(lambda: fn(w), device, repeat)})  # fmt: skip
    row["bf16_tflops"] = flops / row["bf16_s"] / 1e12
    for recipe in ("tensorwise", "rowwise"):
        gemm = row[f"{recipe}_gemm"]
        if "s" in gemm:
            gemm["tflops"] = flops / gemm["s"] / 1e12
            casts = row.get(f"{recipe}_cast_compiled", row.get(f"{recipe}_cast_eager", {}))
            if "input_s" in casts:
                total = gemm["s"] + casts["input_s"] + casts["weight_s"]
                gemm["with_casts_tflops"] = flops / total / 1e12
    return row


def expert_row(device, name: str, experts: int, d: int, ff: int, rows: int, repeat: int):
    """The first projection of a rank's experts, rows an expert, three ways."""
    x = torch.randn(experts * rows, d, device=device, dtype=torch.bfloat16)
    w = torch.randn(experts, ff, d, device=device, dtype=torch.bfloat16)  # (E, out, in)
    offsets = torch.arange(1, experts + 1, device=device, dtype=torch.int32) * rows
    flops = 2 * experts * rows * d * ff
    out = torch.empty(experts * rows, ff, device=device, dtype=torch.bfloat16)
    pieces = list(x.split(rows))

    def loop():
        for e in range(experts):
            torch.mm(pieces[e], w[e].t(), out=out[e * rows : (e + 1) * rows])

    row = {"model": name, "experts": experts, "d_model": d, "d_ff": ff, "rows": rows}
    row["one_gemm_s"] = graphed(lambda: torch.mm(x, w[0].t(), out=out), device, repeat)
    row["loop_s"] = graphed(loop, device, repeat)

    def grouped():
        torch._grouped_mm(x, w.transpose(-2, -1), offs=offsets)

    row["grouped"] = _try(lambda: {"s": graphed(grouped, device, repeat)})
    for key in ("one_gemm", "loop"):
        row[f"{key}_tflops"] = flops / row[f"{key}_s"] / 1e12
    if "s" in row["grouped"]:
        row["grouped"]["tflops"] = flops / row["grouped"]["s"] / 1e12
    return row


GPU = {"big": 8192, "k": [64, 128, 256, 512, 1024, 2048, 4096, 8192],
       "square": [256, 512, 1024, 2048, 4096, 8192], "rows": [128, 256, 512, 1024, 2048,
       4096, 8192], "experts": EXPERT_SHAPES, "repeat": 10}  # fmt: skip
DRY = {"big": 64, "k": [16, 32], "square": [32], "rows": [16, 32],
       "experts": [("tiny", 2, 32, 48)], "repeat": 2}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny shapes")
    args = parser.parse_args()
    sizes = DRY if args.dry_run else GPU
    device = torch.device("cpu" if args.dry_run else "cuda")
    compiled = {}
    if device.type == "cuda":  # one graph each for every shape (dynamic), as torchao compiles
        compiled = {"tensorwise": torch.compile(cast_tensorwise, dynamic=True),
                    "rowwise": torch.compile(cast_rowwise, dynamic=True)}  # fmt: skip
    big = sizes["big"]
    shapes = [(big, big, k) for k in sizes["k"]] + [(n, n, n) for n in sizes["square"]]
    result = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
              "torch": torch.__version__, "fp8": [], "experts": []}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for m, n, k in shapes:
        row = fp8_row(device, m, n, k, sizes["repeat"], compiled)
        result["fp8"].append(row)
        args.out.write_text(json.dumps(result, indent=1))  # nothing measured is lost
        tw, rw = row["tensorwise_gemm"], row["rowwise_gemm"]
        print(f"{m}x{n}x{k}: bf16 {row['bf16_tflops']:.0f}, fp8 tensorwise "
              f"{tw.get('tflops', 0):.0f} ({tw.get('with_casts_tflops', 0):.0f} with casts), "
              f"rowwise {rw.get('tflops', 0):.0f} ({rw.get('with_casts_tflops', 0):.0f}) "
              f"TFLOP/s {tw.get('error', '')}{rw.get('error', '')}", flush=True)  # fmt: skip
    for name, experts, d, ff in sizes["experts"]:
        for rows in sizes["rows"]:
            row = expert_row(device, name, experts, d, ff, rows, sizes["repeat"])
            result["experts"].append(row)
            args.out.write_text(json.dumps(result, indent=1))
            g = row["grouped"]
            print(f"{name} {rows} rows: one GEMM {row['one_gemm_tflops']:.0f}, loop "
                  f"{row['loop_tflops']:.0f}, grouped {g.get('tflops', 0):.0f} TFLOP/s "
                  f"{g.get('error', '')}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
