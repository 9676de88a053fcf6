"""What TinyChat's 2023 INT4 GEMV costs when a row's input channels are not a multiple of
1,024: AWQ's first GEMV kernel, built from its own source, timed on a GPU.

    python benchmarks/awq_gemv_2023.py --out benchmarks/gpu-h100-awq/awq_gemv.json  # on a GPU
    python benchmarks/awq_gemv_2023.py --dry-run --out /tmp/awq_gemv.json  # CPU: layout only

The kernel (benchmarks/awq_gemv_2023/gemv_cuda.cu, mit-han-lab/llm-awq 1480555,
awq/kernels/csrc/quantization, MIT licence beside it) is what TinyChat's 2023 release ran for
decoding (`gemv_forward_cuda`, awq/quantize/qmodule.py there): a warp computes one output
channel, 1,024 input channels a pass (32 threads, 32 4-bit weights each). A row of
Falcon-7B's 4,544 input channels takes five passes, the last reading past the row's end
into the next row's weights (which the next warp loads too), its inputs masked off. plan
times a decoding GEMV by its weights' bytes alone (the `tinychat-2023` serving profile,
docs/plan.md, "Serving"); whether the fifth, partly wasted pass costs DRAM bytes, issue
slots, or nothing is what this measures:

- passes: output channels fixed (65,536: a call long enough to time, far beyond L2), input
  channels 4,096 (four whole passes), 4,544 (four and a half) and 5,120 (five whole), group
  size 64 (Falcon-7B's; 4,544 is no multiple of 128): seconds and the weights' bytes a second;
- layers: each decoding projection of Llama-2-7B (group 128) and Falcon-7B (group 64) at
  batch 1, as TinyChat 2023 runs them (config.json shapes).

Each call runs on a copy of its own among CALLS (kernel_shapes.graphed captures CALLS calls
in one CUDA graph), so no call finds its weights in L2. The one change to AWQ's source is
the stream the kernel launches on (the current stream, so that a CUDA graph can capture it);
every output is first checked against the same weights dequantized in PyTorch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from kernel_shapes import CALLS, graphed, kernel_cli

SOURCE = Path(__file__).resolve().parent / "awq_gemv_2023"
PACK = 8  # 4-bit weights a 32-bit word

# (model, projection, input channels, output channels, group size): config.json of
# meta-llama/Llama-2-7b-hf (hidden 4096, intermediate 11008) and tiiuae/falcon-7b (hidden
# 4544, 71 query heads of 64 and one key-value head: 4,672 fused QKV outputs, MLP 4 × 4544).
LAYERS = [("llama-2-7b", "q, k, v, o", 4096, 4096, 128),
          ("llama-2-7b", "gate, up", 4096, 11008, 128),
          ("llama-2-7b", "down", 11008, 4096, 128),
          ("falcon-7b", "query_key_value", 4544, 4672, 64),
          ("falcon-7b", "dense", 4544, 4544, 64),
          ("falcon-7b", "dense_h_to_4h", 4544, 18176, 64),
          ("falcon-7b", "dense_4h_to_h", 18176, 4544, 64)]  # fmt: skip
PASSES = [(ic, 65536, 64) for ic in (4096, 4544, 5120)]
GPU = {"layers": LAYERS, "passes": PASSES, "repeat": 10}
DRY = {"layers": [("tiny", "one", 128, 16, 64)], "passes": [], "repeat": 2}


def zeros_width(in_channels: int, group: int) -> int:
    """The packed zeros' words a row (calculate_zeros_width, qmodule.py at 1480555)."""
    words = -(-(in_channels // group) // PACK)
    multiplier = 2 if group == 64 else 1
    return -(-words // multiplier) * multiplier


def pack(values: torch.Tensor) -> torch.Tensor:
    """(rows, 8·n) integers in 0..15 to (rows, n) int32 words, channel 8j+i in bits 4i..4i+3
    of word j (qmodule.py's order_map 0..7)."""
    rows, width = values.shape
    nibbles = values.view(rows, width // PACK, PACK).to(torch.int64)
    words = sum(nibbles[..., i] << (4 * i) for i in range(PACK))
    return (words - (words >= 2**31).long() * 2**32).to(torch.int32)  # as int32 bits


def quantized(oc: int, ic: int, group: int, device, dequantize: bool) -> dict:
    """Random 4-bit weights in the kernel's layout, and where asked the same weights
    dequantized. The weights get one row of padding beyond the last: the kernel's last pass
    reads past a row whose input channels are no multiple of 1,024."""
    groups = ic // group
    width = zeros_width(ic, group)
    q = torch.randint(0, 16, (oc + 1, ic), device=device, dtype=torch.uint8)
    zeros = torch.randint(0, 16, (oc, width * PACK), device=device)
    scales = torch.zeros(oc, width * PACK, device=device, dtype=torch.float16)
    scales[:, :groups] = (torch.rand(oc, groups, device=device) * 0.02 + 0.001).half()
    per_channel = lambda t: t[:, :groups].repeat_interleave(group, dim=1)  # noqa: E731
    weights = {"qweight": pack(q)[:oc], "qzeros": pack(zeros), "scales": scales}
    if dequantize:
        weights["dequant"] = per_channel(scales.float()) * (
            q[:oc].float() - per_channel(zeros.float())
        )
    return weights


def weight_bytes(oc: int, ic: int, group: int) -> int:
    """The bytes a call must read: the 4-bit weights, their fp16 scales and packed zeros."""
    width = zeros_width(ic, group)
    return oc * ic // 2 + oc * width * PACK * 2 + oc * width * 4


def load_kernel():
    """AWQ's gemv_forward_cuda, built with torch's extension loader; its launch moved onto
    the current stream (the only change to the source)."""
    from torch.utils.cpp_extension import load

    build = Path(os.environ.get("AWQ_BUILD", "/tmp/awq_gemv_2023"))
    build.mkdir(parents=True, exist_ok=True)
    source = (SOURCE / "gemv_cuda.cu").read_text()
    launch = "<<<num_blocks, num_threads>>>"
    assert source.count(launch) == 2, "the two launches the stream change rewrites"
    source = source.replace(launch, "<<<num_blocks, num_threads, 0, stream>>>")
    source = source.replace(
        "    int blockDim_z = num_out_feats;",
        "    int blockDim_z = num_out_feats;\n"
        "    cudaStream_t stream = at::cuda::getCurrentCUDAStream();",
    )
    header = '#include "gemv_cuda.h"'
    source = source.replace(header, header + "\n#include <ATen/cuda/CUDAContext.h>")
    (build / "gemv_cuda.cu").write_text(source)
    (build / "gemv_cuda.h").write_text((SOURCE / "gemv_cuda.h").read_text())
    (build / "bind.cpp").write_text(
        '#include <torch/extension.h>\n#include "gemv_cuda.h"\n'
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
        '  m.def("gemv_forward_cuda", &gemv_forward_cuda, "AWQ 2023 GEMV");\n}\n'
    )
    flags = ["-O3", "-std=c++17", "-U__CUDA_NO_HALF_OPERATORS__",
             "-U__CUDA_NO_HALF_CONVERSIONS__", "--expt-relaxed-constexpr",
             "--use_fast_math"]  # setup.py's nvcc flags at 1480555, bf16 ones aside  # fmt: skip
    module = load("awq_gemv_2023", [str(build / "bind.cpp"), str(build / "gemv_cuda.cu")],
                  extra_cuda_cflags=flags, build_directory=str(build), verbose=False)  # fmt: skip
    return module.gemv_forward_cuda


def measure(kernel, name, what, ic, oc, group, device, repeat) -> dict:
    copies = CALLS if kernel else 1
    weights = [quantized(oc, ic, group, device, dequantize=i == 0) for i in range(copies)]
    x = (torch.randn(1, ic, device=device) * 0.5).half()
    reference = x.float() @ weights[0].pop("dequant").t()
    row = {"model": name, "projection": what, "in": ic, "out": oc, "group": group,
           "bytes": weight_bytes(oc, ic, group), "passes": -(-ic // 1024),
           "passes_needed": ic / 1024}  # fmt: skip
    if kernel is None:  # dry run: the layout's reference product only
        row["reference_norm"] = float(reference.norm())
        return row
    out = kernel(x, weights[0]["qweight"], weights[0]["scales"], weights[0]["qzeros"], group)
    error = (out.float() - reference).abs().max() / reference.abs().max()
    row["max_relative_error"] = float(error)
    calls = iter(range(10**9))

    def one_call():
        w = weights[next(calls) % len(weights)]
        kernel(x, w["qweight"], w["scales"], w["qzeros"], group)

    row["s"] = graphed(one_call, device, repeat)
    row["gb_per_s"] = row["bytes"] / row["s"] / 1e9
    weights.clear()  # free this shape's copies before the next
    torch.cuda.empty_cache()
    return row


def against_plan(result: dict) -> str:
    lines = [f"{result['device']}, torch {result['torch']}: AWQ's 2023 GEMV (llm-awq 1480555), "
             "batch 1, weights' bytes (4-bit weights, scales, zeros) a second", "",
             "| model | projection | in → out | group | passes (needed) | µs | GB/s "
             "| max relative error |", "|---|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in result["passes"] + result["layers"]:
        lines.append(f"| {r['model']} | {r['projection']} | {r['in']} → {r['out']} | {r['group']} "
                     f"| {r['passes']} ({r['passes_needed']:.2f}) | {r['s'] * 1e6:.1f} "
                     f"| {r['gb_per_s']:.0f} | {r['max_relative_error']:.1e} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    args = kernel_cli(__doc__, against_plan, dry_help="CPU: the layout's reference only")
    if args is None:
        return
    sizes = DRY if args.dry_run else GPU
    device = torch.device("cpu" if args.dry_run else "cuda")
    kernel = None if args.dry_run else load_kernel()
    result = {"device": torch.cuda.get_device_name() if kernel else "cpu",
              "torch": torch.__version__, "passes": [], "layers": []}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for part, shapes in (("passes", [("sweep", "passes", *s) for s in sizes["passes"]]),
                         ("layers", sizes["layers"])):  # fmt: skip
        for name, what, ic, oc, group in shapes:
            row = measure(kernel, name, what, ic, oc, group, device, sizes["repeat"])
            result[part].append(row)
            args.out.write_text(json.dumps(result, indent=1))  # nothing measured is lost
            print(json.dumps(row), flush=True)
    if kernel is not None:
        print(against_plan(result), end="")


if __name__ == "__main__":
    main()
