"""Peak memory of one step: the CUDA allocator's own counter on GPU, a tensor tracker on CPU.

On a GPU, `torch.cuda.max_memory_allocated` is exact and costs nothing, so the timed steps are
measured directly. On CPU there is no such counter (the process's resident size mixes in the
Python heap, the allocator's caches and whatever else the process holds), so one extra, untimed
step runs under `LiveTensors`: a dispatch mode that sees every tensor each ATen op creates and
adds up the bytes of the storages alive at each moment, on top of the tensors the step starts
with (weights, gradients, optimizer state, inputs). That is the CPU analogue of
max_memory_allocated: tensor bytes, without the allocator's rounding.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class LiveTensors(TorchDispatchMode):
    """Tracks the bytes of live tensor storages while active; `peak` is the high-water mark.

    `resident`: the tensors that exist before the step and stay (counted once each, by
    storage). Storages the step creates are counted from creation until freed; a weak
    reference's callback subtracts them, so views and in-place results are not counted twice.
    """

    def __init__(self, resident: Iterable[torch.Tensor] = ()) -> None:
        super().__init__()
        self._seen: dict[int, weakref.ref] = {}  # storage id -> weak reference
        self._size: dict[int, int] = {}  # storage id -> bytes counted for it
        self.live = self.peak = 0
        for t in resident:
            self._add(t)
        self.baseline = self.live

    def _add(self, t: torch.Tensor) -> None:
        if t.device.type == "meta":
            return
        storage = t.untyped_storage()
        key = id(storage)
        if key in self._seen and self._seen[key]() is storage:
            return
        size = storage.nbytes()
        self.live += size
        self._size[key] = size

        def freed(_ref: weakref.ref, key: int = key) -> None:
            self.live -= self._size.pop(key, 0)
            self._seen.pop(key, None)

        self._seen[key] = weakref.ref(storage, freed)
        self.peak = max(self.peak, self.live)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self._add(t)
        return out


def resident_tensors(*objects: object) -> list[torch.Tensor]:
    """The tensors a step starts with: a module's parameters, their gradients and buffers, an
    optimizer's state, and any tensors given directly or in mappings and sequences."""
    out: list[torch.Tensor] = []
    for obj in objects:
        if obj is None:
            continue
        if isinstance(obj, torch.nn.Module):
            for p in obj.parameters():
                out.append(p)
                if p.grad is not None:
                    out.append(p.grad)
            out.extend(obj.buffers())
        elif isinstance(obj, torch.optim.Optimizer):
            out.extend(t for t in tree_leaves(obj.state) if isinstance(t, torch.Tensor))
        else:
            out.extend(t for t in tree_leaves(obj) if isinstance(t, torch.Tensor))
    return out
