"""What one rank keeps for backward under the generated `parallelize`'s context and expert
parallelism (count's torch engine; tensor parallelism and FSDP2 are `activations`' own).

- cp (`archspec.runtime.context_parallel`): what comes before the blocks (embeddings, the
  positions) and after them (the last block's output gathered back, the final norm, the head,
  the loss) runs on every rank over the whole sequence; inside the blocks each rank runs its
  S / cp positions, but attention all-gathers the keys and values, and the fused kernel keeps
  the gathered ones, S positions each (the rank's own S / cp are kept by nothing: RoPE keeps
  only its angles). The blocks share one additive mask over (S / cp queries, S keys), which
  the kernel keeps, and rotary angles for the rank's own positions.
- ep (`archspec.runtime.expert_parallel`): each rank routes its own rows; `ep_routed_rows`
  says how many of the routed rows its experts receive. Which experts the tokens choose
  depends on the weights and the data, so the prediction is the balanced figure (each rank's
  experts receive as many rows as its tokens send, top_k per token): the mean over the ranks,
  exact for it, since the ranks' experts receive every routed row once between them
  (`ep_dispatch_kept` says what the rank keeps beyond one process).
"""

from __future__ import annotations

import sympy as sp

from archspec.backends.count.activations import INDEX, ActivationCounter
from archspec.backends.count.passes import B, Lengths
from archspec.ir import ops


def ep_dispatch_kept(routed_rows: sp.Expr) -> sp.Expr:
    """What an expert-parallel rank's dispatch keeps beyond one process's, for `routed_rows`
    (token, slot) pairs of its own tokens. One process (`mix_experts`) keeps two int64
    indices per pair: the pairs' order sorted by expert (read by the routing weights'
    gather) and each pair's token (read by the gather of the routed rows and by the
    index_add that sums them back). `ExpertParallel.mix` keeps those two and, per row it
    receives, two more: the permutation that sorts the received rows (which come by source
    rank) by expert for the grouped matmuls, and its inverse, which puts the experts'
    outputs back in arrival order. Over the ranks the received rows are the routed pairs;
    the experts' own activations are the interpreter's, over as many rows as the rank's
    tokens send (the balanced routing of the module docstring). The one place to change
    when the experts' layout changes."""
    return routed_rows * 2 * INDEX


def layout_counter(cp: int = 1, ep: int = 1) -> type[ActivationCounter]:
    """The activation interpreter for a rank of a mesh with `cp` context-parallel and `ep`
    expert-parallel ranks (the plain one when both are 1)."""
    if cp == 1 and ep == 1:
        return ActivationCounter

    class RankCounter(ActivationCounter):
        def op_blocks(self, op: ops.Blocks) -> None:
            if cp == 1:
                super().op_blocks(op)
                return
            whole = self.lengths
            self.lengths = Lengths(whole.queries / cp, whole.keys)
            # The mask every block's attention reads: the rank's queries over all keys.
            self.keep_new(self.lengths.queries * whole.keys, self.c, rows="pairs")
            super().op_blocks(op)
            self.lengths = whole

        def op_attend(self, op: ops.Attend) -> None:
            super().op_attend(op)
            gathered = self.lengths.keys - self.lengths.queries
            if cp > 1 and gathered != 0:
                # The gathered keys and values, beyond the rank's own positions.
                self.keep_new(B * gathered * (op.k.width + op.v.width), self.c)

        def op_dispatch(self, op: ops.Dispatch) -> None:
            super().op_dispatch(op)
            if ep > 1:
                self.keep_new(ep_dispatch_kept(self.lengths.rows(op.out)), 1)

    return RankCounter
