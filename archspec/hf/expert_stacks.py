"""The routed experts' tensors: one per expert in the IR and in transformers' checkpoints
(`decoder.blocks.0.moe.experts.3.gate.weight`), stacked in the generated model, one tensor
per projection with the expert first (`decoder.blocks.0.moe.experts.gate`, shape
(n_experts, out, in); a bias `...experts.gate_bias`, (n_experts, out)).

`stack` turns the per-expert names the tensor rules convert into the generated model's,
`unstack` the reverse, for writing transformers' names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch

from archspec.hf.names import leaves
from archspec.ir.nodes import IR

_EXPERT = re.compile(r"^(?P<experts>.*\.experts)\.(?P<index>\d+)\.(?P<proj>\w+)$")


def stacks(ir: IR) -> dict[str, list[str]]:
    """Each stacked parameter of the generated model -> the per-expert tensors it holds,
    in expert order."""
    out: dict[str, list[str]] = {}
    for leaf in leaves(ir):
        if not leaf.where.experts:
            continue
        found = _EXPERT.match(leaf.path)
        assert found is not None, leaf.path  # the IR names a mixture's Repeat `experts`
        base = f"{found['experts']}.{found['proj']}"
        out.setdefault(base, []).append(f"{leaf.path}.weight")
        if leaf.node.bias:
            out.setdefault(f"{base}_bias", []).append(f"{leaf.path}.bias")
    return out


def stack(ir: IR, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Per-expert tensors -> the generated model's stacked ones (others as they are)."""
    out = dict(state)
    for stacked, parts in stacks(ir).items():
        if all(p in out for p in parts):
            out[stacked] = torch.stack([out.pop(p) for p in parts])
    return out


def unstack(ir: IR, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The generated model's stacked tensors -> one per expert (others as they are)."""
    out = dict(state)
    for stacked, parts in stacks(ir).items():
        if stacked in out:
            out.update(zip(parts, out.pop(stacked).unbind(0), strict=True))
    return out
