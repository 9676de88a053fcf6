"""`plan --mode serve` against `bench --mode generate` on this machine's CPU.

The plan's serving model is checked here against the generated code itself, on the same
machine, for the same model, batch, prompt and output lengths:

- measured: `bench --mode generate`'s step (the generated model built, prepared and called
  as archspec.bench runs it: greedy `generate`, fp32, on one thread) with one new token (the
  prefill, which gives the first token) and with 1 + N; the decode step is the difference
  over N.
- predicted: `plan --mode serve` (predict_serving) on an accelerator entry for this CPU whose
  numbers are measured here with torch, none of them on the model: the peak bandwidth is a
  streaming read (`sum` over 256 MiB, far beyond the caches); the engine's achieved fraction
  of it is what batch-1 `F.linear` (the kernel a decode step runs: a vector times a
  transposed weight) reaches over 256 MiB of weights of the model's width; the matmul curve
  (efficiency.py: each GEMM dimension d counts d / (d + d½)) has its plateau and d½ from
  `F.linear` of 1024 rows and of 16 over a 1024² weight, in place of the GPUs' calibrated
  ones.

The machine is shared (other processes take turns on its cores), so every time is the
thread's CPU time, median of a few runs, not its wall time: the work itself, without the
time the core served others. The error is measured / predicted − 1, as in the GPU tables
(positive: predicted faster).

`python -m archspec.plan.serve_vs_bench` prints the table docs/plan.md shows.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from archspec.ir.nodes import IR
from archspec.plan.efficiency import CALIBRATED
from archspec.plan.hardware import GIB, Accelerator, System
from archspec.plan.serve import predict_serving
from archspec.plan.serve_engine import ServeEngine

PROBE_BYTES = 256 * 2**20  # far beyond a CPU's last-level cache (tens of MiB)
SHORT = 16  # rows of the matmul that measures how efficiency falls with a short dimension


def _cpu_seconds(call, runs: int) -> float:
    """The median CPU time of this thread over `runs` calls of `call`: on a shared machine a
    step's wall time also counts the time other processes held the core, its CPU time only
    its own work (torch on one thread runs an op in the calling thread)."""
    times = []
    for _ in range(runs):
        begin = time.thread_time()
        call()
        times.append(time.thread_time() - begin)
    return statistics.median(times)


@dataclass(frozen=True)
class MeasuredCpu:
    accelerator: Accelerator
    gemv_fraction: float  # batch-1 F.linear's bandwidth over the streaming read's
    matmul_half: float  # the GEMM dimension that halves this CPU's matmul efficiency

    @property
    def system(self) -> System:
        a = self.accelerator
        return System(a.key, a.name, a, 1, 0.0, 0.0, 0.0, 0.0, a.source)

    @property
    def engine(self) -> ServeEngine:
        return ServeEngine("eager-cpu", "the generated model, eager, on this CPU",
                           {"16-bit": self.gemv_fraction},
                           note="batch-1 F.linear's bandwidth, measured")  # fmt: skip


def measure_cpu(widths: tuple[int, int], runs: int = 5) -> MeasuredCpu:
    """This CPU's streaming bandwidth, its batch-1 F.linear bandwidth over weights
    (widths[0] × widths[1], as many as PROBE_BYTES hold), and its fp32 matmul's plateau and
    d½, on one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.no_grad():
            stream = torch.ones(PROBE_BYTES // 4)
            bandwidth = PROBE_BYTES / _cpu_seconds(stream.sum, runs)
            out, inner = widths
            weights = [torch.randn(out, inner) for _ in range(PROBE_BYTES // (out * inner * 4))]
            x = torch.randn(1, inner)
            gemv = sum(w.numel() * 4 for w in weights) / _cpu_seconds(
                lambda: [F.linear(x, w) for w in weights], runs
            )
            a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
            square = 2 * 1024**3 / _cpu_seconds(lambda: F.linear(a, b), runs)
            rows = a[:SHORT].clone()
            short = (
                2
                * SHORT
                * 1024**2
                / _cpu_seconds(lambda: [F.linear(rows, b) for _ in range(16)], runs)
            )
    finally:
        torch.set_num_threads(before)
    half = _half_dimension(short * 16 / square)
    peak = square / (1024 / (1024 + half)) ** 3  # the plateau the square matmul falls short of
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB
    source = (f"measured by archspec.plan.serve_vs_bench on one thread (CPU time): sum over "
              f"256 MiB {bandwidth / 1e9:.1f} GB/s, a 1024³ fp32 matmul {square / 1e9:.0f} "
              f"GFLOP/s, {SHORT} rows {short * 16 / 1e9:.0f}")  # fmt: skip
    accelerator = Accelerator("this-cpu", "this machine's CPU, one thread",
                              {"fp32": peak / 1e12}, memory, bandwidth / 1e9, source)  # fmt: skip
    return MeasuredCpu(accelerator, min(1.0, gemv / bandwidth), half)


def _half_dimension(ratio: float) -> float:
    """The d½ of efficiency.py's curve (each GEMM dimension d counts d / (d + d½)) at which a
    matmul of SHORT rows runs `ratio` times as fast as the 1024³ one (bisection)."""
    low, high = 0.0, 1e4
    for _ in range(60):
        h = (low + high) / 2
        if SHORT / (SHORT + h) * (1024 + h) / 1024 > ratio:
            low = h
        else:
            high = h
    return (low + high) / 2


def measured(ir: IR, batch: int, prompt: int, new_tokens: int, runs: int = 3
             ) -> tuple[float, float]:  # fmt: skip
    """(prefill, one decode step) of the generated model's `generate` as `bench --mode
    generate` runs it (its model, inputs and step, fp32 on the CPU, one thread): a call with
    one new token, and one with 1 + new_tokens, each timed by its CPU time."""
    import tempfile

    from archspec.bench import steps
    from archspec.bench.runner import _generated_model

    cpu = torch.device("cpu")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        inputs, _ = steps.make_inputs(ir, "generate", batch, prompt, cpu, seed=0)
        with tempfile.TemporaryDirectory(prefix="archspec-serve-") as folder:
            torch.manual_seed(0)
            side = steps.Side("ours", _generated_model(ir, cpu, folder), inputs)
            steps.prepare(side, "generate", cpu, "fp32")
            vocab = ir.value(ir.root.vocab_size)
            times = []
            for n in (1, 1 + new_tokens):
                step = steps.make_step(side, "generate", cpu, "fp32", vocab, n)
                step()  # warm-up
                times.append(_cpu_seconds(step, runs))
    finally:
        torch.set_num_threads(before)
    first, whole = times
    return first, (whole - first) / new_tokens


def predicted(ir: IR, cpu: MeasuredCpu, batch: int, prompt: int, new_tokens: int
              ) -> tuple[float, float]:  # fmt: skip
    """(prefill, the mean decode step) `plan --mode serve` predicts on the measured CPU."""
    # The measured plateau and d½ in place of the GPUs' calibrated ones.
    eff = replace(CALIBRATED, matmul_peak=1.0, matmul_half=cpu.matmul_half)
    p = predict_serving(ir, cpu.system, batch, prompt, 1 + new_tokens, dtype="fp32",
                        eff=eff, engine=cpu.engine)  # fmt: skip
    return p.prefill_s, p.decode_token_s


@dataclass(frozen=True)
class Comparison:
    label: str
    measured: tuple[float, float]
    predicted: tuple[float, float]

    @property
    def errors(self) -> tuple[float, float]:
        """measured / predicted − 1, prefill and decode (positive: predicted faster)."""
        return tuple(m / p - 1 for m, p in zip(self.measured, self.predicted, strict=True))


def compare(ir: IR, label: str, batch: int, prompt: int, new_tokens: int, runs: int = 3
            ) -> tuple[MeasuredCpu, Comparison]:  # fmt: skip
    d = ir.value(ir.root.d_model)
    cpu = measure_cpu((d, d))
    got = measured(ir, batch, prompt, new_tokens, runs)
    return cpu, Comparison(label, got, predicted(ir, cpu, batch, prompt, new_tokens))


# The models docs/plan.md shows: Llama-2's layer at smaller widths (weights far beyond the
# caches, so that a decode step reads them from memory), and a built-in as it is.
CASES = (
    ("llama-2-7b", ["n_layers=4", "d_model=1024", "n_heads=8", "d_ff=2816"], 1, 128, 16),
    ("llama-2-7b", ["n_layers=4", "d_model=1024", "n_heads=8", "d_ff=2816"], 8, 128, 16),
    ("qwen3-0.6b", [], 1, 64, 8),
)


def main(argv: list[str]) -> None:
    from archspec.cli.common import compile_spec

    lines = ["| model | batch | prompt → new | prefill measured | predicted | error "
             "| decode step measured | predicted | error |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    cpus = []
    for name, overrides, batch, prompt, new in CASES:
        label = name + "".join(f" --set {o}" for o in overrides)
        cpu, c = compare(compile_spec(name, overrides), label, batch, prompt, new)
        cpus.append(cpu)
        (mp, md), (pp, pd), (ep, ed) = c.measured, c.predicted, c.errors
        lines.append(f"| {label} | {batch} | {prompt} → {new} | {mp * 1e3:.0f} ms "
                     f"| {pp * 1e3:.0f} ms | {ep:+.0%} | {md * 1e3:.1f} ms | {pd * 1e3:.1f} ms "
                     f"| {ed:+.0%} |")  # fmt: skip
    print("\n".join(lines))
    for cpu in cpus:
        print(
            f"\n{cpu.accelerator.source}; batch-1 F.linear {cpu.gemv_fraction:.0%} of the "
            f"sum's; d½ {cpu.matmul_half:.1f}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
