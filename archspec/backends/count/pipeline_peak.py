"""The peak of a training step on each rank of the generated `pipeline` (1F1B, GPipe, and
with two stages a rank interleaved 1F1B, looped BFS and the zero-bubble schedules;
torch.distributed.pipelining, one sequence per micro-batch), fp32 with torch.optim.AdamW as
`bench --nproc --pp` trains.

A stage's gradients are made by its first micro-batch's backward and accumulated in place by
the others' (AccumulateGrad adds each new gradient into the one that exists, then frees it),
so from the second backward on the rank holds every gradient of its stage beside the
activations of the micro-batches in flight (the schedule's: `bench.pipeline.stage_predictions`).
With two stages, a backward sees the gradients of the stages that have had one by then
(`schedule_walk`: under looped BFS the saved tensors peak before any); a stage's first
backward makes its gradients block by block as it frees its micro-batch's saved tensors, so
it holds the most at its start or at its end. On top of both, the largest transient of one
micro-batch's backward:

- the backward of a block's MLP down projection (the largest the blocks run): the gradient
  flowing through the residual stream (one sequence × d_model), the gradient of the
  projection's input and the projection's new weight (and bias) gradient;
- on the last stage, the head's backward: the gradient of the logits, of the hidden states
  and the head's new weight gradient;
- the optimizer step: every gradient and AdamW's temporaries (`rank_peak.adamw_temporaries`)
  over the stage's tensors in order.

The schedule receives each micro-batch's input (a later stage) and output gradient (an earlier
one) into a buffer of its own, a micro-batch × d_model each for each stage, kept from step to
step: they are held throughout. Resident: the stages' weights and AdamW moments, AdamW's step
counters (on the CPU) and the whole batch's token ids and targets.
"""

from __future__ import annotations

from archspec.backends.count.rank_peak import (
    INDEX,
    WEIGHT,
    RankPeak,
    adamw_temporaries,
    ordered_leaves,
)
from archspec.backends.count.schedule_walk import Backward
from archspec.backends.count.torch_layout import _shapes
from archspec.ir.nodes import IR, MLP, Block, Linear, Norm
from archspec.ir.visit import walk


def stage_tensors(ir: IR, layers: list[range], stage: int) -> list[int]:
    """Elements of each parameter tensor of `stage` in `parameters()` order: its blocks', the
    embeddings on the first stage, the final norm and head on the last (a head tied to the
    embeddings with a copy of its own there, last)."""
    last = len(layers) - 1
    out: list[int] = []
    for node in _stage_leaves(ir, layers, stage):
        out += [_elements(ir, shape) for shape in _shapes(node)]
    head = ir.root.lm_head
    if head is not None and head.tied_to is not None and last > 0 and stage == last:
        out.append(ir.value(head.in_features * head.out_features))
    return out


def _stage_leaves(ir: IR, layers: list[range], stage: int):
    """The leaf modules of `stage`, in `parameters()` order."""
    last = len(layers) - 1
    seen_blocks = False
    for node, _, layer in ordered_leaves(ir):
        if layer is not None:
            seen_blocks = True
            mine = layer in layers[stage]
        else:
            mine = stage == (last if seen_blocks else 0)
        if mine:
            yield node


def split_backward_gradients(ir: IR, layers: list[range], stage: int, seq: int) -> int:
    """Bytes one micro-batch of `seq` positions keeps from its input backward to its weight
    backward under the zero-bubble schedules. torch's input backward
    (pipelining._backward.stage_backward_input) captures, at each autograd node where a
    weight's gradient meets the input's, the gradient of that node's output, for the weight
    backward to start from: of every linear and norm of the stage, rows × its output width
    (a tied head's copy on the last stage among them). On every stage but the last, the
    residual add of its last block hands the gradient it received unchanged to the output of
    its last sublayer (of each, in a parallel block; none where the output is scaled before
    the add): that one is held already. On the first stage, nothing: its input needs no
    gradient, so torch skips its input backward and runs the whole backward as its weight
    backward."""
    if stage == 0:
        return 0
    widths = [
        node.out_features if isinstance(node, Linear) else node.dim
        for node in _stage_leaves(ir, layers, stage)
        if isinstance(node, Linear | Norm)
    ]
    if stage < len(layers) - 1:
        block = _block_of(ir, layers[stage][-1])
        parallel = block.entry.norm_position in ("shared", "per_branch")
        received = len(block.sublayers) if parallel else 1
        if block.residual_multiplier == 1.0:
            widths += [-ir.root.d_model] * received
    return seq * WEIGHT * sum(ir.value(width) for width in widths)


def _block_of(ir: IR, layer: int) -> Block:
    """The block of `layer`, counted over the stacks' runs in turn."""
    first = 0
    for stack in ir.root.stacks:
        for run in stack.blocks.runs:
            first += ir.value(run.count)
            if layer < first:
                return run.node
    raise ValueError(f"no layer {layer}")


def loss_saved(ir: IR, seq: int) -> int:
    """What the loss over one micro-batch of `seq` positions saves (fp32; as
    `activations.ActivationCounter.op_loss` counts it): the log-softmax over the logits, the
    targets and the sum of their weights."""
    vocab = ir.value(ir.root.lm_head.out_features)
    return seq * vocab * WEIGHT + seq * INDEX + WEIGHT


def _elements(ir: IR, shape) -> int:
    total = 1
    for d in shape:
        total *= ir.value(d)
    return total


def pipeline_peak(
    ir: IR, layers: list[range], stages: list[int], in_flight: int, micro_batches: int,
    seq: int, device: str = "cpu", micro_batch: int = 1,
    backwards: list[Backward] | None = None,
) -> RankPeak:  # fmt: skip
    """The peak of the rank running `stages` of `layers` (each stage's layer range; one
    stage, or the two of a looped schedule, in the order the rank holds them), holding
    `in_flight` bytes of activations at its peak, over `micro_batches` of `micro_batch`
    sequences of `seq` positions. `backwards`: what is alive at each backward the rank runs
    (`schedule_walk.walk`); by default, each stage's steady state (1F1B's from the second
    backward on): `in_flight` beside every gradient of the rank."""
    by_stage = {stage: WEIGHT * sum(stage_tensors(ir, layers, stage)) for stage in stages}
    tensors = [n for stage in stages for n in stage_tensors(ir, layers, stage)]
    gradients = sum(by_stage.values())
    if backwards is None:
        backwards = [Backward(stage, in_flight, frozenset(stages)) for stage in stages]

    def alive(b: Backward) -> int:
        # A stage's first backward makes its gradients block by block as it frees the
        # blocks' saved tensors: the most is at its start or at its end.
        made = b.alive + sum(by_stage[s] for s in b.with_gradients)
        if not b.makes:
            return made
        return max(made - b.makes, made - by_stage[b.stage])

    def worst(of: set[int]) -> int:  # the most alive at a backward of a stage in `of`
        return max(alive(b) for b in backwards if b.stage in of)

    d = ir.value(ir.root.d_model)
    seq *= micro_batch  # positions per micro-batch
    row = seq * d * WEIGHT  # one micro-batch of hidden states
    down = max(
        (p.node for p in walk(ir.root) if isinstance(p.node, Linear) and _is_down(p)),
        key=lambda n: ir.value(n.in_features * n.out_features),
    )
    new_weight = ir.value(down.in_features * down.out_features) + (
        ir.value(down.out_features) if down.bias else 0
    )
    block = row + seq * ir.value(down.in_features) * WEIGHT + WEIGHT * new_weight
    moments = {"block backward": block + worst(set(stages))}
    last = len(layers) - 1
    head = ir.root.lm_head
    if last in stages and head is not None:
        vocab = ir.value(head.out_features)
        moments["head backward"] = seq * vocab * WEIGHT + row + vocab * d * WEIGHT
        moments["head backward"] += worst({last})
    optimizer = "single" if device == "cpu" else "foreach"
    moments["optimizer step"] = gradients + adamw_temporaries(tensors, optimizer)
    # The schedule's receive buffers: inputs on every stage but the first, output gradients
    # on every stage but the last.
    buffers = micro_batches * row * sum((stage > 0) + (stage < last) for stage in stages)
    moments = {k: v + buffers for k, v in moments.items()}
    steps = len(tensors) * WEIGHT if device == "cpu" else 0
    resident = 3 * gradients + steps + 2 * INDEX * micro_batches * seq
    return RankPeak(min(stages), resident, moments, in_flight, sum(tensors))


def _is_down(placed) -> bool:
    parent = placed.ancestors[-1] if placed.ancestors else None
    return isinstance(parent, MLP) and placed.node is parent.down
