"""The standard benchmark set: five architectures in forward, train and generate modes,
eager and compiled, each against the transformers implementation (`archspec bench --vs-hf`).

    python benchmarks/run_standard.py                      # on the GPU, full sizes
    python benchmarks/run_standard.py --profile cpu-small  # on CPU, at small sizes
    python benchmarks/run_standard.py --only gpt2-xl,llama-1b --modes train --compile on

Each run is its own `archspec bench ... --json` process, so one run's compiled graphs,
allocator pools or out-of-memory error cannot touch the next. A run that does not fit with
both models in memory is retried with the generated model alone (no speedup, but its MFU and
memory). The script writes to --out: results.json (every run's JSON), table.md (the markdown
table for benchmarks/RESULTS.md) and chart.png (speedup over transformers, and MFU or
measured against predicted memory; needs matplotlib, `pip install 'archspec[plot]'`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The llama-style ~1B is TinyLlama-1.1B's shape (22 layers of d_model 2048, GQA with 4 KV
# heads); the small MoE is Mixtral's layout at 1/4 of its width and depth.
LLAMA_1B = ["d_model=2048", "n_layers=22", "n_heads=32", "n_kv_heads=4", "d_ff=5632",
            "max_seq_len=2048"]  # fmt: skip
MOE_SMALL = ["d_model=1024", "n_layers=8", "n_heads=16", "n_kv_heads=4", "d_ff=3584",
             "max_seq_len=2048"]  # fmt: skip


@dataclass(frozen=True)
class Model:
    label: str
    spec: str
    sets: list[str] = field(default_factory=list)


MODELS = [
    Model("gpt2", "gpt2"),
    Model("gpt2-xl", "gpt2-xl", ["max_seq_len=2048"]),  # the target is at S=2048
    Model("llama-1b", "llama-2-7b", LLAMA_1B),
    Model("moe-small", "mixtral-8x7b", MOE_SMALL),
    Model("t5-base", "t5-base"),
]


@dataclass(frozen=True)
class Shape:
    batch: int
    seq: int
    new_tokens: int = 0  # generate mode


# Per profile: the devices' options, and (batch, seq) per model and mode. GPU sizes fit an
# 80 GB H100 with both models resident (gpt2-xl training at B=2, S=2048: about 33 GB each with
# AdamW); the MFU targets are llama-1b and gpt2-xl training at S=2048. CPU sizes keep one
# step within seconds on a core, with the two ~1B models and the MoE cut to a few layers
# (their per-layer shapes unchanged).
PROFILES: dict[str, dict] = {
    "gpu": {
        "options": ["--device", "cuda", "--dtype", "bf16", "--steps", "20", "--warmup", "5"],
        "cut": {},
        "shapes": {
            "forward": {"gpt2": Shape(16, 1024), "t5-base": Shape(16, 512), "*": Shape(8, 2048)},
            "train": {"gpt2": Shape(16, 1024), "t5-base": Shape(16, 512), "*": Shape(2, 2048)},
            "generate": {"*": Shape(8, 512, 128)},
        },
    },
    "cpu-small": {
        "options": ["--device", "cpu", "--dtype", "fp32", "--threads", "1", "--steps", "7",
                    "--warmup", "2"],
        "cut": {"gpt2-xl": ["n_layers=4"], "llama-1b": ["n_layers=4"], "moe-small": ["n_layers=2"]},
        "shapes": {
            "forward": {"*": Shape(1, 128)},
            "train": {"*": Shape(1, 128)},
            "generate": {"*": Shape(1, 128, 16)},
        },
    },
}  # fmt: skip


def shape_for(profile: dict, mode: str, label: str) -> Shape:
    table = profile["shapes"][mode]
    return table.get(label, table["*"])


def command(model: Model, profile: dict, mode: str, compiled: bool, vs_hf: bool) -> list[str]:
    shape = shape_for(profile, mode, model.label)
    sets = model.sets + profile["cut"].get(model.label, [])
    args = [sys.executable, "-m", "archspec", "bench", model.spec, "--json", "--mode", mode]
    args += ["--batch", str(shape.batch), "--seq", str(shape.seq), *profile["options"]]
    if profile.get("steps"):  # --steps: later options win
        args += ["--steps", str(profile["steps"])]
    if shape.new_tokens:
        args += ["--new-tokens", str(shape.new_tokens)]
    for s in sets:
        args += ["--set", s]
    if compiled:
        args.append("--compile")
    if vs_hf:
        args.append("--vs-hf")
        if profile.get("hf_first"):
            args.append("--hf-first")
    return args


def run_one(model: Model, profile: dict, mode: str, compiled: bool) -> dict:
    for vs_hf in (True, False):
        args = command(model, profile, mode, compiled, vs_hf)
        began, load_before = time.time(), _load()
        done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
        seconds = time.time() - began
        if done.returncode == 0:
            result = json.loads(done.stdout)
            result |= {"label": model.label, "sets": model.sets + profile["cut"].get(
                model.label, []), "wall_s": seconds,
                # The machine's 1-minute load average before and after the run: a shared
                # machine's other work slows either side's steps.
                "load_average": [load_before, _load()]}  # fmt: skip
            return result
        out_of_memory = "out of memory" in done.stderr.lower()
        print(f"  failed ({'out of memory' if out_of_memory else done.returncode}):",
              done.stderr.strip().splitlines()[-1:], file=sys.stderr)  # fmt: skip
        if not (vs_hf and out_of_memory):
            break
        print("  retrying without --vs-hf", file=sys.stderr)
    return {"label": model.label, "mode": mode, "compile": compiled, "error": done.stderr[-2000:]}


def _load() -> float | None:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def _bytes(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


def table(results: list[dict]) -> str:
    head = ("| model | mode | B × S | compile | step (median) | tokens/s | achieved TFLOP/s | MFU "
            "| peak mem | predicted | meas./pred. | transformers tokens/s | speedup |")  # fmt: skip
    rows = [head, "|" + " --- |" * 2 + " ---: |" * 11]
    for r in results:
        if "error" in r:
            rows.append(f"| {r['label']} | {r['mode']} | | {'yes' if r['compile'] else 'no'} "
                        "| failed | | | | | | | | |")  # fmt: skip
            continue
        shape = f"{r['batch']} × {r['seq']}"
        if r["new_tokens"]:
            shape += f" + {r['new_tokens']}"
        mfu = f"{r['mfu']:.1%}" if r["mfu"] is not None else "-"
        ratio = r["peak_memory_bytes"] / r["predicted_memory_bytes"]
        hf = f"{r['hf_tokens_per_s']:,.1f}" if "speedup" in r else "(did not fit)"
        speedup = f"**{r['speedup']:.2f}×**" if "speedup" in r else "-"
        rows.append(
            f"| {r['label']} | {r['mode']} | {shape} | {'yes' if r['compile'] else 'no'} "
            f"| {r['step_time_s'] * 1e3:,.1f} ms | {r['tokens_per_s']:,.1f} "
            f"| {r['flops_per_s'] / 1e12:.3f} | {mfu} | {_bytes(r['peak_memory_bytes'])} "
            f"| {_bytes(r['predicted_memory_bytes'])} | {ratio:.2f} | {hf} | {speedup} |"
        )
    return "\n".join(rows) + "\n"


def chart(results: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in results if "error" not in r][::-1]  # top to bottom in table order
    labels = [f"{r['label']} {r['mode']}{' (compiled)' if r['compile'] else ''}" for r in ok]
    rows = range(len(ok))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 1.5 + 0.26 * len(ok)), sharey=True)
    speedups = [r.get("speedup", 0.0) for r in ok]
    colors = ["tab:green" if s >= 1 else "tab:red" for s in speedups]
    left.barh(rows, speedups, color=colors)
    left.axvline(1.0, color="black", linestyle="--", linewidth=1)
    left.set_xlabel("tokens/s ÷ transformers' tokens/s (target ≥ 1)")
    left.set_title("speedup over transformers")
    for y, value in zip(rows, speedups, strict=True):
        left.text(value, y, f" {value:.2f}×", va="center", fontsize=7)
    if any(r["mfu"] is not None for r in ok):
        values = [100 * (r["mfu"] or 0) for r in ok]
        right.barh(rows, values, color="tab:blue")
        right.axvline(50, color="black", linestyle="--", linewidth=1)
        right.set_xlabel("MFU, % (target ≥ 50 for train at S=2048)")
        right.set_title("model FLOPs utilisation")
    else:
        values = [r["peak_memory_bytes"] / r["predicted_memory_bytes"] for r in ok]
        right.barh(rows, values, color="tab:blue")
        right.axvline(1.0, color="black", linestyle="--", linewidth=1)
        right.set_xlabel("measured ÷ predicted peak memory")
        right.set_title("peak memory against the analysis")
    left.set_yticks(rows, labels, fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default=None,
                        help="gpu (default when CUDA is available) or cpu-small")  # fmt: skip
    parser.add_argument("--only", help="comma-separated model labels (default: all)")
    parser.add_argument("--modes", default="forward,train,generate")
    parser.add_argument("--compile", choices=("off", "on", "both"), default="both")
    parser.add_argument("--steps", type=int, default=None,
                        help="timed steps per run (default: the profile's)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=None, help="default: benchmarks/<profile>")
    parser.add_argument("--hf-first", action="store_true",
                        help="CPU: build transformers' model before ours in every run "
                        "(bench --hf-first); alternate it between runs")  # fmt: skip
    parser.add_argument("--render", type=Path, nargs="+", metavar="RESULTS_JSON",
                        help="run nothing: write the table and chart of these results.json "
                        "files, merged, to --out")  # fmt: skip
    args = parser.parse_args()
    if args.render:
        results = [r for path in args.render for r in json.loads(path.read_text())]
        write(results, args.out or args.render[0].parent, "merged")
        return

    profile_name = args.profile
    if profile_name is None:
        import torch

        profile_name = "gpu" if torch.cuda.is_available() else "cpu-small"
    profile = PROFILES[profile_name] | {"steps": args.steps, "hf_first": args.hf_first}
    out = args.out or ROOT / "benchmarks" / profile_name
    out.mkdir(parents=True, exist_ok=True)
    wanted = set(args.only.split(",")) if args.only else None
    compiles = {"off": [False], "on": [True], "both": [False, True]}[args.compile]
    results = []
    for model in MODELS:
        if wanted and model.label not in wanted:
            continue
        for mode in args.modes.split(","):
            for compiled in compiles:
                print(f"{model.label} {mode} {'compiled' if compiled else 'eager'}",
                      file=sys.stderr, flush=True)  # fmt: skip
                result = run_one(model, profile, mode, compiled)
                results.append(result)
                if "speedup" in result:
                    print(f"  {result['tokens_per_s']:,.1f} tokens/s, "
                          f"speedup {result['speedup']:.2f}×", file=sys.stderr)  # fmt: skip
                (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    write(results, out, profile_name)


def write(results: list[dict], out: Path, profile_name: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    first = next((r for r in results if "error" not in r), None)
    where = f"{first['device_name']}, torch {first['torch']}" if first else profile_name
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    header = f"<!-- {profile_name}: {where}; load average at the end {load} -->\n"
    (out / "table.md").write_text(header + table(results))
    try:
        chart(results, out / "chart.png", f"archspec bench, standard set ({where})")
    except ImportError:
        print("no chart: matplotlib is missing (pip install 'archspec[plot]')", file=sys.stderr)
    print(table(results))


if __name__ == "__main__":
    main()
