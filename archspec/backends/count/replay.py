"""What the backward pass replays of a checkpointed block: the whole block, or the block up to
torch's early stop. count's FLOPs and plan's op costs, step time and hardware FLOPs ask here.
What the backward rebuilds (count's memory) does not depend on it: the early stop stops once it
has rebuilt every tensor the forward saved, and a whole replay rebuilds no more of them.

A checkpoint keeps a block's inputs and runs the block's forward again in the backward pass.
How much of it runs again is a property of the checkpoint implementation, so of the training
stack, not of the model:

- reentrant: a custom autograd Function whose backward reruns the whole function under
  enable_grad, then backpropagates through its outputs. Megatron-LM's and Megatron-Core's
  full recomputation (`tensor_parallel.checkpoint`, CheckpointFunction in
  megatron/core/tensor_parallel/random.py, `torch.autograd.backward(outputs, args)`, at
  Megatron-LM d98e8a6), so NeMo's; DeepSpeed's activation checkpointing, which
  Megatron-DeepSpeed runs (CheckpointFunction in
  deepspeed/runtime/activation_checkpointing/checkpointing.py at DeepSpeed 56c5223);
  metaseq's (OPT's) fairscale-derived checkpoint_wrapper (CheckpointFunction in
  metaseq/modules/checkpoint_activation_wrapper/checkpoint_activations.py at f7ffa5f);
  MosaicML Composer's FSDP activation checkpointing, which llm-foundry's MPT runs, by default
  (`activation_checkpointing_reentrant` defaults to True: composer/trainer/dist_strategy.py at
  029483a, CheckpointImpl.REENTRANT; llm-foundry's MPT yamls at 061f2c7 leave it unset).
- non-reentrant: torch.utils.checkpoint with use_reentrant=False, which the generated code
  runs (archspec/runtime/checkpoint.py) and torchtitan through torch's checkpoint_wrapper
  (its default CheckpointImpl.NO_REENTRANT, read in torch 2.13's
  torch/distributed/algorithms/_checkpoint/checkpoint_wrapper.py; called without one in
  torchtitan/parallelisms/parallelize_llama.py at 3faaa1a and 9dec370; NO_REENTRANT named at
  0413364). Its replay stops early by default (`torch.utils.checkpoint.set_checkpoint_early_stop`):
  it counts the tensors the forward saved for backward and stops, raising inside the replay,
  as soon as it has saved as many again. An op saves its inputs before it computes, its
  outputs after: so the replay runs up to the last op that saves anything, and of that op only
  what comes before a save of its inputs alone. A pre-norm block ends in residual adds (which
  save nothing) fed by a projection (which saves its input and its weight, not its output): the
  replay stops at that projection's save, and neither its matmul nor the adds run again.
- pruned: JAX's rematerialisation (jax.checkpoint, flax's nn.remat), which MaxText runs: "only
  the inputs of a jax.checkpoint-decorated function might be saved, and any residuals consumed
  on the backward pass are re-computed from those inputs as needed" (JAX's documentation,
  "Control autodiff's saved values with jax.checkpoint"). So the replay runs the ops whose
  output some op of the block keeps for its backward, and what they are computed from: not a
  projection whose output only feeds residual adds, wherever it sits. In a parallel block
  (PaLM's, MaxText's) that is the attention's output projection as well as the MLP's down
  projection; in a sequential pre-norm block the attention's output feeds the second norm,
  which keeps its input, so the replay is torch's early stop.
"""

from __future__ import annotations

from collections.abc import Sequence

from archspec.backends.count.conventions import NO_RECOMPUTE
from archspec.ir import ops

REENTRANT, NON_REENTRANT, PRUNED = "reentrant", "non-reentrant", "pruned"
CHECKPOINTS = (REENTRANT, NON_REENTRANT, PRUNED)


def early_stop(block: Sequence[ops.Op]) -> int:
    """How many of a block's leaf ops, in forward order, torch's non-reentrant checkpoint runs
    again before it stops: all but the trailing residual adds and the projection feeding them
    (which saves only its input). A block that ends in anything else (a norm, dropout, which
    saves its mask, an MoE's combine) is replayed whole."""
    end = len(block)
    while end and isinstance(block[end - 1], ops.Add):
        end -= 1
    if end < len(block) and end and isinstance(block[end - 1], ops.LinearOp):
        end -= 1
    return end


def unread(block: Sequence[ops.Op], lengths, ctx) -> list[bool]:
    """For each leaf op of a block (its lowered ops with each sublayer call expanded, in
    forward order: what the interpreters visit), whether the backward reads nothing it
    computes: no op of the block keeps its output (or a view of it), it keeps nothing of its
    own making, and no op the backward does read is computed from it. The activation
    interpreter (activations.py) says what each op keeps; `ctx` is the stack's values the
    block's sublayers are lowered with."""
    from archspec.backends.count.activations import ActivationCounter
    from archspec.ir.lower import lower

    returned: dict[ops.Value, ops.Value] = {}  # a sublayer call's result -> what made it

    def expand(op_list) -> list[ops.Op]:
        out = []
        for op in op_list:
            if isinstance(op, ops.Call):
                sub = lower(op.module, op.args[0], ctx)
                out += expand(sub.ops)
                if op.out is not None and sub.out is not None:
                    returned[op.out.storage] = sub.out.storage
            else:
                out.append(op)
        return out

    def made(value: ops.Value) -> ops.Value:
        storage = value.storage
        while storage in returned:
            storage = returned[storage]
        return storage

    leaves = expand(block)
    maker: dict[ops.Value, int] = {}  # a storage -> the first op making it (not its views)
    for i, op in enumerate(leaves):
        if op.out is not None:
            maker.setdefault(made(op.out), i)
    counter = ActivationCounter(lengths, 2, "flash", NO_RECOMPUTE)
    counter.ctx = ctx
    scope = counter.scopes[-1]
    read = [False] * len(leaves)
    for i, op in enumerate(leaves):
        kept, internal = set(scope.kept), len(scope.internal)
        counter.run([op])
        read[i] = len(scope.internal) > internal  # statistics only this op makes
        for storage in set(scope.kept) - kept:
            j = maker.get(made(storage))
            if j is not None:
                read[j] = True
    # What a replayed op is computed from is replayed too, back to the block's inputs.
    for i in reversed(range(len(leaves))):
        if read[i]:
            for value in leaves[i].inputs:
                j = maker.get(made(value))
                if j is not None and j < i:
                    read[j] = True
    return [not r for r in read]


def full_replays(past_early_stop: bool, checkpoint: str, unread: bool = False) -> bool:
    """Whether full recomputation under `checkpoint` replays an op (`past_early_stop`: the op
    is among those `early_stop` leaves out; `unread`: among those `unread` finds)."""
    if checkpoint == PRUNED:
        return not unread
    return checkpoint == REENTRANT or not past_early_stop
