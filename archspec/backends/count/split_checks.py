"""The checks of a context- or expert-parallel layout against the model and the sequence,
one message each naming the values: the one place `count`, `plan` and `bench --nproc` ask.

- Expert parallelism (`ep`) deals each mixture's routed experts out over ep of the
  data-parallel ranks: the model needs experts, ep divides them, and ep divides the
  data-parallel ranks (the ranks sharing the experts are data ranks: each trains on its own
  rows).
- Context parallelism (`cp`) splits each sequence over cp ranks as Megatron-Core's ring
  attention and the generated `parallelize` (`archspec.runtime.context_parallel`) split it
  under a causal mask: 2·cp chunks, rank r taking chunks r and 2·cp - 1 - r so every rank
  sees as much of the triangle. A bidirectional model (an encoder) gains nothing from that
  balancing and neither runs one, nor sliding-window layers or layers rotating by a local
  position, whose masks the chunks do not follow.
"""

from __future__ import annotations

from archspec.errors import SpecError
from archspec.ir.nodes import IR, Attention, MoE
from archspec.ir.visit import walk


def check_expert_split(ir: IR, ep: int, data_ranks: int | None = None) -> None:
    """ep at least 1; beyond 1, a model with experts that ep divides, and (when given)
    `data_ranks` data-parallel ranks that ep divides."""
    if ep < 1:
        raise SpecError(f"--ep takes 1 or more ranks (got {ep:,})")
    if ep == 1:
        return
    moes = [p.node for p in walk(ir.root) if isinstance(p.node, MoE)]
    if not moes:
        raise SpecError(f"--ep {ep}: {ir.name} has no experts (no mixture-of-experts layer)")
    for moe in moes:
        experts = ir.value(moe.n_experts)
        if experts % ep:
            raise SpecError(f"--ep {ep} does not divide the {experts} experts")
    if data_ranks is not None and data_ranks % ep:
        raise SpecError(
            f"--ep {ep} does not divide the {data_ranks} data-parallel ranks",
            hint="expert-parallel ranks are data-parallel ranks that share the experts",
        )


def check_context_split(ir: IR, cp: int, seq: int | None = None) -> None:
    """cp at least 1; beyond 1, a causal decoder without windowed or locally rotated layers,
    and (when given) a sequence of `seq` positions that 2·cp equal chunks divide."""
    if cp < 1:
        raise SpecError(f"--cp takes 1 or more ranks (got {cp:,})")
    if cp == 1:
        return
    if ir.root.layout != "decoder":
        raise SpecError(
            f"--cp {cp}: only a causal decoder is split over cp; {ir.name}'s layout is "
            f"{ir.root.layout}"
        )
    if any(isinstance(p.node, Attention) and p.node.mask.windowed for p in walk(ir.root)):
        raise SpecError(f"--cp {cp}: sliding-window layers are not split over cp")
    if any(stack.local_position is not None for stack in ir.root.stacks):
        raise SpecError(f"--cp {cp}: layers rotating by a local_position are not split over cp")
    if seq is not None and seq % (2 * cp):
        raise SpecError(
            f"--cp {cp}: the {seq} positions do not split into {2 * cp} equal chunks",
            hint=f"causal load balancing gives each rank two chunks: --seq a multiple of {2 * cp}",
        )


def check_generated_mesh(cp: int, ep: int) -> None:
    """The generated `parallelize` lays experts out beside data and tensor parallelism, not
    beside context parallelism."""
    if ep > 1 and cp > 1:
        raise SpecError(
            f"--ep {ep} with --cp {cp}: expert parallelism is laid out beside data and "
            "tensor parallelism, not context parallelism"
        )
