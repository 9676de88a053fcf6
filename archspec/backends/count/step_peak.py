"""The peak memory of one whole training step on one device: forward, loss, backward, optimizer.

`memory_figures` adds up what a device holds (weights, gradients, optimizer states, the
activations kept for backward), but no moment of a step holds exactly that sum: gradients do
not exist while the activations are all alive (`zero_grad(set_to_none=True)`, PyTorch's
default, frees them after each step), and transient buffers come on top of both. The peak is
the weights and optimizer states, which stay, plus the largest of these moments (what PyTorch
allocates, read from autograd's formulas and measured with archspec's tensor tracker in
tests/test_train_peak.py):

- the loss's backward: every kept activation, and the gradients of the log-probabilities and
  of the logits (nll_loss's and log_softmax's backward, B·S·vocab each);
- the head's backward: every kept activation but the log-probabilities, the gradient of the
  logits, of the hidden states (B·S·d_model) and of the head's weight (vocab·d_model);
- the backward of the last block's MLP (the first block the backward runs): what every
  block but the last keeps, the last block's activations (under full recomputation, rebuilt)
  up to the op that peaks, the gradients flowing through the MLP (the residual stream's,
  B·S·d_model; the hidden units', B·S·d_ff, three times for a gated MLP's product) and the
  gradients of the head, pooler and final norm (block_backward.py);
- the backward of the first block's MLP (the last it runs): the same inside the first block,
  with no other block's activations left but every gradient made except the first block's
  and the first stack's embeddings'. Full recomputation keeps one B·S·d_model tensor per
  block: where a block's parameters outweigh it, this is the peak;
- the end of the backward: every gradient, and for token embeddings used twice (a tied head, an
  encoder and a decoder) the second use's gradient of the shared matrix and the sum autograd
  accumulates out of place (2·vocab·d_model); under DTensor's tensor parallelism (without
  sequence parallelism) the embedding's backward makes the whole table's gradient on every
  rank, beside a tied head's share of it;
- the optimizer step: every gradient, and for AdamW's foreach implementation one temporary as
  large as the parameters (`torch._foreach_sqrt` of the second moments, then divided in
  place); the fused kernel updates in place.

One device without pipeline parallelism (the step's order is a pipeline schedule's otherwise).
A rank of the generated `parallelize`'s layouts gives its own terms (`RankTerms`, made by
rank_peak.py): its activations, its gradients and when they are whole or sharded, and what it
holds besides at each moment (FSDP2's gathered parameters), and under FSDP2 alone the
moments of the first and the last block's reduce-scatter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sympy as sp

from archspec.backends.count.activations import ActivationCounter, activation_parts
from archspec.backends.count.block_backward import BackwardMoment, block_moments
from archspec.backends.count.layout import vocab_rows
from archspec.backends.count.memory import COMPUTE_BYTES, GRAD_BYTES, MemoryFigures
from archspec.backends.count.params import parameter_count
from archspec.backends.count.passes import S_DEC, B, S
from archspec.errors import SpecError
from archspec.ir.nodes import IR

OPTIMIZER_IMPLEMENTATIONS = ("fused", "foreach")


@dataclass(frozen=True)
class StepPeak:
    """Bytes on the device at the peak of a training step: `resident` (weights and optimizer
    states) plus the largest of `moments`, each named by when it happens."""

    resident: sp.Expr
    moments: dict[str, sp.Expr]

    @property
    def peak(self) -> sp.Expr:
        return self.resident + sp.Max(*self.moments.values())

    def at(self, values: dict) -> tuple[int, str]:
        """(peak bytes, the moment it happens) at the given sizes."""
        evaluated = {k: int(sp.ceiling(v.xreplace(values))) for k, v in self.moments.items()}
        moment = max(evaluated, key=evaluated.__getitem__)
        return int(sp.ceiling(self.resident.xreplace(values))) + evaluated[moment], moment


@dataclass(frozen=True)
class RankTerms:
    """One rank's own terms of the moments (rank_peak.py makes them)."""

    counter_class: type[ActivationCounter]  # what the rank keeps for backward
    gradients: sp.Expr  # bytes of all the rank's gradients, as the optimizer sees them
    # Bytes alive at a block's backward moment (block_backward.py), named as in `moments`:
    # its activations and the gradients made by then.
    block_moment: Callable[[BackwardMoment, str], sp.Expr]
    held: Callable[[str], sp.Expr]  # what the rank holds besides at `moment`
    optimizer_temporaries: sp.Expr  # the optimizer step's own buffers
    # What the rank holds besides the activations and the gradient of the block's input when
    # FSDP2 reduce-scatters the first or the last block's gradients (named as in `moments`);
    # None where those moments are not counted.
    reduce_scatter: Callable[[str], sp.Expr] | None = None
    # Bytes of a compute-time parameter and of its gradient before the reduce-scatter: 2
    # under FSDP2's mixed precision (param_dtype bf16: the activations bf16 too), else 4.
    param_bytes: int = 4


def step_peak(
    ir: IR, m: MemoryFigures, optimizer_impl: str = "fused", rank: RankTerms | None = None
) -> StepPeak:
    """The peak of one training step with the layout and dtypes of `m`; for one rank of a
    multi-process layout with its `rank` terms (which replace `optimizer_impl`'s)."""
    if optimizer_impl not in OPTIMIZER_IMPLEMENTATIONS:
        raise SpecError(f"optimizer implementation is fused or foreach (got '{optimizer_impl}')")
    par = m.parallel
    if par.pp > 1:
        raise SpecError("the step's peak is worked out for one pipeline stage (--pp 1)")
    c, g = COMPUTE_BYTES[m.dtype], GRAD_BYTES[m.grad_dtype]
    loss = c  # the bytes of each element of the loss's log-probabilities
    if rank is not None:
        # The generated model's loss casts the logits to fp32 (`ActivationCounter.op_loss`).
        c, g, loss = rank.param_bytes, rank.param_bytes, 4
    split = par.sp and par.tp > 1
    counter = rank.counter_class if rank is not None else None
    parts = activation_parts(
        ir, c, m.attn, m.recompute, par.tp, split, m.device, par.engine, counter_class=counter
    )
    kept = (parts.total if rank is not None else m.activations) - parts.rebuilt
    gradients = rank.gradients if rank is not None else m.gradients
    total = parameter_count(ir.root)

    def block_moment(moment: BackwardMoment, name: str) -> sp.Expr:
        # One device: the gradients made by then are shared out as the parameters are.
        if rank is not None:
            return rank.block_moment(moment, name)
        return moment.activations + gradients * moment.made_params / total

    model = ir.root
    moments: dict[str, sp.Expr] = {}
    head = model.lm_head
    d = model.d_model
    # Vocabulary-parallel: each rank has its share of the vocabulary (Megatron-LM's padded;
    # DTensor's torch.chunk piece), and of the logits (the torch engine gathers them whole).
    rows = model.vocab_size
    if par.tp > 1:
        rows = vocab_rows(ir.value(rows), par.tp, par.engine)
    if head is not None:
        vocab = model.vocab_size if par.engine == "torch" else rows
        tokens = B * _longest(model)
        # nll_loss's and log_softmax's backward: two gradients of the fp32 log-probabilities.
        moments["loss backward"] = kept + 2 * tokens * vocab * loss
        # The gradient of the logits (compute dtype) in place of the log-probabilities.
        logits = tokens * vocab * (c - loss)
        moments["head backward"] = kept + logits + tokens * d * c + rows * d * g
    # The backward of the last block's MLP and of the first block's (block_backward.py).
    for which in ("last", "first"):
        name = f"{which} block's backward"
        candidates = [
            block_moment(moment, name)
            for moment in block_moments(
                ir, which, c, m.attn, m.recompute, par.tp, split, m.device, par.engine,
                counter_class=counter or ActivationCounter,
            )
        ]  # fmt: skip
        if candidates:
            moments[name] = sp.Max(*candidates)
    if rank is not None and rank.reduce_scatter is not None and parts.layers:
        # A block's post_backward (rank_peak.py): its backward over, what it kept is freed;
        # the gradient of its input is alive. The first block's: no block's kept is left.
        blocks = {"last": kept - parts.after - parts.layers[-1][1], "first": parts.before}
        for which, alive in blocks.items():
            name = f"{which} block's reduce-scatter"
            moments[name] = alive + B * _longest(model) * d * c + rank.reduce_scatter(name)
    # The token embeddings used twice (by a tied head, or by an encoder and a decoder): the
    # second use's gradient and the out-of-place sum autograd accumulates.
    tied = head is not None and head.tied_to is not None
    shared = tied or model.layout == "encoder-decoder"
    table = model.vocab_size * d * g
    end = 2 * table if shared else 0
    if par.engine == "torch" and par.tp > 1 and not split:
        # DTensor's vocabulary-parallel embedding (over the replicated token ids) makes the
        # whole table's gradient on every rank before keeping the rank's rows; a tied head's
        # share waits beside it to be summed.
        end = table + (rows * d * g if tied else 0)
    moments["end of backward"] = gradients + end
    # foreach AdamW's sqrt of the fp32 second moments, sharded as they are under ZeRO.
    sharded = par.dp if par.zero >= 1 else 1
    temporaries = 4 * m.first.params / sharded if optimizer_impl == "foreach" else 0
    if rank is not None:
        temporaries = rank.optimizer_temporaries
    moments["optimizer step"] = gradients + temporaries
    if rank is not None:
        moments = {name: bytes_ + rank.held(name) for name, bytes_ in moments.items()}
    return StepPeak(m.weights + m.optimizer_states, moments)


def _longest(model) -> sp.Expr:
    """The positions of the last stack's tokens (the decoder's in an encoder-decoder)."""
    return S_DEC if model.layout == "encoder-decoder" else S
