"""One training step's time under one layout: the ops on the roofline, plus communication.

Per micro-batch, the slowest pipeline stage runs its layers' forward and backward (each op at
max(FLOPs / (peak × efficiency), bytes / (bandwidth × efficiency)), backward twice the forward,
a flash kernel's 2.5 times), tensor-parallel collectives after every row-parallel projection
(an all-reduce, or with sequence parallelism a reduce-scatter, in forward and backward:
Korthikanti et al. 2022, Section 4.2.2; with sequence parallelism each sequence-sharded tensor
the split ops read is all-gathered too, the normed hidden state of the usual block, a latent
attention's latents: opcost.CostCounter.gathered; each run of layers its own block's,
block_tp.py), the replayed forward
of recomputation (under per-op checkpointing, what op_checkpoint.py does not keep; under full
recomputation the whole block, or up to the early stop of torch's non-reentrant checkpoint:
replay.py), and
pipeline sends to the next stage (1/tp of the activations each, as Megatron-LM's scatter-gather
optimisation sends them: Narayanan et al. 2021, Section 4.1).
A step runs m micro-batches plus the pipeline bubble, (p - 1)/(V·m) of them (Narayanan et al.
2021, Section 2.2), then reduces gradients over data-parallel replicas, and updates the weights
(Adam reads and writes every state). What the stack overlaps (engines.py) hides communication
behind the compute it runs beside.

Context parallelism (cp ranks per sequence, Megatron-Core's and torchtitan's ring attention)
gives each rank s/cp positions: every op but the attention core runs on s/cp, the attention
core does 1/cp of the whole sequence's (load-balanced causal) work, and the keys and values go
round the ring once forward and twice backward (keys and values, then their gradients),
overlapped with the attention core. Gradients are reduced over dp × cp ranks.

Float8 communication (fp8_comm.py): with `fp8_all_gather` (torchtitan's FSDP float8 all-gather)
the blocks' linear weights are gathered in one byte, the rest in bf16; under an engine whose
float8 tensor parallelism gathers in float8 (torchtitan's) the sequence-parallel all-gathers
move one byte an element, the reduce-scatters two.

Uneven pipeline stages (`stage_layers`, e.g. BLOOM's 5, 6, ..., 6, 5) put that many layers on
each stage; the slowest stage sets the pace.

Activation offloading (`offload_layers`, Transformer Engine's CPU offloading as Megatron-Core
runs it) copies the first layers' saved activations to the host during the forward, on a stream
of their own, and back during the backward: the copies hide behind the compute of their pass,
each behind the layers computed while it is in flight (at most layers - offloaded sets on the
device), and a pass waits for what they cannot hide (the host link's bandwidth, each way, from
systems.yaml's `host_link_gbs`). The copies also read and write the
device's memory, which the memory-bound ops beside them feel; that is not counted.

Expert parallelism (ep ranks of the data-parallel group share each MoE layer's experts,
Megatron-Core's and DeepSpeed-MoE's layout) times each MoE layer on its busiest rank: the
routed rows it computes and receives, which under uniform routing exceed the mean by a few
percent and with a learned router by what --moe-imbalance says (dispatch.py); adds a dispatch
of the routed tokens before the experts and a combine after them, forward and backward
(dispatch.py: what each dispatcher sends, not overlapped), and reduces the experts' gradients
over the dp/ep ranks holding the same experts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import sympy as sp

from archspec.backends.count.conventions import NO_RECOMPUTE
from archspec.backends.count.layout import Parallelism
from archspec.backends.count.memory import COMPUTE_BYTES, GRAD_BYTES
from archspec.backends.count.op_checkpoint import OP
from archspec.backends.count.passes import B, whole_sequences
from archspec.backends.count.recompute_modules import CORE_ATTN, selective_modules
from archspec.backends.count.replay import CHECKPOINTS, full_replays
from archspec.errors import SpecError
from archspec.ir.nodes import IR, Attention, MoE
from archspec.ir.visit import walk
from archspec.plan.block_tp import TensorParallel, block_tp
from archspec.plan.collectives import all_gather, all_reduce, group_link, reduce_scatter, send
from archspec.plan.dispatch import dispatch_time, host_wait, routing_imbalance
from archspec.plan.efficiency import Efficiency
from archspec.plan.engines import DEFAULT_ENGINE, exposed, get_engine, with_async_tp
from archspec.plan.fp8_comm import SAVED_PER_ELEMENT, float8_weights
from archspec.plan.hardware import System
from archspec.plan.layers import stage_runs
from archspec.plan.mtp import depth_items
from archspec.plan.opcost import OpCost, PassCosts, pass_costs
from archspec.plan.recompute_block import full_share, is_full
from archspec.plan.roofline import Roofline

# Adam's update touches, per parameter: fp32 master weight, gradient and two moments read, the
# three written back, and the low-precision weight copy written (mixed precision).
OPTIMIZER_BYTES_PER_PARAM = 4 + 4 + 8 + 4 + 8 + 2

BREAKDOWN = ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "bubble",
             "dp_comm", "optimizer", "offload", "host")  # fmt: skip


def folds(tp: int, ep: int, etp: int | None) -> bool:
    """Whether expert parallelism folds over the tensor-parallel ranks: ep beside experts
    split over fewer ranks than tp (--etp 1; None: the tp)."""
    return ep > 1 and etp is not None and etp < tp


def expert_parallel_ranks(tp: int, cp: int, dp: int, ep: int, etp: int | None) -> int:
    """The ranks of a pipeline stage the ep groups are drawn from: the data-parallel ones, or
    folded, tp × cp × dp."""
    return tp * cp * dp if folds(tp, ep, etp) else dp


@dataclass(frozen=True)
class Layout:
    tp: int = 1
    pp: int = 1
    interleave: int = 1
    micro_batch: int = 1
    sp: bool = False
    recompute: str = NO_RECOMPUTE
    zero: int = 0
    cp: int = 1  # context parallelism: ranks sharing each sequence
    stage_layers: tuple[int, ...] | None = None  # layers per pipeline stage; None: even
    ep: int = 1  # expert parallelism: data-parallel ranks sharing each layer's experts
    dp_replicate: int = 1  # hybrid sharding: replicas of the ZeRO shard group (Parallelism's)
    # Activation offloading: the first layers whose saved activations go to the host's
    # memory during the forward and come back for the backward (Megatron-Core's
    # cpu_offloading_num_layers, one stage, no recomputation: request.py checks)
    offload_layers: int = 0
    # Expert tensor parallelism (Megatron-Core's expert_tensor_parallel_size): None, the
    # experts split over the tp ranks as the dense layers are, the ep groups drawn from the
    # data-parallel ranks; 1, each rank holds its experts whole and the ep groups fold over
    # the tp and data-parallel ranks together (MoE parallel folding).
    etp: int | None = None

    @property
    def expert_tp(self) -> int:
        return self.tp if self.etp is None else self.etp

    @property
    def folded(self) -> bool:
        """Whether expert parallelism folds over the tensor-parallel ranks (etp 1 under tp)."""
        return folds(self.tp, self.ep, self.etp)

    def parallelism(self, gpus: int, micro_batches: int) -> Parallelism:
        """count's layout of all `gpus`. Context-parallel ranks hold the whole weights, so ZeRO
        shards them over dp·cp (Megatron-Core's distributed optimizer over its dp × cp group,
        torchtitan's FSDP over its flattened dp_shard_cp mesh); the memory model is given
        1/cp of the sequence for the activations."""
        return Parallelism(gpus, self.tp, self.pp, self.zero, self.sp, self.interleave,
                           micro_batches, cp=self.cp, dp_replicate=self.dp_replicate)  # fmt: skip

    def dp(self, gpus: int) -> int:
        return gpus // (self.tp * self.pp * self.cp)

    def bounds(self, layers: int) -> list[tuple[int, int]]:
        """[first, last) layer of each stage."""
        sizes = self.stage_layers or (layers // self.pp,) * self.pp
        starts = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
        return list(zip(starts[:-1], starts[1:], strict=True))

    def as_dict(self, gpus: int) -> dict[str, Any]:
        return {
            "tp": self.tp,
            "pp": self.pp,
            "cp": self.cp,
            "ep": self.ep,
            "dp": self.dp(gpus),
            "stage_layers": list(self.stage_layers) if self.stage_layers else None,
            "interleave": self.interleave,
            "micro_batch": self.micro_batch,
            "sp": self.sp,
            "recompute": self.recompute,
            "zero": self.zero,
            "dp_replicate": self.dp_replicate,
            "offload_layers": self.offload_layers,
            **({"etp": self.expert_tp} if self.ep > 1 else {}),
        }


@dataclass(frozen=True)
class Training:
    """What a step runs beyond the layout."""

    gpus: int
    global_batch: int
    seq: int
    dtype: str = "bf16"
    grad_dtype: str = "fp32"
    attn: str = "flash"
    engine: str = DEFAULT_ENGINE  # what the stack overlaps (engines.py)
    async_tp: bool = False  # torchtitan's async TP: the TP collectives overlap the matmuls
    # torchtitan's enable_fsdp_float8_all_gather: FSDP gathers the Float8Linear weights in
    # one byte (fp8_comm.py)
    fp8_all_gather: bool = False
    # The activation checkpoint of full recomputation (replay.py: "reentrant" replays each
    # block whole, "non-reentrant" stops early); None: the engine's.
    checkpoint: str | None = None
    # How expert parallelism dispatches tokens: "fused" (DeepEP, HybridEP) or "alltoall"
    # (Megatron-Core's, one row per routed expert): dispatch.py.
    ep_dispatch: str = "fused"
    # The busiest expert-parallel rank's routed rows over the mean; None: what uniform routing
    # gives (dispatch.routing_imbalance), as the benchmarks' forced balancing routes.
    moe_imbalance: float | None = None
    # The fused attention kernel under --attn flash: "fa2", the GEMM rule (FlashAttention-2's
    # kernel), or "cudnn", cuDNN's at its throughput measured on an H100 (attention_kernels.py).
    attn_kernel: str = "fa2"
    # Megatron-Core's multi-token prediction: depths on the last stage, each one more layer,
    # a projection and the head again (mtp.py).
    mtp_layers: int = 0


def checkpoint_of(run: Training) -> str:
    """The activation checkpoint the run's full recomputation runs: its own, else its engine's."""
    return run.checkpoint or get_engine(run.engine).checkpoint


@dataclass
class StepTime:
    layout: Layout
    micro_batches: int
    seconds: float
    breakdown: dict[str, float] = field(default_factory=dict)
    # Under expert parallelism, the busiest rank's routed rows over the mean (dispatch.py).
    expert_load: float = 1.0


class StepModel:
    """Times training steps of one model on one system, layout after layout. The op costs are
    lowered once; each micro-batch size evaluates them once."""

    def __init__(self, ir: IR, system: System, run: Training, eff: Efficiency | None = None):
        self.engine = with_async_tp(get_engine(run.engine), run.async_tp)
        self.checkpoint = checkpoint_of(run)
        if self.checkpoint not in CHECKPOINTS:
            raise SpecError(f"checkpoint is one of {', '.join(CHECKPOINTS)} "
                            f"(got {self.checkpoint!r})")  # fmt: skip
        eff = eff or self.engine.efficiency(system.accelerator.key)
        self.ir, self.system, self.run, self.eff = ir, system, run, eff
        self.c = COMPUTE_BYTES[run.dtype]
        cudnn = run.attn == "flash" and run.attn_kernel == "cudnn"
        # Transformer Engine runs sinks in cuDNN's kernel whichever kernel times the rest.
        sinks = run.attn == "flash" and (cudnn or self.engine.kernels == "transformer_engine")
        self.roofline = Roofline.of(system.accelerator, run.dtype, eff, cudnn, sinks)
        self.bandwidth = self.roofline.bandwidth
        self.costs: PassCosts = pass_costs(ir, self.c, run.attn)
        self.d_model = ir.value(ir.root.d_model)
        self.layers = sum(n for n, _ in self.costs.layers)
        attn = next((p.node for p in walk(ir.root) if isinstance(p.node, Attention)), None)
        moe = next((p.node for p in walk(ir.root) if isinstance(p.node, MoE)), None)
        self.top_k = ir.value(moe.top_k) if moe else 0
        self.n_experts = ir.value(moe.n_experts) if moe else 0
        # Bytes of one position's keys and values (what context parallelism passes round).
        self.kv_width = (
            2 * ir.value(attn.n_kv_heads) * ir.value(attn.head_dim) * self.c if attn else 0
        )
        self.numbers = lru_cache(maxsize=None)(self._numbers)
        self.sequence_gathers = lru_cache(maxsize=None)(self._sequence_gathers)
        # count's memory model per context-parallel degree, made on first use; created here so
        # that the copies with_efficiency makes share it (a fit asks for the same stages'
        # parameters at every point of its grid).
        self._memory: dict[int, Any] = {}

    def with_efficiency(self, eff: Efficiency) -> StepModel:
        """The same model and run under other efficiencies (a fit tries many): the lowered
        costs and their numbers are shared."""
        other = object.__new__(StepModel)
        other.__dict__.update(self.__dict__)
        other.eff = eff
        other.roofline = Roofline.of(self.system.accelerator, self.run.dtype, eff,
                                     self.roofline.cudnn_attention,
                                     bool(self.roofline.sink_row_s))  # fmt: skip
        return other

    # Costs as numbers.

    def _numbers(self, micro: int, cp: int = 1, ep: int = 1, load: float = 1.0,
                 fold: float = 1.0):  # fmt: skip
        local = {B: micro, **whole_sequences(self.run.seq // cp)}
        whole = {B: micro, **whole_sequences(self.run.seq)}

        def num(cost: OpCost):
            # With context parallelism a rank's attention core is 1/cp of the whole
            # sequence's; everything else runs on its s/cp positions.
            values, share = (whole, cp) if cost.attn_core and cp > 1 else (local, 1)
            shape = tuple(float(sp.sympify(x).xreplace(values)) for x in cost.shape or ())
            moved = float(sp.sympify(cost.bytes).xreplace(values)) / share
            flops = float(sp.sympify(cost.flops).xreplace(values)) / share
            if cost.sink_rows:  # the rank's rows, evaluated for op_time
                rows = float(sp.sympify(cost.sink_rows).xreplace(values)) / share
                cost = replace(cost, sink_rows=rows)
            if cost.expert and ep > 1:
                # Expert parallelism: a rank runs its own tokens' share of the routed work
                # (as many FLOPs, routing balanced), but on its E/ep experts, each fed the
                # tokens all ep ranks route to it: each expert's matmul has ep times the
                # rows of one rank's share, and the rank reads 1/ep of the experts' weights.
                # `fold` (etp/tp): the experts of an etp group take its share of the
                # micro-batch's rows (the step times them over etp, not tp, ranks).
                m, n, k = shape
                shape = (m * ep * load * fold, n, k)
                weights = float(sp.sympify(cost.weights).xreplace(values))
                moved = self.c * weights / ep + (moved - self.c * weights) * load * fold
                flops *= load * fold
            elif cost.routed and ep > 1:
                moved *= load  # the busiest rank's routed rows (dispatch.py)
                flops *= load
            return cost, flops, moved, shape

        runs = [(n, [num(c) for c in costs]) for n, costs in self.costs.layers]
        return [num(c) for c in self.costs.before], runs, [num(c) for c in self.costs.after]

    def routing(self, layout: Layout) -> tuple[float, float]:
        """The busiest expert-parallel rank's routed rows and the tokens dispatched to it, over
        the mean, under `layout`. The experts of an expert-parallel rank, split over its etp
        ranks, take rows from those ranks' share of the micro-batch (ep of them in all); each
        tensor-parallel rank dispatches its 1/tp share of the positions."""
        tokens = layout.micro_batch * self.run.seq // layout.cp
        tp, ep = max(layout.tp, 1), layout.ep
        return self.loads(tokens * layout.expert_tp // tp * ep, tokens // tp * ep, ep)

    def loads(self, tokens: int, dispatched: int, ep: int) -> tuple[float, float]:
        """The busiest expert-parallel rank's routed rows and the tokens dispatched to it, each
        over the mean, when the `ep` ranks' experts take rows of `tokens` tokens in all and
        their dispatches send `dispatched`: the run's --moe-imbalance for both, else uniform
        routing's (dispatch.routing_imbalance)."""
        if ep <= 1 or not self.n_experts:
            return 1.0, 1.0
        if self.run.moe_imbalance is not None:
            return self.run.moe_imbalance, self.run.moe_imbalance
        rows = routing_imbalance(tokens, self.n_experts, self.top_k, ep)
        # The all-to-all sends one row per routed expert, a fused dispatcher one per token.
        fused = self.run.ep_dispatch != "alltoall"
        sent = routing_imbalance(dispatched, self.n_experts, self.top_k, ep, rows=not fused)
        return rows, sent

    def _sequence_gathers(self, micro: int, cp: int) -> list[list[tuple[float, OpCost]]]:
        """The elements sequence parallelism gathers in each run's block, before each op that
        gathers (a rank's positions its 1/cp of the sequence)."""
        local = {B: micro, **whole_sequences(self.run.seq // cp)}
        return [[(float(sp.sympify(c.gathers).xreplace(local)), c) for c in costs
                 if c.gathers != 0] for _, costs in self.costs.layers]  # fmt: skip

    # The step.

    def step(self, layout: Layout) -> StepTime:
        run, sysm, engine = self.run, self.system, self.engine
        tp, pp, v, cp = layout.tp, layout.pp, layout.interleave, layout.cp
        dp = layout.dp(run.gpus)
        m = run.global_batch // (layout.micro_batch * dp)
        tokens = layout.micro_batch * run.seq // cp  # positions a rank runs per micro-batch
        etp = layout.expert_tp
        rows, received = self.routing(layout)
        before, runs, after = self.numbers(layout.micro_batch, cp, layout.ep, rows,
                                           etp / max(tp, 1))  # fmt: skip
        net = self.eff.network_peak
        hit = self.eff.overlap_interference  # what overlapped communication still costs
        tp_link = group_link(sysm, tp, 1, net)
        activation = tokens * self.d_model * self.c

        # Tensor-parallel collectives, each run of identical layers' own (block_tp.py).
        tensor_parallel = TensorParallel(
            tp, tp_link, tokens * self.d_model, self.c, layout.sp and tp > 1,
            run.dtype == "fp8" and engine.fp8_sp_gather, layout.folded)  # fmt: skip
        gathers = self.sequence_gathers(layout.micro_batch, cp)
        blocks = [block_tp(ops, gathers[i], tensor_parallel, layout.recompute, self.checkpoint)
                  for i, (_, ops) in enumerate(runs)]  # fmt: skip
        # Context parallelism: each layer's keys and values of the whole sequence pass round
        # the cp ring (an all-gather's volume) forward, and keys, values and their gradients
        # backward, over NVLink or the network as the ring spans (ranks ordered tp, cp, dp).
        kv = layout.micro_batch * run.seq * self.kv_width / max(tp, 1)
        cp_link = group_link(sysm, cp, tp, net)
        layer_cp = 3 * all_gather(kv, cp, cp_link)
        # Expert parallelism: the routed tokens to their experts' ranks and back, forward and
        # backward (and again in a full recomputation's forward), per MoE layer.
        # Folded, the ep group is consecutive ranks (Megatron-Core's expert rank order: etp,
        # ep, then the expert data-parallel ranks); else data-parallel ranks tp·cp apart.
        ep_stride = 1 if layout.folded else tp * cp
        # The busiest rank's receive scales the whole dispatch, its network share too (a
        # node's busiest is a little less uneven than a rank's: an upper bound there).
        a2a = dispatch_time(sysm, tokens * self.d_model * self.c / max(tp, 1) * received,
                            self.n_experts, self.top_k, layout.ep, ep_stride, net,
                            run.ep_dispatch)  # fmt: skip
        full = is_full(layout.recompute)
        # The embedding's forward and the head's backward all-reduce over the vocabulary.
        vocab_tp = all_reduce(activation, tp, tp_link)
        modules = selective_modules(layout.recompute)
        stages = []
        for st, (first, last) in enumerate(layout.bounds(self.layers)):
            per_stage = last - first
            # The share of the stage's layers recomputed whole (all of them under `full`, the
            # first N of each chunk under `full:N`: recompute_block.py).
            share = 1.0 if layout.recompute == OP else full_share(layout.recompute, per_stage / v)
            passes = 4 + 2 * share  # EP's four all-to-alls, and the replayed forward's two
            # (layers, run index) of the stage's share of each run.
            held = stage_runs([(n, i) for i, (n, _) in enumerate(runs)], self.costs.spans,
                              first, last)  # fmt: skip
            ends = [(1, op) for op in (before if st == 0 else []) + (after if st == pp - 1 else [])]
            depths = run.mtp_layers if st == pp - 1 else 0
            if depths:
                # Multi-token prediction's depths: the decoder's last layer again, and the ops
                # around it (mtp.py).
                held = [*held, (depths, len(runs) - 1)]
                ends += [(depths, op) for op in depth_items(before, after, self.d_model, self.c,
                                                            tokens)]  # fmt: skip
                per_stage += depths
            layers = [(n, runs[i][1]) for n, i in held]
            compute = rec = attn_core = forward = block_forward = 0.0
            # Recomputation replays the blocks' forward only, not the embeddings or the head.
            for n, item, in_block in [(n, op, True) for n, ops in layers for op in ops] + [
                (n, op, False) for n, op in ends
            ]:
                split = etp if item[0].expert and layout.ep > 1 else tp
                t = self.roofline.op_time(item, split, layout.sp)
                compute += n * (1 + item[0].backward) * t
                forward += n * t
                block_forward += n * t if in_block else 0.0
                if item[0].attn_core:
                    attn_core += n * (1 + item[0].backward) * t
                replay = (
                    (full
                     and full_replays(item[0].past_early_stop, self.checkpoint,
                                      item[0].unread))
                    or (CORE_ATTN in modules and item[0].attn_core and run.attn != "flash")
                    or item[0].recompute_module in modules
                    or (layout.recompute == OP and item[0].replayed_by_op_checkpoint)
                )  # fmt: skip
                if replay and in_block:
                    rec += n * t * (share if full else 1.0)
            tp_comm = sum(n * blocks[i].layer for n, i in held) + vocab_tp * (
                (st == 0) + (st == pp - 1) * (1 + depths))  # fmt: skip
            moe_layers = sum(n for n, ops in layers for op in ops if op[0].label == "dispatch")
            ep_comm = moe_layers * passes * a2a
            rec_comm = sum(n * blocks[i].recompute for n, i in held) * (share if full else 1.0)
            # Overlapped collectives cost what the compute beside them cannot hide: the
            # tensor-parallel ones the matmuls (with sp, engines that overlap them), the
            # ring's passes the attention core.
            tp_comm = exposed(tp_comm, compute + rec, engine.overlap_tp and layout.sp, hit)
            cp_comm = exposed(per_stage * layer_cp, attn_core, True, hit)
            replays = 1 + share  # forwards of each MoE layer
            local = self.n_experts // layout.ep  # the experts a rank holds
            host = host_wait(self.eff.host_moe_expert * local, moe_layers * replays,
                             block_forward / per_stage + 2 * a2a)  # fmt: skip
            stages.append((compute, rec + rec_comm, tp_comm, cp_comm, ep_comm, host, forward))
        # p2p: each micro-batch crosses every chunk boundary forward and back.
        if pp > 1:
            pp_link = group_link(sysm, pp, tp * cp * dp, net)
            if engine.scatter_gather:
                gather = all_gather(activation, tp, tp_link)
                p2p = 2 * v * (send(activation / tp, pp_link) + gather)
            else:
                p2p = 2 * v * send(activation, pp_link)
        else:
            p2p = 0.0
        slowest = max(stages, key=lambda s: sum(s[:6]))
        compute, rec, tp_comm, cp_comm, ep_comm, host, forward = slowest
        offload = self.offload_wait(layout, forward, compute - forward)
        per_micro = compute + rec + tp_comm + cp_comm + ep_comm + host + p2p + offload
        bubble = (pp - 1) / v * per_micro
        # Data parallelism, once per step over the replicas and the context-parallel ranks
        # (which hold the same weights): without ZeRO an all-reduce of the gradients; under
        # ZeRO-1/2 the gradients reduced in their own dtype, then the updated weights
        # all-gathered in the weights' (exchange below). Under hybrid sharding ZeRO shards
        # over one of `dp_replicate` groups (ranks ordered tp, cp, dp_shard, dp_replicate, so
        # a group's ranks are tp apart), and the groups then all-reduce the gradient shard
        # each rank holds, a group's width apart (FSDP2's HSDP; XLA's across TPU slices).
        replicas = dp * cp
        group = replicas // layout.dp_replicate
        dp_link = group_link(sysm, group, tp, net)
        params = max(self.params_per_device(tp, pp, layout.stage_layers, layout.ep, etp))
        grad_bytes = GRAD_BYTES[run.grad_dtype]
        # Under fp8 the weights stay bf16 (COMPUTE_BYTES), as the stacks keep and gather them.
        weight_bytes = COMPUTE_BYTES[run.dtype]
        # What FSDP's float8 all-gather saves on the weights it gathers (fp8_comm.py).
        saved = SAVED_PER_ELEMENT * self.float8_weights(layout) if run.fp8_all_gather else 0.0
        # The experts' gradients are reduced only over the ranks that hold the same ones:
        # dp/ep tp·ep apart, or folded, tp·dp/ep ep apart (the expert data-parallel group).
        experts = self.expert_params(tp, pp, layout)
        dense = params - experts
        expert_group = group * tp // (etp * layout.ep)
        expert_stride = layout.ep * (1 if layout.folded else tp)
        replica_link = group_link(sysm, layout.dp_replicate, tp * group, net)
        shard_grads = (dense / group + experts / expert_group) * grad_bytes
        across = all_reduce(shard_grads, layout.dp_replicate, replica_link)
        if layout.zero >= 3:
            # Weights gathered for the forward and again for the backward of every micro-batch,
            # gradients reduce-scattered (and, hybrid, all-reduced across the groups) after
            # each backward; prefetched, they hide behind the micro-batch's compute.
            gather = all_gather(params * weight_bytes - saved, group, dp_link)
            scatter = reduce_scatter(params * grad_bytes, group, dp_link)
            dp_comm = m * exposed(2 * gather + scatter + across, compute + rec,
                                  engine.overlap_zero3, hit)  # fmt: skip
        else:
            expert_link = group_link(sysm, expert_group, expert_stride, net)
            reduction = self.exchange(
                layout, dense * grad_bytes, dense * weight_bytes - saved, group, dp_link
            ) + self.exchange(layout, experts * grad_bytes, experts * weight_bytes,
                              expert_group, expert_link)  # fmt: skip
            # Overlapped, the exchange (under ZeRO-1/2 both its halves) runs during the last
            # micro-batch's backward (about two thirds of its compute, and its recomputation).
            last_backward = 2 / 3 * compute + rec
            dp_comm = exposed(reduction + across, last_backward, engine.overlap_dp, hit)
        shard = group if layout.zero >= 1 else 1
        optimizer = params / shard * OPTIMIZER_BYTES_PER_PARAM / self.bandwidth
        breakdown = {
            "compute": m * compute,
            "recompute": m * rec,
            "tp_comm": m * tp_comm,
            "cp_comm": m * cp_comm,
            "ep_comm": m * ep_comm,
            "pp_comm": m * p2p,
            "bubble": bubble,
            "dp_comm": dp_comm,
            "optimizer": optimizer,
            "offload": m * offload,
            "host": m * host,
        }
        return StepTime(layout, m, sum(breakdown.values()), breakdown, rows)

    def offload_wait(self, layout: Layout, forward: float, backward: float) -> float:
        """Seconds a micro-batch waits for activation offloading. The offloaded layers'
        activations cross the host link once each way, on one copy stream, beside the pass's
        compute; and with at most W = layers - offloaded sets on the device, a layer's copy
        can only hide behind the W - 1 layers computed while it is in flight (Transformer
        Engine's scheduling: at W = 1 "compute and transfers cannot overlap"). A pass waits
        for the larger of what its compute cannot hide in all and what the window cannot hide
        layer by layer (the layers' mean times)."""
        offloaded = layout.offload_layers
        if not offloaded:
            return 0.0
        link = self.system.host_link_gbs * 1e9
        each = self._memory_model(layout.cp).layer_activations(layout.tp, layout.sp,
                                                               layout.micro_batch)  # fmt: skip
        copies = sum(each[:offloaded]) / link
        window = len(each) - offloaded - 1  # the other layers computed beside one copy

        def waited(compute: float) -> float:
            per_layer = compute / len(each)
            return max(0.0, copies - compute, copies - offloaded * window * per_layer)

        return waited(forward) + waited(backward)

    def exchange(self, layout: Layout, grads: float, weights: float, n: int, link) -> float:
        """The data-parallel exchange of `grads` bytes of gradients and `weights` bytes of
        weights over `n` ranks, once per step. Without ZeRO, an all-reduce of the gradients.
        Under ZeRO-1/2 each rank updates its shard, so the gradients are reduce-scattered in
        their reduce dtype and the updated weights all-gathered in theirs:
        - Megatron-Core's distributed optimizer (NeMo): `_reduce_scatter_base` of the bucket's
          `grad_data` (fp32 with grad_reduce_in_fp32, else the param dtype), then
          `_all_gather_base` of its `param_data`, allocated in `param_dtype`
          (megatron/core/distributed/param_and_grad_buffer.py:130-141 and :357-371,
          distributed_data_parallel.py:107-108, optimizer/distrib_optimizer.py:1378-1405 at
          Megatron-LM 86d5aa5d7, July 2024);
        - FSDP2 with `reshard_after_forward=False` (torchtitan and Llama 3 beside a pipeline):
          the weights gathered once in MixedPrecisionPolicy's param_dtype (bf16) and kept,
          the gradients reduce-scattered in its reduce_dtype (fp32);
        - DeepSpeed's BF16_Optimizer beside a pipeline (Megatron-DeepSpeed in bf16, ZeRO
          stage 0 in its config: "bf16 must use z0! it implements its own zero stage 1
          equivalent", BLOOM's tr11-176B-ml.slurm) all-reduces the fp32 gradients whole
          (pipe/engine.py's `_bf16_reduce_grads`, `buffered_allreduce_fallback` of
          `get_grads_for_reduction()`, the fp32 ones), then all-gathers the bf16 weight
          partitions after the update (`all_gather_dp_groups` of `bf16_partitioned_groups`,
          runtime/bf16_optimizer.py:337-362 and :402-403 at DeepSpeed 56c522386, April 2022):
          the engine's `bf16_zero_all_reduce`. Outside bf16 DeepSpeed's ZeRO-1/2 optimizer
          reduces each partition to its owner (`average_tensor`'s `dist.reduce` per rank, a
          reduce-scatter's volume) and gathers the 16-bit weights (`all_gather_dp_groups`,
          zero/stage_1_and_2.py:879-961 at 56c522386)."""
        if layout.zero == 0:
            return all_reduce(grads, n, link)
        whole = self.engine.bf16_zero_all_reduce and self.run.dtype == "bf16"
        reduce = all_reduce if whole else reduce_scatter
        return reduce(grads, n, link) + all_gather(weights, n, link)

    def params_per_device(self, tp: int, pp: int, stage_layers=None, ep: int = 1,
                          etp: int | None = None) -> list[int]:  # fmt: skip
        return [p for _, p in self._memory_model().params(tp, pp, stage_layers, ep, etp)]

    def float8_weights(self, layout: Layout) -> float:
        """Float8Linear weight elements a device of the stage holding the most parameters
        holds (the stage whose weights the data-parallel exchange is timed on)."""
        stages = self._memory_model().params(layout.tp, layout.pp, layout.stage_layers,
                                             layout.ep, layout.etp)  # fmt: skip
        (first, last), _ = max(stages, key=lambda s: s[1])
        return float8_weights(self.costs, first, last, layout.tp)

    def expert_params(self, tp: int, pp: int, layout: Layout) -> float:
        """Expert parameters one device of the stage holding the most parameters holds."""
        memory = self._memory_model()
        stages = memory.params(tp, pp, layout.stage_layers, layout.ep, layout.etp)
        bounds, _ = max(stages, key=lambda s: s[1])
        return memory.experts_in(bounds) / layout.expert_tp / layout.ep

    def _memory_model(self, cp: int = 1):
        """count's memory model at a rank's share of the sequence (the parameters do not
        depend on it), cached."""
        from archspec.plan.fit import MemoryModel  # the cached stage parameters

        if cp not in self._memory:
            self._memory[cp] = MemoryModel(self.ir, self.run.seq // cp, self.run.dtype,
                                           self.run.grad_dtype, self.run.attn,
                                           kernels=self.engine.kernels,
                                           mtp_layers=self.run.mtp_layers)  # fmt: skip
        return self._memory[cp]
