"""Bounds on a benchmark run, checked before anything is built or allocated.

A benchmark really runs the model: `--threads 10**20` overflows torch's int, a spec of 10^12
layers or a batch of 10^8 asks for more memory than the machine has (the allocation then
fails deep inside torch, or the machine swaps for hours), and `--new-tokens` in the millions
turns the prediction alone into minutes. Each is refused here with the limit it broke, for the
single-process run and for `--nproc` alike, before any launch, process or allocation.
"""

from __future__ import annotations

import math
import os
from typing import Any

import torch

from archspec.bench import steps
from archspec.errors import SpecError, did_you_mean
from archspec.ir.nodes import IR
from archspec.safety.limits import MAX_SIZE

MAX_THREADS = 4096
MAX_STEPS = 100_000  # --steps, --warmup
MAX_NEW_TOKENS = 100_000
MAX_SEED = 2**64 - 1  # torch.Generator.manual_seed takes an unsigned 64-bit seed
MEMINFO = "/proc/meminfo"  # Linux's memory figures


def check_options(s: Any) -> None:
    """The options alone (the spec is not needed): numbers in range, flags that need another."""
    if s.threads is not None and not 1 <= s.threads <= MAX_THREADS:
        raise SpecError(f"--threads must be between 1 and {MAX_THREADS:,} (got {s.threads})")
    if not 0 <= s.seed <= MAX_SEED:
        raise SpecError(f"--seed must be between 0 and 2**64-1 = {MAX_SEED:,} (got {s.seed:,})")
    if s.hf_first and not s.vs_hf:
        raise SpecError("--hf-first orders the two models of --vs-hf; add --vs-hf")
    if s.peak_tflops is not None and not (math.isfinite(s.peak_tflops) and s.peak_tflops > 0):
        raise SpecError(f"--peak-tflops must be a positive number (got {s.peak_tflops})")
    for option, value, least, most in (
        ("batch", s.batch, 1, MAX_SIZE),
        ("steps", s.steps, 1, MAX_STEPS),
        ("warmup", s.warmup, 0, MAX_STEPS),
        ("new-tokens", s.new_tokens, 1, MAX_NEW_TOKENS),
    ):
        if value < least:
            raise SpecError(f"--{option} must be at least {least} (got {value})")
        if value > most:
            raise SpecError(f"--{option} must be at most {most:,} (got {value:,})")


def device_of(name: str | None) -> torch.device:
    """The device `--device` names (default: cuda when there is one), or a clear refusal."""
    if name is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise _not_a_device(name) from None
    if device.type not in ("cpu", "cuda"):
        raise _not_a_device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SpecError(
            f"--device cuda: no CUDA device is available to this torch ({torch.__version__})",
            hint="run on a machine with an NVIDIA GPU and a CUDA build of torch, or use "
            "--device cpu",
        )
    return device


def _not_a_device(name: str) -> SpecError:
    # A misspelt cuda:N is suggested with its index.
    index = name.partition(":")[2]
    choices = ("cpu", "cuda", *([f"cuda:{index}"] if index else []))
    return SpecError(f"--device takes cpu or cuda (or cuda:N), not {name!r}",
                     hint=did_you_mean(name, choices))  # fmt: skip


def check_settings(ir: IR, s: Any, device: torch.device) -> tuple[str, int]:
    """The settings against the spec and the device: the dtype and sequence length."""
    if s.mode not in steps.MODES:
        raise SpecError(f"--mode takes one of: {', '.join(steps.MODES)} (got {s.mode!r})",
                        hint=did_you_mean(s.mode, steps.MODES))  # fmt: skip
    dtype = s.dtype or ("bf16" if device.type == "cuda" else "fp32")
    if dtype not in steps.DTYPES:
        raise SpecError(f"--dtype takes one of: {', '.join(steps.DTYPES)} (got {dtype!r})",
                        hint=did_you_mean(dtype, steps.DTYPES))  # fmt: skip
    if dtype == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise SpecError(
            f"{torch.cuda.get_device_name(device)} has no bf16", hint="use --dtype fp16"
        )
    limit = ir.value(ir.root.max_seq_len)
    layout = ir.root.layout
    generate = s.mode == "generate"
    reserve = s.new_tokens if generate and layout == "decoder" else 0
    seq = s.seq if s.seq is not None else max(1, min(512, limit - reserve))
    if seq < 1:
        raise SpecError(f"--seq must be at least 1 (got {seq})")
    if seq + reserve > limit:
        what = f"--seq {seq} + --new-tokens {reserve}" if reserve else f"--seq {seq}"
        raise SpecError(
            f"{what} is longer than the {limit} positions '{ir.name}' is built for",
            hint="use a shorter --seq, or --set max_seq_len=N",
        )
    if generate and layout == "encoder-decoder" and s.new_tokens + 1 > limit:
        raise SpecError(f"--new-tokens {s.new_tokens} is more than the decoder's {limit} positions")
    if generate and (layout == "encoder" or ir.root.lm_head is None):
        raise SpecError(
            f"--mode generate needs a decoder with a language-model head; '{ir.name}' "
            f"is {'an encoder' if layout == 'encoder' else 'a model without an LM head'}",
            hint="use --mode forward or --mode train",
        )
    return dtype, seq


def available_bytes(device: torch.device) -> int | None:
    """Memory the run may use on `device`: free GPU memory; on the CPU the memory Linux says
    a new process can have without swapping (MemAvailable), else the machine's RAM."""
    try:
        if device.type == "cuda":
            return torch.cuda.mem_get_info(device)[0]
        available = _mem_available()
        if available is not None:
            return available
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, RuntimeError, AttributeError):
        return None


def _mem_available() -> int | None:
    """/proc/meminfo's MemAvailable in bytes, or None off Linux."""
    try:
        with open(MEMINFO) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # in kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def least_bytes(vocab: int, width: int, batch: int, seq: int, element: int) -> int:
    """What any step holds besides the weights, at the least: the token ids (int64), one
    hidden state, and the logits (the analysis' forward figure counts only the weights)."""
    return batch * seq * (8 + (width + vocab) * element)


def check_fits(
    name: str, predicted_bytes: int, device: torch.device, batch: int, beside: str = ""
) -> None:
    """Refuse a run whose predicted memory exceeds what the device has. `beside`: what the
    figure holds besides the generated model's run (--vs-hf's transformers model)."""
    available = available_bytes(device)
    if available is not None and predicted_bytes > available:
        smaller = "a smaller --batch or --seq" if batch > 1 else "a shorter --seq"  # 1 is least
        # Off Linux the figure is the machine's RAM, not what is free of it.
        what = "available" if device.type == "cuda" or _mem_available() is not None else "of RAM"
        raise SpecError(
            f"'{name}' needs about {predicted_bytes / 2**30:,.1f} GiB for this run{beside}, "
            f"more than the {available / 2**30:,.1f} GiB {what} on {device.type}",
            hint=f"use --set n_layers=N (or smaller sizes), {smaller}; --force runs it anyway",
        )
