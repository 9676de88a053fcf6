"""One token through a projection: nn.Linear's weight layout against GPT-2's Conv1D layout.

    python benchmarks/linear_layout.py            # gpt2-xl's block projections, 4 blocks
    python benchmarks/linear_layout.py --width 2048 --hidden 5632 --rows 128
    python benchmarks/linear_layout.py --freezing

nn.Linear stores its weight (out, in) and computes x @ W.T; transformers' GPT-2 keeps
OpenAI's Conv1D, weight (in, out), and computes addmm(b, x, W). Same FLOPs, same bytes, but
the BLAS may read the two layouts at different speeds, most visibly for a single row (a
decode step). The two are timed alternately, one thread, over the projections of `--blocks`
blocks (distinct weights, so that they come from memory, not cache), and the ratio printed.

With --freezing both are compiled by inductor with `freezing` on (inference: the weights
become constants, prepacked for the CPU's GEMM), and the script also prints how much the
process's resident memory grew over the compilation: the packed copies.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from torch import Tensor, nn


class Linears(nn.Module):
    """The projections as nn.Linear: weight (out, in)."""

    def __init__(self, shapes: list[tuple[int, int]]) -> None:
        super().__init__()
        self.projections = nn.ModuleList(nn.Linear(i, o) for i, o in shapes)

    def forward(self, inputs: list[Tensor]) -> list[Tensor]:
        return [p(x) for p, x in zip(self.projections, inputs, strict=True)]


class Conv1Ds(nn.Module):
    """The same projections as GPT-2's Conv1D: weight (in, out), the same values."""

    def __init__(self, linears: Linears) -> None:
        super().__init__()
        self.weights = nn.ParameterList(p.weight.t().contiguous() for p in linears.projections)
        self.biases = nn.ParameterList(p.bias.clone() for p in linears.projections)

    def forward(self, inputs: list[Tensor]) -> list[Tensor]:
        pairs = zip(self.weights, self.biases, strict=True)
        return [torch.addmm(b, x, w) for (w, b), x in zip(pairs, inputs, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=1600, help="d_model (gpt2-xl: 1600)")
    parser.add_argument("--hidden", type=int, default=6400, help="d_ff (gpt2-xl: 6400)")
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--rows", type=int, default=1, help="tokens per product (1: decode)")
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--freezing", action="store_true", help="compile both, frozen")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    d, f = args.width, args.hidden
    # A GPT-2 block: the fused q/k/v projection, the output projection, the MLP's two.
    shapes = [(d, 3 * d), (d, d), (d, f), (f, d)] * args.blocks  # (in, out)
    linear = Linears(shapes).eval()
    models: dict[str, nn.Module] = {"linear": linear, "conv1d": Conv1Ds(linear).eval()}
    inputs = [torch.randn(args.rows, i) for i, _ in shapes]
    if args.freezing:
        from torch._inductor import config as inductor

        inductor.freezing = True
        before = _resident()
        models = {name: torch.compile(m, dynamic=False) for name, m in models.items()}
        with torch.no_grad():
            for model in models.values():
                model(inputs)  # compiles
        grown = _resident() - before
        weights = sum(p.numel() * p.element_size() for p in linear.parameters())
        print(f"compiling both, frozen, grew the resident memory by {grown / 2**20:.0f} MiB; "
              f"each layout's weights are {weights / 2**20:.0f} MiB")  # fmt: skip

    times: dict[str, list[float]] = {name: [] for name in models}
    order = list(models.items())
    with torch.no_grad():
        for _, model in order:
            model(inputs)  # warm-up
        for i in range(args.repeats):
            for name, model in order if i % 2 == 0 else order[::-1]:
                began = time.perf_counter()
                model(inputs)
                times[name].append(time.perf_counter() - began)
    lin, conv = (statistics.median(times[k]) for k in ("linear", "conv1d"))
    frozen = ", compiled with freezing" if args.freezing else ""
    print(f"{len(shapes)} projections of {args.rows} row(s){frozen}, 1 thread, torch "
          f"{torch.__version__}")  # fmt: skip
    print(f"nn.Linear (out, in): {lin * 1e3:.2f} ms   Conv1D (in, out): {conv * 1e3:.2f} ms")
    print(f"Conv1D layout is {lin / conv:.3f}x the speed of nn.Linear's (median of {args.repeats})")


def _resident() -> int:
    """Resident set size of this process in bytes (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


if __name__ == "__main__":
    main()
