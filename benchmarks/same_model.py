"""The noise floor of a speedup: the generated model timed against an identical copy of itself.

    python benchmarks/same_model.py llama-2-7b --set d_model=2048 --set n_layers=4 \\
        --set n_heads=32 --set n_kv_heads=4 --set d_ff=5632 --processes 6 --out OUT

Two models with the same code and the same weights do the same work, so every difference
between their times is the machine's. Each process builds both, alternates their steps as
`archspec bench --vs-hf` alternates ours and transformers' (same step function, same warm-up,
one thread), and keeps the step times. The processes run one after another, each in a fresh
interpreter, because what holds for a whole process (where each model's weights landed in
memory, which was allocated first) no pairing of steps inside it can cancel: on the machine of
benchmarks/RESULTS.md the two copies' paired median ranged from 0.965 to 1.027 between
processes. Which of the two is built first alternates between processes (`built_first` in
each record): there, the model built first took 0.9-1.5% longer on average.

OUT/results.json has one record per process in bench's format, the copy's times under
`copy_step_times_s`; `benchmarks/paired_ratio.py OUT/results.json` reads it. A speedup over
transformers whose size is within the spread of these paired medians is not one this machine
can show.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one_process(args: argparse.Namespace) -> dict:
    import torch

    from archspec.bench import steps
    from archspec.bench.runner import _compile, _generated_model
    from archspec.bench.timing import time_step
    from archspec.cli.common import compile_spec

    torch.set_num_threads(args.threads)
    ir = compile_spec(args.spec, args.set)
    device = torch.device("cpu")
    inputs, targets = steps.make_inputs(ir, "generate", 1, args.seq, device, seed=0)
    vocab = ir.value(ir.root.vocab_size)
    sides = []
    with tempfile.TemporaryDirectory(prefix="archspec-same-") as folder:
        torch.manual_seed(0)
        first = _generated_model(ir, device, folder)
        second = _generated_model(ir, device, folder)
        second.load_state_dict(first.state_dict())
        # Which of the two is built first alternates between processes, so that the
        # order of allocation, if it matters, shows as a difference between them.
        built = {"ours": first, "copy": second}
        if args.copy_first:
            built = {"ours": second, "copy": first}
        for kind, model in built.items():
            side = steps.Side(kind, model, inputs, targets)
            steps.prepare(side, "generate", device, "fp32")
            if args.compile:
                _compile(model, "generate")
            step = steps.make_step(side, "generate", device, "fp32", vocab, args.new_tokens)
            for _ in range(args.warmup):
                step()
            sides.append(step)
        times: list[list[float]] = [[], []]
        for i in range(args.steps):
            order = [0, 1] if i % 2 == 0 else [1, 0]
            for k in order:
                times[k].append(time_step(sides[k], device))
    return {
        "name": ir.name,
        "label": args.label or ir.name,
        "sets": args.set,
        "compile": args.compile,
        "built_first": "copy" if args.copy_first else "ours",
        "threads": args.threads,
        "seq": args.seq,
        "new_tokens": args.new_tokens,
        "torch": torch.__version__,
        "step_times_s": times[0],
        "copy_step_times_s": times[1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec")
    parser.add_argument("--set", action="append", default=[], help="KEY=VALUE, repeatable")
    parser.add_argument("--label", help="the row's name in paired_ratio.py's table")
    parser.add_argument("--seq", type=int, default=128, help="prompt length")
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--steps", type=int, default=10, help="timed pairs per process")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--out", type=Path, help="folder for results.json (default: print)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--copy-first", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_process(args)))
        return
    records = []
    child = [sys.executable, __file__, "--one", *sys.argv[1:]]
    for i in range(args.processes):
        order = ["--copy-first"] if i % 2 else []
        done = subprocess.run(child + order, capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0:
            sys.exit(f"process {i + 1} failed:\n{done.stderr[-2000:]}")
        records.append(json.loads(done.stdout.splitlines()[-1]))
        print(f"process {i + 1} of {args.processes} done", file=sys.stderr)
    text = json.dumps(records, indent=1)
    if args.out is None:
        print(text)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
