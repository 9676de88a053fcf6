"""What one rank keeps for backward under the generated `parallelize`'s context and expert
parallelism (count's torch engine; tensor parallelism and FSDP2 are `activations`' own).

- cp (`archspec.runtime.context_parallel`): what comes before the blocks (embeddings, the
  positions) and after them (the last block's output gathered back, the final norm, the head,
  the loss) runs on every rank over the whole sequence; inside the blocks each rank runs its
  S / cp positions, but attention all-gathers the keys and values, and the fused kernel keeps
  the gathered ones, S positions each (the rank's own S / cp are kept by nothing: RoPE keeps
  only its angles). The blocks share one additive mask over (S / cp queries, S keys), which
  the kernel keeps, and rotary angles for the rank's own positions.
- ep (`archspec.runtime.expert_parallel`): each rank routes its own rows, and its experts
  run on the rows the ranks' tokens choose them for. Which experts the tokens choose depends
  on the weights and the data, so it is an input, as the batch is (`ExpertLoad`): the rows
  the rank's experts receive relative to balanced routing, where they receive as many as
  the rank's own tokens send (top_k per token per mixture layer: `balanced_routed_rows`).
  The ranks' experts receive every routed row once between them, so the loads of an ep
  group average 1; 1 (the default) is their mean. What a rank keeps is linear in each
  layer's received rows (its experts' activations and two int64 indices per row) with the
  same bytes per row in every mixture layer (one mixture per spec), so the ratio over all
  the step's layers (`ExpertLoad.step`) gives its saved tensors exactly: a repeated stack
  stays one op, interpreted once at that ratio and counted times its number of layers. The
  backward of the last block's MLP (`block_backward`) holds that block's own received rows
  beside what the others keep, and the first block's its own alone: `ExpertLoad.first` and
  `.last`, the ratios in the first and the last mixture layer (`rank_peak` interprets the
  block at its own ratio and puts the step's total back).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sympy as sp

from archspec.backends.count.activations import INDEX, ActivationCounter
from archspec.backends.count.passes import B, Lengths
from archspec.backends.count.routed_load import loaded
from archspec.ir import ops
from archspec.ir.nodes import IR, MoE
from archspec.ir.visit import walk


def ep_dispatch_kept(received_rows: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """What an expert-parallel rank keeps beyond one process's for the `received_rows` its
    experts receive: (before the experts, after them). One process (`mix_experts`) keeps
    two int64 indices per (token, slot) pair of its own tokens: each pair's token (read by
    the gather of the routed rows and by the index_add that sums them back) and, after the
    experts, the pairs' order sorted by expert (read by the routing weights' gather); the
    counter counts those. `ExpertParallel.mix` keeps those two and, per row it receives,
    two more: before the experts the permutation that sorts the received rows (which come
    by source rank) by expert for the grouped matmuls, after them its inverse, which puts
    the experts' outputs back in arrival order. The experts' own activations are the
    interpreter's, over the received rows (`layout_counter`). The one place to change when
    the experts' layout changes."""
    return received_rows * INDEX, received_rows * INDEX


@dataclass(frozen=True)
class ExpertLoad:
    """The rows an expert-parallel rank's experts receive relative to balanced routing
    (exact ratios): over the step's mixture layers, and in its first and last mixture
    layer, which the backward moments of the model's first and last block read where those
    blocks are mixtures (the module docstring); `first` and `last` default to `step`."""

    step: sp.Expr = sp.Integer(1)
    first: sp.Expr | None = None
    last: sp.Expr | None = None

    def __post_init__(self) -> None:
        for name in ("first", "last"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, self.step)


def expert_load(ir: IR, tokens: int, rows_by_layer: Sequence[int]) -> ExpertLoad:
    """The load of a rank of `tokens` tokens whose experts received `rows_by_layer`, one
    count per mixture layer in the order the forward runs them (every layer's balanced
    share alike: top_k per token, one top_k per spec)."""
    mixtures = _mixtures(ir)
    layers = sum(count for count, _ in mixtures)
    if len(rows_by_layer) != layers:
        raise ValueError(f"{len(rows_by_layer)} counts of rows for {layers} mixture layers")
    balanced = balanced_routed_rows(ir, tokens)
    each = balanced // layers
    return ExpertLoad(
        sp.Rational(sum(rows_by_layer), balanced),
        sp.Rational(rows_by_layer[0], each),
        sp.Rational(rows_by_layer[-1], each),
    )


def balanced_routed_rows(ir: IR, tokens: int) -> int:
    """The rows an expert-parallel rank's experts receive over one forward of `tokens` of
    its own under balanced routing: as many as its tokens send, top_k each per mixture
    layer (`ExpertLoad` 1)."""
    return sum(count * top_k * tokens for count, top_k in _mixtures(ir))


def _mixtures(ir: IR) -> list[tuple[int, int]]:
    """(layers, top_k) of each mixture of experts in the tree."""
    return [
        (ir.value(placed.copies), ir.value(placed.node.top_k))
        for placed in walk(ir.root)
        if isinstance(placed.node, MoE)
    ]


def layout_counter(
    cp: int = 1, ep: int = 1, load: sp.Expr = 1, experts_sharded: bool = False
) -> type[ActivationCounter]:
    """The activation interpreter for a rank of a mesh with `cp` context-parallel and `ep`
    expert-parallel ranks (the plain one when both are 1); `load`: the rows the rank's
    experts receive over the step, relative to balanced routing (the module docstring; an
    exact ratio, e.g. sympy.Rational(received, balanced_routed_rows(...)));
    `experts_sharded`: FSDP2 shards the rank's experts (over dp_shard)."""
    if cp == 1 and ep == 1:
        return ActivationCounter

    class RankCounter(loaded(ActivationCounter, load)):  # type: ignore[misc, valid-type]
        expert_ranks = ep  # each rank holds n_experts / ep of every mixture's experts
        # ExpertParallel's hook divides each expert gradient by the data ranks (a new
        # tensor beside the one the backward made); FSDP2, where it shards the experts,
        # takes their parameters over and divides on its own.
        expert_gradient_copies = 2 if ep > 1 and not experts_sharded else 1

        def op_blocks(self, op: ops.Blocks) -> None:
            if cp == 1:
                super().op_blocks(op)
                return
            whole = self.lengths
            self.lengths = Lengths(whole.queries / cp, whole.keys)
            # The mask every block's attention reads: the rank's queries over all keys,
            # kept by the fused kernel and the selective checkpoint; a written-out core
            # (sinks) only adds it to the scores.
            attentions = [run.node.attn for run in op.repeat.runs]  # type: ignore[attr-defined]
            if self.recompute == "selective" or not any(a.sinks for a in attentions):
                self.keep_new(self.lengths.queries * whole.keys, self.c, rows="pairs")
            super().op_blocks(op)
            self.lengths = whole

        def op_attend(self, op: ops.Attend) -> None:
            super().op_attend(op)
            gathered = self.lengths.keys - self.lengths.queries
            # A written-out core with sinks counts its keys and values over every key
            # already (each kv head repeated per query head, or the gathered tensor itself).
            counted = op.sinks and self.recompute != "selective"
            if cp > 1 and gathered != 0 and not counted:
                # The gathered keys and values, beyond the rank's own positions.
                self.keep_new(B * gathered * (op.k.width + op.v.width), self.c)

        def op_dispatch(self, op: ops.Dispatch) -> None:
            super().op_dispatch(op)  # its rows received (routed_load.loaded)
            if ep > 1:
                self.keep_new(ep_dispatch_kept(self.lengths.rows(op.out) * load)[0], 1)

        def op_combine(self, op: ops.Combine) -> None:
            super().op_combine(op)
            if ep > 1:
                self.keep_new(ep_dispatch_kept(self.lengths.rows(op.expert_out) * load)[1], 1)

    return RankCounter
