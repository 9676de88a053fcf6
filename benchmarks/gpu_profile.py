"""Where the time of a GPU step goes: the profile behind gpu_check's unexplained figures.

    python benchmarks/gpu_profile.py dispatch --out benchmarks/gpu-h100/profile   # on a GPU
    python benchmarks/gpu_profile.py decode   --out benchmarks/gpu-h100/profile
    python benchmarks/gpu_profile.py train    --out benchmarks/gpu-h100/profile
    python benchmarks/gpu_profile.py decode --dry-run --out /tmp/profile        # CPU, tiny

gpu_check measured eager decoding of the generated code host-bound on an H100 (about 540 µs a
layer, where the GPU's kernels take far less) and compiled training at 34-40% MFU. This
script takes torch.profiler's record of those steps and writes plain figures:

- dispatch: the host's cost of one small eager op (torch.add on a CUDA tensor, launched and
  not waited for) on this machine's CPU: what each op of an eager step costs the host;
- decode: eager generation with the generated llama-7b and llama-1b (B=1): per decoded token
  and per decoder layer, the aten ops called, the kernels launched, the host time, the GPU's
  kernel time, and the aten ops that take the most host time;
- train: one compiled bf16 training step of the generated llama-1b (B=2, S=2048, AdamW):
  GPU kernel time by kind (matmuls, attention, Triton's fused kernels, the optimizer, the
  rest), the time the GPU was idle, and the matmuls' own throughput against the catalogue's
  dense bf16 peak.

Each part writes <out>/<part>.json; nothing is fitted here.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_standard import LLAMA_1B  # noqa: E402  (the project's ~1B llama shape)

TINY = ["n_layers=2", "d_model=64", "n_heads=4", "n_kv_heads=2", "d_ff=128", "vocab_size=256",
        "max_seq_len=64"]  # fmt: skip

# Kernel names, by kind (the first that matches): the attention kernels SDPA picks (cuDNN's
# names also carry "sm90_"), cuBLAS and CUTLASS matmuls (nvjet is cuBLAS's Hopper family),
# the fused AdamW, Triton's kernels (inductor's fused elementwise and reductions).
KINDS = (
    ("attention", ("flash", "fmha", "attention", "sdpa")),
    ("matmul", ("gemm", "nvjet", "cutlass", "xmma", "cublas", "sm90_", "sm80_")),
    ("optimizer", ("adam", "multi_tensor", "foreach")),
    ("triton", ("triton",)),
)


# The runtime calls that launch a kernel (one per kernel an eager op runs).
LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx")


def kind_of(kernel: str) -> str:
    name = kernel.lower()
    for kind, marks in KINDS:
        if any(m in name for m in marks):
            return kind
    return "other"


def _model(spec: str, sets: list[str], device: torch.device, folder: str):
    """The spec's IR and its generated model on `device`, as bench builds it."""
    from archspec.bench.runner import _generated_model
    from archspec.cli.common import compile_spec

    ir = compile_spec(spec, sets)
    return ir, _generated_model(ir, device, folder)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _activities(device: torch.device):
    from torch.profiler import ProfilerActivity

    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])


def _kernels(prof) -> list:
    """The GPU kernels of a profile (memcpy and memset included, as the GPU runs them), not
    the GPU-side spans of record_function labels such as "Optimizer.step#AdamW.step", which
    would count the kernels under them twice. A span is told by what it is: a GPU event that
    holds the next one to start within its own interval (kernels on one stream never
    overlap). Names cannot tell them apart: inductor labels each Triton launch on the host
    with its kernel's name."""
    from torch.autograd import DeviceType

    events = sorted(
        (e for e in prof.events() if e.device_type == DeviceType.CUDA),
        key=lambda e: (e.time_range.start, -e.time_range.end),
    )
    if not events:  # a CPU run
        return []
    return [
        e
        for e, after in zip(events, [*events[1:], None], strict=True)
        if after is None or not (after.time_range.end <= e.time_range.end)
    ]


def dispatch(device: torch.device, dry: bool) -> dict:
    """Host microseconds of one eager op, the GPU not waited for between ops."""
    x = torch.ones(16, device=device)
    n = 200 if dry else 20_000
    rows = {}
    for name, op in (("add", lambda: torch.add(x, x)), ("mul_", lambda: x.mul_(1.0)),
                     ("linear 1x4096", None)):  # fmt: skip
        if op is None:
            w = torch.ones(4096, 4096, device=device, dtype=torch.bfloat16)
            a = torch.ones(1, 4096, device=device, dtype=torch.bfloat16)
            op = lambda w=w, a=a: torch.nn.functional.linear(a, w)  # noqa: E731
        for _ in range(100):
            op()
        _sync(device)
        start = time.perf_counter()
        for _ in range(n):
            op()
        host = time.perf_counter() - start
        _sync(device)
        total = time.perf_counter() - start
        rows[name] = {"host_us_per_op": host / n * 1e6, "wall_us_per_op": total / n * 1e6}
    return {"ops": rows, "cpu": _cpu_name()}


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def decode(device: torch.device, dry: bool, compiled: bool = False) -> dict:
    """B=1 generation of each model, profiled over `new` tokens after a warm-up; eager, or
    (compiled) llama-1b through torch.compile without CUDA graphs."""
    from torch.profiler import profile

    from archspec.backends.count.layout import layer_count

    models = {"llama-7b": ("llama-2-7b", TINY if dry else []),
              "llama-1b": ("llama-2-7b", TINY if dry else LLAMA_1B)}  # fmt: skip
    if compiled:
        del models["llama-7b"]
    seq, new = (16, 4) if dry else (128, 32)
    out = {}
    for label, (spec, sets) in models.items():
        with tempfile.TemporaryDirectory(prefix="gpu-profile-") as folder:
            ir, model = _model(spec, sets, device, folder)
            model.eval().to(torch.bfloat16)
            if compiled:
                # As bench compiles for generation: the stacks, which `generate` calls itself
                # (compiling the model compiles only its forward, which generate never calls).
                from archspec.bench.runner import _compile

                _compile(model, "generate", backend="eager" if dry else "inductor")
            layers = sum(layer_count(stack, ir) for stack in ir.root.stacks)
            ids = torch.randint(0, ir.value(ir.root.vocab_size), (1, seq), device=device)
            with torch.inference_mode():
                # Warm-up: allocator, cuBLAS handles, SDPA's choice, and compiled graphs for
                # both lengths (the cache's size, fixed under dynamic=False, is the total).
                for _ in range(2):
                    model.generate(ids, 1)
                    model.generate(ids, new)
                _sync(device)
                # The prefill alone, to take it out of the decode figures.
                start = time.perf_counter()
                model.generate(ids, 1)
                _sync(device)
                prefill = time.perf_counter() - start
                start = time.perf_counter()
                model.generate(ids, new)
                _sync(device)
                whole = time.perf_counter() - start
                with profile(activities=_activities(device)) as prof:
                    model.generate(ids, new)
                    _sync(device)
            out[label] = _decode_figures(prof, device, prefill, whole, new, layers)
            del model
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return out


def _decode_figures(prof, device, prefill: float, whole: float, new: int, layers: int) -> dict:
    events = prof.key_averages()
    aten = [e for e in events if e.key.startswith("aten::")]
    launches = sum(e.count for e in events if e.key in LAUNCHES)
    kernels = _kernels(prof)
    kernel_s = sum(k.time_range.elapsed_us() for k in kernels) / 1e6 if kernels else 0.0
    # Top-level aten ops only (those an op of the model called, not one inside another),
    # so an op is counted once however it decomposes.
    top = Counter()
    for e in prof.events():
        if e.name.startswith("aten::") and (
            e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")
        ):
            top[e.name] += 1
    tokens_decoded = new - 1  # the first new token comes from the prefill
    step_s = (whole - prefill) / tokens_decoded
    n_layers = layers
    per_token = {
        "step_s": step_s,
        "top_level_aten_ops": sum(top.values()) / new,
        "kernel_launches": launches / new,
        "gpu_kernel_s": kernel_s / new,
    }
    return {
        "layers": n_layers,
        "prefill_s": prefill,
        "generate_s": whole,
        "new_tokens": new,
        "per_token": per_token,
        "per_layer": {k: v / n_layers for k, v in per_token.items()},
        "top_ops_by_host_time": [
            {
                "op": e.key,
                "calls_per_token": e.count / new,
                "self_host_us_per_call": e.self_cpu_time_total / max(e.count, 1),
            }
            for e in sorted(aten, key=lambda e: -e.self_cpu_time_total)[:15]
        ],
        "top_level_ops_per_token": {k: v / new for k, v in top.most_common(20)},
    }


def train(device: torch.device, dry: bool) -> dict:
    """One compiled bf16 training step of llama-1b, profiled after warm-up steps."""
    from torch.profiler import profile

    from archspec.backends.count.flops_report import train_flops_per_token
    from archspec.bench import steps

    sets = TINY if dry else LLAMA_1B
    batch, seq = (1, 32) if dry else (2, 2048)
    with tempfile.TemporaryDirectory(prefix="gpu-profile-") as folder:
        ir, model = _model("llama-2-7b", sets, device, folder)
        torch.manual_seed(0)
        model.compile(backend="eager" if dry else "inductor")
        inputs, targets = steps.make_inputs(ir, "train", batch, seq, device, 0)
        side = steps.Side("ours", model, inputs, targets, optimizer=steps.adamw(model))
        step = steps.make_step(side, "train", device, "bf16", ir.value(ir.root.vocab_size), 0)
        for _ in range(3):
            step()
        _sync(device)
        times = []
        for _ in range(3):
            start = time.perf_counter()
            step()
            _sync(device)
            times.append(time.perf_counter() - start)
        with profile(activities=_activities(device)) as prof:
            step()
            _sync(device)
    kernels = _kernels(prof)
    by_kind: Counter = Counter()
    by_name: Counter = Counter()
    for k in kernels:
        by_kind[kind_of(k.name)] += k.time_range.elapsed_us() / 1e6
        by_name[k.name] += k.time_range.elapsed_us() / 1e6
    busy = _busy_seconds(kernels)
    step_s = sorted(times)[1]
    # The step's FLOPs as count executes them (matmuls and attention, forward and backward).
    flops = train_flops_per_token(ir, seq) * batch * seq
    result = {
        "batch": batch, "seq": seq, "step_s": step_s, "gpu_busy_s": busy,
        "gpu_idle_fraction": max(0.0, 1 - busy / step_s),
        "kernel_s_by_kind": dict(by_kind.most_common()),
        "top_kernels": [{"kernel": n[:160], "s": s, "kind": kind_of(n)}
                        for n, s in by_name.most_common(20)],
        "train_flops": flops, "tflops_per_s": flops / step_s / 1e12,
    }  # fmt: skip
    if by_kind["matmul"] + by_kind["attention"]:
        # What the matmul and attention kernels reach while they run.
        result["tflops_per_s_in_matmul_and_attention"] = (
            flops / (by_kind["matmul"] + by_kind["attention"]) / 1e12
        )
    return result


def _busy_seconds(kernels) -> float:
    """Seconds at least one kernel ran: the union of the kernels' intervals."""
    spans = sorted((k.time_range.start, k.time_range.end) for k in kernels)
    busy, end = 0.0, None
    for a, b in spans:
        if end is None or a > end:
            busy += b - a
            end = b
        elif b > end:
            busy += b - end
            end = b
    return busy / 1e6


PARTS = {
    "dispatch": dispatch,
    "decode": decode,
    "train": train,
    "decode-compiled": lambda device, dry: decode(device, dry, compiled=True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=sorted(PARTS))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "gpu-profile")
    parser.add_argument("--dry-run", action="store_true", help="on CPU, tiny sizes")
    parser.add_argument("--flash-only", action="store_true",
                        help="SDPA held to its FlashAttention-2 kernel (cuDNN's and the "
                        "memory-efficient one turned off); writes <part>-flash.json")  # fmt: skip
    args = parser.parse_args()
    if args.flash_only:
        # Graphs compiled and cached on disk by an earlier run would still call cuDNN's
        # kernel (the flags are not in the cache's key: seen on an H100).
        torch.compiler.config.force_disable_caches = True
        torch.backends.cuda.enable_cudnn_sdp(False)
        torch.backends.cuda.enable_mem_efficient_sdp(False)
    device = torch.device("cpu" if args.dry_run else "cuda")
    args.out.mkdir(parents=True, exist_ok=True)
    name = "cpu" if args.dry_run else torch.cuda.get_device_name()
    figures = PARTS[args.part](device, args.dry_run)
    sdpa = "flash only" if args.flash_only else "as torch chooses"
    result = {"part": args.part, "device": name, "torch": torch.__version__, "sdpa": sdpa,
              **figures}  # fmt: skip
    name = f"{args.part}-flash" if args.flash_only else args.part
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1)[:6000])


if __name__ == "__main__":
    main()
