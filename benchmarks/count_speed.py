"""How fast is `archspec count`? Cold processes, both sides timed in one run, ratios printed.

1. `archspec count llama-2-70b --json` against the usual alternative: building the
   transformers LlamaForCausalLM on the meta device and summing `p.numel()` (imports included).
2. `archspec count gpt2 --set n_layers=10000` against `archspec count gpt2` (12 layers): a
   repeated stack is one IR node with a count, so depth should cost nothing.

Run: python benchmarks/count_speed.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HF_SIDE = """
import torch
from transformers import LlamaConfig, LlamaForCausalLM
config = LlamaConfig(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                     num_attention_heads=64, num_key_value_heads=8, vocab_size=32000,
                     max_position_embeddings=4096, tie_word_embeddings=False)
with torch.device("meta"):
    model = LlamaForCausalLM(config)
print(sum(p.numel() for p in model.parameters()))
"""

ARCHSPEC = [sys.executable, "-m", "archspec", "count"]


# Time processes as an installed archspec runs: with bytecode caches. PYTHONDONTWRITEBYTECODE (set
# in some containers) would make every process compile every module again, timing the compiler.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

# What every `archspec count` must import before it does any work: the interpreter, then the
# libraries it is built on (the command line, the tables, the YAML reader).
FLOOR = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import typer, rich.table, yaml": [sys.executable, "-c", "import typer, rich.table, yaml"],
}


def timed(cmd: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=ENV).stdout
    return time.perf_counter() - start, out


def median_time(cmd: list[str], runs: int) -> tuple[float, str]:
    timed(cmd)  # warm-up: file-system caches, .pyc files
    results = [timed(cmd) for _ in range(runs)]
    return statistics.median(t for t, _ in results), results[0][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    ours, ours_out = median_time([*ARCHSPEC, "llama-2-70b", "--json"], args.runs)
    hf, hf_out = median_time([sys.executable, "-c", HF_SIDE], args.runs)
    import json

    ours_total = json.loads(ours_out)["params"]["total"]
    assert ours_total == int(hf_out), (ours_total, hf_out)
    print(f"llama-2-70b, {ours_total:,} parameters on both sides (median of {args.runs} cold runs)")
    print(f"  archspec count:             {ours:7.3f} s")
    print(f"  transformers on meta + sum: {hf:7.3f} s")
    print(f"  speed-up:                   {hf / ours:7.1f}x")

    shallow, _ = median_time([*ARCHSPEC, "gpt2", "--json"], args.runs)
    deep, _ = median_time([*ARCHSPEC, "gpt2", "--set", "n_layers=10000", "--json"], args.runs)
    print("gpt2 at 12 layers against 10,000 layers")
    print(f"  12 layers:     {shallow:7.3f} s")
    print(f"  10000 layers:  {deep:7.3f} s")
    print(f"  ratio deep/12: {deep / shallow:7.2f}")

    print("start-up floor: what any command built on these libraries pays")
    for label, cmd in FLOOR.items():
        floor, _ = median_time(cmd, args.runs)
        print(f"  {label:31s} {floor:7.3f} s")


if __name__ == "__main__":
    main()
