"""Activation memory: the bytes autograd keeps for the backward pass, op by op.

An interpreter runs the same ops as the FLOP counter and the code generator
(`archspec.ir.lower`) and asks, for each op, which tensors its backward needs, the way PyTorch
keeps them when it runs the generated code: a Linear keeps its input, a norm its input and per-row
statistics (RMSNorm also the normalised input), an activation its input or output as its kind
says, a product both factors, RoPE only its angles. Two ops that keep the same tensor keep one
storage, so each tensor is counted once (values are compared by identity, views by their base).
The prediction equals what torch.autograd.graph.saved_tensors_hooks measures
(tests/test_memory.py). Korthikanti et al. 2022 (Reducing Activation Recomputation in Large
Transformer Models) count the same way for Megatron's code.

Each tensor is counted in the compute dtype (`compute` bytes) unless the op that keeps it says
otherwise: int64 indices, fp32 statistics (attention's log-sum-exp), the torch engine's loss
over logits cast to fp32, and a norm's tensors as its kind says for the dtype and device
(`NormKind.kept_bytes`: under bf16 compute on the CPU LayerNorm's statistics are bf16 and
RMSNorm works on an fp32 copy of its input). So FSDP2's mixed precision (bf16 compute from
fp32 parameters) is counted exactly on the CPU (tests/test_mixed_precision_saved.py).

A tensor is counted in the scope that made it: one block's tensors once per block (a run of
identical blocks is interpreted once and multiplied by its count), what a stack builds for all
its blocks (RoPE's angles, the mask, the encoder output) once.

Tensor and sequence parallelism are counted for one of two engines. "megatron" (the default):
sequence parallelism splits every tensor of the residual stream, inside the blocks and out (the
embeddings' dropout, the final norm), a column-parallel linear keeps only its rank's share of the
sequence and gathers it again for backward, and the loss is vocabulary-parallel (Korthikanti et
al. 2022, Section 4.2.2). "torch": the generated `parallelize` on PyTorch's DTensor. Sequence
parallelism splits only what sits between the sublayers of the blocks (norms, residual stream,
residual dropout); attention, the MLP and an MoE run on the gathered sequence, and the gathered
input their linears read is kept whole (autograd saves it); outside the blocks everything is
whole but a final norm that feeds the head alone (`final_norm_split`: the head gathers its
share, and keeps the gathered input whole); the logits are gathered, so the loss keeps whole
log-probabilities unless `loss_parallel` (torch.distributed.tensor.parallel.loss_parallel)
leaves them split.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from archspec.backends.count.conventions import NO_RECOMPUTE
from archspec.backends.count.op_checkpoint import OP, OpCheckpoint
from archspec.backends.count.passes import B, Lengths, forward_pass
from archspec.backends.count.recompute_modules import CORE_ATTN, selective_modules
from archspec.ir import ops
from archspec.ir.lower import StackValues, lower, lower_block, lower_model, lower_stack
from archspec.ir.nodes import IR, Block, Run
from archspec.ir.sequence_ends import final_norm_split
from archspec.kinds import ACTIVATIONS, NORMS

# fp32: attention's log-sum-exp, router weights, the torch engine's loss (a norm's statistics:
# NormKind.kept_bytes)
STATS = 4
INDEX = 8  # token ids, positions and expert choices are int64
BOOL = 1


@dataclass
class Scope:
    """The tensors kept by the ops of one module instance (a block), or of a whole stack."""

    # Values hash by identity; holding them (not their ids) keeps each one alive, so no later
    # value can take a dead one's id.
    kept: dict[ops.Value, sp.Expr] = field(default_factory=dict)  # storage -> bytes
    made: set[ops.Value] = field(default_factory=set)  # the values made here
    internal: list[sp.Expr] = field(default_factory=list)  # tensors no other op sees

    def total(self) -> sp.Expr:
        return sp.Add(*self.kept.values(), *self.internal)


@dataclass(frozen=True)
class Gathered:
    """The whole-sequence copy of a value that a sublayer gathered (torch engine): a storage
    of its own beside the rank's share."""

    value: ops.Value


class ActivationCounter:
    """Bytes kept for backward by one training forward of one stack's ops."""

    expert_ranks = 1  # the ranks a mixture's experts are spread over (`rank_activations`)
    expert_gradient_copies = 1  # an expert's weight gradient made twice (a dividing hook)
    discards_outputs = False  # whether output-discarding checkpoints are counted (TE's)

    def __init__(
        self,
        lengths: Lengths,
        compute: int | sp.Expr,
        attn: str,
        recompute: str,
        tp: int = 1,
        sp_: bool = False,
        device: str = "cuda",
        engine: str = "megatron",
        loss_parallel: bool = False,
    ):
        self.lengths = lengths
        # PyTorch's math attention drops out with a one-byte mask on a GPU (native_dropout) but
        # multiplies by a mask in the compute dtype on the CPU.
        self.sdpa_mask_bytes = BOOL if device != "cpu" else compute
        self.c = compute
        self.device = device
        self.attn = attn
        self.recompute = recompute
        # Megatron-Core's selective modules: the attention core by default; the norms apart
        # from a projection and the experts' activation only where outputs are discarded as
        # Transformer Engine's layers allow (te_activations.py).
        self.modules = selective_modules(recompute)
        if self.modules - {CORE_ATTN} and not self.discards_outputs:
            raise ValueError(f"recompute {recompute!r}: modules beyond core_attn are counted "
                             "for Transformer Engine's layers only")  # fmt: skip
        self.block = None  # the block being interpreted
        self.tp = tp  # tensor-parallel ranks: each keeps its share of what is split
        self.sequence_parallel = sp_  # the residual stream's tensors split along the sequence
        if engine not in ("megatron", "torch"):
            raise ValueError(f"engine is 'megatron' or 'torch', not {engine!r}")
        self.engine = engine
        self.loss_parallel = engine == "megatron" or loss_parallel
        self.sublayers = 0  # the depth of sublayer calls being interpreted (torch: whole)
        self.ctx = StackValues()
        self.scopes = [Scope()]
        self.rebuilt: list[sp.Expr] = []  # full recomputation: each kind of block, rebuilt
        # Per-op checkpointing (`op`): inside a block, its policy and what it has kept so far
        # (by storage; the fused kernel's log-sum-exp under its Attend op).
        self.op_checkpoint: OpCheckpoint | None = None
        self.op_kept: dict[object, sp.Expr] = {}
        # The additive masks a training forward builds: score biases (ALiBi, T5). Without
        # padding, a causal stack without one passes no mask (SDPA masks causally).
        self.built_masks: set[ops.Value] = set()
        self.layers: list[tuple[Run, sp.Expr, sp.Expr]] = []  # (run, calls, bytes each)
        # The torch engine's final norm on each rank's share of the sequence (the head
        # gathers it), where `final_norm_split`; `in_split_norm` while it is counted.
        self.split_norm = None
        self.in_split_norm = False

    @property
    def tokens(self) -> sp.Expr:
        return B * self.lengths.queries

    def share(self, split: bool, limit: sp.Expr | int | None = None, rows: str = "tokens"):
        """The fraction of a tensor one tensor-parallel rank keeps. Heads and hidden units are
        split (kv heads at most n_kv_heads ways: beyond that ranks hold copies); with sequence
        parallelism the residual stream's tensors are split along the sequence; everything
        else (norm inputs, residual dropout masks) is whole on every rank, as in Megatron-LM."""
        if self.tp == 1:
            return 1
        if split:
            return sp.Integer(1) / (sp.Min(self.tp, limit) if limit is not None else self.tp)
        if (
            self.sequence_parallel
            and rows in ("tokens", "memory", "keys")
            and self.sequence_split()
        ):
            return sp.Integer(1) / self.tp
        return 1

    def sequence_split(self) -> bool:
        """Whether sequence parallelism splits what is made here: everywhere under Megatron-LM;
        under the generated torch code between the sublayers of a block, and in a final norm
        that feeds the head alone (`final_norm_split`)."""
        if self.engine == "megatron":
            return True
        return (len(self.scopes) > 1 or self.in_split_norm) and self.sublayers == 0

    def per_element(self, value: ops.Value) -> int | sp.Expr:
        """Bytes an element of `value` takes, by its dtype."""
        return {"compute": self.c, "index": INDEX, "stats": STATS, "bool": BOOL}[value.dtype]

    def bytes(self, value: ops.Value) -> sp.Expr:
        per = self.per_element(value)
        share = self.share(value.split, value.split_limit, value.rows)
        return self.lengths.elements(value) * per * share

    # Bookkeeping.

    def made(self, value: ops.Value | None) -> None:
        if value is not None:
            self.scopes[-1].made.add(value)

    def keep(self, value: ops.Value) -> None:
        """`value` is kept: count its storage once, in the scope that made it. Inside a
        sublayer, the torch engine keeps the sequence it gathered: a whole copy of its own."""
        storage = value.storage
        owner = next((s for s in reversed(self.scopes) if storage in s.made), self.scopes[0])
        if self.engine == "torch" and self.sublayers and self.sequence_parallel:
            owner.kept.setdefault(Gathered(storage), self.bytes(storage))  # type: ignore[index]
            return
        owner.kept.setdefault(storage, self.bytes(storage))

    def keep_new(
        self, elements: sp.Expr, per_element: int | sp.Expr, split: bool = False, rows="tokens"
    ) -> None:
        """A tensor made and kept inside one op (an internal copy, statistics); `split` and
        `rows` say how tensor parallelism divides it, as for a value."""
        share = self.share(split, rows=rows)
        self.scopes[-1].internal.append(elements * per_element * share)

    def run(self, op_list) -> None:
        for op in op_list:
            self.made(op.out)
            if isinstance(op, ops.Route):
                self.made(op.chosen)
            getattr(self, f"op_{type(op).__name__.lower()}")(op)
            if self.op_checkpoint is not None and self.op_checkpoint.keeps(op):
                self.kept_by_op_checkpoint(op)

    def kept_by_op_checkpoint(self, op: ops.Op) -> None:
        """What per-op checkpointing saves of an op it keeps: a projection's output; the fused
        attention kernel's output and its fp32 log-sum-exp per row."""
        assert op.out is not None
        self.op_kept[op.out.storage] = self.bytes(op.out.storage)
        if isinstance(op, ops.Attend):
            lse = B * op.heads * self.lengths.queries * STATS * self.share(True)
            self.op_kept[op] = lse

    # Leaves.

    def op_lookup(self, op: ops.Lookup) -> None:
        if op.index is not None:
            self.keep(op.index)  # the embedding's backward scatters by index

    def op_linearop(self, op: ops.LinearOp) -> None:
        self.keep(op.x)

    def op_normop(self, op: ops.NormOp) -> None:
        """A norm keeps its input and per-row statistics (RMSNorm also the normalised input,
        for the scale's gradient). Its output is kept by whatever reads it."""
        self.in_split_norm = op.module is self.split_norm
        self.norm_kept(op)
        self.in_split_norm = False

    def norm_kept(self, op: ops.NormOp) -> None:
        # A norm over each head (Qwen3's q_norm) has one row of statistics per head.
        x = op.x
        rows = self.lengths.rows(x) * (x.width / op.module.dim)
        for part in self.norm_parts(op.module, x, rows):
            if part is None:
                self.keep(x)
            else:
                self.keep_new(*part)

    def norm_parts(self, norm, x: ops.Value, rows: sp.Expr) -> list:
        """What a norm over `x` keeps, in the dtypes its kind says (`NormKind.kept_bytes`):
        None for x itself, else a tensor of its own as keep_new's (elements, bytes each,
        split, rows): an fp32 copy of x, the statistics, the normalised x, the scale."""
        entry = NORMS[norm.kind]
        each = entry.kept_bytes(self.c, self.device)
        elements = self.lengths.elements(x)
        copy = each.input_copy
        parts = [None if copy is None else (elements, copy, x.split, x.rows)]
        parts.append((rows, entry.row_statistics * each.statistic, x.split, x.rows))
        if entry.keeps_normalised:
            parts.append((elements, each.normalised, x.split, x.rows))
        if entry.keeps_scale:
            parts.append((norm.dim, each.scale, False, "weights"))
        return parts

    def op_activationop(self, op: ops.ActivationOp) -> None:
        keeps = ACTIVATIONS[op.kind].keeps
        if keeps in ("input", "both"):
            self.keep(op.x)
        if keeps in ("output", "both"):
            self.keep(op.out)

    def op_mul(self, op: ops.Mul) -> None:
        self.keep(op.a)
        self.keep(op.b)

    def op_add(self, op: ops.Add) -> None:
        pass  # the gradient of a sum needs neither operand

    def op_scale(self, op: ops.Scale) -> None:
        if op.tensor:  # a 0-d tensor factor, kept by the product
            self.keep_new(sp.Integer(1), self.c, rows="weights")

    def op_clamp(self, op: ops.Clamp) -> None:
        self.keep(op.x)  # clamp's backward passes the gradient where the input was in range

    def op_clampedswiglu(self, op: ops.ClampedSwiGLU) -> None:
        # Each clamp keeps its input (gate, up); the sigmoid its output, which the product
        # with the clamped gate keeps too, beside that gate; the last product keeps up + 1
        # and gate·sigmoid. Scaling by alpha and adding 1 (Python numbers) keep nothing.
        self.keep(op.gate)
        self.keep(op.up)
        out = op.out
        assert out is not None
        for _ in range(4):  # the clamped gate, its sigmoid, up + 1, and their product
            self.keep_new(self.lengths.elements(out), self.c, split=out.split, rows=out.rows)

    def op_softcap(self, op: ops.Softcap) -> None:
        # cap·tanh(x / cap): the tanh keeps its output; dividing and scaling keep nothing.
        x = op.x
        self.keep_new(self.lengths.elements(x), self.c, split=x.split, rows=x.rows)

    def op_select(self, op: ops.Select) -> None:
        pass  # a view

    def op_part(self, op: ops.Part) -> None:
        pass  # a view

    def op_cached(self, op: ops.Cached) -> None:
        pass  # in training nothing is cached: x itself

    def op_concat(self, op: ops.Concat) -> None:
        pass  # the gradient of a concatenation needs only the parts' sizes

    def op_loss(self, op: ops.Loss) -> None:
        # Cross-entropy keeps the log-softmax over the logits (vocabulary-parallel: split).
        # The torch engine's loss casts the logits to fp32 first, as torchtitan's
        # cross_entropy_loss and bench's training_loss do (`logits.float()`): under bf16
        # compute the log-softmax and the weight sum are fp32 (the cast keeps nothing).
        loss_bytes = STATS if self.engine == "torch" else self.c
        split = op.logits.split and self.loss_parallel
        self.keep_new(self.lengths.elements(op.logits), loss_bytes, split=split)
        # The negative log-likelihood keeps the targets (int64, one per token, whole on every
        # rank) and the sum of their weights (one scalar).
        self.keep_new(self.lengths.rows(op.logits), INDEX, rows="targets")
        self.keep_new(sp.Integer(1), loss_bytes, rows="targets")

    def op_dropout(self, op: ops.Dropout) -> None:
        # The mask of kept elements (one byte each); the output is kept by whatever reads it.
        self.keep_new(self.lengths.elements(op.x), BOOL, split=op.x.split, rows=op.x.rows)

    # Attention.

    def op_rope(self, op: ops.Rope) -> None:
        # x·cos + rotate_half(x)·sin: each product keeps the factor that is not x's, the
        # angles the stack computed once for all blocks.
        self.keep(op.angles)

    def op_attend(self, op: ops.Attend) -> None:
        L, c = self.lengths, self.c
        n, h, hd, vd = self.tokens, op.heads, op.head_dim, op.v_head_dim
        keys = L.attended(op.k)
        kv_tokens = B * keys
        if CORE_ATTN in self.modules:
            # The attention core (scores, softmax, dropout, AV) runs under a checkpoint (the
            # generated code's checkpoint="selective"), whichever kernel: it keeps what the
            # core starts from, q, k, v and the additive mask, and nothing of its own; the
            # output projection keeps the merged heads.
            for value in (op.q, op.k, op.v, op.out):
                self.keep(value)
            if op.mask in self.built_masks:
                self.keep(op.mask)
            self.keep_window_mask(op)
            return
        if op.sinks:
            # Attention with sinks runs as written (`sink_attention`; SDPA has no sink): q·kᵀ
            # keeps q and k repeated per query head; the shift by each row's maximum keeps
            # the maximum's index (int64, one per row); the softmax keeps its output, one
            # column wider than the keys (the sink's); AV keeps v repeated and a view of
            # that output without the sink's column (the same storage).
            self.keep(op.q)
            self.keep_new(kv_tokens * h * (hd + vd), c, split=True)
            rows = B * h * L.queries
            self.keep_new(rows * (keys + 1), c, split=True)
            self.keep_new(rows, INDEX, split=True)
            return
        if op.softcap is not None:
            # Soft-capped scores run as written (no fused kernel caps them): q·kᵀ keeps q and
            # k repeated per query head, AV the probabilities and v repeated, the tanh its
            # output; the softmax runs in float32 and keeps that, and casting to a narrower
            # dtype makes the copy AV keeps. (The merged heads are the output projection's.)
            self.keep(op.q)
            self.keep_new(kv_tokens * h * (hd + vd), c, split=True)
            scores = B * h * L.queries * keys
            self.keep_new(scores, c + STATS + (c if c != STATS else 0), split=True)
            return
        if self.attn == "flash":
            # A fused kernel keeps q, k and v (the projections, or RoPE's rotated copies) and,
            # to rebuild the probabilities, its output and one fp32 log-sum-exp per row. The
            # output is laid out like q, (B, S, h, hd), so merging the heads is a view and the
            # output projection keeps that same tensor.
            for value in (op.q, op.k, op.v, op.out):
                self.keep(value)
            # A fused kernel's dropout keeps only its random seed.
            self.keep_new(B * h * L.queries, STATS, split=True)
            if op.mask in self.built_masks:
                self.keep(op.mask)  # the kernel keeps the additive mask
            self.keep_window_mask(op)
            return
        # PyTorch's eager (math) attention keeps scaled copies of q and k, v made contiguous
        # (k and v repeated per query head under GQA), and the probabilities: B·h·S² values;
        # with dropout also its mask and the dropped probabilities AV multiplies (Korthikanti
        # et al. 2022, Section 4.1: 5·a·s²·b bytes in fp16). Merging the heads copies the
        # output, which the output projection keeps.
        self.keep_new(n * h * hd + kv_tokens * h * (hd + vd), c, split=True)
        scores = B * h * L.queries * keys
        self.keep_new(scores, c, split=True)
        if op.dropout:
            self.keep_new(scores, self.sdpa_mask_bytes + c, split=True)

    def keep_window_mask(self, op: ops.Attend) -> None:
        """A sliding window's mask, which each attention layer builds for itself over
        (queries, keys) from the stack's mask (as wide), kept where the core keeps its mask:
        by the fused kernel, and by the checkpoint of selective recomputation."""
        if not op.masking.windowed:
            return
        keys = self.lengths.attended(op.k)
        width, split = (op.mask.width, op.mask.split) if op.mask is not None else (1, False)
        self.keep_new(self.lengths.queries * keys * width, self.c, split=split, rows="pairs")

    # Mixture of experts.

    def op_route(self, op: ops.Route) -> None:
        # The router's kind says what its float32 scores, indices and masks keep.
        self.keep_new(op.kind.kept_bytes(op.routing(self.tokens, self.c)), 1)

    def op_dispatch(self, op: ops.Dispatch) -> None:
        # Per routed copy of a token, its token (`order // top_k`, an int64 index read by
        # the rows' gather and by index_add_).
        self.keep_new(self.lengths.rows(op.out), INDEX)

    def op_combine(self, op: ops.Combine) -> None:
        # The expert output scaled by its weight (fp32, or the logits' dtype as the router's
        # kind says) keeps both; index_add_ keeps its source. The weights' gather, after the
        # experts, keeps each routed copy's place in the sort by expert (`order`, int64).
        routed = self.lengths.rows(op.expert_out)
        self.keep_new(routed, INDEX)
        self.keep(op.expert_out)
        self.keep_new(routed, self.per_element(op.weights))
        self.keep_new(routed * op.expert_out.width, self.c)

    # Structure.

    def op_call(self, op: ops.Call) -> None:
        self.sublayers += 1
        self.run(lower(op.module, op.args[0], self.ctx).ops)
        self.sublayers -= 1

    def op_blocks(self, op: ops.Blocks) -> None:
        """Each run's blocks: recorded per run (a pipeline deals them out over its stages)."""
        for run in op.repeat.runs:
            assert isinstance(run.node, Block)
            low = lower_block(run.node)
            self.scopes.append(Scope())
            for value in low.inputs:
                self.made(value)
            if self.recompute == OP:
                self.op_checkpoint, self.op_kept = OpCheckpoint(self.attn), {}
            self.block = run.node
            self.run(low.ops)
            self.block = None
            self.op_checkpoint = None
            block = self.scopes.pop().total()
            if self.recompute in ("full", OP):
                # Checkpointing keeps each block's inputs: its own x, and the tensors the stack
                # hands every block (the mask, RoPE's angles, the encoder output), once; per-op
                # checkpointing also the outputs its policy saves. The backward rebuilds one
                # block at a time: the largest block's activations, less what was kept, come
                # on top, once for the model.
                x = low.inputs[0]
                kept = self.bytes(x) + sp.Add(
                    *(b for k, b in self.op_kept.items() if k is not x.storage)
                )
                self.rebuilt.append(block - kept)
                block = kept
                shared = [self.ctx.angles, self.ctx.local_angles, self.ctx.memory]
                if self.ctx.mask in self.built_masks:
                    shared.append(self.ctx.mask)
                for value in shared:
                    if value is not None:
                        self.keep(value)
            self.layers.append((run, run.calls, block))

    # What a stack builds once for its blocks.

    def op_positions(self, op: ops.Positions) -> None:
        pass

    def op_sinusoids(self, op: ops.Sinusoids) -> None:
        pass

    def op_ropeangles(self, op: ops.RopeAngles) -> None:
        pass

    def op_scorebias(self, op: ops.ScoreBias) -> None:
        assert op.out is not None
        self.built_masks.add(op.out)
        if op.table is None:
            return  # ALiBi's bias is a constant
        # T5: the bucket of every (query, key) pair, kept by the table lookup, and in a causal
        # stack the bool mask torch.where selects the learned bias with.
        pairs = self.lengths.queries * self.lengths.keys
        self.keep_new(pairs, INDEX)
        if op.causal:
            self.keep_new(pairs, BOOL)


def activation_bytes(
    ir: IR,
    compute: int | sp.Expr = 4,
    attn: str = "eager",
    recompute: str = NO_RECOMPUTE,
    tp: int = 1,
    sequence_parallel: bool = False,
    device: str = "cuda",
    engine: str = "megatron",
    loss_parallel: bool = False,
) -> sp.Expr:
    """Bytes kept for backward by one training forward of the batch, and by its loss (the
    log-softmax over the logits, when there is an LM head), on one of `tp` tensor-parallel
    ranks. `device`: "cuda" (the default: what training runs on) or "cpu", where PyTorch's math
    attention keeps its dropout mask in the compute dtype. `engine`, `loss_parallel`: whose
    tensor and sequence parallelism (the module docstring)."""
    return activation_parts(
        ir, compute, attn, recompute, tp, sequence_parallel, device, engine, loss_parallel
    ).total


@dataclass(frozen=True)
class ActivationParts:
    """What one training forward keeps, by where it sits in a pipeline: before the blocks
    (embeddings, positions, masks), in each block, and after them (final norm, heads, loss)."""

    before: sp.Expr
    layers: tuple[tuple[sp.Expr, sp.Expr], ...]  # (blocks, bytes of one) of each run
    after: sp.Expr
    rebuilt: sp.Expr  # full recomputation: the largest block, rebuilt in the backward pass
    # Of `before`, what the stack builds for its blocks and they keep (RoPE's angles, a mask):
    # each pipeline stage of the generated pipeline() builds its own.
    shared: sp.Expr = sp.Integer(0)
    spans: tuple[range, ...] = ()  # the layers of each run, counted over the stacks in turn

    @property
    def blocks(self) -> sp.Expr:
        return sp.Add(*(count * each for count, each in self.layers))

    @property
    def total(self) -> sp.Expr:
        return self.before + self.blocks + self.after + self.rebuilt


def activation_parts(
    ir: IR,
    compute: int | sp.Expr = 4,
    attn: str = "eager",
    recompute: str = NO_RECOMPUTE,
    tp: int = 1,
    sequence_parallel: bool = False,
    device: str = "cuda",
    engine: str = "megatron",
    loss_parallel: bool = False,
    counter_class: type[ActivationCounter] | None = None,
) -> ActivationParts:
    """What one training forward keeps, by part; `counter_class`: the interpreter, when a
    layout keeps more or less than this one's (`rank_activations.layout_counter`)."""
    run = forward_pass(ir.root.layout)
    before = after = shared = sp.Integer(0)
    layers: list[tuple[sp.Expr, sp.Expr]] = []
    spans: list[range] = []
    rebuilt: list[sp.Expr] = []
    for segment in lower_model(ir.root):
        spans += segment.stack.blocks.spans(ir.value, sum(map(len, spans)))
        lengths = run.lengths(segment.role)
        assert lengths is not None
        counter = (counter_class or ActivationCounter)(
            lengths, compute, attn, recompute, tp, sequence_parallel, device, engine, loss_parallel
        )
        if engine == "torch" and sequence_parallel and tp > 1 and final_norm_split(ir.root):
            counter.split_norm = segment.stack.final_norm
        counter.run(segment.embed)
        stack_ops, ctx = lower_stack(segment.stack, segment.x, segment.memory)
        counter.ctx = ctx
        counter.run(stack_ops.ops)
        kept = counter.scopes[0].total()
        stack_kept = counter.scopes[0].kept
        for value in (ctx.angles, ctx.local_angles, ctx.mask):
            if value is not None and value.storage in stack_kept:
                shared += stack_kept[value.storage]
        counter.run(segment.heads)
        # The final norm keeps the last block's output: it sits after the blocks, with the
        # heads. Everything else of the stack's own comes before them.
        final = segment.stack.final_norm
        counter.in_split_norm = final is not None and final is counter.split_norm
        tail = _final_norm_bytes(counter, final) if final is not None else 0
        counter.in_split_norm = False
        before += kept - tail
        after += counter.scopes[0].total() - kept + tail
        layers += [(count, each) for _, count, each in counter.layers]
        rebuilt += counter.rebuilt
    rebuilt_max = sp.Max(*rebuilt) if rebuilt else 0
    return ActivationParts(before, tuple(layers), after, rebuilt_max, shared, tuple(spans))


def _final_norm_bytes(counter: ActivationCounter, norm) -> sp.Expr:
    """What a stack's final norm keeps: its input (the last block's output) and statistics."""
    from archspec.ir.ops import Value

    x = Value("x", "tokens", norm.dim)

    def size(part) -> sp.Expr:
        if part is None:
            return counter.bytes(x)
        elements, each, split, rows = part
        return elements * each * counter.share(split, rows=rows)

    return sp.Add(*map(size, counter.norm_parts(norm, x, counter.lengths.rows(x))))
