"""`archspec bench --nproc N`: the generated model trained across N processes on this machine.

The launcher is the installed torch's torchrun (`python -m torch.distributed.run --standalone`):
gloo on CPU processes, NCCL on GPUs. Each rank (`distributed_rank.py`) runs the model under its
own `parallelize` (tensor parallelism over `tp` ranks, FSDP2 over the rest when `zero` is 3)
and reports its step times, peak memory and parameter bytes; they are shown beside archspec's
per-device prediction for the same layout."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from archspec.errors import SpecError
from archspec.ir.nodes import IR


def check_layout(nproc: int, tp: int, zero: int, device: str, gpus: int) -> None:
    """One clear message per impossible request."""
    if nproc < 2:
        raise SpecError("--nproc takes 2 or more processes")
    if tp < 1 or nproc % tp:
        raise SpecError(f"--tp {tp} does not divide --nproc {nproc}")
    if zero not in (0, 3):
        raise SpecError("--zero with --nproc takes 0 (replicated) or 3 (FSDP2)")
    if nproc // tp > 1 and zero != 3:
        raise SpecError(
            f"--nproc {nproc} with --tp {tp} leaves {nproc // tp} data-parallel replicas",
            hint="the generated parallelize shards them with FSDP2: add --zero 3",
        )
    if device == "cuda" and nproc > gpus:
        raise SpecError(f"--nproc {nproc} exceeds the {gpus} GPUs of this machine")


def check_heads(ir: IR, tp: int) -> None:
    """The generated parallelize gives each rank whole heads, and whole key/value heads or,
    beyond n_kv_heads ranks, a copy of the one its query heads read (as Megatron-LM does)."""
    from archspec.ir.nodes import Attention
    from archspec.ir.visit import walk

    for placed in walk(ir.root):
        if isinstance(placed.node, Attention):
            heads, kv = ir.value(placed.node.n_heads), ir.value(placed.node.n_kv_heads)
            if heads % tp:
                raise SpecError(f"--tp {tp} does not divide the {heads} heads")
            if kv % tp and tp % kv:
                raise SpecError(
                    f"--tp {tp} does not divide the {kv} kv heads, nor is it a multiple of them"
                )
    if (
        any(
            isinstance(p.node, Attention) and p.node.mask.bias and not p.node.mask.learned_bias
            for p in walk(ir.root)
        )
        and tp > 1
    ):
        raise SpecError("tensor parallelism does not split ALiBi's per-head slopes: use --tp 1")


def attention_that_runs(ir: IR, device: str) -> str:
    """What SDPA runs in training: a fused kernel on a GPU; on the CPU the math path when
    attention drops out or its additive mask needs a gradient (T5) or is shared across the
    batch (ALiBi), which the CPU's fused kernel refuses, else the fused kernel."""
    from archspec.ir.nodes import Attention
    from archspec.ir.visit import walk

    if device == "cuda":
        return "flash"
    for placed in walk(ir.root):
        node = placed.node
        if isinstance(node, Attention) and (node.dropout or node.mask.bias):
            return "eager"
    return "flash"


def predicted(
    ir: IR, nproc: int, tp: int, zero: int, batch: int, seq: int, device: str = "cpu"
) -> dict[str, int]:
    """archspec's per-device figures for the generated `parallelize`'s layout (count's torch
    engine), in bytes: fp32 training with AdamW, the attention SDPA runs on `device`."""
    from archspec.backends.count.activations import activation_bytes
    from archspec.backends.count.flops import KV_LEN, S_DEC, B, S
    from archspec.backends.count.flops_report import whole_bytes
    from archspec.backends.count.memory import Parallelism, memory_figures

    attn = attention_that_runs(ir, device)
    par = Parallelism(gpus=nproc, tp=tp, zero=zero, engine="torch")
    m = memory_figures(ir, attn=attn, parallel=par).stages[0]
    env = {**ir.env, B: batch, S: seq, S_DEC: seq, KV_LEN: seq}
    # The activations on this device: PyTorch's math attention keeps its dropout mask in fp32
    # on the CPU (one byte on a GPU), which count's figures, made for GPUs, do not say.
    kept = activation_bytes(ir, 4, attn, tp=tp, device=device, engine="torch")
    figures = {
        "weights": whole_bytes(m.weights, env),
        "gradients": whole_bytes(m.gradients, env),
        "optimizer": whole_bytes(m.optimizer_states, env),
        "activations": whole_bytes(kept, env),
    }
    return {**figures, "total": sum(figures.values()), "attn": attn}  # type: ignore[dict-item]


def run_distributed(
    ir: IR, nproc: int, tp: int, zero: int, device: str | None, batch: int, seq: int | None,
    steps: int, warmup: int, seed: int,
) -> dict[str, Any]:  # fmt: skip
    """`bench --nproc`: torchrun on this machine (on the CPU unless `device` says cuda), at
    `seq` positions (default: 512, or the model's context if shorter)."""
    import torch

    from archspec.backends.torchgen import generate_source

    device = device or "cpu"
    seq = seq or min(512, ir.value(ir.root.max_seq_len))
    gpus = torch.cuda.device_count()
    check_layout(nproc, tp, zero, device, gpus)
    check_heads(ir, tp)
    # Refuses what cannot be split.
    prediction = predicted(ir, nproc, tp, zero, batch, seq, "cuda" if device == "cuda" else "cpu")
    settings = {
        "device": device, "tp": tp, "batch": batch, "seq": seq, "steps": steps,
        "warmup": warmup, "seed": seed, "vocab": ir.value(ir.root.vocab_size),
        "encoder_decoder": ir.root.layout == "encoder-decoder",
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder, "model.py")
        source.write_text(generate_source(ir))
        settings_path = Path(folder, "settings.json")
        settings_path.write_text(json.dumps(settings))
        command = [
            sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={nproc}", "-m", "archspec.bench.distributed_rank",
            str(source), str(settings_path),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            errors = [line for line in done.stderr.splitlines() if "Error" in line]
            raise SpecError(
                f"torchrun failed (exit {done.returncode}): "
                + (errors[-1] if errors else done.stderr.strip()[-500:])
            )
        ranks = [json.loads(Path(folder, f"rank{r}.json").read_text()) for r in range(nproc)]
    for r in ranks:
        r["step_time_s"] = statistics.median(r["step_times_s"])
        r["tokens_per_s"] = batch * seq / r["step_time_s"]
    return {
        "name": ir.name, "overrides": list(ir.identity.overrides), "nproc": nproc, "tp": tp,
        "dp": nproc // tp, "zero": zero,
        "device": "cuda" if device == "cuda" else "cpu", "batch": batch, "seq": seq,
        "predicted_bytes": prediction, "ranks": ranks,
    }  # fmt: skip
