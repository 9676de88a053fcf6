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
from typing import TYPE_CHECKING

from archspec import build_ir, load_spec
from archspec.ir.nodes import IR

if TYPE_CHECKING:
    import torch

# Two layers, 32 wide, four heads: the model the distributed tests start on 2 to 4 gloo
# processes (each head and the MLP split over up to 4 ranks), and the size other tests start
# from, changing what their check needs (`tiny_sizes(d_model=64, ...)`).
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


def tiny_sizes(*more: str, **sizes: int | None) -> list[str]:
    """The overrides of SIZES with `sizes` changed (None leaves that field to the spec), then
    `more` (overrides of any field, `"moe.top_k=2"`)."""
    merged = {**SIZES, **sizes}
    return [f"{key}={value}" for key, value in merged.items() if value is not None] + list(more)


def scaled_down(
    name: str,
    sizes: Sequence[str],
    overrides: Sequence[str] = (),
    *,
    head_dim: int | None = None,
    experts: tuple[int, int] | None = None,
    one_kv_head_stays: bool = True,
) -> list[str]:
    """Overrides that make spec `name` (with `overrides`) small while keeping its shape:
    `sizes`, then grouped-query attention with 2 kv heads (multi-query attention keeps its one
    unless `one_kv_head_stays` is False), a partial rotation over 8 channels, and where given
    a `head_dim` for specs that set one and `experts` (count, top k) for a mixture of experts
    (None keeps the spec's). A key set in `overrides` keeps its value."""
    spec = load_spec(name, list(overrides))
    shrink = list(sizes)
    if head_dim is not None and spec.head_dim is not None:
        shrink.append(f"head_dim={head_dim}")
    if spec.n_kv_heads is not None:
        one = spec.n_kv_heads == 1 and one_kv_head_stays
        shrink.append(f"n_kv_heads={1 if one else 2}")
    if experts is not None and spec.moe is not None:
        shrink += [f"moe.n_experts={experts[0]}", f"moe.top_k={experts[1]}"]
        if (spec.moe.groups or 1) > 1:  # group-limited routing (DeepSeek): two groups, one kept
            shrink += ["moe.groups=2", "moe.top_groups=1"]
    layers = next((int(t.partition("=")[2]) for t in sizes if t.startswith("n_layers=")), None)
    if spec.moe is not None and layers is not None and spec.moe.dense_layers >= layers:
        # Dense first layers (DeepSeek-V3's 3) keep a mixture-of-experts layer after them.
        shrink.append(f"moe.dense_layers={layers - 1}")
    if spec.position.rotary_dim is not None:
        shrink.append("position.rotary_dim=8")
    given = {text.partition("=")[0] for text in overrides}
    return [*overrides, *(text for text in shrink if text.partition("=")[0] not in given)]


def as_sets(overrides: Sequence[str]) -> list[str]:
    """The command-line form of overrides: `--set key=value` for each."""
    return [word for override in overrides for word in ("--set", override)]


def generated_module(
    spec: str | IR, overrides: Sequence[str] = (), folder: str | Path | None = None
) -> ModuleType:
    """The generated PyTorch module of a spec (a built-in name or a path, with `overrides`) or
    of an IR, imported from `folder` (a fresh temporary folder by default)."""
    # torch here, not at the top: the sizes serve tests that never build a model
    from archspec.backends.torchgen import generate_source, load_generated

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
    import torch

    module = generated_module(spec, overrides, folder)
    if seed is not None:
        torch.manual_seed(seed)
    return module.Model(**options)
