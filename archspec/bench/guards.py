"""Bounds on a benchmark run, checked before anything is built or allocated.

A benchmark really runs the model: `--threads 10**20` overflows torch's int, a spec of 10^12
layers or a batch of 10^8 asks for more memory than the machine has (the allocation then
fails deep inside torch, or the machine swaps for hours), and `--new-tokens` in the millions
turns the prediction alone into minutes. Each is refused here with the limit it broke.
"""

from __future__ import annotations

import math
import os
from typing import Any

import torch

from archspec.errors import SpecError

MAX_THREADS = 4096
MAX_STEPS = 100_000  # --steps, --warmup
MAX_NEW_TOKENS = 100_000


def check_options(s: Any) -> None:
    """The options alone (the spec is not needed): numbers in range, flags that need another."""
    if s.threads is not None and not 1 <= s.threads <= MAX_THREADS:
        raise SpecError(f"--threads must be between 1 and {MAX_THREADS:,} (got {s.threads})")
    if s.hf_first and not s.vs_hf:
        raise SpecError("--hf-first orders the two models of --vs-hf; add --vs-hf")
    if s.peak_tflops is not None and not (math.isfinite(s.peak_tflops) and s.peak_tflops > 0):
        raise SpecError(f"--peak-tflops must be a positive number (got {s.peak_tflops})")
    for option, value, most in (
        ("steps", s.steps, MAX_STEPS),
        ("warmup", s.warmup, MAX_STEPS),
        ("new-tokens", s.new_tokens, MAX_NEW_TOKENS),
    ):
        if value > most:
            raise SpecError(f"--{option} must be at most {most:,} (got {value:,})")


def available_bytes(device: torch.device) -> int | None:
    """Memory the run may use on `device`: free GPU memory, or the machine's RAM."""
    try:
        if device.type == "cuda":
            return torch.cuda.mem_get_info(device)[0]
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, RuntimeError, AttributeError):
        return None


def least_bytes(vocab: int, width: int, batch: int, seq: int, element: int) -> int:
    """What any step holds besides the weights, at the least: the token ids (int64), one
    hidden state, and the logits (the analysis' forward figure counts only the weights)."""
    return batch * seq * (8 + (width + vocab) * element)


def check_fits(name: str, predicted_bytes: int, device: torch.device) -> None:
    """Refuse a run whose predicted memory exceeds what the device has."""
    available = available_bytes(device)
    if available is not None and predicted_bytes > available:
        raise SpecError(
            f"'{name}' needs about {predicted_bytes / 2**30:,.1f} GiB for this run, more than "
            f"the {available / 2**30:,.1f} GiB available on {device.type}",
            hint="use --set n_layers=N (or smaller sizes), a smaller --batch or --seq; "
            "--force runs it anyway",
        )
