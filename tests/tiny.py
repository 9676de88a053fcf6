"""Small models for the tests: the sizes, as `--set` overrides, and the generated model built
from them.

Plain functions, not fixtures: the sizes are read at import time (parametrize lists, module
constants), and the builders are called from the tests' own helpers. The thread pinning these
CPU-sized models want is the `one_thread` fixture in tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import torch

from archspec import build_ir, load_spec
from archspec.backends.torchgen import generate_source, load_generated
from archspec.ir.nodes import IR

# Two layers, 32 wide, four heads: the model the distributed tests start on 2 to 4 gloo
# processes (each head and the MLP split over up to 4 ranks), and the size other tests start
# from, changing what their check needs (`tiny(d_model=64, ...)`).
SIZES: dict[str, int] = {
    "n_layers": 2,
    "d_model": 32,
    "n_heads": 4,
    "d_ff": 64,
    "vocab_size": 64,
    "max_seq_len": 16,
}

# Six heads sharing two kv heads, as changes to SIZES: tp = 3 divides the heads and the MLP,
# not the kv heads (nor is it a multiple of them), which the tensor-parallel code refuses.
GQA_6_2 = ["d_model=48", "n_heads=6", "n_kv_heads=2", "d_ff=96"]


def tiny(*more: str, **sizes: int | None) -> list[str]:
    """The overrides of SIZES with `sizes` changed (None leaves that field to the spec), then
    `more` (overrides of any field, `"moe.top_k=2"`)."""
    merged = {**SIZES, **sizes}
    return [f"{key}={value}" for key, value in merged.items() if value is not None] + list(more)


def as_sets(overrides: Sequence[str]) -> list[str]:
    """The command-line form of overrides: `--set key=value` for each."""
    return [word for override in overrides for word in ("--set", override)]


def generated_module(
    spec: str | IR, overrides: Sequence[str] = (), folder: str | Path | None = None
) -> ModuleType:
    """The generated PyTorch module of a spec (a built-in name or a path, with `overrides`) or
    of an IR, imported from `folder` (a fresh temporary folder by default)."""
    ir = spec if isinstance(spec, IR) else build_ir(load_spec(spec, list(overrides)))
    return load_generated(generate_source(ir), folder)


def built_model(
    spec: str | IR,
    overrides: Sequence[str] = (),
    folder: str | Path | None = None,
    *,
    seed: int | None = 0,
    **options,
) -> torch.nn.Module:
    """The generated `Model(**options)` of a spec or IR (as `generated_module` takes them), its
    weights drawn after `torch.manual_seed(seed)` (None: from the RNG as it stands)."""
    module = generated_module(spec, overrides, folder)
    if seed is not None:
        torch.manual_seed(seed)
    return module.Model(**options)
