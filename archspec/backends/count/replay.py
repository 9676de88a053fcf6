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
"""

from __future__ import annotations

from collections.abc import Sequence

from archspec.ir import ops

REENTRANT, NON_REENTRANT = "reentrant", "non-reentrant"
CHECKPOINTS = (REENTRANT, NON_REENTRANT)


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


def full_replays(past_early_stop: bool, checkpoint: str) -> bool:
    """Whether full recomputation under `checkpoint` replays an op (`past_early_stop`: the op
    is among those `early_stop` leaves out)."""
    return checkpoint == REENTRANT or not past_early_stop
