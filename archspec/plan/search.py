"""Layout search: every valid (tp, pp, interleave, micro-batch, sp, recompute, ZeRO) for a
model, a cluster and a global batch, timed, with those that do not fit in memory set aside.

The space is Megatron-LM's: tensor parallelism within a node (Narayanan et al. 2021's first
takeaway: tp up to the GPUs of a node), pipeline stages of whole layers, the interleaved
schedule only where the micro-batches per step are a multiple of the stages (as Megatron-LM
requires), beside a pipeline only the ZeRO stage the engine runs there (Megatron-LM's
distributed optimizer and DeepSpeed's pipeline engine are ZeRO-1; FSDP keeps a stage's gathered
weights, ZeRO-2: engines.py), and micro-batches that are powers of two. A layout given is
timed as given, even one that does not fit (flagged). Each layout costs a few evaluations of
formulas lowered once (step.py, fit.py): thousands take seconds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import product

from archspec.backends.count.conventions import NO_RECOMPUTE, RECOMPUTE
from archspec.backends.count.layout import Parallelism, check_layout, layer_count
from archspec.backends.count.op_checkpoint import OP
from archspec.backends.count.recompute_modules import is_selective
from archspec.errors import SpecError
from archspec.ir.nodes import IR, MoE
from archspec.ir.visit import walk
from archspec.plan.efficiency import Efficiency
from archspec.plan.engines import get_engine
from archspec.plan.fit import MemoryModel, StageBytes
from archspec.plan.hardware import System
from archspec.plan.recompute_block import block_layers
from archspec.plan.step import (
    Layout,
    StepModel,
    StepTime,
    Training,
    expert_parallel_ranks,
    folds,
)
from archspec.safety.limits import MAX_PIPELINE_STAGES

# What a device holds beyond the tensors count's memory model counts, each term named:
# - CUDA's context and the kernels loaded with it: 1,343 MiB, measured with one tensor on a GPU
#   (transformers' "Model training anatomy": `torch.ones((1, 1)).to("cuda")` takes a V100 to
#   "GPU memory occupied: 1343 MB", "the kernels alone take up 1.3GB");
CUDA_CONTEXT_BYTES = 1343 * 2**20
# - the caching allocator's reserve (blocks it holds but has split too small to hand out) and
#   the communication libraries' buffers (NCCL's, the framework's gradient buckets): 8% of the
#   device. An assumption: no source measures it in general (BLOOM's ~60 GB a GPU against
#   archspec's 44 GB of tensors, docs/plan.md, says it can be far more).
ALLOCATOR_RESERVE = 0.08


def usable_memory(memory_bytes: float) -> float:
    """Bytes of a device's memory the model's tensors can have."""
    return memory_bytes * (1 - ALLOCATOR_RESERVE) - CUDA_CONTEXT_BYTES


MICRO_BATCHES = (1, 2, 4, 8, 16, 32)
NO_ZERO_RANKS = "ZeRO shards over the data-parallel and context-parallel ranks: it needs dp·cp > 1"
# Megatron-Core refuses both (TransformerConfig.__post_init__): "Currently there is no support
# for Pipeline parallelism with CPU offloading", "CPU offloading does not work when activation
# recomputation is enabled".
OFFLOAD_ALONE = "activation offloading runs without pipeline stages or recomputation"
# Experts held whole beside tensor parallelism (--etp 1) are timed on each rank's 1/tp of the
# positions, as sequence parallelism leaves them, in one data-parallel group.
FOLDED = "--etp 1 beside tp > 1 needs --sp and no --dp-replicate"
MAX_INTERLEAVE = 8


@dataclass
class Candidate:
    time: StepTime
    memory: StageBytes  # the most loaded stage
    fits: bool = True  # False only for a given layout, timed though it does not fit


@dataclass
class SearchResult:
    ranked: list[Candidate] = field(default_factory=list)  # fitting layouts, fastest first
    dropped: Counter = field(default_factory=Counter)  # reason -> layouts
    considered: int = 0
    least_unfit: float | None = None  # bytes per device of the leanest layout that did not fit


def layout_space(ir: IR, system: System, run: Training, only: dict | None = None):
    """Every layout to consider, and the reason each one left out is impossible."""
    only = only or {}
    engine = get_engine(run.engine)
    layers = sum(layer_count(s, ir) for s in ir.root.stacks)
    gpus = run.gpus
    # With a fused attention kernel selective recomputation has nothing left to replay: it is
    # no recomputation (count's memory and FLOPs say the same), so the search skips it.
    skip = run.attn == "flash" and "recompute" not in only
    recomputes = [r for r in RECOMPUTE if not (r == "selective" and skip)]
    # Per-op checkpointing (torchtitan's), Megatron-Core's recomputed modules and its full
    # recomputation of some layers (`full:N`) are timed when asked for, not searched.
    recomputes += [r for r in only.get("recompute", ())
                   if (r == OP or is_selective(r) or block_layers(r) is not None)
                   and r not in recomputes]  # fmt: skip

    def allowed(name, values):
        return [v for v in values if name not in only or v in only[name]]

    # Powers of two within a node that divide the devices: a few, however large the node.
    widest = min(system.gpus_per_node, gpus)
    tps = allowed("tp", [2**k for k in range(widest.bit_length()) if gpus % 2**k == 0])
    if "tp" in only:
        tps = list(only["tp"])
    # Stages divide the layers and the devices: at most one stage per device, whatever the depth,
    # and at most MAX_PIPELINE_STAGES (check_layout refuses more).
    deepest = min(layers, gpus, MAX_PIPELINE_STAGES)
    pps = allowed("pp", [p for p in range(1, deepest + 1) if layers % p == 0])
    if "pp" in only:
        pps = list(only["pp"])
    # Context parallelism and uneven stages are tried as given, never searched.
    cp = only.get("cp", [1])[0]
    eps = list(only["ep"]) if "ep" in only else expert_parallel_sizes(ir, gpus)
    replicas = only.get("dp_replicate", [1])[0]  # hybrid sharding: as given, never searched
    stage_layers = only.get("stage_layers", [None])[0]
    offload = only.get("offload_layers", [0])[0]  # as given, never searched
    for tp, pp in product(tps, pps):
        if gpus % (tp * pp * cp):
            if "tp" in only and "pp" in only:
                yield None, f"--gpus {gpus} is not a multiple of tp {tp} × pp {pp} × cp {cp}"
            continue  # not a layout of this many devices
        dp = gpus // (tp * pp * cp)
        # A given interleaving or micro-batch is tried as given (request.py checked it), not
        # only where the searched values (powers of two, up to MAX_INTERLEAVE) hold it.
        if "interleave" in only:
            interleaves = list(only["interleave"])
        elif pp == 1 or stage_layers or not engine.interleave:
            interleaves = [1]
        else:
            interleaves = [v for v in range(1, MAX_INTERLEAVE + 1) if (layers // pp) % v == 0]
        micro_batches = list(only.get("micro_batch", MICRO_BATCHES))
        for v in interleaves:
            for mb in micro_batches:
                if run.global_batch % (mb * dp):
                    yield None, "the global batch is not a whole number of micro-batches"
                    continue
                m = run.global_batch // (mb * dp)
                if v > 1 and m % pp:
                    yield None, "interleaving needs micro-batches a multiple of the stages"
                    continue
                # Given, --sp and --zero are tried as given: a layout they cannot run in is
                # left out with its reason, not silently (which left "no layout runs: ").
                sps = list(only["sp"]) if "sp" in only else [False, True] if tp > 1 else [False]
                sharded = [0, 1, 2, 3] if dp * cp > 1 else [0]
                zeros = list(only["zero"]) if "zero" in only else sharded
                for sp_, rc, zero, (ep, etp) in product(
                    sps, allowed("recompute", recomputes), zeros, expert_layouts(eps, tp, only)
                ):
                    if sp_ and tp == 1:
                        yield None, "sequence parallelism (--sp) needs tensor parallelism (tp > 1)"
                        continue
                    if zero and dp * cp == 1:
                        yield None, NO_ZERO_RANKS
                        continue
                    if run.fp8_all_gather and zero < 2:
                        yield None, "--fp8-all-gather needs FSDP's sharded weights (ZeRO 2 or 3)"
                        continue
                    if pp > 1 and zero > engine.pipeline_zero:
                        yield None, f"ZeRO-{zero} is not run beside a pipeline by {engine.name}"
                        continue
                    folded = folds(tp, ep, etp)
                    if expert_parallel_ranks(tp, cp, dp, ep, etp) % ep:
                        yield None, f"--ep {ep} does not divide the {dp} data-parallel ranks"
                        continue
                    if folded and (not sp_ or replicas > 1):
                        if "etp" in only:  # given: refused with its reason
                            yield None, FOLDED
                        continue  # searched: folding is tried only where it can be
                    if replicas > 1 and (zero == 0 or dp % replicas or (dp // replicas) % ep):
                        yield None, (f"--dp-replicate {replicas} needs ZeRO and whole groups "
                                     "of data-parallel ranks")  # fmt: skip
                        continue
                    if offload and (pp > 1 or rc != NO_RECOMPUTE):
                        yield None, OFFLOAD_ALONE
                        continue
                    yield Layout(tp, pp, v, mb, sp_, rc, zero, cp, stage_layers, ep,
                                 replicas, offload, etp), None  # fmt: skip


def expert_parallel_sizes(ir: IR, gpus: int) -> list[int]:
    """The expert-parallel sizes a search tries: 1, and for a model with experts every power of
    two that divides each MoE layer's experts and the devices (whether it divides a layout's
    data-parallel or folded ranks is checked per layout, with its reason)."""
    counts = [ir.value(p.node.n_experts) for p in walk(ir.root) if isinstance(p.node, MoE)]
    if not counts:
        return [1]
    top = min(min(counts), gpus)
    return [2**k for k in range(top.bit_length()) if all(n % 2**k == 0 for n in counts)
            and gpus % 2**k == 0]  # fmt: skip


def expert_layouts(eps: list[int], tp: int, only: dict):
    """(ep, etp) pairs: the experts split over the tp ranks as the dense layers are (etp None)
    and, beside tp > 1 and ep > 1, held whole with ep folded over tp × cp × dp (etp 1,
    Megatron-Core's MoE parallel folding; layout_space keeps it only beside sequence
    parallelism and one data-parallel group). A given --etp is tried as given."""
    for ep in eps:
        if "etp" in only:
            yield ep, only["etp"][0]
            continue
        yield ep, None
        if ep > 1 and tp > 1:
            yield ep, 1


def search(
    ir: IR,
    system: System,
    run: Training,
    eff: Efficiency | None = None,  # None: the engine's (engines.py)
    only: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
    memory: MemoryModel | None = None,
    keep_unfit: bool = False,
) -> SearchResult:
    """Time every layout that fits, fastest first; count the others by why they were left out.
    With `keep_unfit` (a layout given, not searched) one that does not fit is timed too, and
    flagged: published runs ran layouts that archspec's memory model, which counts what the
    generated PyTorch code keeps, says need more than the device has."""
    result = SearchResult()
    model = StepModel(ir, system, run, eff)
    cp = (only or {}).get("cp", [1])[0]  # each rank holds the activations of seq / cp
    memory = memory or MemoryModel(ir, run.seq // cp, run.dtype, run.grad_dtype, run.attn,
                                   kernels=get_engine(run.engine).kernels,
                                   mtp_layers=run.mtp_layers)  # fmt: skip
    capacity = usable_memory(system.accelerator.memory_bytes)
    space = list(layout_space(ir, system, run, only))
    checked: dict[tuple[int, int, int], str | None] = {}
    for i, (layout, reason) in enumerate(space):
        if progress is not None and i % 64 == 0:
            progress(i, len(space))
        result.considered += 1
        if layout is None:
            result.dropped[reason] += 1
            continue
        m = run.global_batch // (layout.micro_batch * layout.dp(run.gpus))
        par = layout.parallelism(run.gpus, m)
        key = (layout.tp, layout.pp, layout.interleave)
        if key not in checked:
            try:
                # Uneven stages (given, checked by request.py): only tp's split to check here.
                check_layout(ir, par if not layout.stage_layers else
                             Parallelism(layout.tp, layout.tp, 1, 0, layout.sp))  # fmt: skip
                checked[key] = None
            except SpecError as exc:
                checked[key] = exc.message
        if checked[key] is not None:
            result.dropped[checked[key]] += 1
            continue
        busiest = memory.busiest(par, layout.micro_batch, layout.recompute,
                                 layout.stage_layers, layout.ep, layout.offload_layers,
                                 layout.etp, model.routing(layout)[0])  # fmt: skip
        fits = busiest.total <= capacity
        if not fits:
            result.least_unfit = min(result.least_unfit or busiest.total, busiest.total)
            if not keep_unfit:
                result.dropped["do not fit in memory"] += 1
                continue
        result.ranked.append(Candidate(model.step(layout), busiest, fits))
    if progress is not None:
        progress(len(space), len(space))
    # Ties (layouts that differ only where it costs nothing) go to the one holding less.
    result.ranked.sort(key=lambda c: (c.time.seconds, c.memory.total))
    return result
