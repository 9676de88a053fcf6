"""Each op's FLOPs, bytes moved and matmul shape, for the roofline: the IR's ops, lowered once.

The FLOPs are the FLOP counter's own (count's `FlopCounter`, one method per op): this
interpreter runs it and files what each op adds under that op, beside the bytes the op reads
and writes and, for a matmul, its (M, N, K). Everything stays a formula in the micro-batch `B`
and the lengths; a layout only divides and evaluates it, so a search never lowers again.

Bytes are what a kernel of the op moves through device memory once: a linear reads its input
and weight and writes its output; an elementwise op reads its inputs and writes its output. An
eager attention materialises the B·h·S² scores (Megatron-LM's fused scale-mask-softmax reads
and writes them once, dropout once more, with a one-byte mask); a fused (flash) kernel reads q,
k and v and writes the output, and with a causal mask skips the hidden half of the pairs
(FlashAttention-2, Dao 2023, Section 3.1.1).

A mixture of experts reads the weights of the experts its tokens are routed to: T tokens each
choosing top_k of E experts touch E·(1 − (1 − top_k/E)^T) distinct experts on average (each
expert escapes one token with probability 1 − top_k/E), so a decode step at batch 1 reads top_k
experts per layer and a long prefill all E. An expert's linear carries that many copies of its
weight, and its matmul shape is one expert's share of the routed rows.

Each cost says how tensor parallelism splits it (Megatron-LM, Shoeybi et al. 2019): `split`
ops (the projections of heads and hidden units, the attention core, the vocabulary-parallel
head) run 1/tp of the work on each rank; `whole` ones (norms, residual adds, dropout on the
residual stream) run whole on every rank unless sequence parallelism splits them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import sympy as sp

from archspec.backends.count.conventions import get_convention
from archspec.backends.count.flops import FlopCounter
from archspec.backends.count.op_checkpoint import OpCheckpoint
from archspec.backends.count.passes import B, Lengths, Pass, decode_pass, forward_pass
from archspec.backends.count.recompute_modules import (
    LAYERNORM,
    MOE_ACT,
    CheckpointedRegions,
    separate_norms,
)
from archspec.backends.count.replay import early_stop, unread
from archspec.ir import ops
from archspec.ir.lower import lower_block, lower_model, lower_stack
from archspec.ir.nodes import IR, Block
from archspec.plan.window_tiles import window_share

# Megatron-LM's cross-entropy works on fp32 logits: it reads the logits and writes and reads
# back fp32 copies (softmax, then the loss).
LOSS_BYTES_PER_LOGIT = 8


@dataclass(frozen=True)
class OpCost:
    label: str
    kind: str  # "matmul" (tensor cores) or "memory" (elementwise, bandwidth-bound)
    flops: sp.Expr
    bytes: sp.Expr
    shape: tuple[sp.Expr, sp.Expr, sp.Expr] | None = None  # (M, N, K) of one matmul
    tp: str = "whole"  # "split", "column", "row" (matmuls over split heads/units) or "whole"
    attn_core: bool = False  # QKᵀ, softmax, dropout, AV: what selective recompute replays
    backward: float = 2.0  # backward time / forward time (input and weight gradients)
    weights: sp.Expr = sp.Integer(0)  # weight elements among `bytes` (weight-only quantization)
    kv: sp.Expr = sp.Integer(0)  # key and value elements among `bytes` (a quantized KV cache)
    expert: bool = False  # a routed expert's linear (serving engines read experts apart)
    # Whether the op runs on the rows routed to experts (top_k copies of the tokens): under
    # expert parallelism the busiest rank runs more of them than the mean (dispatch.py).
    routed: bool = False
    # Query heads per key/value head of an attention (GQA, MQA: above 1): an engine's decode
    # kernel may read a shared head's cache once per query head (serve_engine.py).
    kv_group: sp.Expr = sp.Integer(1)
    # Whether per-op checkpointing (`--recompute op`, op_checkpoint.py) replays this op in the
    # backward pass.
    replayed_by_op_checkpoint: bool = False
    # Whether this op comes after the early stop of torch's non-reentrant checkpoint, which
    # full recomputation then does not replay (replay.py).
    past_early_stop: bool = False
    # Whether the backward reads nothing this op computes, so a pruned replay (JAX's
    # rematerialisation) skips it (replay.py).
    unread: bool = False
    # Whether an fp8 run does this matmul in fp8: the blocks' projections. The stacks keep a
    # projection outside the blocks, the output head, in bf16: Megatron-Core's output_layer is
    # a plain ColumnParallelLinear (TE's fp8 reaches TE modules only; an fp8 head is the
    # opt-in `fp8_output_proj`, mxfp8 only, default False: megatron/core/models/gpt/
    # gpt_model.py and transformer/transformer_config.py at Megatron-LM d98e8a6), torchtitan
    # leaves "output" out of its Float8Linear swap (fp8_comm.py), llm-foundry's MPT
    # unembeds with F.linear of the tied embedding (llmfoundry/models/layers/
    # custom_embedding.py at 8c8dd48).
    in_fp8: bool = True
    # The Megatron-Core module whose selective recomputation replays this op beyond the
    # attention core (recompute_modules.py): LAYERNORM (a norm apart from a projection),
    # MOE_ACT (the experts' activation), MLA_UP_PROJ or MLP (the ops their checkpoints cover,
    # projections included: CheckpointedRegions), or "".
    recompute_module: str = ""
    # Elements sequence parallelism all-gathers for this op: the sequence-sharded tensors it
    # is the first of its block to read on the tensor-parallel side (see `CostCounter.run`).
    gathers: sp.Expr = sp.Integer(0)
    # A fused attention whose softmax has sinks (gpt-oss): its query rows times its heads,
    # which a kernel that runs sinks apart from its tiles pays for per row (roofline.py).
    sink_rows: sp.Expr = sp.Integer(0)


@dataclass
class PassCosts:
    """One pass of the model as op costs: before the blocks (embeddings), each run of identical
    blocks (count, costs of one block), after them (final norms, head, loss)."""

    before: list[OpCost] = field(default_factory=list)
    layers: list[tuple[int, list[OpCost]]] = field(default_factory=list)
    after: list[OpCost] = field(default_factory=list)
    spans: list[range] = field(default_factory=list)  # each run's layers, over the stacks


class CostCounter(FlopCounter):
    """The FLOP counter, with each op's FLOPs filed under the op with its bytes and shape."""

    def __init__(self, conv, lengths: Lengths, compute_bytes: int, attn: str, ctx=None):
        super().__init__(conv, lengths, ctx, training=True)
        self.compute_bytes = compute_bytes
        self.attn = attn
        self.costs: list[OpCost] = []
        self.runs: list[tuple[int, list[OpCost]]] = []
        self.blocks_at: int | None = None  # where the blocks sit among `costs`
        self._flops = sp.Integer(0)
        self.route: ops.Route | None = None  # the router of the experts being costed
        self.op_checkpoint: OpCheckpoint | None = None  # inside a block: what `op` keeps
        self.visited: list[list[OpCost]] = []  # inside a block: each op's costs, in order
        self.block: Block | None = None  # inside a block: the block
        # Inside a block: the runs of ops mla_up_proj's and mlp's checkpoints cover.
        self.regions: CheckpointedRegions | None = None
        # Inside a block: the sequence-sharded tensors already gathered (`gathered`).
        self.sharded_read: set[int] = set()

    def add(self, component: str, kind: str, flops: sp.Expr) -> None:
        super().add(component, kind, flops)
        self._flops += flops

    def run(self, op_list) -> None:
        for op in op_list:
            if isinstance(op, (ops.Call, ops.Blocks)):
                getattr(self, f"op_{type(op).__name__.lower()}")(op)
                continue
            self._flops = sp.Integer(0)
            getattr(self, f"op_{type(op).__name__.lower()}")(op)
            costs = self.cost(op, self._flops)
            region = self.regions.module(op) if self.regions is not None else ""
            if region:
                costs = [replace(c, recompute_module=region) for c in costs]
            if self.op_checkpoint is not None:
                self.op_checkpoint.keeps(op)
                self.visited.append(costs)
            if self.in_block and costs:
                costs[0] = replace(costs[0], gathers=self.gathered(op, costs))
            self.costs += costs

    def gathered(self, op: ops.Op, costs: list[OpCost]) -> sp.Expr:
        """Elements of the tensors sequence parallelism all-gathers before `op`. Under it the
        residual stream and the ops tensor parallelism leaves whole (norms, a latent
        attention's down projections) hold a rank's share of the positions; an op over split
        heads or hidden units needs every position, so each such tensor it reads is gathered,
        once a block however many ops read it. A block of the usual kind gathers the normed
        hidden state before the attention and before the MLP; a latent attention gathers its
        two latents and the shared rotary key instead (Megatron-Core's MLA: the up
        projections' sequence-parallel inputs and `gather_from_sequence_parallel_region` of
        k_pos_emb, megatron/core/transformer/multi_latent_attention.py at d98e8a6). Tokens
        routed to experts are the dispatcher's (step.py)."""
        if not any(c.tp in ("column", "split") for c in costs):
            return sp.Integer(0)
        total = sp.Integer(0)
        for v in op.inputs:
            if v is None or v.split or v.copies != 1 or id(v) in self.sharded_read:
                continue
            if v.rows in ("tokens", "memory", "keys"):  # not positions' angles: built whole
                self.sharded_read.add(id(v))
                total += self.lengths.elements(v, computed=True)
        return total

    def op_route(self, op: ops.Route) -> None:
        super().op_route(op)
        self.route = op

    def op_blocks(self, op: ops.Blocks) -> None:
        self.blocks_at = len(self.costs)
        for run in op.repeat.runs:
            assert isinstance(run.node, Block)
            inner = CostCounter(self.conv, self.lengths, self.compute_bytes, self.attn, self.ctx)
            inner.in_block = True
            inner.op_checkpoint = OpCheckpoint(self.attn)
            inner.block = run.node
            inner.regions = CheckpointedRegions(run.node)
            inner.run(lower_block(run.node).ops)
            block = [op for op, _ in inner.op_checkpoint.visited]
            end = early_stop(block)
            skipped = unread(lower_block(run.node).ops, self.lengths, self.ctx)
            assert len(skipped) == len(block)  # the same leaves, in the same order
            costs = [
                replace(
                    c,
                    replayed_by_op_checkpoint=replayed,
                    past_early_stop=i >= end,
                    unread=skipped[i],
                )  # fmt: skip
                for i, (op_costs, replayed) in enumerate(
                    zip(inner.visited, inner.op_checkpoint.replayed(), strict=True)
                )
                for c in op_costs
            ]
            self.runs.append((run.calls, costs))

    # Bytes and shapes.

    def cost(self, op: ops.Op, flops: sp.Expr) -> list[OpCost]:
        c = self.compute_bytes
        L = self.lengths
        name = type(op).__name__
        if isinstance(op, ops.LinearOp):
            m = L.rows(op.x, computed=True)
            if m == 0:
                return []  # a decode step's cross-attention K and V: cached, never computed
            k, n = op.module.in_features, op.module.out_features
            split = op.out is not None and op.out.split
            row = op.x.split and not split  # attention output, MLP down: split inputs
            tp = "column" if split else "row" if row else "whole"
            weights = 1
            if op.x.copies != 1:  # an expert's linear, on the tokens routed to it
                assert self.route is not None, "routed tokens come after their router"
                weights = distinct_experts(self.route, m / op.x.copies)
            moved = c * (m * k + weights * k * n + m * n)
            shape = (m / weights, n, k)
            return [OpCost(f"{op.component}.linear", "matmul", flops, moved, shape, tp,
                           weights=weights * k * n, expert=op.x.copies != 1,
                           routed=op.x.copies != 1, in_fp8=self.in_block)]  # fmt: skip
        if isinstance(op, ops.Attend):
            return self.attend(op, flops)
        if isinstance(op, ops.Loss):
            moved = LOSS_BYTES_PER_LOGIT * L.elements(op.logits, computed=True)
            return [OpCost("loss", "memory", flops, moved, tp="split")]
        if isinstance(op, ops.Lookup):
            assert op.out is not None
            moved = 2 * c * L.elements(op.out, computed=True)
            return [OpCost("embeddings.lookup", "memory", flops, moved)]
        if op.out is None or not op.inputs:
            return []  # positions, angles, masks: built once, negligible
        if isinstance(op, (ops.Part, ops.Cached)):
            return []  # views
        inputs = sum(L.elements(v, computed=True) for v in op.inputs if v is not None)
        moved = c * (inputs + L.elements(op.out, computed=True))
        if isinstance(op, ops.Dropout):
            moved += L.elements(op.out, computed=True)  # the one-byte mask
        tp = "split" if op.out.split else "whole"
        return [OpCost(name.lower(), "memory", flops, moved, tp=tp, routed=op.out.copies != 1,
                       recompute_module=self.recompute_module(op))]  # fmt: skip

    def recompute_module(self, op: ops.Op) -> str:
        """Which selectively recomputed module (recompute_modules.py) an elementwise op is in."""
        if isinstance(op, ops.NormOp) and self.block is not None:
            return LAYERNORM if id(op.module) in separate_norms(self.block) else ""
        routed = op.out is not None and op.out.copies != 1
        return MOE_ACT if routed and not isinstance(op, ops.Dispatch) else ""

    def attend(self, op: ops.Attend, flops: sp.Expr) -> list[OpCost]:
        L = self.lengths
        c = self.compute_bytes
        keys = L.attended(op.k)
        q, d = L.queries, op.head_dim
        heads = B * op.heads
        kv = L.rows(op.k) * op.kv_heads * (op.head_dim + op.v_head_dim)
        qkv_out = (
            L.elements(op.q, computed=True)
            + 2 * L.elements(op.out, computed=True)  # q and the output have the same size
            + kv
        )
        if self.attn == "flash":
            # One fused kernel; a causal mask lets it skip the hidden half of the pairs. With
            # sinks, a kernel adds one logit per row: FlashAttention-3 (vLLM's, taking gpt-oss's
            # as s_aux) nothing beside the pairs, cuDNN's a time per row (`sink_rows`).
            visible = sp.Rational(1, 2) if op.masking.causal else 1
            if op.masking.reach is not None and op.masking.causal and q == keys:
                # Over a sliding window the kernel skips the key tiles outside it, and costs
                # what the tiles it visits do (window_tiles.py, measured with cuDNN): these
                # FLOPs are the work the kernel is timed at (its tiles, masked entries and
                # each query tile's fixed share included), more than the window's pairs. The
                # FLOPs plan reports (report.py's step_flops) are count's, these only where a
                # reentrant or pruned full recomputation replays ops beyond count's replay.
                visible *= window_share(q, op.masking.reach)
            # The backward reruns QKᵀ and the softmax: 2.5 forwards (FlashAttention-2).
            return [
                OpCost(
                    "attention.flash",
                    "matmul",
                    flops * visible,
                    c * qkv_out,
                    (q, keys, d),
                    "split",
                    attn_core=True,
                    backward=2.5,
                    kv=kv,
                    kv_group=sp.sympify(op.heads) / op.kv_heads,
                    sink_rows=heads * q if op.sinks else sp.Integer(0),
                )
            ]
        scores = heads * q * keys
        matmul = 2 * scores * d
        values = 2 * scores * op.v_head_dim
        rest = flops - matmul - values  # softmax, scale, mask and dropout work of the scores
        costs = [
            OpCost("attention.scores", "matmul", matmul, c * (qkv_out / 2 + scores),
                   (q, keys, d), "split", attn_core=True),
            OpCost("attention.softmax", "memory", rest, 2 * c * scores, tp="split",
                   attn_core=True),
        ]  # fmt: skip
        if op.sinks:
            # Written out (sink_attention): the sink column concatenated to the scores and
            # every row shifted by its maximum, a read and a write of the logits each (their
            # FLOPs are the softmax's `rest`).
            logits = scores + heads * q
            costs.append(
                OpCost("attention.sinks", "memory", 0, 4 * c * logits, tp="split",
                       attn_core=True)
            )  # fmt: skip
        if op.dropout:
            costs.append(
                OpCost("attention.dropout", "memory", 0, (2 * c + 1) * scores, tp="split",
                       attn_core=True)
            )  # fmt: skip
        costs.append(
            OpCost("attention.values", "matmul", values, c * (qkv_out / 2 + scores),
                   (q, op.v_head_dim, keys), "split", attn_core=True)
        )  # fmt: skip
        return costs


def distinct_experts(route: ops.Route, tokens: sp.Expr) -> sp.Expr:
    """The expected number of experts `tokens` tokens touch, each routed to top_k of E
    (uniformly: a balanced router's load, the case auxiliary load-balancing losses aim at).
    The base is a float: an exact rational raised to a prefill's B·S tokens (hundreds of
    thousands) is a fraction of as many digits, which took minutes to evaluate."""
    e, k = route.n_experts, route.top_k
    return e * (1 - sp.N(1 - sp.sympify(k) / e) ** tokens)


def pass_costs(ir: IR, compute_bytes: int, attn: str, run: Pass | None = None) -> PassCosts:
    """The op costs of one pass (default: a training forward over whole sequences), with the
    spec's dimensions put in: formulas in B and the lengths only."""
    model = ir.root
    run = run or forward_pass(model.layout)
    conv = get_convention("executed")
    out = PassCosts()
    offset = 0  # layers of the stacks before
    for segment in lower_model(model):
        lengths = run.lengths(segment.role)
        spans = segment.stack.blocks.spans(ir.value, offset)
        offset += sum(map(len, spans))
        if lengths is None:
            continue
        out.spans += spans
        counter = CostCounter(conv, lengths, compute_bytes, attn)
        counter.run(segment.embed)
        out.before += counter.costs
        stack_ops, ctx = lower_stack(segment.stack, segment.x, segment.memory)
        counter.ctx = ctx
        counter.costs = []
        counter.run(stack_ops.ops)
        at = counter.blocks_at if counter.blocks_at is not None else len(counter.costs)
        out.before += counter.costs[:at]
        tail = counter.costs[at:]
        out.layers += counter.runs
        counter.costs = []
        counter.run(segment.heads)
        out.after += tail + counter.costs
    env = ir.env
    subs = lambda cost: _subs(cost, env)  # noqa: E731
    return PassCosts(
        [subs(c) for c in out.before],
        [(ir.value(n), [subs(c) for c in costs]) for n, costs in out.layers],
        [subs(c) for c in out.after],
        out.spans,
    )


def decode_costs(ir: IR, compute_bytes: int) -> PassCosts | None:
    run = decode_pass(ir.root.layout)
    return None if run is None else pass_costs(ir, compute_bytes, "flash", run)


def _subs(cost: OpCost, env) -> OpCost:
    def put(e):
        return sp.sympify(e).xreplace(env)

    shape = tuple(put(x) for x in cost.shape) if cost.shape else None
    return replace(cost, flops=put(cost.flops), bytes=put(cost.bytes), shape=shape,
                   weights=put(cost.weights), kv=put(cost.kv),
                   kv_group=put(cost.kv_group), gathers=put(cost.gathers),
                   sink_rows=put(cost.sink_rows))  # fmt: skip
