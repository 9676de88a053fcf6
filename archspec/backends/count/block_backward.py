"""What the backward pass holds while it runs the MLP of the model's first or last block.

The backward pass runs the blocks last to first. Each block it finishes frees what that block
kept for it (under full recomputation, the block's input: the checkpoint keeps nothing else)
and leaves that block's parameter gradients behind. Both change by a fixed amount per block, so
the bytes alive during a block's backward are largest at one of the two ends: the last block
(every activation still kept, only the heads' gradients made) or the first block (no other
block's activations left, every other gradient made). Full recomputation keeps one B·S·d_model
tensor per block: where a block's parameters outweigh it, the first block is the peak.

Inside the block the peak is in its MLP, the largest sublayer's backward (under full
recomputation, once the checkpoint has rebuilt the block). Two ops can hold the most:

- the down projection's backward (`torch.mm` for the gradient of its input, B·S·d_ff, then
  for the gradient of its weight) while the gradient of the MLP's output is alive, which is a
  tensor of its own when dropout, a sandwich norm or an MoE's combine stands between the MLP
  and the residual add (their backward makes a new one), and the same tensor as the residual
  stream's gradient when the MLP's output goes into the add directly (the add's backward
  passes one gradient to both operands);
- a gated MLP's product act(gate)·up, whose backward makes the gradients of both factors
  (B·S·d_ff each) while the product's gradient is alive; the down projection has freed its
  input and its output's gradient by then. gpt-oss's clamped SwiGLU ends in such a product,
  (up + 1)·(g·sigmoid(alpha·g)); the backward of what comes before it holds less, its
  factors' saved copies freed.

For a mixture's routed experts, whose weights are stacked (the backward of a projection
makes every expert's gradient of it at once, as large as the rows' activations or larger), also
the backward of the projection of the experts' input that runs first (`up`), which makes that
gradient while the gradient of the rows and the activation's pending one are alive; and where
expert parallelism divides each expert gradient in a hook (`ExpertParallel`), the quotient
beside it, just after each projection's backward.

Besides those, the backward holds the residual stream's gradient (B·S·d_model); in the first
block, for a learned score bias the blocks share (T5), the gradient the later blocks
accumulated for it (heads·S², summed over the batch); what the block's ops up to the peak op
keep (the interpreter of `activations` run over the block, stopped there: what later ops kept
was freed as their backward ran); what the stack keeps outside its blocks (before them: what
comes after was freed by the heads' backward) and, for the last block, every other block; and
the gradients made so far. For routed experts, also the moment before the MLP's backward (the
gradient of the experts' output rows alive, none of the block's own gradients made): below
the others, but where FSDP2 gathers the experts (`BackwardMoment.gathering`). Measured with
archspec's tensor tracker against the generated model (tests/test_train_peak.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from archspec.backends.count.activations import ActivationCounter
from archspec.backends.count.params import parameter_count
from archspec.backends.count.passes import forward_pass
from archspec.ir import ops
from archspec.ir.lower import lower_model, lower_stack
from archspec.ir.nodes import IR, MLP, Block, Linear, Norm, Run


@dataclass(frozen=True)
class BackwardMoment:
    """Bytes of activations and of their gradients alive at one op of a block's backward, and
    the parameters whose gradients exist then. `gathering`: the moment before a mixture's
    routed experts run their backward, when FSDP2 gathers them (rank_peak.py)."""

    activations: sp.Expr
    made_params: sp.Expr
    gathering: bool = False


class _BlockTracer(ActivationCounter):
    """The activation interpreter, recording for each run of blocks what one block of it keeps
    after each op, and the MLP each op belongs to."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # One trace per run of blocks: (op, the MLP it belongs to, bytes the block keeps).
        self.traces: list[list[tuple[ops.Op, MLP | None, sp.Expr]]] = []
        self.runs: list[Run] = []
        self.blocks: list[Block] = []
        self.stack_kept: sp.Expr | None = None  # what the stack keeps outside its blocks
        self.modules: list = []
        self._scope = None

    def run(self, op_list) -> None:
        for op in op_list:
            super().run([op])
            if len(self.scopes) == 2:
                if self.scopes[-1] is not self._scope:
                    self._scope = self.scopes[-1]
                    self.traces.append([])
                mlp = next((m for m in reversed(self.modules) if isinstance(m, MLP)), None)
                self.traces[-1].append((op, mlp, self._scope.total()))

    def op_call(self, op: ops.Call) -> None:
        self.modules.append(op.module)
        super().op_call(op)
        self.modules.pop()

    def op_blocks(self, op: ops.Blocks) -> None:
        self.runs = list(op.repeat.runs)
        self.blocks = [run.node for run in self.runs]
        super().op_blocks(op)
        # What the stack made before its blocks and keeps (with, under full recomputation,
        # what the checkpoint keeps for every block: mask, angles, encoder output).
        self.stack_kept = self.scopes[0].total()


def block_moments(
    ir: IR,
    which: str,
    compute: int,
    attn: str,
    recompute: str,
    tp: int = 1,
    sequence_parallel: bool = False,
    device: str = "cuda",
    engine: str = "megatron",
    counter_class: type[ActivationCounter] = ActivationCounter,
) -> list[BackwardMoment]:
    """The candidate peaks of the MLP backward of the model's `which` block: "first" (the
    first stack's first block, the last the backward runs) or "last" (the last stack's last
    block, the first it runs)."""
    model = ir.root
    segments = lower_model(model)
    run = forward_pass(model.layout)
    first = which == "first"
    target = 0 if first else len(segments) - 1
    kept = sp.Integer(0)  # what the stacks before the target keep, whole
    for k, segment in enumerate(segments[: target + 1]):
        lengths = run.lengths(segment.role)
        assert lengths is not None
        tracer = _tracer(counter_class)(
            lengths, compute, attn, recompute, tp, sequence_parallel, device, engine
        )
        tracer.run(segment.embed)
        stack_ops, ctx = lower_stack(segment.stack, segment.x, segment.memory)
        tracer.ctx = ctx
        if k < target:
            tracer.run(stack_ops.ops)
            kept += tracer.scopes[0].total() + sum(n * each for _, n, each in tracer.layers)
            continue
        # Only the ops up to the blocks: what comes after them is freed before any block's
        # backward.
        upto = next(i for i, op in enumerate(stack_ops.ops) if isinstance(op, ops.Blocks))
        tracer.run(stack_ops.ops[: upto + 1])
    assert tracer.stack_kept is not None
    # The run holding the stack's first layer, or its last (a cycled window pattern's runs
    # interleave: the last layer is in the run that reaches furthest).
    ends = [run.layers(ir.value)[0 if first else -1] for run in tracer.runs]
    at = ends.index(min(ends) if first else max(ends))
    block = tracer.blocks[at]
    trace = tracer.traces[at]
    layers = tracer.layers
    if first:
        # Every other block has run its backward and freed what it kept.
        kept += tracer.stack_kept
        made = parameter_count(model) - _embedding_params(ir) - parameter_count(block)
    else:
        # Every other block keeps what it kept; the heads' gradients exist.
        kept += tracer.stack_kept + sum(n * each for _, n, each in layers) - layers[at][2]
        made = _params_after_blocks(ir)
    mlp = _last_mlp(trace)
    if mlp is None:
        return []
    mine = [op for op, m, _ in trace if m is mlp]
    down = next(op for op in reversed(mine) if isinstance(op, ops.LinearOp))
    # The gated product; gpt-oss's clamped SwiGLU ends in one, (up + 1) · (g · sigmoid)
    product = next((op for op in mine if isinstance(op, (ops.Mul, ops.ClampedSwiGLU))), None)
    index = {id(op): i for i, (op, _, _) in enumerate(trace)}
    # The residual stream's gradient, the width of the block's input.
    flowing = tracer.bytes(ops.Value("x", "tokens", block.width))
    if first and segments[0].stack.rel_bias is not None and ctx.mask is not None:
        # The gradient of the score bias the blocks share, accumulated by the blocks after
        # the first (summed over the batch).
        flowing += tracer.bytes(ctx.mask)
    call = next(op for op, _, _ in trace if isinstance(op, ops.Call) and op.module is mlp)
    own_out = _output_gradient_is_own(trace, call)
    experts = _stacked_experts(trace, call, tracer.expert_ranks)
    routed = _routed(trace, call)
    # A routed expert's weight gradient, divided by a hook where expert parallelism does so
    # (`ActivationCounter.expert_gradient_copies`): the quotient, a tensor of its own, comes
    # beside the gradient the backward made.
    copy = tracer.expert_gradient_copies - 1 if routed else 0
    moments = []
    i = index[id(down)]
    if routed:
        # Before the experts' backward: the gradient of their output rows, nothing of the
        # block's own made (below every other moment here, but where FSDP2 gathers the
        # experts' unit: `gathering`).
        rows = tracer.bytes(down.out) if own_out else 0
        moments.append(BackwardMoment(kept + trace[i][2] + flowing + rows, made, True))
    done = _params_after(trace, i, mlp, experts) + experts * _weight(down)
    grads = tracer.bytes(down.x) + (tracer.bytes(down.out) if own_out else 0)
    moments.append(BackwardMoment(kept + trace[i][2] + flowing + grads, made + done))
    if copy:
        # Its quotient, once the projection's backward is over: its input's gradient beside
        # the gradient and the quotient (the input it kept is freed, as large).
        grads = experts * _weight(down) * copy
        moments.append(BackwardMoment(kept + trace[i][2] + flowing, made + done + grads))
    if product is not None:
        i = index[id(product)]
        grads = 3 * tracer.bytes(product.out)
        after = _params_after(trace, i, mlp, experts)
        moments.append(BackwardMoment(kept + trace[i][2] + flowing + grads, made + after))
    if routed:
        inputs = [op for op in mine[: mine.index(down)] if _reads_input(op, mine)]
        for k, op in enumerate(reversed(inputs)):  # in the order the backward runs them
            i = index[id(op)]
            # Waiting: the input rows' gradient of this projection and of those before it,
            # and beside a gated MLP's first, the activation's (as large as the product).
            waiting = (k + 1) * tracer.bytes(op.x)
            if product is not None and k == 0:
                waiting += tracer.bytes(product.out)
            at = kept + trace[i][2] + flowing + waiting
            done = made + _params_after(trace, i, mlp, experts) + experts * _weight(op)
            moments.append(BackwardMoment(at + tracer.bytes(op.out), done))
            if copy:
                # The quotient, once its output's gradient is freed; after the last of
                # them the input rows are freed too, their gradients summed into one.
                if k == len(inputs) - 1:
                    at -= (k + 1) * tracer.bytes(op.x)
                moments.append(BackwardMoment(at, done + experts * _weight(op) * copy))
    return moments


def _weight(op: ops.LinearOp) -> sp.Expr:
    return op.module.in_features * op.module.out_features


def _reads_input(op: ops.Op, mine: list[ops.Op]) -> bool:
    """Whether `op` is a projection of its MLP's input (gate or up), not of a value the
    MLP made."""
    made = {other.out for other in mine}
    return isinstance(op, ops.LinearOp) and op.x not in made


def _tracer(counter_class: type[ActivationCounter]) -> type[_BlockTracer]:
    """The block tracer over a layout's own interpreter (`rank_activations`)."""
    if counter_class is ActivationCounter:
        return _BlockTracer
    return type("BlockTracer", (_BlockTracer, counter_class), {})


def _last_mlp(trace) -> MLP | None:
    mlps = [m for _, m, _ in trace if m is not None]
    return mlps[-1] if mlps else None


def _output_gradient_is_own(trace, call: ops.Call) -> bool:
    """Whether the MLP's output gradient is a tensor of its own: true unless the MLP's output
    goes straight into an add, whose backward hands the same gradient to both operands."""
    readers = [op for op, _, _ in trace if call.out in op.inputs and op is not call]
    return not all(isinstance(op, ops.Add) for op in readers)


def _routed(trace, call: ops.Call) -> bool:
    """Whether the MLP `call` runs is a mixture's routed expert (its input dispatched)."""
    return any(op.out is call.args[0] for op, _, _ in trace if isinstance(op, ops.Dispatch))


def _stacked_experts(trace, call: ops.Call, ranks: int = 1) -> int:
    """The experts one rank holds (n_experts / `ranks`, the expert-parallel ranks) when the
    MLP `call` runs is a mixture's routed expert, else 1: the experts' weights are stacked
    (archspec.runtime.experts), so the backward of a projection makes the gradient of every
    expert it holds at once."""
    dispatch = next((op for op, _, _ in trace if op.out is call.args[0]), None)
    if not isinstance(dispatch, ops.Dispatch):
        return 1
    route = next(op for op, _, _ in trace if getattr(op, "chosen", None) is dispatch.chosen)
    return route.n_experts // ranks


def _params_after(trace, i: int, expert: MLP | None = None, experts: int = 1) -> sp.Expr:
    """Parameters of the leaf ops after the i-th: their backward ran already (the stacked
    `experts` of the routed `expert` MLP's projections, each)."""
    total = sp.Integer(0)
    for op, mlp, _ in trace[i + 1 :]:
        module = getattr(op, "module", None)
        if isinstance(module, (Linear, Norm)):
            total += parameter_count(module) * (experts if mlp is expert else 1)
    return total


def _embedding_params(ir: IR) -> sp.Expr:
    """Parameters used before the first stack's blocks and nowhere after them: the first
    stack's position table, relative bias, embedding norm and projection, the segment table,
    and the token table unless a tied head or a later stack uses it too."""
    model = ir.root
    first = model.stacks[0]
    total = sp.Integer(0)
    for node in (first.pos_emb, first.rel_bias, first.emb_norm, first.emb_proj, model.type_emb):
        if node is not None:
            total += parameter_count(node)
    tied = model.lm_head is not None and model.lm_head.tied_to is not None
    if not tied and len(model.stacks) == 1:
        total += parameter_count(model.tok_emb)
    return total


def _params_after_blocks(ir: IR) -> sp.Expr:
    """Parameters whose gradients the backward makes before the blocks': the head (its matrix
    even when tied to the embeddings), the pooler and the last stack's final norm."""
    model = ir.root
    total = sp.Integer(0)
    for node in (model.lm_head, model.pooler, model.stacks[-1].final_norm):
        if node is None:
            continue
        if node is model.lm_head and node.tied_to:
            total += node.in_features * node.out_features
        total += parameter_count(node)
    return total
