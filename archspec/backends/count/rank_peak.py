"""The peak of a training step on each rank of the generated `parallelize`'s layouts (count's
torch engine): tensor parallelism (DTensor), FSDP2 over the data ranks, FSDP2 beside tp (a
2-D mesh: fully_shard cuts each rank's tp shards, and a unit gathers them back, whole over
the data ranks but still split over tp), context and expert parallelism; fp32 with
torch.optim.AdamW as `bench --nproc` trains, or FSDP2's mixed precision (below).

The moments are step_peak.py's, each with the rank's own terms (`RankTerms`):

- resident: the rank's weights and AdamW's two moments (its shards, or its experts), AdamW's
  `step` counter per tensor (a 4-byte tensor on the CPU; on a GPU the default foreach
  implementation keeps it on the host) and the token ids and targets of the rank's rows;
- activations: what the rank keeps (`rank_activations`: cp's gathered keys, ep's dispatch and
  its experts' activations over the rows they receive, `ExpertLoad`: the routing is an input);
- FSDP2 (torch.distributed.fsdp.fully_shard in torchtitan's units, `fsdp_units`: the
  embedding, each block, the final norm with the head, the root with what is left). A unit's
  parameters are all-gathered whole before its forward and freed after it
  (reshard_after_forward), but the final norm and head's stay whole until their backward
  (reshard_after_forward=False) and the root's until the backward ends. The backward gathers
  each unit again, and before running it prefetches the next one's (the all-gather's output
  buffer, whole); a unit's gradients are whole until its reduce-scatter after its backward,
  when they are copied into the reduce-scatter's input (whole too). So the backward of the
  last block holds its own whole parameters and the prefetched block's, and its gradients
  whole beside the head's sharded; the first block's, every other block's gradients sharded
  and the embedding's parameters prefetched. A mixture's experts are sharded along their
  rows (Shard(1)), which gathering copies out through a temporary as large: in the block's
  unit (FSDP2 alone) or, under ep beside dp_shard, in a unit of their own, whole through
  their backward and three times their size while gathered before it (`experts_unit`);
- FSDP2's mixed precision (parallelize's mp_policy="bf16": MixedPrecisionPolicy(param_dtype
  bf16, reduce_dtype fp32), `MIXED_PRECISION`), as torch 2.13's fully_shard does it: the
  shards, AdamW's states and the sharded gradients stay fp32 (`FSDPParam.init_dtype_attrs`:
  orig_dtype fp32). Gathering a unit copies its shards into a flat bf16 all-gather input
  (`_get_param_all_gather_inputs`' foreach copy, freed when `foreach_all_gather` returns)
  inside a bf16 all-gather output, whole, which `foreach_all_gather_copy_out` copies into
  the unsharded parameters (`init_unsharded_param`: param_dtype, bf16): whole parameters,
  gathered or prefetched, are 2 bytes each. The forward and backward compute in bf16 (the
  activations and their gradients: `activation_parts` at 2 bytes), so a unit's gradients
  are bf16 and whole until `foreach_reduce` copies them into its reduce-scatter input of
  reduce_dtype (fp32, whole, kept as `reduce_scatter_states` as above) and reduce-scatters
  into an fp32 output the sharded gradients view (orig_dtype == reduce_dtype: no cast). The
  loss casts the logits to fp32: its backward's gradients are fp32, the head's gradient of
  the logits bf16. Covered for FSDP2 alone, without experts (`rank_peaks` refuses the rest);
- a block's reduce-scatter (FSDP2 alone, the first and the last block's; `reduce_scatter` in
  `_rank_terms`): after its backward, with the gradient of its input alive, the block's
  reduce-scatter input (fp32, whole), its gradients freed but the last, the output shard,
  and on the CPU gloo's copy of that input. Under fp32 it stays below the block's backward
  in the runs measured; under
  mixed precision, whose fp32 reduce-scatter input is twice the bf16 gradients, it is the
  peak of small batches (measured, benchmarks/RESULTS.md);
- HSDP (a dp_replicate × dp_shard mesh, alone or beside tp): a rank holds what it holds
  under FSDP2 (beside tp) over its replica's dp_shard ranks, and the moments are those: torch 2.13's
  `foreach_reduce` reduce-scatters a unit's gradients over dp_shard into the rank's shard as
  without replicas, then all-reduces that shard in place over dp_replicate (gloo copies
  nothing, measured; `_all_reduce_state` keeps the reduce-dtype output, the sharded
  gradients' own storage under parallelize's policies, whose reduce dtype is theirs);
- the optimizer step: every gradient, plus what AdamW allocates: the for-loop implementation
  (PyTorch's default on the CPU) makes sqrt(second moments) and its quotient for each
  parameter in turn, keeping that quotient until the next parameter's replaces it (`denom`):
  the most is a parameter's quotient and the next one's two temporaries; foreach (the default
  on a GPU) one temporary as large as all the rank's parameters.

The runs it is checked against (2 gloo processes, tests/test_rank_peak.py) measure with
archspec's tensor tracker, as the bench does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import sympy as sp

from archspec.backends.count.block_backward import BackwardMoment
from archspec.backends.count.layout import Parallelism, is_leaf, tp_share
from archspec.backends.count.memory import memory_figures
from archspec.backends.count.params import parameter_count
from archspec.backends.count.passes import S_DEC, B, S, whole_sequences
from archspec.backends.count.rank_activations import ExpertLoad, layout_counter
from archspec.backends.count.step_peak import RankTerms, step_peak
from archspec.backends.count.torch_layout import _shapes, chunk
from archspec.backends.count.torch_layout_mesh import coordinates, covered
from archspec.errors import SpecError
from archspec.ir.nodes import IR, MLP, Attention, Model, MoE, Node, Repeat, Stack
from archspec.ir.visit import INDEX_NAMES, join, walk
from archspec.safety.limits import MAX_RANK_TENSORS

WEIGHT = 4  # fp32 weights, gradients and each AdamW moment
INDEX = 8  # int64 token ids and targets
MIXED_PRECISION = 2  # module docstring: FSDP2's mp_policy="bf16"


@dataclass(frozen=True)
class RankPeak:
    """One rank's peak: `resident` bytes plus the largest of `moments`; `activations`, what
    it keeps for backward; `params`, the parameter elements it holds."""

    rank: int
    resident: int
    moments: dict[str, int]
    activations: int
    params: int

    @property
    def moment(self) -> str:
        return max(self.moments, key=self.moments.__getitem__)

    @property
    def peak(self) -> int:
        return self.resident + self.moments[self.moment]


def _experts(node: Node, parent: Node | None) -> bool:
    return isinstance(parent, MoE) and node is parent.experts


def ordered_leaves(ir: IR, ep: int = 1):
    """(leaf, its walk path, its layer) for every leaf module in `model.parameters()` order,
    runs unrolled (layer: the block's index over all stacks, None outside the blocks); of
    each mixture's experts, the n_experts / ep one expert-parallel rank holds. Refused beyond
    MAX_RANK_TENSORS leaves, which would take minutes to walk."""
    leaves = _leaf_count(ir, ir.root, None, ep)
    if leaves > MAX_RANK_TENSORS:
        raise SpecError(
            f"count's torch engine walks each parameter tensor of a rank one by one; this model "
            f"has {leaves:,} (at most {MAX_RANK_TENSORS:,})",
            hint="drop --engine torch: the default engine counts any depth at once",
        )
    layers = iter(range(10**9))

    def go(node: Node, path: str, depth: int, parent: Node | None, layer: int | None):
        if is_leaf(node):
            yield node, path, layer
            return
        if isinstance(node, Repeat):
            index = INDEX_NAMES[depth]
            blocks = isinstance(parent, Stack) and node is parent.blocks
            for run in node.runs:
                count = ir.value(run.count)
                if _experts(node, parent):
                    count //= ep
                for _ in range(count):
                    at = next(layers) if blocks else layer
                    yield from go(run.node, join(path, index), depth + 1, node, at)
            return
        for child in node.children:
            yield from go(child, join(path, child.name), depth, node, layer)

    yield from go(ir.root, ir.root.name, 0, None, None)


def _leaf_count(ir: IR, node: Node, parent: Node | None, ep: int) -> int:
    """How many leaves ordered_leaves yields under `node`, without unrolling the runs."""
    if is_leaf(node):
        return 1
    if isinstance(node, Repeat):
        total = 0
        for run in node.runs:
            count = ir.value(run.count)
            if _experts(node, parent):
                count //= ep
            total += count * _leaf_count(ir, run.node, node, ep)
        return total
    return sum(_leaf_count(ir, child, node, ep) for child in node.children)


def local_tensors(ir: IR, dims: dict[str, int], rank: int) -> list[int]:
    """Elements of each parameter tensor rank `rank` holds, in `model.parameters()` order."""
    return [n for *_, tensors in leaf_tensors(ir, dims, rank) for n in tensors]


def leaf_tensors(ir: IR, dims: dict[str, int], rank: int):
    """(leaf, its layer, whether it is an expert's, the elements of each of its parameter
    tensors rank `rank` holds) in `model.parameters()` order. DTensor's tensor parallelism
    (`torch_layout`'s rules) leaves each rank its tp shard; FSDP2 shards that over the data
    ranks (torch.chunk's pieces of its first dimension, as fully_shard cuts a tp shard on a
    2-D mesh; an expert-parallel rank's experts over dp_shard alone)."""
    at = coordinates(dims, rank)
    tp, cp, ep, dp = dims["tp"], dims["cp"], dims["ep"], dims["dp_shard"]
    data = dp * ep * (cp if dp > 1 else 1)
    data_rank = (at["dp_shard"] * ep + at["ep"]) * (cp if dp > 1 else 1) + (
        at["cp"] if dp > 1 else 0
    )
    placed = {p.path: p for p in walk(ir.root)}
    for node, path, layer in ordered_leaves(ir, ep):
        where = placed[path]
        pairs = zip(where.ancestors, where.ancestors[1:], strict=False)
        expert = any(_experts(up, above) for above, up in pairs)
        tensors = []
        for rows, rest in _tp_shards(ir, where, tp, at["tp"]):
            if data > 1:
                ways, index = (dp, at["dp_shard"]) if expert else (data, data_rank)
                rows = chunk(rows, ways, index)
            tensors.append(int(rows * rest))
        yield node, layer, expert, tensors


def _tp_shards(ir: IR, where, tp: int, tp_rank: int) -> list[tuple[int, int]]:
    """(first dimension, elements per row) of each of a leaf's tensors on tp rank `tp_rank`:
    the vocabulary's rows (torch.chunk's piece), else `tp_share`'s elements of a tensor split
    along its rows (column-parallel, Shard(0)) or along its columns (row-parallel
    projections and a relative-position table: Shard(1), every row kept)."""
    node = where.node
    shapes = [[ir.value(d) for d in shape] for shape in _shapes(node)]
    model = ir.root
    if tp == 1:
        return [(dim0, sp.prod(rest)) for dim0, *rest in shapes]
    parent = where.ancestors[-1]
    if isinstance(parent, Model) and node in (model.tok_emb, model.lm_head):
        rows = chunk(ir.value(model.vocab_size), tp, tp_rank)
        return [(rows, shape[1] if len(shape) == 2 else 1) for shape in shapes]
    # A tied weight is not the leaf's own; a bias is there when it has one.
    shares = [n for n in tp_share(where, ir, tp, "torch") if n]
    by_columns = (isinstance(parent, Attention) and node is parent.o) or (
        isinstance(parent, MLP) and node is parent.down
    ) or (isinstance(parent, Stack) and node is parent.rel_bias)  # fmt: skip
    out = []
    for (dim0, *rest), n in zip(shapes, shares, strict=True):
        if by_columns and rest:
            out.append((dim0, n // dim0))
        else:
            out.append((n // sp.prod(rest), sp.prod(rest)))
    return out


def adamw_temporaries(tensors: list[int], implementation: str) -> int:
    """Bytes AdamW allocates during its step beyond its states (the module docstring)."""
    if implementation == "foreach":
        return WEIGHT * sum(tensors)
    if implementation == "fused":
        return 0
    pairs = zip([0, *tensors], tensors, strict=False)
    return WEIGHT * max((before + 2 * this for before, this in pairs), default=0)


@dataclass(frozen=True)
class Units:
    """FSDP2's units (parameter elements, whole) as the generated parallelize groups them:
    the embedding (0 when it stays in the root), each block in forward order with its
    experts apart (an expert-parallel rank's own, not sharded with the rest), the final norm
    with the head (0 when in the root), and the root with what is left."""

    embedding: int
    blocks: list[int]
    experts: list[int]
    last: int
    root: int


def fsdp_units(ir: IR, tp: int = 1, tp_rank: int = 0) -> Units:
    """torchtitan's grouping (`torchgen.parallel_layouts._units_beside_blocks`): one stack and
    no tied head, else everything but the blocks in the root. Under tensor parallelism a
    unit gathers its tp shards (those of tp rank `tp_rank`), whole over the data ranks."""
    model = ir.root
    layers = sum(ir.value(run.count) for stack in model.stacks for run in stack.blocks.runs)
    blocks, experts = [0] * layers, [0] * layers
    embedding = last = rest = 0
    head = model.lm_head
    norm = model.stacks[-1].final_norm
    apart = len(model.stacks) == 1 and not (head is not None and head.tied_to is not None)
    dims = {"pp": 1, "dp_shard": 1, "ep": 1, "cp": 1, "tp": tp}
    for node, layer, expert, tensors in leaf_tensors(ir, dims, tp_rank):
        n = sum(tensors)
        if layer is not None:
            (experts if expert else blocks)[layer] += n
        elif apart and node is model.tok_emb:
            embedding += n
        elif apart and head is not None and node in (head, norm):
            last += n
        else:
            rest += n
    return Units(embedding, blocks, experts, last, rest)


def rank_peaks(
    ir: IR, dims: dict[str, int], batch: int, seq: int, device: str = "cpu", attn: str = "flash",
    sequence_parallel: bool = False, expert_loads: Sequence[ExpertLoad] | None = None,
    mixed_precision: bool = False,
) -> list[RankPeak]:  # fmt: skip
    """Each rank's peak on mesh `dims` (`archspec.bench.mesh_layout.mesh_dims`, without pp;
    with dp_replicate, HSDP: FSDP2 over one replica's dp_shard, the module docstring),
    `batch` sequences of `seq` positions per data rank; `sequence_parallel`: parallelize's
    (the sequence split over tp between the blocks). `expert_loads`: under ep, the rows each
    rank's experts receive relative to balanced routing (one per rank; default: balanced).
    `mixed_precision`: parallelize's mp_policy="bf16" (`MIXED_PRECISION`)."""
    tp, cp, ep, dp = dims["tp"], dims["cp"], dims["ep"], dims["dp_shard"]
    if mixed_precision and (dp * ep == 1 or tp * cp * ep > 1 or _has_experts(ir)):
        raise SpecError(
            "the peak per rank under mixed precision covers FSDP2 alone (dp_shard), without experts"
        )
    param_bytes = MIXED_PRECISION if mixed_precision else WEIGHT
    if dims.get("dp_replicate", 1) > 1 and cp * ep > 1:
        raise SpecError("the peak per rank under HSDP covers dp_replicate × dp_shard (× tp)")
    if dp > 1 and tp > 1:
        _check_fsdp_beside_tp(ir, dims)
    elif not covered(dims):
        raise SpecError(
            "the peak per rank covers tp, FSDP2, FSDP2 beside tp, cp beside tp or FSDP2, "
            "and ep with dp_shard"
        )
    env = {**ir.env, B: batch, **whole_sequences(seq)}
    par = Parallelism(gpus=tp, tp=tp, sp=sequence_parallel and tp > 1, engine="torch")
    m = memory_figures(ir, attn=attn, parallel=par, device=device)
    ranks = tp * cp * ep * dp * dims.get("dp_replicate", 1)
    loads = [ExpertLoad()] * ranks if expert_loads is None else list(expert_loads)
    if len(loads) != ranks:
        raise ValueError(f"{len(loads)} expert loads for {ranks} ranks")
    optimizer = "single" if device == "cpu" else "foreach"
    kept: dict[sp.Expr, int] = {}  # by the step's load

    def activations(load: sp.Expr) -> int:
        if load not in kept:
            kept[load] = _activations(ir, m, cp, ep, env, load, param_bytes)
        return kept[load]

    out = []
    alike: dict[tuple, dict[str, int]] = {}  # ranks holding the same tensors at one load
    for rank, load in enumerate(loads):
        tensors = local_tensors(ir, dims, rank)
        key = (tuple(tensors), load)
        if key not in alike:
            at = partial(_moments, ir, m, dims, rank, tensors, optimizer, env, param_bytes)
            alike[key] = _with_block_loads(at, load, activations)
        steps = len(tensors) * WEIGHT if device == "cpu" else 0
        resident = 3 * WEIGHT * sum(tensors) + steps + 2 * INDEX * batch * seq
        out.append(RankPeak(rank, resident, alike[key], activations(load.step), sum(tensors)))
    return out


def _moments(
    ir: IR, m, dims: dict[str, int], rank: int, tensors: list[int], optimizer: str, env: dict,
    param_bytes: int, load: sp.Expr,
) -> dict[str, int]:  # fmt: skip
    """step_peak's moments for the rank holding `tensors`, its experts at `load`."""
    terms = _rank_terms(ir, dims, rank, tensors, optimizer, load, param_bytes, m.device)
    peak = step_peak(ir, m, rank=terms)
    return {k: int(sp.ceiling(v.xreplace(env))) for k, v in peak.moments.items()}


def _with_block_loads(at, load: ExpertLoad, activations) -> dict[str, int]:
    """The moments at the step's load, but the backward of the first and the last block's
    MLP, which hold that block's own received rows (`rank_activations`): the last block's
    interpreted at its own ratio, with the step's activations in place of that ratio's (the
    other blocks keep theirs: everything kept is linear in the rows), the first block's at
    its own alone (no other block's activations are left)."""
    cache: dict[sp.Expr, dict[str, int]] = {}

    def moments_at(ratio: sp.Expr) -> dict[str, int]:
        if ratio not in cache:
            cache[ratio] = at(ratio)
        return cache[ratio]

    moments = dict(moments_at(load.step))
    last, first = "last block's backward", "first block's backward"
    if last in moments:
        kept = activations(load.step) - activations(load.last)
        moments[last] = moments_at(load.last)[last] + kept
    if first in moments:
        moments[first] = moments_at(load.first)[first]
    return moments


def _check_fsdp_beside_tp(ir: IR, dims: dict[str, int]) -> None:
    """FSDP2 over tp shards (a 2-D mesh) is counted where its units are the embedding, the
    blocks and the final norm with the head, and nothing but those (the gradients made before
    a block's backward are then the units' own tp shards: `_rank_terms`)."""
    model = ir.root
    first = model.stacks[0]
    extra = (first.pos_emb, first.rel_bias, first.emb_norm, first.emb_proj, model.type_emb)
    u = fsdp_units(ir)
    if dims["cp"] * dims["ep"] > 1 or u.root or not u.embedding or not u.last or any(extra):
        raise SpecError(
            "the peak per rank covers FSDP2 beside tp (dp_shard × tp) for one stack of blocks "
            "between a token embedding and an untied head, with no cp or ep"
        )


def _rank_terms(
    ir: IR, dims: dict[str, int], rank: int, tensors: list[int], optimizer: str, load: sp.Expr,
    param_bytes: int = WEIGHT, device: str = "cuda",
) -> RankTerms:  # fmt: skip
    """The terms of step_peak's moments for a rank holding `tensors` (the module docstring)."""
    cp, ep, dp, tp = dims["cp"], dims["ep"], dims["dp_shard"], dims["tp"]
    data = dp * ep * (cp if dp > 1 else 1)  # the ranks FSDP2 shards over
    u = fsdp_units(ir, tp, coordinates(dims, rank)["tp"])
    # Each block's FSDP2 unit: its experts with it, but under ep (their own, `experts_unit`).
    units = u.blocks if ep > 1 else [b + e for b, e in zip(u.blocks, u.experts, strict=True)]
    gradients = sp.Integer(WEIGHT * sum(tensors))
    total = parameter_count(ir.root)

    def block_moment(moment: BackwardMoment, name: str) -> sp.Expr:
        made = moment.made_params
        if tp > 1 and data > 1:  # the units' own tp shards (`_check_fsdp_beside_tp`)
            made = u.last
            if name == "first block's backward":
                made += sum(u.blocks[1:]) + sum(u.experts[1:])
        if data == 1:  # the gradients made, shared out as the rank's parameters are
            return moment.activations + gradients * made / total
        # The units whose backward is over have reduce-scattered their gradients (of the
        # experts the rank holds its own, sharded over dp_shard alone): the final norm and
        # head's, and in the first block's backward every other block's. The running
        # unit's are whole.
        done, own = u.last, 0
        if name == "first block's backward":
            done, own = done + sum(u.blocks[1:]), sum(u.experts[1:])
        sharded = sp.Integer(done) / data + sp.Integer(own) / (ep * dp)
        # The running unit's gradients are in the compute dtype (`MIXED_PRECISION`).
        alive = moment.activations + WEIGHT * sharded + param_bytes * (made - done - own)
        return alive + experts_unit(moment, name)

    def experts_unit(moment: BackwardMoment, name: str) -> sp.Expr:
        # A mixture's experts are sharded along their rows (Shard(1), parallelize's
        # `by_expert_rows`). torch 2.13's foreach_all_gather (_fsdp_collectives.py) makes
        # the unit's all-gather output, whole; its pre_backward copies it out
        # (wait_for_unshard -> foreach_all_gather_copy_out), allocating the unsharded
        # weights (alloc_all_gather_outputs) and, as fsdp_placement.dim != 0, an empty_like
        # temporary of each Shard(1) weight for split_with_sizes_copy, then torch.cat's the
        # pieces into the weights; the temporaries go when the copy-out returns, the output
        # right after (outside the forward, `_all_gather_result = None`), and only then is
        # the next unit prefetched (`_backward_prefetch`): `gathering`, before the MLP's
        # backward, with `held`'s prefetched unit not gathered yet.
        if dp == 1 or not any(u.experts):
            return sp.Integer(0)
        first = name == "first block's backward"
        at = 0 if first else -1
        prefetched = u.embedding if first else (units[-2] if len(units) > 1 else 0)
        if ep > 1:
            # Under ep beside dp_shard the rank's experts (n_experts / ep) are a unit of their
            # own: the block's unit prefetches it and it prefetches the block before. Whole
            # through their backward; the output, the temporaries and the weights at once.
            unit = sp.Integer(u.experts[at]) / ep
            if not moment.gathering:
                return WEIGHT * unit
            return WEIGHT * (3 * unit - prefetched)
        # In the block's unit (`held` counts them with it), gathered at the block's
        # pre_backward, before the mixture's combine runs its backward: the gradient of the
        # experts' output rows that `gathering` counts is not made yet (counted over).
        if not moment.gathering:
            return sp.Integer(0)
        return WEIGHT * (units[at] + u.experts[at] - prefetched)

    def held(moment: str) -> sp.Expr:
        if data == 1:
            return sp.Integer(0)
        # Whole parameters: the root's throughout, the final norm and head's until their
        # backward, the running block's and the one the backward prefetches. Besides, the
        # reduce-scatter input of the unit whose backward ran before (its gradients, whole):
        # FSDP2 keeps it (`reduce_scatter_state`) until the next unit's reduce-scatter.
        # Parameters and gradients whole in the compute dtype, reduce-scatter inputs in fp32
        # (`MIXED_PRECISION`).
        before_first = units[1] if len(units) > 1 else u.last
        gathered = {
            "loss backward": (u.root + u.last, 0),
            "head backward": (u.root + u.last + units[-1], 0),
            "last block's backward": (u.root + sum(units[-2:]) + u.last, 0),
            "first block's backward": (u.root + units[0] + u.embedding, before_first),
            # The last unit's backward (the embedding's, else the root's): its whole
            # parameters and gradients, and the first block's reduce-scatter input.
            "end of backward": (
                2 * (u.embedding or u.root) + (u.root if u.embedding else 0),
                units[0] if units else 0,
            ),
        }
        whole, reducing = gathered.get(moment, (0, 0))
        return sp.Integer(param_bytes * whole + WEIGHT * reducing)

    def reduce_scatter(moment: str) -> sp.Expr:
        # A block's post_backward (torch 2.13's FSDPParamGroup.post_backward): it reshards the
        # block's parameters, lets the previous unit's reduce-scatter input go
        # (`reduce_scatter_states`, one kept), then `foreach_reduce` allocates the block's
        # reduce-scatter input (reduce_dtype, whole), copies the gradients in (whole, in the
        # compute dtype) and frees them (`unsharded_grads.clear()`) but the last, which its
        # loop over the gradients leaves bound to `unsharded_grad` until it returns; then the
        # output (the rank's shard, reduce_dtype) and the reduce-scatter, where gloo's
        # _reduce_scatter_base reduces a copy of the whole input (measured, each unit on 2 CPU
        # ranks; none on a GPU's NCCL). Held besides: the root's parameters, the prefetched
        # unit's (the block before, or the embedding), the units done's gradients, sharded.
        # (On 2 gloo ranks one rank now and then holds more here: benchmarks/RESULTS.md.)
        first = moment == "first block's reduce-scatter"
        at, prefetched = (0, u.embedding) if first else (-1, units[-2] if len(units) > 1 else 0)
        done = u.last + (sum(units[1:]) if first else 0)
        unit = sp.Integer(units[at])
        copy = unit if device == "cpu" else 0
        whole = param_bytes * (u.root + prefetched + last_tensors[at])
        return whole + WEIGHT * (sp.Integer(done) / data + unit + unit / data + copy)

    temporaries = sp.Integer(adamw_temporaries(tensors, optimizer))
    counter = layout_counter(cp, ep, load, experts_sharded=dp > 1)
    alone = data > 1 and tp * cp * ep == 1 and not any(u.experts)  # FSDP2 alone
    last_tensors = _last_tensors(ir) if alone else []
    return RankTerms(
        counter, gradients, block_moment, held, temporaries,
        reduce_scatter if alone else None, param_bytes,
    )  # fmt: skip


def _last_tensors(ir: IR) -> list[int]:
    """Elements of each block's last parameter tensor (whole), in forward order."""
    dims = {"pp": 1, "dp_shard": 1, "ep": 1, "cp": 1, "tp": 1}
    last: dict[int, int] = {}
    for _, layer, _, tensors in leaf_tensors(ir, dims, 0):
        if layer is not None and tensors:
            last[layer] = tensors[-1]
    return [last[layer] for layer in sorted(last)]


def _has_experts(ir: IR) -> bool:
    return any(isinstance(p.node, MoE) for p in walk(ir.root))


def _activations(
    ir: IR, m, cp: int, ep: int, env: dict, load: sp.Expr, compute: int = WEIGHT
) -> int:
    from archspec.backends.count.activations import activation_parts

    par = m.parallel
    parts = activation_parts(
        ir, compute, m.attn, m.recompute, par.tp, par.sp, m.device, "torch",
        counter_class=layout_counter(cp, ep, load),
    )  # fmt: skip
    return int(sp.ceiling(parts.total.xreplace({**env, S_DEC: env[S]})))
