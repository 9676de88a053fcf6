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
- experts: for MoE shapes (Mixtral 8x7B's 8 experts of 4096 → 14336 on one rank;
  Qwen3-30B-A3B's 128 of 2048 → 768 over 8 ranks, 16 a rank; DeepSeek-V3's 256 of
  7168 → 2048 over 8 ranks, 32 a rank; GPT-OSS 120B's 128 of 2880 → 5760 and 2880 → 2880,
  fc1 and fc2, over 8 ranks; `--experts NAME` keeps those named so), the first projection
  of a rank's experts at 128 to 8192 rows an expert: torch._grouped_mm (the grouped GEMM
  torchtitan runs), a loop of one torch.mm an expert (what a plain expert loop runs), and
  one torch.mm of all the rows against one expert's weight (what plan's cost assumes: one
  GEMM of the rows).
"""

from __future__ import annotations

import argparse
import json

import torch
from kernel_shapes import graphed, kernel_cli, plan_rule

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # float8_e4m3fn's largest finite value

# (name, experts a rank holds, d_model, the expert's hidden width), from each model's
# config.json: Mixtral-8x7B-v0.1, Qwen3-30B-A3B, DeepSeek-V3 (moe_intermediate_size).
EXPERT_SHAPES = [("mixtral-8x7b, ep 1", 8, 4096, 14336),
                 ("qwen3-30b-a3b, ep 8", 16, 2048, 768),
                 ("deepseek-v3, ep 8", 32, 7168, 2048),
                 # openai/gpt-oss-120b (hidden 2880, 128 experts of 2880, Megatron-Core's fc1
                 # fusing gate and up): NeMo's presets run EP 8, 16 experts a rank.
                 ("gpt-oss-120b fc1, ep 8", 16, 2880, 5760),
                 ("gpt-oss-120b fc2, ep 8", 16, 2880, 2880)]  # fmt: skip


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


def expert_row(device, name: str, experts: int, d: int, ff: int, rows: int, repeat: int,
               backward: bool = False):  # fmt: skip
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
    if backward:
        row["backward"] = _try(lambda: expert_backward(device, x, w, offsets, out, repeat))
    for key in ("one_gemm", "loop"):
        row[f"{key}_tflops"] = flops / row[f"{key}_s"] / 1e12
    if "s" in row["grouped"]:
        row["grouped"]["tflops"] = flops / row["grouped"]["s"] / 1e12
    return row


def expert_backward(device, x, w, offsets, out, repeat: int) -> dict:
    """Forward and backward (the input's and the weights' gradients) of the grouped GEMM and
    of the one GEMM of all rows, each captured whole in a CUDA graph: TFLOP/s over the three
    GEMMs' FLOPs. The weights' gradient of a grouped GEMM reduces over an expert's rows, the
    dimension that is small when experts are many."""
    x = x.detach().requires_grad_(True)
    w = w.detach().requires_grad_(True)
    w0 = w[0].detach().clone().requires_grad_(True)
    grad = torch.randn_like(out)

    def grouped():
        torch._grouped_mm(x, w.transpose(-2, -1), offs=offsets).backward(grad)

    def one_gemm():
        torch.mm(x, w0.t()).backward(grad)

    flops = 3 * 2 * x.shape[0] * x.shape[1] * w.shape[1]
    result = {}
    for key, fn in (("grouped", grouped), ("one_gemm", one_gemm)):
        seconds = graphed(fn, device, repeat)
        result[key] = {"s": seconds, "tflops": flops / seconds / 1e12}
    return result


GPU = {"big": 8192, "k": [64, 128, 256, 512, 1024, 2048, 4096, 8192],
       "square": [256, 512, 1024, 2048, 4096, 8192], "rows": [128, 256, 512, 1024, 2048,
       4096, 8192], "experts": EXPERT_SHAPES, "repeat": 10}  # fmt: skip
DRY = {"big": 64, "k": [16, 32], "square": [32], "rows": [16, 32],
       "experts": [("tiny", 2, 32, 48)], "repeat": 2}  # fmt: skip


def against_plan(result: dict) -> str:
    """Markdown tables: each measured kernel beside plan's rule for its shape. fp8 GEMMs are
    set beside bf16 ones of the same shape, on both sides, and as a share of their own big
    GEMM (the rule's shape apart from its plateau, which is fitted on whole published steps,
    not on kernels); a rank's experts beside plan's rule under NeMo's H100 plateau (the
    published MoE runs are NeMo's)."""
    lines = [f"{result['device']}, torch {result['torch']}"]
    if result["fp8"]:
        lines += ["", *fp8_table(result)]
    if result["experts"]:
        lines += ["", *experts_table(result)]
    return "\n".join(lines) + "\n"


def fp8_table(result: dict) -> list[str]:
    bf16, _, _ = plan_rule(result["device"])
    fp8, what, _ = plan_rule(result["device"], "fp8")
    big = max(result["fp8"], key=lambda r: r["m"] * r["n"] * r["k"])
    lines = [f"fp8 ({what}):", "",
             "| shape | bf16 | fp8 GEMM | with compiled casts | fp8 / bf16 | plan fp8 "
             "| plan fp8 / bf16 | fp8 / big fp8, measured | plan |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for recipe in ("tensorwise", "rowwise"):
        lines.append(f"| **{recipe}** | | | | | | | | |")
        top = big[f"{recipe}_gemm"].get("tflops")
        for r in result["fp8"]:
            gemm, shape = r[f"{recipe}_gemm"], (r["m"], r["n"], r["k"])
            if "tflops" not in gemm:
                lines.append(f"| {r['m']}×{r['n']}×{r['k']} | {gemm.get('error', '')} |")
                continue
            plan8, plan16 = fp8(*shape), bf16(*shape)
            lines.append(
                f"| {r['m']}×{r['n']}×{r['k']} | {r['bf16_tflops']:.0f} | {gemm['tflops']:.0f} "
                f"| {gemm.get('with_casts_tflops', 0):.0f} "
                f"| {gemm['tflops'] / r['bf16_tflops']:.2f} | {plan8:.0f} | {plan8 / plan16:.2f} "
                f"| {gemm['tflops'] / top:.2f} | {plan8 / fp8(*(big[x] for x in 'mnk')):.2f} |"
            )
    return lines


def experts_table(result: dict) -> list[str]:
    rule, what, _ = plan_rule(result["device"], engine="nemo")
    backward = "backward" in result["experts"][0]
    header = ("| model | experts | rows an expert | one GEMM of all rows | loop | grouped "
              "| plan | grouped / plan |")  # fmt: skip
    rule_line = "|---|---:|---:|---:|---:|---:|---:|---:|"
    if backward:
        header += (" grouped, forward + backward | one GEMM, forward + backward "
                   "| grouped forward + backward / plan |")  # fmt: skip
        rule_line += "---:|" * 3
    lines = [f"A rank's experts, first projection, TFLOP/s ({what}):", "", header, rule_line]
    for r in result["experts"]:
        plan = rule(r["rows"], r["d_ff"], r["d_model"])  # the three GEMMs alike under the rule
        grouped = r["grouped"].get("tflops", float("nan"))
        line = (f"| {r['model']} | {r['experts']} | {r['rows']} | {r['one_gemm_tflops']:.0f} "
                f"| {r['loop_tflops']:.0f} | {grouped:.0f} | {plan:.0f} "
                f"| {grouped / plan:.2f} |")  # fmt: skip
        if backward:
            both = r["backward"]
            g, one = (both.get(k, {}).get("tflops", float("nan")) for k in ("grouped", "one_gemm"))
            line += f" {g:.0f} | {one:.0f} | {g / plan:.2f} |"
        lines.append(line)
    return lines


def main() -> None:
    def part(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--part", choices=("all", "backward"), default="all",
                            help="backward: only the experts, forward and backward")  # fmt: skip
        parser.add_argument("--experts", action="append", metavar="MODEL",
                            help="only the expert shapes named so (a prefix)")  # fmt: skip

    args = kernel_cli(__doc__, against_plan, add=part)
    if args is None:
        return
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
    backward = args.part == "backward"
    for m, n, k in [] if backward else shapes:
        row = fp8_row(device, m, n, k, sizes["repeat"], compiled)
        result["fp8"].append(row)
        args.out.write_text(json.dumps(result, indent=1))  # nothing measured is lost
        tw, rw = row["tensorwise_gemm"], row["rowwise_gemm"]
        print(f"{m}x{n}x{k}: bf16 {row['bf16_tflops']:.0f}, fp8 tensorwise "
              f"{tw.get('tflops', 0):.0f} ({tw.get('with_casts_tflops', 0):.0f} with casts), "
              f"rowwise {rw.get('tflops', 0):.0f} ({rw.get('with_casts_tflops', 0):.0f}) "
              f"TFLOP/s {tw.get('error', '')}{rw.get('error', '')}", flush=True)  # fmt: skip
    chosen = [e for e in sizes["experts"]
              if not args.experts or e[0].startswith(tuple(args.experts))]  # fmt: skip
    for name, experts, d, ff in chosen:
        for rows in sizes["rows"]:
            row = expert_row(device, name, experts, d, ff, rows, sizes["repeat"], backward)
            result["experts"].append(row)
            args.out.write_text(json.dumps(result, indent=1))
            g, b = row["grouped"], row.get("backward", {})
            print(f"{name} {rows} rows: one GEMM {row['one_gemm_tflops']:.0f}, loop "
                  f"{row['loop_tflops']:.0f}, grouped {g.get('tflops', 0):.0f} TFLOP/s "
                  f"{g.get('error', '')}; forward + backward: "
                  f"{ {k: round(v['tflops']) for k, v in b.items() if k != 'error'} } "
                  f"{b.get('error', '')}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
