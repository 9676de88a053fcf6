"""The whole GPU measurement in one command, within eight minutes on one H100 or H200.

    python benchmarks/gpu_check.py --out benchmarks/gpu-h100     # on a machine with one GPU
    python benchmarks/gpu_check.py --dry-run --out /tmp/check    # every part on CPU, tiny

Parts (docs/bench.md, "GPU check", says what each figure means):
1. train: bf16 training steps of gpt2-xl and a ~1B llama at S=2048, eager and compiled:
   tokens/s, MFU against the catalogue's dense bf16 peak, peak memory against count's;
2. vs_hf: forward and generate against transformers on the same weights, eager and compiled;
3. decode: B=1 bf16 generation of a 7B llama against the HBM roofline, eager, compiled and
   compiled with CUDA graphs (mode="reduce-overhead");
4. fp8: the llama trained through torchao.float8, loss finite, speed against bf16;
5. plan: plan's predicted single-GPU step time for each training run against the measured;
6. sweep (only when asked: --part sweep): shapes nothing was calibrated on, for plan's
   held-out checks: CUDA-graph decoding of the 7B at batch 8, 32 and 64 and a 2,048-token
   prompt, compiled llama-1b training at S=1024 (B=4) and S=512 (B=8), and the three
   training shapes again with SDPA held to FlashAttention-2 ("flash-2 only");
7. fp8_width (only when asked): whole models trained compiled with bf16 weights, through
   torchao.float8 and as they are, at two widths: fp8's gain alone.

Each run is its own process (this script with --child), so a run's compiled graphs,
allocator pools or out-of-memory error cannot touch the next, and a run that overruns its
part's budget is killed and recorded as such. results.json is written after every run, so a
run that fails or is cut off loses nothing measured before it; table.md holds the rows for
benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_standard import LLAMA_1B  # noqa: E402  (the project's ~1B llama shape)

TOTAL_BUDGET_S = 450  # within 8 minutes, start-up of the first process included

# Full sizes (batch chosen to fit an 80 GB H100 with AdamW: run_standard.py's train shapes).
GPU = {
    "options": {"device": "cuda", "dtype": "bf16", "steps": 10, "warmup": 3},
    "models": {
        "gpt2-xl": ("gpt2-xl", ["max_seq_len=2048"]),
        "llama-1b": ("llama-2-7b", LLAMA_1B),
        "llama-7b": ("llama-2-7b", []),
        # Llama 3 8B's width in 8 layers, with a 32K vocabulary so that the head is not most
        # of the projections' work: the fp8_width part's wider model.
        "llama-8b-width": ("llama-3-8b", ["n_layers=8", "vocab_size=32000", "max_seq_len=4096"]),
    },
    "train": {"batch": 2, "seq": 2048},
    "vs_hf": {"forward": (8, 2048, 0), "generate": (8, 512, 128)},
    # Fewer steps where one step is seconds long (eager decoding of a 7B: ~20 ms a token).
    "vs_hf_steps": {"steps": 5, "warmup": 2},
    "decode": {"seq": 128, "new_tokens": 128, "steps": 3, "warmup": 2},
    "compile_backend": "inductor",
    "budgets": {
        "train": 170,
        "vs_hf": 75,
        "decode": 140,
        "fp8": 45,
        "plan": 20,
        "sweep": 0,
        "fp8_width": 0,
    },
    # (batch, prompt) decoded and (batch, seq) trained by the sweep part.
    "sweep": {
        "decode": [(8, 128), (32, 128), (64, 128), (1, 2048)],
        "train": [(4, 1024), (8, 512)],
        # The training shapes again with SDPA held to its FlashAttention-2 kernel (cuDNN's
        # and the memory-efficient one turned off): the kernel most published runs used.
        "train_flash": [(2, 2048), (4, 1024), (8, 512)],
    },  # fmt: skip
    # (model, batch, seq) trained by the fp8_width part, in bf16 and through torchao.float8.
    "fp8_width": [("llama-8b-width", 1, 4096), ("llama-1b", 2, 2048)],
}
TINY = ["n_layers=2", "d_model=64", "n_heads=4", "d_ff=128", "vocab_size=256", "max_seq_len=64"]
# --dry-run: the same runs on CPU at tiny sizes. torch.compile runs with backend="eager"
# (dynamo traces the model, no kernels are generated) to stay within seconds; there are no
# CUDA graphs on CPU, so the "cuda graphs" run is a compiled run there.
DRY_NOTE = ("dry run: CPU, tiny sizes, torch.compile with backend='eager', no CUDA graphs "
            "(the 'cuda graphs' run is a plain compiled run); the figures only show that "
            "the code paths work")  # fmt: skip
DRY = {
    "options": {"device": "cpu", "dtype": "bf16", "steps": 2, "warmup": 1, "threads": 1},
    "models": {
        "gpt2-xl": ("gpt2-xl", TINY),
        "llama-1b": ("llama-2-7b", [*TINY, "n_kv_heads=2"]),
        "llama-7b": ("llama-2-7b", [*TINY, "n_kv_heads=4"]),
        "llama-8b-width": ("llama-3-8b", [*TINY, "n_kv_heads=2"]),
    },
    "train": {"batch": 1, "seq": 32},
    "vs_hf": {"forward": (1, 32, 0), "generate": (1, 16, 8)},
    "vs_hf_steps": {"steps": 2, "warmup": 1},
    "decode": {"seq": 16, "new_tokens": 8},
    "compile_backend": "eager",
    "budgets": {
        "train": 60,
        "vs_hf": 60,
        "decode": 60,
        "fp8": 30,
        "plan": 30,
        "sweep": 0,
        "fp8_width": 0,
    },
    "sweep": {"decode": [(2, 16)], "train": [(2, 16)], "train_flash": [(2, 16)]},
    "fp8_width": [("llama-8b-width", 1, 32), ("llama-1b", 1, 32)],
}


# ---- the runs of each part (plain data, executed by --child) ----


def train_runs(p: dict) -> list[dict]:
    shape = p["train"]
    return [
        {"kind": "bench", "label": f"train {m} {'compiled' if c else 'eager'}", "model": m,
         "settings": {"mode": "train", "compile": c, **shape}}
        for m in ("llama-1b", "gpt2-xl") for c in (False, True)
    ]  # fmt: skip


def vs_hf_runs(p: dict) -> list[dict]:
    runs = []
    for mode, (batch, seq, new) in p["vs_hf"].items():
        for c in (False, True):
            settings = {"mode": mode, "compile": c, "batch": batch, "seq": seq, "vs_hf": True,
                        **p["vs_hf_steps"]}  # fmt: skip
            if new:
                settings["new_tokens"] = new
            label = f"{mode} llama-1b vs transformers {'compiled' if c else 'eager'}"
            runs.append({"kind": "bench", "label": label, "model": "llama-1b",
                         "settings": settings})  # fmt: skip
    return runs


def decode_runs(p: dict) -> list[dict]:
    # CUDA graphs (the decode target's mode) before plain compiled: a 7B compiles for a
    # minute or more, and what the budget cuts off is the last run.
    cuda = p["options"]["device"] == "cuda"
    variants = [("eager", False, None), ("cuda graphs", True, "reduce-overhead" if cuda else None),
                ("compiled", True, None)]  # fmt: skip
    return [
        {"kind": "decode", "label": f"decode llama-7b B=1 {name}", "model": "llama-7b",
         "settings": {"mode": "generate", "batch": 1, "compile": c, "compile_mode": m,
                      **p["decode"]}}
        for name, c, m in variants
    ]  # fmt: skip


def fp8_runs(p: dict) -> list[dict]:
    return [{"kind": "fp8", "label": "train llama-1b fp8 (torchao.float8)", "model": "llama-1b",
             "settings": {"mode": "train", "compile": True, **p["train"]}}]  # fmt: skip


def plan_runs(p: dict) -> list[dict]:
    """One prediction per model: plan has no compile setting (its efficiencies are
    calibrated on published, compiled or fused-kernel runs)."""
    return [{**run, "kind": "plan", "label": f"plan {run['model']}"}
            for run in train_runs(p) if not run["settings"]["compile"]]  # fmt: skip


def sweep_runs(p: dict) -> list[dict]:
    """Held-out shapes (a budget of 0: run only when asked, by --part sweep or --only): the
    7B decoded under CUDA graphs at other batches and prompt lengths, llama-1b trained
    compiled at other sequence lengths with the same tokens a step."""
    cuda = p["options"]["device"] == "cuda"
    decode = [
        {"kind": "decode", "label": f"decode llama-7b B={b} prompt {seq} cuda graphs",
         "model": "llama-7b",
         "settings": {"mode": "generate", "batch": b, "compile": True,
                      "compile_mode": "reduce-overhead" if cuda else None,
                      **{**p["decode"], "seq": seq}}}
        for b, seq in p["sweep"]["decode"]
    ]  # fmt: skip
    train = [
        {"kind": "bench", "label": f"train llama-1b compiled B={b} S={seq}", "model": "llama-1b",
         "settings": {"mode": "train", "compile": True, "batch": b, "seq": seq}}
        for b, seq in p["sweep"]["train"]
    ]  # fmt: skip
    flash = [
        {"kind": "bench", "label": f"train llama-1b compiled B={b} S={seq} flash-2 only",
         "model": "llama-1b", "sdpa": "flash",
         "settings": {"mode": "train", "compile": True, "batch": b, "seq": seq}}
        for b, seq in p["sweep"]["train_flash"]
    ]  # fmt: skip
    return decode + train + flash


def fp8_width_runs(p: dict) -> list[dict]:
    """fp8's gain at two widths (a budget of 0: run only when asked, by --part fp8_width): each
    model trained compiled with bf16 weights, once through torchao.float8 and once as it is,
    by the same code on the same machine, so that the ratio is fp8's alone (the train part's
    bf16 runs keep fp32 weights under autocast)."""
    return [
        {"kind": "fp8", "label": f"train {m} B={b} S={seq} {'fp8' if fp8 else 'bf16 weights'}",
         "model": m, "float8": fp8,
         "settings": {"mode": "train", "compile": True, "batch": b, "seq": seq}}
        for m, b, seq in p["fp8_width"] for fp8 in (False, True)
    ]  # fmt: skip


PARTS = {"train": train_runs, "vs_hf": vs_hf_runs, "decode": decode_runs, "fp8": fp8_runs,
         "plan": plan_runs, "sweep": sweep_runs, "fp8_width": fp8_width_runs}  # fmt: skip


# ---- one run, in a child process ----


def _ir(p: dict, model: str):
    from archspec.cli.common import resolve_spec, with_overrides
    from archspec.ir.build import build_ir

    spec, sets = p["models"][model]
    resolved = resolve_spec(spec, sets)
    return resolved, with_overrides(build_ir(resolved), sets)


def _settings(p: dict, run: dict):
    from archspec.bench.runner import Settings

    options = {**p["options"], "compile_backend": p["compile_backend"], **run["settings"]}
    return Settings(**options)


def bench_run(p: dict, run: dict) -> dict:
    """`archspec bench` in this process: tokens/s, MFU, measured and predicted memory (and,
    with vs_hf, transformers' figures and the speedup)."""
    from archspec.bench.runner import run_bench
    from archspec.hf.export_config import hf_config_dict

    resolved, ir = _ir(p, run["model"])
    s = _settings(p, run)
    result = run_bench(ir, s, hf_config=hf_config_dict(resolved) if s.vs_hf else None)
    result |= {"compile_mode": s.compile_mode, "compile_backend": s.compile_backend}
    result["memory_predicted_over_measured"] = (
        result["predicted_memory_bytes"] / result["peak_memory_bytes"]
    )
    return result


def decode_run(p: dict, run: dict) -> dict:
    """A bench generate run and its HBM roofline: every decode step reads the weights once
    and each sequence's whole KV cache (the generated code preallocates it to the final
    length and reads it whole at each step), and yields one token a sequence, so tokens/s
    can be at most batch x bandwidth / those bytes."""
    from torch._dynamo.utils import counters

    from archspec.backends.count.flops_report import kv_cache_bytes_per_token, weight_bytes

    result = bench_run(p, run)
    # Inductor counts the graphs it could not put under CUDA graphs (a mutated input, a CPU
    # tensor, ...): with "reduce-overhead", 0 skips means every decode step replays a graph.
    # TORCH_LOGS=perf_hints prints the reasons.
    result["cudagraph_skips"] = counters["inductor"]["cudagraph_skips"]
    _, ir = _ir(p, run["model"])
    s = run["settings"]
    per_step = weight_bytes(ir, "bf16") + s["batch"] * kv_cache_bytes_per_token(ir, "bf16") * (
        s["seq"] + s["new_tokens"]
    )
    per_token = per_step / s["batch"]
    accelerator = _catalogue_entry(p, result["device_name"])
    result["bytes_per_token"] = per_token
    result["cache_reuse"] = (
        "not possible through the generated API: Model.generate allocates its KV cache per "
        "call (same shapes each call, so compiled graphs are reused, not recompiled)"
    )
    if accelerator is not None:
        roofline = accelerator.bandwidth / per_token
        result["roofline_tokens_per_s"] = roofline
        result["fraction_of_roofline"] = result["tokens_per_s"] / roofline
    return result


def _fp8_conversion(p: dict):
    """torchao's convert_to_float8_training, or why fp8 cannot run here. In a dry run (CPU)
    the conversion is left out (None) and the rest of the path runs in bf16."""
    import torch

    if p["options"]["device"] == "cpu":
        return None, None
    try:
        from torchao.float8 import convert_to_float8_training
    except ImportError:
        return None, "torchao is not installed (pip install torchao)"
    if torch.cuda.get_device_capability() < (8, 9):
        return None, "fp8 matmuls need an NVIDIA GPU of compute capability 8.9 or more"
    return convert_to_float8_training, None


def fp8_run(p: dict, run: dict) -> dict:
    """torchao.float8 training (convert_to_float8_training on bf16 weights, compiled), timed
    with bench's own inputs, step and timer; the loss of one forward after the timed steps."""
    import tempfile

    import torch

    from archspec.bench import steps
    from archspec.bench.guards import device_of
    from archspec.bench.runner import _generated_model
    from archspec.bench.timing import Times, time_step

    convert, why_not = _fp8_conversion(p)
    if not run.get("float8", True):
        convert, why_not = None, None  # the same run with bf16 weights: fp8's twin
    if why_not:
        return {"skipped": why_not}
    _, ir = _ir(p, run["model"])
    s = _settings(p, run)
    device = device_of(s.device)
    inputs, targets = steps.make_inputs(ir, "train", s.batch, s.seq, device, s.seed)
    # The generated module's file stays while the model runs (compile reads its source).
    with tempfile.TemporaryDirectory(prefix="gpu-check-fp8-") as folder:
        torch.manual_seed(s.seed)
        model = _generated_model(ir, device, folder).to(torch.bfloat16)
        if convert is not None:
            convert(model)
        model.compile(backend=s.compile_backend)
        side = steps.Side("ours", model, inputs, targets, optimizer=steps.adamw(model))
        step = steps.make_step(side, "train", device, "bf16", ir.value(ir.root.vocab_size), 0)
        for _ in range(s.warmup):
            step()
        times = Times(tuple(time_step(step, device) for _ in range(s.steps)))
        with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16):
            logits = steps.output_of(side)(inputs).float()
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten()).item()
    return {"fp8": convert is not None, "float8_asked": run.get("float8", True),
            "step_time_s": times.median,
            "tokens_per_s": s.batch * s.seq / times.median, "loss": loss,
            "loss_finite": math.isfinite(loss)}  # fmt: skip


def plan_run(p: dict, run: dict) -> dict:
    """`archspec plan` for the same single-GPU run (bench trains with fp32 weights and
    gradients under bf16 autocast: --grad-dtype fp32) on the device's catalogue entry."""
    import torch

    name = torch.cuda.get_device_name() if torch.cuda.is_available() else ""
    accelerator = _catalogue_entry(p, name)
    if accelerator is None:
        return {"skipped": f"'{name}' is not in the hardware catalogue"}
    spec, sets = p["models"][run["model"]]
    s = run["settings"]
    args = ["plan", spec, *[a for x in sets for a in ("--set", x)], "--gpu", accelerator.key,
            "--gpus", "1", "--global-batch", str(s["batch"]), "--batch", str(s["batch"]),
            "--seq", str(s["seq"]), "--tp", "1", "--pp", "1", "--dtype", "bf16",
            "--grad-dtype", "fp32", "--json"]  # fmt: skip
    out = subprocess.run([sys.executable, "-m", "archspec", *args], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    report = json.loads(out)
    return {
        "system": accelerator.key,
        "predicted_step_time_s": report["step_time_s"],
        "predicted_mfu": report["mfu"],
        "predicted_memory_bytes": report["memory"]["total"],
    }


def _catalogue_entry(p: dict, device_name: str):
    """The device's catalogue entry; on CPU (--dry-run) the H100 SXM's, so that the
    roofline and plan code paths run (their figures mean nothing there)."""
    from archspec.bench import devices
    from archspec.plan.hardware import load_accelerators

    if p["options"]["device"] == "cpu":
        return load_accelerators()["h100-sxm"]
    return devices.find_accelerator(device_name)


RUNNERS = {"bench": bench_run, "decode": decode_run, "fp8": fp8_run, "plan": plan_run}


def child(p: dict, run: dict) -> None:
    if run.get("sdpa") == "flash":
        # SDPA may then choose only the flash kernel (or math). Compiled graphs cached on
        # disk by an earlier run of the same shapes would still call cuDNN's (the flags are
        # not in the cache's key: seen on an H100), so this run compiles afresh.
        os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
        import torch

        torch.backends.cuda.enable_cudnn_sdp(False)
        torch.backends.cuda.enable_mem_efficient_sdp(False)
    result = RUNNERS[run["kind"]](p, run)
    if run.get("sdpa"):
        result["sdpa"] = run["sdpa"]
    print(json.dumps(result))


# ---- the parent: budgets, processes, files ----


def run_in_child(p: dict, run: dict, timeout: float) -> dict:
    """The run's figures, its error, or why it was cut off. The child leads its own process
    group, so a timeout also ends what it started (torch.compile's worker processes)."""
    start = time.monotonic()
    command = [sys.executable, __file__, "--child", json.dumps({"profile": p, "run": run})]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)  # fmt: skip
    try:
        stdout, stderr = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        return {"skipped": f"killed after {timeout:.0f} s, the rest of its part's budget"}
    seconds = time.monotonic() - start
    if child.returncode != 0:
        return {"error": stderr.strip().splitlines()[-1:] or [f"exit {child.returncode}"],
                "stderr_tail": stderr[-3000:], "wall_s": seconds}  # fmt: skip
    return {**json.loads(stdout.strip().splitlines()[-1]), "wall_s": seconds}


def _runs(results: dict, part: str) -> list[dict]:
    return results["parts"].get(part, {}).get("runs", [])


def fp8_against_bf16(results: dict) -> None:
    """Put the fp8 run beside the bf16 compiled training run of the same model and shape."""
    measured = {r["label"]: r for r in _runs(results, "train")}
    bf16 = measured.get("train llama-1b compiled", {})
    for r in _runs(results, "fp8"):
        if "tokens_per_s" in r and "tokens_per_s" in bf16:
            r["bf16_tokens_per_s"] = bf16["tokens_per_s"]
            r["speedup_over_bf16"] = r["tokens_per_s"] / bf16["tokens_per_s"]


def plan_against_measured(results: dict) -> None:
    """Put each plan prediction beside the measured step times of the same training run,
    eager and compiled."""
    measured = {r["label"]: r for r in _runs(results, "train")}
    for r in _runs(results, "plan"):
        if "predicted_step_time_s" not in r:
            continue
        for way in ("eager", "compiled"):
            train = measured.get(f"train {r['label'].split()[1]} {way}", {})
            if "step_time_s" in train:
                r[f"measured_{way}_step_time_s"] = train["step_time_s"]
                r[f"predicted_over_{way}"] = r["predicted_step_time_s"] / train["step_time_s"]


def environment(p: dict) -> dict:
    import torch

    cuda = p["options"]["device"] == "cuda" and torch.cuda.is_available()
    return {
        "device_name": torch.cuda.get_device_name() if cuda else platform.processor() or "cpu",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "dry_run": p["options"]["device"] == "cpu",
        "compile_backend": p["compile_backend"],
        "note": DRY_NOTE if p["options"]["device"] == "cpu" else None,
    }


def main_run(
    p: dict, out: Path, only: list[str] | None = None, total: float = TOTAL_BUDGET_S
) -> dict:
    """Every run, each part within its budget; or, with `only`, the runs of those labels,
    which share `total` seconds and replace their rows in the results already in `out`
    (a second call on a machine that has little time left)."""
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    results: dict[str, Any] = {"environment": environment(p), "parts": {}}
    if only and (out / "results.json").exists():
        results = json.loads((out / "results.json").read_text())
    part_end = start
    for part, make_runs in PARTS.items():
        # Each part ends at the sum of its budget and those before it: what an earlier part
        # did not use goes to the next, and the last ends within the total.
        budget = p["budgets"][part]
        part_end = start + total if only else min(part_end + budget, start + total)
        if budget == 0 and not only:
            continue  # a part run only when asked
        entry: dict[str, Any] = results["parts"].setdefault(part, {"budget_s": budget, "runs": []})
        for run in make_runs(p):
            if only and run["label"] not in only:
                continue
            left = part_end - time.monotonic()
            if left < 5:
                row = {"skipped": "no time left in its part's budget"}
            else:
                print(f"[{time.monotonic() - start:5.0f} s] {run['label']}", flush=True)
                row = run_in_child(p, run, left)
            done = [r for r in entry["runs"] if r["label"] != run["label"]]
            # Rows of runs this version no longer makes (a changed shape) are dropped.
            labels = [r["label"] for r in make_runs(p)]
            entry["runs"] = sorted([r for r in [*done, {"label": run["label"], **row}]
                                    if r["label"] in labels],
                                   key=lambda r: labels.index(r["label"]))  # fmt: skip
            plan_against_measured(results)
            fp8_against_bf16(results)
            write(results, out)
    return results


def write(results: dict, out: Path) -> None:
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "table.md").write_text(markdown(results))


def _pct(x: float | None) -> str:
    return f"{100 * x:.1f}%" if x is not None else "-"


def _row(r: dict) -> str:
    """One table row: the figures the run has, or why it has none."""
    if "skipped" in r or "error" in r:
        return f"| {r['label']} | {r.get('skipped') or 'error: ' + ' '.join(r['error'])} |"
    figures = []
    if "tokens_per_s" in r:
        figures.append(f"{r['tokens_per_s']:,.0f} tok/s")
    if r.get("mfu") is not None:
        figures.append(f"MFU {_pct(r['mfu'])}")
    if "memory_predicted_over_measured" in r:
        figures.append(f"memory predicted/measured {r['memory_predicted_over_measured']:.3f}")
    if "speedup" in r:
        figures.append(f"{r['speedup']:.2f}× transformers")
    if "fraction_of_roofline" in r:
        figures.append(f"{_pct(r['fraction_of_roofline'])} of HBM roofline")
    if r.get("compile_mode") == "reduce-overhead":
        figures.append(f"{r['cudagraph_skips']} graphs not under CUDA graphs")
    if r.get("fp8") is False and r.get("float8_asked", True):
        figures.append("bf16: fp8 conversion left out in a dry run")
    if "loss_finite" in r:
        figures.append(f"loss {r['loss']:.3f}")
    if "speedup_over_bf16" in r:
        figures.append(f"{r['speedup_over_bf16']:.2f}× bf16")
    if "predicted_step_time_s" in r:
        figures.append(f"predicted step {r['predicted_step_time_s'] * 1e3:.3g} ms")
    for way in ("eager", "compiled"):
        if f"predicted_over_{way}" in r:
            figures.append(f"predicted/measured {way} {r[f'predicted_over_{way}']:.3g}")
    return f"| {r['label']} | {', '.join(figures)} |"


def markdown(results: dict) -> str:
    env = results["environment"]
    lines = [f"Device: {env['device_name']}; torch {env['torch']}, CUDA {env['cuda']}"
             + (f" ({env['note']})" if env["note"] else ""), "",
             "| run | figures |", "|---|---|"]  # fmt: skip
    for entry in results["parts"].values():
        lines += [_row(r) for r in entry["runs"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "gpu-check")
    parser.add_argument("--dry-run", action="store_true", help="every part on CPU, tiny sizes")
    parser.add_argument("--only", action="append", metavar="LABEL",
                        help="run only this run (repeatable); its row replaces the one in "
                        "--out/results.json")  # fmt: skip
    parser.add_argument(
        "--part",
        action="append",
        choices=sorted(GPU["budgets"]),
        help="run only this part's runs (repeatable), as --only does",
    )
    parser.add_argument("--budget", type=float, default=TOTAL_BUDGET_S,
                        help="seconds for all the runs (with --only, they share it)")  # fmt: skip
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        job = json.loads(args.child)
        child(job["profile"], job["run"])
        return
    p = {**(DRY if args.dry_run else GPU), "out": str(args.out)}
    only = [*(args.only or []), *(r["label"] for part in args.part or [] for r in PARTS[part](p))]
    results = main_run(p, args.out, only or None, args.budget)
    print(markdown(results))


if __name__ == "__main__":
    main()
