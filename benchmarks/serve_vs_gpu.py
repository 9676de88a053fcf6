"""`plan --mode serve` against the generation gpu_check.py measured on a GPU.

    python benchmarks/serve_vs_gpu.py benchmarks/gpu-h100      # writes serve_vs_plan.md there

gpu_check.py's decode runs time the generated model's `generate` (bf16, one GPU, the static
KV cache) eager, compiled and compiled with CUDA graphs, and its generate runs time
transformers' `generate` beside it on the same weights. Each measured run is one whole
generate call: the prefill of the prompt and the decode steps of the new tokens. This script
asks `archspec plan --mode serve` (the command line, as a user would) for the same model,
batch, prompt and new tokens on the device's catalogue entry, under each engine profile that
runs decoding the way the measured code did:

- gpt-fast: compiled PyTorch with a static cache under CUDA graphs, which is what the
  generated code runs with `--compile` and mode="reduce-overhead";
- transformers: eager PyTorch, Python issuing every kernel, which is what the generated code
  runs without `--compile`, and what transformers' own generate runs.

Compiled without CUDA graphs has no profile: no published figure ran so. Nothing here is
fitted to these measurements; they check profiles calibrated on published figures (docs/
plan.md, "Serving"). The predictions need no GPU, so this runs anywhere on a results.json.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# The generated code's way of running against the profile that runs decoding so.
PROFILE = {"cuda graphs": "gpt-fast", "eager": "transformers"}


def ways(run: dict) -> list[tuple[str, float]]:
    """(how it ran, measured seconds of one generate call) for the run's measured sides: the
    generated code, and transformers where the run timed it too."""
    if not run["compile"]:
        ours = "eager"
    elif run.get("compile_mode") == "reduce-overhead":
        ours = "cuda graphs"
    else:
        ours = "compiled"
    measured = [(f"generated, {ours}", run["step_time_s"])]
    if "hf_step_time_s" in run:
        hf = "eager" if not run["compile"] else "compiled"
        measured.append((f"transformers, {hf}", run["hf_step_time_s"]))
    return measured


def predict(run: dict, engine: str, gpu: str) -> float:
    """Seconds of one generate call, prefill and decode, as `archspec plan --mode serve`
    predicts them."""
    sets = [a for s in run.get("overrides", []) for a in ("--set", s)]
    args = ["plan", run["name"], *sets, "--mode", "serve", "--gpu", gpu, "--gpus", "1",
            "--batch", str(run["batch"]), "--prompt", str(run["seq"]),
            "--new-tokens", str(run["new_tokens"]), "--engine", engine, "--json"]  # fmt: skip
    out = subprocess.run([sys.executable, "-m", "archspec", *args], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    return json.loads(out)["generate_s"]


def profile_of(way: str) -> str | None:
    return next((engine for key, engine in PROFILE.items() if way.endswith(key)), None)


def rows(results: dict, gpu: str) -> list[dict]:
    """One row per measured side of every generate run: measured, predicted, their ratio."""
    out = []
    for part in ("decode", "vs_hf", "sweep"):
        for run in results["parts"].get(part, {}).get("runs", []):
            if run.get("mode") != "generate" or "step_time_s" not in run:
                continue
            for way, measured in ways(run):
                engine = profile_of(way)
                predicted = predict(run, engine, gpu) if engine else None
                out.append({
                    "run": run["label"], "way": way, "batch": run["batch"],
                    "prompt": run["seq"], "new_tokens": run["new_tokens"],
                    "measured_s": measured, "engine": engine, "predicted_s": predicted,
                    "predicted_over_measured": predicted / measured if predicted else None,
                })  # fmt: skip
    return out


def markdown(table: list[dict], device: str, gpu: str) -> str:
    lines = [
        f"Measured on {device}; predicted by `archspec plan --mode serve --gpu {gpu}`.",
        "",
        "| run | measured side | batch | prompt → new | measured | profile | predicted "
        "| predicted / measured |",
        "|---|---|---:|---|---:|---|---:|---:|",
    ]
    for r in table:
        predicted = f"{r['predicted_s']:.3f} s" if r["predicted_s"] else "—"
        ratio = f"{r['predicted_over_measured']:.2f}" if r["predicted_over_measured"] else "—"
        lines.append(f"| {r['run']} | {r['way']} | {r['batch']} | {r['prompt']} → "
                     f"{r['new_tokens']} | {r['measured_s']:.3f} s | {r['engine'] or '—'} | "
                     f"{predicted} | {ratio} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/gpu-h100")
    results = json.loads((out / "results.json").read_text())
    device = results["environment"]["device_name"]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from archspec.bench.devices import find_accelerator

    accelerator = find_accelerator(device)
    if accelerator is None:
        sys.exit(f"'{device}' is not in the hardware catalogue")
    table = rows(results, accelerator.key)
    (out / "serve_vs_plan.json").write_text(json.dumps(table, indent=1))
    text = markdown(table, device, accelerator.key)
    (out / "serve_vs_plan.md").write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
