"""Activation checkpointing: recomputing in the backward pass instead of keeping."""

from collections.abc import Callable

import torch
import torch.utils.checkpoint
from torch import Tensor


def maybe_checkpoint(
    fn: Callable[..., Tensor],
    *args,
    enabled: bool,
    **kwargs,
) -> Tensor:
    """fn(*args, **kwargs); if enabled, through torch.utils.checkpoint: autograd keeps
    only the tensors among args (and the RNG state, so dropout draws the same masks
    again), and the backward pass runs fn again for what fn would have kept.
    """
    if not enabled:
        return fn(*args, **kwargs)
    return torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False, **kwargs)
