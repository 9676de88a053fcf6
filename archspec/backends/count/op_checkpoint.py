"""Per-op selective activation checkpointing (`--recompute op`): which of a block's ops keep
their outputs, and which the backward pass replays.

torchtitan's "selective op" checkpointing wraps each block in a checkpoint whose policy saves
the outputs of the ops in its `_save_list` (`aten.mm`, the fused SDPA kernels,
`reduce_scatter_tensor`, `abs`, `max`) except every second `aten.mm` of the block, counted in
forward order, and recomputes everything else when the backward pass needs it
(`_apply_ac_to_transformer_block`: torchtitan/parallelisms/parallelize_llama.py at 9dec370,
lines 214-278; the same policy at 0413364, bcdeaa3 and 820504e). In a Llama block the
projections run wq, wk, wv, wo, w1, w3, w2, so wk, wo and w3 are replayed, with the norms,
RoPE, the activation, the products and the residual adds.

What reaches `aten.mm` is a bias-free nn.Linear: a biased one runs `aten.addmm`, which the list
does not name, and an expert's grouped matmul neither, so both are replayed and neither moves
the count. An attention that no fused kernel runs (the math path, soft-capped scores) replays
its matmuls, which are batched (`bmm`), and its softmax.

The replay stops early, as torch's non-reentrant checkpoint does under full recomputation too
(replay.py): a pre-norm block's last projection and its adds are not replayed.
"""

from __future__ import annotations

from archspec.backends.count.conventions import RECOMPUTE
from archspec.backends.count.replay import early_stop
from archspec.ir import ops

OP = "op"
# What `plan` and the memory model take; count's FLOP figures take RECOMPUTE (no `op`).
PLAN_RECOMPUTE = (*RECOMPUTE, OP)


class OpCheckpoint:
    """Walks one block's ops in forward order and says, op by op, whether the policy keeps the
    op's output (the rest of the block is replayed in the backward pass)."""

    def __init__(self, attn: str) -> None:
        self.fused_attention = attn == "flash"
        self.mm = 0  # the block's aten.mm calls so far
        self.visited: list[tuple[ops.Op, bool]] = []  # each op so far, and whether kept

    def keeps(self, op: ops.Op) -> bool:
        kept = self._keeps(op)
        self.visited.append((op, kept))
        return kept

    def replayed(self) -> list[bool]:
        """For each op visited, in order: whether the backward pass replays it (not kept, and
        not in the trailing run the early stop skips)."""
        end = early_stop([op for op, _ in self.visited])
        return [not kept and i < end for i, (_, kept) in enumerate(self.visited)]

    def _keeps(self, op: ops.Op) -> bool:
        if isinstance(op, ops.LinearOp):
            if op.module.bias or op.x.copies != 1:
                return False  # aten.addmm, a routed expert's grouped matmul: replayed
            self.mm += 1
            return self.mm % 2 == 1
        if isinstance(op, ops.Attend):
            return self.fused_attention and op.softcap is None and not op.sinks
        return False
