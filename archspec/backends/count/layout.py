"""How a training run lays a model out over devices, and what one device holds of it.

The layout follows the engines that train the seed's flagship models (Megatron-LM; PyTorch's
FSDP2 for ZeRO-3): `tp` tensor-parallel ranks split attention heads, MLP hidden units and the
vocabulary (Shoeybi et al. 2019); `pp` pipeline stages take consecutive layers, `interleave` of
them per device with the interleaved schedule (Narayanan et al. 2021); `cp` context-parallel
ranks split each sequence (ring attention, 2·cp chunks balancing the causal mask); the
remaining `dp = gpus / (tp·pp·cp)` data-parallel replicas split the batch, whole sequences
each, and ZeRO stages 1-3 shard optimizer states, gradients and weights over them and the cp
ranks (Rajbhandari et al. 2020); `ep` of the data-parallel ranks share each mixture's routed
experts, n_experts / ep each, whose states ZeRO shards over the dp·cp / ep ranks holding the
same experts (`data_ranks`, `expert_data_ranks`); sequence parallelism (`sp`) splits what
tensor parallelism leaves whole along the sequence (Korthikanti et al. 2022).

`engine="torch"` counts the generated `parallelize` on PyTorch's DTensor and FSDP2 instead: the
vocabulary is not padded (the embedding rows and the LM head's columns split as `torch.chunk`
does: the first ranks hold ceil(V / tp), and the device counted is the one that holds most),
beyond n_kv_heads ranks the k and v weights are whole on every rank (`kv_ways`), a pipeline is
the generated `pipeline()` alone (1F1B, without tensor or data parallelism; a tied head's copy on
the last stage holds the whole vocabulary) and a data-parallel layout is FSDP2 (ZeRO-3), under
`dp_replicate` FSDP2 on a dp_replicate × dp_shard mesh (HSDP, beside dp_shard and tp alone);
its activations are `activations`' torch engine.

A size that cannot be split is an error naming the values, never a fraction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import sympy as sp

from archspec.backends.count.params import parameter_count
from archspec.backends.count.stages import check_stage_layers, stage_ranges
from archspec.errors import SpecError, did_you_mean
from archspec.ir.nodes import (
    IR,
    MLP,
    Attention,
    Embedding,
    Linear,
    Model,
    MoE,
    Node,
    Sinks,
    Stack,
    within,
)
from archspec.ir.visit import Placed, walk
from archspec.safety.limits import MAX_PIPELINE_STAGES

# Megatron-LM pads the vocabulary so that each tensor-parallel rank holds a multiple of 128
# rows (`--make-vocab-size-divisible-by 128`): GPT-2's 50,257 becomes 50,304 at tp = 1.
VOCAB_MULTIPLE = 128


@dataclass(frozen=True)
class Parallelism:
    gpus: int = 1
    tp: int = 1
    pp: int = 1
    zero: int = 0
    sp: bool = False  # sequence parallelism (needs tp > 1 to mean anything)
    interleave: int = 1  # virtual pipeline stages per device
    micro_batches: int = 1  # per replica per optimizer step
    engine: str = "megatron"  # or "torch": the generated parallelize (DTensor, FSDP2)
    # The layers of each pipeline stage, when not as many each (`--stage-layers 5,6,6,5`).
    stage_layers: tuple[int, ...] | None = None
    # --engine torch: FSDP2's mixed precision as torchtitan sets it (parallelize's
    # mp_policy="bf16": bf16 compute, the sharded parameters, their gradients and the
    # reduction in fp32), and the loss on logits split over the vocabulary (loss_parallel).
    mixed_precision: bool = False
    loss_parallel: bool = False
    cp: int = 1  # context-parallel ranks sharing each sequence
    ep: int = 1  # expert-parallel ranks: data-parallel ranks sharing each mixture's experts
    # --engine torch: the generated pipeline()'s schedule, as --schedule spells it
    # (`schedules.SCHEDULES`; None: 1F1B, with the stages of `pp` ranks' figures).
    schedule: str | None = None
    # Hybrid sharding (HSDP; MaxText's data parallelism across slices beside FSDP within each):
    # data-parallel groups that each hold a whole ZeRO shard set, ZeRO sharding over the
    # dp·cp / dp_replicate ranks of one group (torchtitan's data_parallel_replicate_degree).
    dp_replicate: int = 1

    def __post_init__(self) -> None:
        for name in ("gpus", "tp", "pp", "interleave", "micro_batches", "cp", "ep",
                     "dp_replicate"):  # fmt: skip
            if getattr(self, name) < 1:
                raise SpecError(f"--{name.replace('_', '-')} must be at least 1")
        if self.zero not in (0, 1, 2, 3):
            raise SpecError("--zero takes a ZeRO stage: 0, 1, 2 or 3")
        if self.gpus % (self.tp * self.pp * self.cp):
            cp = f" × --cp {self.cp}" if self.cp > 1 else ""
            raise SpecError(
                f"--gpus {self.gpus} is not a multiple of --tp {self.tp} × --pp {self.pp}{cp}",
                hint="the data-parallel degree is gpus / (tp·pp·cp), a whole number",
            )
        if self.dp % self.ep:
            raise SpecError(
                f"--ep {self.ep} does not divide the {self.dp} data-parallel ranks",
                hint="expert-parallel ranks are data-parallel ranks that share the experts",
            )
        if self.dp_replicate > 1:
            self._check_replicas()
        if self.interleave > 1 and self.pp == 1:
            raise SpecError("--interleave needs pipeline parallelism (--pp 2 or more)")
        if self.engine not in ("megatron", "torch"):
            raise SpecError(f"--engine takes megatron or torch, not {self.engine!r}",
                            hint=did_you_mean(self.engine, ("megatron", "torch")))  # fmt: skip
        if self.engine == "torch" and self.pp > 1 and (self.tp * self.dp * self.cp > 1):
            raise SpecError(
                f"--engine torch counts the generated pipeline() alone, not beside --tp "
                f"{self.tp}, --cp {self.cp} and {self.dp} data-parallel replicas",
                hint=f"use --gpus {self.pp} --tp 1 (bench runs a pipeline beside --tp and "
                "--zero 3, predicting only its saved tensors under --zero 3)",
            )
        if self.engine == "torch":
            from archspec.backends.count.split_checks import check_generated_mesh

            check_generated_mesh(self.cp, self.ep)
            if self.ep > 1 and self.tp > 1:
                raise SpecError(
                    f"--engine torch: an expert-parallel rank's experts beside --tp {self.tp} "
                    "are not counted",
                    hint="--ep with data-parallel ranks alone (--tp 1)",
                )
        if self.engine == "torch" and self.interleave > 1:
            raise SpecError(
                f"--engine torch counts torch's pipeline schedules, not --interleave "
                f"{self.interleave}",
                hint="--schedule interleaved-1f1b puts two stages on each rank",
            )
        if self.schedule is not None:
            self._check_schedule()
        if self.stage_layers is not None and self.interleave > 1:
            raise SpecError("--stage-layers lists whole stages: use --interleave 1")
        if self.engine == "torch" and self.dp > 1 and self.zero != 3:
            raise SpecError(
                f"--engine torch shards the {self.dp} data-parallel replicas with FSDP2: --zero 3"
            )
        if self.mixed_precision and (self.engine != "torch" or self.dp == 1):
            raise SpecError(
                "--mixed-precision is FSDP2's: --engine torch with data-parallel replicas "
                "(--gpus above --tp × --pp, --zero 3)"
            )
        if self.loss_parallel and (self.engine != "torch" or self.tp == 1):
            raise SpecError("--loss-parallel splits the logits over --tp: --engine torch, --tp 2+")

    def _check_replicas(self) -> None:
        if self.zero == 0:
            raise SpecError(
                f"--dp-replicate {self.dp_replicate} replicates ZeRO's shard groups: it needs "
                "--zero 1, 2 or 3",
                hint="without ZeRO every data-parallel rank holds the whole weights already",
            )
        if self.dp % self.dp_replicate:
            raise SpecError(
                f"--dp-replicate {self.dp_replicate} does not divide the {self.dp} "
                "data-parallel ranks",
                hint="each replica is a whole group of data-parallel ranks",
            )
        if (self.dp // self.dp_replicate) % self.ep:
            raise SpecError(
                f"--ep {self.ep} does not divide the {self.dp // self.dp_replicate} "
                f"data-parallel ranks of one of --dp-replicate {self.dp_replicate} replicas"
            )
        if self.engine == "torch":
            self._check_generated_replicas()

    def _check_generated_replicas(self) -> None:
        """What the generated parallelize refuses about HSDP: replicas beside cp or ep, and
        shard groups of one rank (it needs a dp_shard dimension)."""
        beside = [
            f"--{name} {getattr(self, name)}" for name in ("cp", "ep") if getattr(self, name) > 1
        ]
        if beside:
            raise SpecError(
                f"--engine torch: --dp-replicate {self.dp_replicate} with {' and '.join(beside)}: "
                "the generated parallelize lays HSDP out beside dp_shard and tp alone",
                hint="count HSDP beside cp or ep with --engine megatron",
            )
        if self.dp == self.dp_replicate:
            raise SpecError(
                f"--engine torch: --dp-replicate {self.dp_replicate} leaves one rank in each of "
                f"FSDP2's shard groups (the {self.dp} data-parallel ranks)",
                hint="HSDP shards over 2 or more ranks in each replica: fewer replicas",
            )

    def _check_schedule(self) -> None:
        from archspec.backends.count.schedules import check_schedule

        check_schedule(self.schedule)
        if self.engine != "torch":
            raise SpecError(
                f"--schedule {self.schedule} is the generated pipeline()'s (--engine torch)",
                hint="Megatron's interleaved schedule is --interleave V",
            )
        if self.pp == 1:
            raise SpecError(f"--schedule {self.schedule} needs pipeline parallelism (--pp 2+)")

    @property
    def stages_per_rank(self) -> int:
        """Pipeline stages each rank holds: the interleaved chunks, or the schedule's."""
        if self.schedule is not None:
            from archspec.backends.count.schedules import check_schedule

            return check_schedule(self.schedule)[1]
        return self.interleave

    def one_stage_a_rank(self) -> Parallelism:
        """The layout with each of a schedule's stages on a rank of its own (the layout
        `memory_figures` counts stage by stage)."""
        stages = self.pp * self.stages_per_rank
        return replace(self, gpus=self.gpus * stages // self.pp, pp=stages, schedule=None)

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp * self.cp)

    @property
    def data_ranks(self) -> int:
        """The ranks ZeRO shards a weight's states over: the data-parallel ranks and the cp
        ranks beside them (Megatron-Core's distributed optimizer over its dp × cp group; FSDP2
        over dp_shard × ep × cp in the generated parallelize, where with no data ranks
        beside cp nothing is sharded); under hybrid sharding those of one replica."""
        if self.engine == "torch" and self.dp == 1:
            return 1
        return self.dp * self.cp // self.dp_replicate

    @property
    def expert_data_ranks(self) -> int:
        """The ranks ZeRO shards a routed expert's states over: those holding the same
        experts, data_ranks / ep (Megatron-Core's expert data-parallel group; FSDP2 over
        dp_shard in the generated parallelize)."""
        return self.data_ranks // self.ep

    def in_flight(self, stage: int) -> tuple[int, int]:
        """(chunks, layers per chunk divisor): the model chunks whose activations stage
        `stage` holds at its peak. 1F1B: stage s runs p - s forwards before its first
        backward (Narayanan et al. 2021, Section 2.2). Interleaved: Megatron-LM's schedule warms
        up with 2·(p - s - 1) + (V - 1)·p chunks, then one more forward before each backward;
        on the first stage that is L·(1 + (p - 1)/(p·V)) layers' worth (Korthikanti et al.
        2022, Section 4.2.3). Never more than the micro-batches there are."""
        p, v, m = self.pp, self.interleave, self.micro_batches
        if v == 1:
            return min(p - stage, m), 1
        return min(2 * (p - stage - 1) + (v - 1) * p + 1, m * v), v


def layer_count(stack: Stack, ir: IR) -> int:
    """Layers the forward pass runs (a block sharing its weights counts once per call)."""
    return sum(ir.value(run.calls) for run in stack.blocks.runs)


def check_layout(ir: IR, par: Parallelism) -> None:
    """Refuse a layout the model cannot be split into, naming the values."""
    from archspec.backends.count.split_checks import check_context_split, check_expert_split

    check_expert_split(ir, par.ep, par.dp)
    check_context_split(ir, par.cp)
    model = ir.root
    attentions = [p.node for p in walk(model) if isinstance(p.node, Attention)]
    for attn in attentions[:1]:
        heads, kv = ir.value(attn.n_heads), ir.value(attn.n_kv_heads)
        if heads % par.tp:
            raise SpecError(
                f"--tp {par.tp} does not divide the {heads} attention heads",
                hint="tensor parallelism gives each rank whole heads",
            )
        if kv % par.tp and par.tp % kv:
            raise SpecError(
                f"--tp {par.tp} and the {kv} key/value heads do not divide one another",
                hint="each rank holds whole kv heads, or beyond n_kv_heads ranks share copies",
            )
    for placed in walk(model):
        node = placed.node
        if isinstance(node, MLP) and ir.value(node.hidden) % par.tp:
            raise SpecError(
                f"--tp {par.tp} does not divide the MLP's {ir.value(node.hidden)} hidden units"
            )
    shared = any(ir.value(r.applied) != 1 for s in model.stacks for r in s.blocks.runs)
    if shared and par.pp > 1:
        raise SpecError(
            f"--pp {par.pp}: this model's layers share weights (layer_groups), which pipeline "
            "stages cannot split",
            hint="use tensor or data parallelism",
        )
    if par.pp > MAX_PIPELINE_STAGES:
        raise SpecError(
            f"--pp {par.pp}: archspec times pipelines of at most {MAX_PIPELINE_STAGES:,} stages",
            hint="published runs use a few dozen; give fewer stages",
        )
    layers = sum(layer_count(s, ir) for s in model.stacks)
    chunks = par.pp * par.stages_per_rank
    if par.stage_layers is not None:
        check_stage_layers(par.stage_layers, chunks, layers)
    elif layers % chunks:
        what = f"--pp {par.pp}" + (
            f" × --interleave {par.interleave}" if par.interleave > 1 else ""
        )
        if par.stages_per_rank > 1 and par.schedule is not None:
            what = f"--pp {par.pp} × 2 stages a rank (--schedule {par.schedule})"
        raise SpecError(
            f"{what} = {chunks} pipeline chunks do not divide the {layers} layers",
            hint="each pipeline stage holds the same number of whole layers",
        )


def padded_vocab(vocab: int, tp: int) -> int:
    """The vocabulary rows Megatron-LM allocates: a multiple of 128 per tensor-parallel rank."""
    multiple = VOCAB_MULTIPLE * tp
    return math.ceil(vocab / multiple) * multiple


def vocab_rows(vocab: int, tp: int, engine: str = "megatron") -> int:
    """Vocabulary rows one tensor-parallel rank holds (the most any rank holds): Megatron-LM's
    padded share, or DTensor's `torch.chunk` piece, ceil(V / tp)."""
    if engine == "torch":
        return -(-vocab // tp)
    return padded_vocab(vocab, tp) // tp


def kv_ways(kv_heads: int, tp: int, engine: str = "megatron") -> int:
    """How many ways the k and v weights split over tp ranks. Beyond n_kv_heads ranks each rank
    computes a copy of the kv head its query heads read: Megatron-LM keeps only that head's
    rows (n_kv_heads ways); the generated parallelize keeps the whole weight, a Replicate
    DTensor whose gradient DTensor sums over the ranks (1 way; the same for one kv head)."""
    if kv_heads % tp == 0:
        return tp
    return 1 if engine == "torch" else min(tp, kv_heads)


def tp_share(placed: Placed, ir: IR, tp: int, engine: str = "megatron") -> tuple[int, int]:
    """(weight elements, bias elements) of one copy of a leaf that one tensor-parallel rank
    holds. Column-parallel projections (q, k, v, MLP up and gate) split their weight and bias;
    row-parallel ones (attention output, MLP down) split the weight and keep the whole bias;
    attention sinks split with the query heads;
    k and v split at most n_kv_heads ways (`kv_ways`); the vocabulary is split
    (and padded, as Megatron-LM pads it); norms, position tables and the MoE router are whole on
    every rank."""
    node = placed.node
    parent = placed.ancestors[-1] if placed.ancestors else None
    if isinstance(node, Embedding):
        if isinstance(parent, Model) and node is parent.tok_emb:
            return vocab_rows(ir.value(node.num), tp, engine) * ir.value(node.dim), 0
        if isinstance(parent, Stack) and node is parent.rel_bias:
            return ir.value(node.num) * ir.value(node.dim) // tp, 0  # a column per head
        return ir.value(node.num) * ir.value(node.dim), 0
    if isinstance(node, Linear):
        weight = 0 if node.tied_to else ir.value(node.in_features) * ir.value(node.out_features)
        bias = ir.value(node.out_features) if node.bias else 0
        if isinstance(parent, Model) and node is parent.lm_head:
            vocab = vocab_rows(ir.value(node.out_features), tp, engine)
            return (0 if node.tied_to else vocab * ir.value(node.in_features)), (
                vocab if node.bias else 0
            )
        if isinstance(parent, Attention):
            if node is parent.o:
                return weight // tp, bias
            if parent.latent is not None and node is not parent.q and node is not parent.v:
                # Latent attention's down projections (kv_down makes the latent and the shared
                # rotated key, q_down the query latent) are whole on every rank: Megatron-Core
                # duplicates linear_kv_down_proj and linear_q_down_proj, and the generated
                # parallelize leaves them unsplit, as torchtitan's DeepSeek-V3 plan does.
                return weight, bias
            ways = tp if node is parent.q else kv_ways(ir.value(parent.n_kv_heads), tp, engine)
            return weight // ways, bias // ways
        if isinstance(parent, MLP):
            if node is parent.down:
                return weight // tp, bias
            return weight // tp, bias // tp
        return weight, bias  # the router, the pooler
    if isinstance(node, Sinks):  # split with the query heads, as q's rows
        return ir.value(node.heads) // tp, 0
    # Norms: whole on every rank.
    dim = ir.value(node.dim)  # type: ignore[attr-defined]
    return dim, dim if node.bias else 0  # type: ignore[attr-defined]


def is_leaf(node: Node) -> bool:
    return isinstance(node, (Embedding, Linear, Sinks)) or type(node).__name__ == "Norm"


@dataclass(frozen=True)
class StageParams:
    """Parameters one device holds on one pipeline stage (after tensor parallelism)."""

    stage: int
    params: sp.Expr  # a formula in the dimensions without model parallelism, else a number
    layers: tuple[int, int]  # [first, last) layer index over all stacks
    experts: sp.Expr = sp.Integer(0)  # of `params`, the routed experts' (n_experts / ep)


def stage_params(ir: IR, par: Parallelism) -> list[StageParams]:
    """Parameters per device on each pipeline stage. Layers (the encoder's, then the
    decoder's) are dealt out in equal runs, or in the runs `par.stage_layers` lists; the
    embeddings sit on the first stage, the final norms, pooler and LM head on the last; a head
    tied to the embeddings on another stage keeps its own copy there (Megatron-LM synchronises
    the two copies' gradients, as the generated pipeline() does). Under expert parallelism a
    device holds n_experts / ep of each mixture's routed experts, counted in the stage's own
    layers (`experts`)."""
    model = ir.root
    total_layers = sum(layer_count(s, ir) for s in model.stacks)
    per_stage = total_layers // par.pp
    ranges = stage_ranges(par.stage_layers or (per_stage,) * par.pp)
    if par.tp == 1 and par.pp == 1 and par.ep == 1:
        # One device holds the whole model: keep the count a formula in the dimensions.
        return [StageParams(0, sp.sympify(parameter_count(model)), (0, total_layers))]
    counts = [0] * par.pp
    experts = [0] * par.pp
    offset = 0  # layers of the stacks before the one being walked

    def stage_range(stage: int) -> tuple[int, int]:
        return ranges[stage]

    for stack in model.stacks:
        for placed in walk(stack):
            if not is_leaf(placed.node):
                continue
            weight, bias = tp_share(placed, ir, par.tp, par.engine)
            copies = ir.value(placed.copies)
            layer = _layer_index(placed, stack, ir)
            if layer is None:  # stack-level: position tables on the first, final norms last
                inside_blocks = placed.node is not stack.final_norm
                stage = 0 if inside_blocks else par.pp - 1
                counts[stage] += copies * (weight + bias)
                continue
            # One row of the table stands for `copies` blocks (a run): deal them out.
            each = copies // len(layer)
            expert = _is_expert(placed)
            if expert:  # the device's n_experts / ep of them
                each //= par.ep
            for stage in range(par.pp):
                first, last = stage_range(stage)
                held = within(layer, first - offset, last - offset) * each * (weight + bias)
                counts[stage] += held
                if expert:
                    experts[stage] += held
        offset += layer_count(stack, ir)
    for placed in walk(model):
        if placed.ancestors and isinstance(placed.ancestors[-1], Model) and is_leaf(placed.node):
            weight, bias = tp_share(placed, ir, par.tp, par.engine)
            node = placed.node
            heads = (model.lm_head, model.pooler, model.lm_transform, model.lm_norm, model.score)
            last = node in (*heads, model.score_dense)
            counts[par.pp - 1 if last else 0] += weight + bias
            if node is model.lm_head and node.tied_to and par.pp > 1:
                # The last stage keeps its own copy of the tied matrix.
                counts[par.pp - 1] += vocab_rows(
                    ir.value(model.vocab_size), par.tp, par.engine
                ) * ir.value(model.d_model)
    return [
        StageParams(s, sp.Integer(counts[s]), ranges[s], sp.Integer(experts[s]))
        for s in range(par.pp)
    ]


def _is_expert(placed: Placed) -> bool:
    """Whether a leaf is a routed expert's (inside a mixture's `experts`, not its router or
    its shared experts)."""
    return any(
        isinstance(up, MoE) and any(a is up.experts for a in placed.ancestors)
        for up in placed.ancestors
    )


def overlap(a: tuple[int, int], b: tuple[int, int]) -> int:
    """How many indices the half-open ranges a and b share (layers, without listing them: a
    model of 10⁹ layers costs what one of 12 does)."""
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def _layer_index(placed: Placed, stack: Stack, ir: IR) -> range | None:
    """The layer indices of the run a leaf of `stack` is in; None outside the blocks."""
    ancestors = placed.ancestors
    at = next((i for i, a in enumerate(ancestors) if a is stack.blocks), None)
    if at is None:
        return None
    block = ancestors[at + 1]
    for run in stack.blocks.runs:
        if run.node is block:
            return run.indices(ir.value)
    raise AssertionError("a block outside its runs")


def moe_of(ir: IR) -> MoE | None:
    return next((p.node for p in walk(ir.root) if isinstance(p.node, MoE)), None)
