"""What the GPU's own kernels reach at the shapes plan costs: matmuls and fused attention.

    python benchmarks/kernel_shapes.py --out benchmarks/gpu-h100-sweep/kernels.json   # on a GPU
    python benchmarks/kernel_shapes.py --dry-run --out /tmp/kernels.json             # CPU, tiny
    python benchmarks/kernel_shapes.py --against-plan benchmarks/gpu-h100-sweep/kernels.json

plan costs a matmul of shape (M, N, K) at a plateau times d / (d + d½) for each dimension
(archspec/plan/efficiency.py), and a fused (flash) attention as a GEMM of shape (queries,
keys, head width) under the same rule (opcost.py). This script times, with CUDA events:

- matmuls: torch.mm in bf16 of (M, N, K) with M = N = 8192 and K from 64 to 8192, and square
  ones from 256 to 8192, each timed as a CUDA graph of 20 calls (a small one is shorter than
  its launch): TFLOP/s, what the rule is checked against;
- attention: torch's scaled_dot_product_attention (bf16, causal), as SDPA chooses and with
  each fused backend forced (flash, memory-efficient, cuDNN; one the device or the shape does
  not take is recorded with why), forward and forward + backward, head widths 64 and 128,
  sequences 512 to 8192 with the tokens of a call held at 16,384 a head: TFLOP/s counting
  the causal half of the pairs (4·S²·d/2 a head forward, 2.5 times that backward, as
  opcost.py counts them).

Nothing is fitted here. --against-plan (no GPU needed) puts a results file beside plan's rule
on the device's catalogue entry: plan's TFLOP/s under Megatron-LM's fitted plateau, and both
sides as a share of their own 8192-cube GEMM, so that the rule's shape is compared apart from
its plateau (which is fitted on whole published steps, not on kernels).
"""

from __future__ import annotations

import argparse
import contextlib
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


def timed_in_graph(a: torch.Tensor, b: torch.Tensor, device: torch.device, repeat: int) -> float:
    """Median seconds of one torch.mm, from a CUDA graph of CALLS of them."""
    out = torch.empty(a.shape[0], b.shape[1], device=device, dtype=a.dtype)
    return graphed(lambda: torch.mm(a, b, out=out), device, repeat)


def graphed(fn, device: torch.device, repeat: int) -> float:
    """Median seconds of one call of fn, from a CUDA graph of CALLS of them: a small kernel
    takes less time on the GPU than its launch takes the host, so timing calls one by one
    would time the host (on CPU, calls timed one by one)."""
    if device.type != "cuda":
        return timed(fn, device, repeat)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up outside the graph, as capture requires
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(CALLS):
            fn()
    return timed(graph.replay, device, repeat) / CALLS


CALLS = 20


def matmuls(device: torch.device, sizes: dict, repeat: int) -> list[dict]:
    big = sizes["big"]
    shapes = [(big, big, k) for k in sizes["k"]] + [(n, n, n) for n in sizes["square"]]
    rows = []
    for m, n, k in shapes:
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=device, dtype=torch.bfloat16)
        seconds = timed_in_graph(a, b, device, repeat)
        rows.append({"m": m, "n": n, "k": k, "seconds": seconds,
                     "tflops": 2 * m * n * k / seconds / 1e12})  # fmt: skip
    return rows


# SDPA's own choice, then each of its fused kernels forced: which one a stack ran decides
# what its attention costs (docs/plan.md: torch 2.11's default against the FlashAttention-2
# kernels of the stacks' published runs).
BACKENDS = ("default", "flash", "efficient", "cudnn")


def _backend(name: str):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if name == "default":
        return contextlib.nullcontext()
    kind = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION}[name]  # fmt: skip
    return sdpa_kernel(kind)


def attention(device: torch.device, sizes: dict, repeat: int) -> list[dict]:
    rows = []
    for backend in sizes["backends"]:
        for d in sizes["head_dim"]:
            for s in sizes["seq"]:
                shape = {"backend": backend, "seq": s, "head_dim": d}
                try:
                    rows.append({**shape, **_attention_row(device, sizes, repeat, backend, s, d)})
                except RuntimeError as e:  # the backend takes no such call on this device
                    rows.append({**shape, "error": str(e).splitlines()[0][:200]})
    return rows


def _attention_row(device, sizes: dict, repeat: int, backend: str, s: int, d: int) -> dict:
    batch = max(1, sizes["tokens"] // s)
    heads = sizes["heads"]
    q, k, v = (torch.randn(batch, heads, s, d, device=device, dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))  # fmt: skip
    grad = torch.randn_like(q)

    def forward():
        with torch.no_grad(), _backend(backend):
            F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def both():
        with _backend(backend):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(grad)

    flops = 4 * batch * heads * s * s * d / 2  # the causal half of the pairs
    fwd = timed(forward, device, repeat)
    total = timed(both, device, repeat)
    return {"batch": batch, "heads": heads, "forward_s": fwd, "forward_backward_s": total,
            "forward_tflops": flops / fwd / 1e12,
            "forward_backward_tflops": 3.5 * flops / total / 1e12}  # fmt: skip


GPU = {"big": 8192, "k": [64, 128, 256, 512, 1024, 2048, 4096, 8192],
       "square": [256, 512, 1024, 2048, 4096, 8192],
       "head_dim": [64, 128], "seq": [512, 1024, 2048, 4096, 8192], "tokens": 16384,
       "heads": 32, "repeat": 10, "backends": BACKENDS}  # fmt: skip
DRY = {"big": 64, "k": [16, 32], "square": [32], "head_dim": [16], "seq": [32, 64],
       "tokens": 64, "heads": 2, "repeat": 2, "backends": BACKENDS}  # fmt: skip


def plan_rule(device: str, dtype: str = "bf16", engine: str = "megatron"):
    """plan's TFLOP/s for a projection of shape (M, N, K) on the catalogue entry of `device`
    under `engine`'s fitted plateau, in `dtype` (fp8: the fp8 peak times the fitted factor, at
    its own half-size), with a line naming what it is and the engine's efficiency."""
    from archspec.bench.devices import find_accelerator
    from archspec.plan.engines import ENGINES
    from archspec.plan.roofline import Roofline

    accelerator = find_accelerator(device)
    if accelerator is None:
        raise SystemExit(f"'{device}' is not in the hardware catalogue")
    eff = ENGINES[engine].efficiency(accelerator.key)
    roofline = Roofline.of(accelerator, dtype, eff)
    peak = roofline.linear_peak or roofline.peak
    half = roofline.linear_half or roofline.half

    def tflops(m: float, n: float, k: float) -> float:
        return eff.matmul(m, n, k, half) * peak / 1e12

    what = (f"plan: `{accelerator.key}` in {dtype}, {engine}'s plateau {eff.matmul_peak:g}, "
            f"GEMM half-size {half:.0f}")  # fmt: skip
    return tflops, what, eff


def against_plan(result: dict) -> str:
    """A markdown table: each measured kernel beside plan's rule for its shape."""
    plan_tflops, what, eff = plan_rule(result["device"])
    big = max(result["matmuls"], key=lambda r: r["m"] * r["n"] * r["k"])
    measured_big, plan_big = big["tflops"], plan_tflops(big["m"], big["n"], big["k"])
    lines = [f"{result['device']}, torch {result['torch']}; {what}",
             "", "| kernel | shape | measured TFLOP/s | plan TFLOP/s | measured / big GEMM "
             "| plan / big GEMM |", "|---|---|---:|---:|---:|---:|"]  # fmt: skip

    def row(kernel: str, shape: str, measured: float, plan: float) -> None:
        lines.append(f"| {kernel} | {shape} | {measured:.0f} | {plan:.0f} | "
                     f"{measured / measured_big:.2f} | {plan / plan_big:.2f} |")  # fmt: skip

    for r in result["matmuls"]:
        row(
            "matmul",
            f"{r['m']}×{r['n']}×{r['k']}",
            r["tflops"],
            plan_tflops(r["m"], r["n"], r["k"]),
        )
    for r in result["attention"]:
        if "error" in r:
            continue
        # plan costs a flash kernel as a GEMM of (queries, keys, head width), forward and
        # backward at the same efficiency (opcost.py).
        plan = plan_tflops(r["seq"], r["seq"], r["head_dim"]) * eff.attention
        backend = r.get("backend", "default")  # results of before the backends were timed
        kernel = "SDPA causal, forward + backward" + (
            "" if backend == "default" else f", {backend}"
        )
        row(kernel, f"S {r['seq']}, head width {r['head_dim']}", r["forward_backward_tflops"], plan)
    return "\n".join(lines) + "\n"


def kernel_cli(doc: str, against_plan, dry_help: str = "CPU, tiny shapes", add=None):
    """The command line the kernel scripts share: --out to measure (--dry-run: on CPU, tiny),
    or --against-plan RESULTS to print a results file beside plan's rules (no GPU needed),
    after which it returns None. `add` adds a script's own options to the parser."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--against-plan", type=Path, metavar="RESULTS",
                        help="print a results file beside plan's rule (no GPU needed)")  # fmt: skip
    parser.add_argument("--dry-run", action="store_true", help=dry_help)
    if add is not None:
        add(parser)
    args = parser.parse_args()
    if args.against_plan:
        print(against_plan(json.loads(args.against_plan.read_text())), end="")
        return None
    if args.out is None:
        parser.error("--out is required to measure")
    return args


def measurement(args, gpu: dict, dry: dict) -> tuple[dict, torch.device, dict]:
    """What a kernel script's measurement starts from: its sizes (the GPU's, or on a dry run the
    tiny ones on CPU), the device, and the results' header (device and torch); makes --out's
    folder."""
    device = torch.device("cpu" if args.dry_run else "cuda")
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    return (dry if args.dry_run else gpu), device, {"device": name, "torch": torch.__version__}


def main() -> None:
    args = kernel_cli(__doc__, against_plan)
    if args is None:
        return
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
        what = f"sdpa {row['backend']} d={row['head_dim']} S={row['seq']}"
        if "error" in row:
            print(f"{what}: {row['error']}")
            continue
        print(f"{what}: fwd {row['forward_tflops']:.0f}, fwd+bwd "
              f"{row['forward_backward_tflops']:.0f} TFLOP/s")  # fmt: skip


if __name__ == "__main__":
    main()
