"""The tensor-parallel collectives of one block, forward and backward, and what recomputing it
runs again.

A tensor-parallel block (Megatron-LM's, Shoeybi et al. 2019) all-reduces the output of each
row-parallel projection, forward, and of the matching column-parallel input, backward: one
all-reduce of the block's activation per row-parallel op each way. Under sequence parallelism
(Korthikanti et al. 2022, section 4.2.2) each all-reduce becomes a reduce-scatter back to the
rank's positions, and each sequence-sharded tensor the split ops read is all-gathered before
them (opcost.CostCounter.gathered: the normed hidden state, or a latent attention's latents);
the backward mirrors the forward. Folded experts (expert tensor parallelism 1) run whole on the
rank's own positions and need none; unfolded ones are gathered as the hidden state (the
dispatcher's gather).

A stack whose layers differ (DeepSeek-V3's dense layers before its MoE ones, a window pattern)
has one block per run of identical layers; the step sums each run's collectives over the
layers a stage holds (step.py), so a MoE layer's extra row-parallel projection is counted on
the MoE layers only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from archspec.backends.count.op_checkpoint import OP
from archspec.backends.count.replay import full_replays
from archspec.plan.collectives import Link, all_gather, all_reduce, reduce_scatter
from archspec.plan.fp8_comm import FLOAT8_BYTES
from archspec.plan.opcost import OpCost
from archspec.plan.recompute_block import is_full


@dataclass(frozen=True)
class TensorParallel:
    """What a layout's tensor parallelism moves: the group, its link, the elements of the
    hidden state a rank's positions hold and the bytes of an element."""

    tp: int
    link: Link
    hidden: float  # the rank's positions × d_model: what an unfolded expert's gather moves
    element: float  # bytes of a compute-dtype element
    sequence_parallel: bool
    fp8_gather: bool  # the stack gathers float8 matmuls' inputs in one byte (fp8_comm.py)
    folded: bool  # experts folded into the tensor-parallel ranks (etp 1): no collectives

    @property
    def activation(self) -> float:
        """Bytes of the hidden state on the rank's positions (what each reduction moves)."""
        return self.hidden * self.element


@dataclass(frozen=True)
class BlockTP:
    """Seconds of one block's tensor-parallel collectives: forward and backward (`layer`), and
    what a recomputation of it adds (`recompute`, before its full or selective share)."""

    layer: float
    recompute: float


def block_tp(ops: list[tuple[OpCost, Any, Any, Any]], gathers: list[tuple[float, OpCost]],
             par: TensorParallel, recompute: str, checkpoint: str) -> BlockTP:  # fmt: skip
    """The collectives of a block whose ops (step.py's numbers: the cost first) are `ops`,
    with `gathers` the elements sequence parallelism gathers before each op that gathers,
    under a layout's recomputation `recompute` and the run's activation `checkpoint`."""

    def reduced(c: OpCost) -> bool:
        return c.tp == "row" and not (c.expert and par.folded)

    row_parallel = sum(1 for c, *_ in ops if reduced(c))
    gathered = 0.0
    if par.sequence_parallel:
        # Unfolded experts' rows are gathered as the hidden state. In float8 the stack may
        # gather a projection's input and its output gradient in one byte; the reduce-scatters
        # stay 16-bit (fp8_comm.py).
        each = gathers + [(par.hidden, c) for c, *_ in ops if reduced(c) and c.expert]
        gathered = sum(
            all_gather(elements * (FLOAT8_BYTES if par.fp8_gather and c.kind == "matmul"
                                   and c.in_fp8 else par.element), par.tp, par.link)
            for elements, c in each
        )  # fmt: skip
        after_row = reduce_scatter(par.activation, par.tp, par.link)
    else:
        after_row = all_reduce(par.activation, par.tp, par.link)
    forward = gathered + row_parallel * after_row
    if is_full(recompute):
        # A row-parallel projection past the early stop does not run again, nor the
        # all-reduce or reduce-scatter of its output (the all-gathers before the projections
        # feeding it do).
        skipped = sum(1 for c, *_ in ops if reduced(c)
                      and not full_replays(c.past_early_stop, checkpoint, c.unread))  # fmt: skip
        again = forward - skipped * after_row
    elif recompute == OP and par.tp > 1:
        # Per-op checkpointing keeps the reduce-scatters' outputs (they are on its save list)
        # and replays the all-gathers, or the all-reduces without sequence parallelism.
        again = gathered if par.sequence_parallel else forward
    else:
        again = 0.0
    return BlockTP(2 * forward, again)
