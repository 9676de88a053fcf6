"""The generated `parallelize`'s layouts beyond tensor parallelism: expert parallelism over
"ep" (`archspec.runtime.expert_parallel`), context parallelism over "cp"
(`archspec.runtime.context_parallel`) and FSDP2 over the data ranks. The mesh is read
once, by `mesh_sizes` (`archspec.runtime.mesh`).

The data ranks are "dp_replicate", "dp_shard" (or "dp") and "ep": each trains on its own rows
of the batch (an "ep" rank is a data rank that also holds its share of the experts, as in
torchtitan, where ep borrows the data-parallel ranks). FSDP2 shards the embedding, every
block, the final norm with the head (`_units_beside_blocks`), then the root, over dp_shard
and ep (and cp beside dp_shard, torchtitan's dp_shard_cp), replicated over dp_replicate
(HSDP); an expert-parallel rank's experts are its own (`data_parallel`).
"""

from __future__ import annotations

from archspec.backends.torchgen.copied import runtime_sources
from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.feedforward import EXPERTS
from archspec.backends.torchgen.text import call, indent, lines
from archspec.ir.nodes import MoE


def copies(module: str, *names: str) -> list[str]:
    """The named functions and classes of archspec.runtime.<module>, each followed by a
    blank line, for parallelize's body."""
    return [line for code in runtime_sources(module, *names) for line in (code, "")]


def _refusals() -> list[str]:
    return [
        'if sizes["pp"] > 1:',
        "    raise ValueError(f\"pp={sizes['pp']}: parallelize has no pipeline stages\")",
        'if sizes["dp_replicate"] > 1 and (sizes["cp"] > 1 or sizes["ep"] > 1):',
        '    raise ValueError("dp_replicate (HSDP) is planned beside dp_shard and tp")',
    ]


def _experts(f: Features) -> list[str]:
    moes = sorted({f.cls(node) for node, _ in f.classes(MoE)})
    if not moes:
        return [
            'if sizes["ep"] > 1:',
            "    raise ValueError(f\"ep={sizes['ep']}: this model has no experts\")",
        ]
    body = [
        'if sizes["cp"] > 1:',
        '    raise ValueError("expert parallelism is planned beside dp_shard and tp")',
        'ep = mesh["ep"]',
        "# Every data rank (ep and dp_shard) its own rows: each expert's gradient is",
        "# divided by their number (by FSDP2 below when it shards them over dp_shard).",
        'data_ranks = sizes["ep"] if sizes["dp_shard"] == 1 else 1',
        "for module in model.modules():",
        f"    if isinstance(module, ({', '.join(moes)},)):",
        "        if module.experts.n_experts % ep.size():",
        "            n = module.experts.n_experts",
        '            raise ValueError(f"ep={ep.size()} does not divide the {n} experts")',
        "        module.experts = ExpertParallel(module.experts, ep, data_ranks)",
    ]
    styles = copies("expert_parallel", "AllToAll", "ExpertParallel")
    return ["", *styles, 'if sizes["ep"] > 1:', indent(lines(*body), 1)]


def more_layouts(f: Features) -> list[str]:
    """The lines after tensor parallelism: refusals, expert and context parallelism."""
    return [*_refusals(), *_experts(f), *_context(f)]


def data_parallel(f: Features) -> list[str]:
    """FSDP2 over the data ranks. Under cp with dp_shard, the blocks shard over dp_shard × cp
    too, their gradients summed over cp (each rank's positions give part of them) and
    averaged over dp_shard; without dp_shard, `split_context` sums them. An expert-parallel
    rank's own experts are sharded over dp_shard alone (each a unit), or left out."""
    moe = any(True for _ in f.classes(MoE))
    body = [
        'if mp_policy == "bf16":  # torchtitan\'s: bf16 compute, gradients reduced in fp32',
        "    bf16, fp32 = torch.bfloat16, torch.float32",
        "    mp_policy = MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)",
        "mp_policy = mp_policy or MixedPrecisionPolicy()  # default: no casts",
    ]
    own: list[str] = []
    if moe:
        own = ["ignored_params=own", "shard_placement_fn=by_expert_rows"]
        body += [
            "# The stacked experts (n_experts, out, in): each expert's rows sharded, as an",
            "# expert's Linear would be (Shard(0) would hand ranks whole experts).",
            f"experts = [m for m in model.modules() if isinstance(m, {EXPERTS})]",
            "stacked = {p for m in experts for p in m.parameters()}",
            "",
            "def by_expert_rows(param):",
            "    return Shard(1) if param in stacked else None",
            "",
            "# An expert-parallel rank's own experts: not sharded over the others.",
            'own = {p for m in model.modules() if hasattr(m, "mix") for p in m.parameters()}',
            'if own and sizes["dp_shard"] > 1:  # over dp_shard, averaged over every rank',
            '    shard = flat_mesh(mesh, ("dp", "dp_shard"))',
            '    for local in (m.local for m in model.modules() if hasattr(m, "mix")):',
            "        fully_shard(",
            "            local,",
            "            mesh=shard,",
            "            mp_policy=mp_policy,",
            "            shard_placement_fn=by_expert_rows,",
            "        )",
            "        local.set_gradient_divide_factor(dp.size())",
            "        local.set_force_sum_reduction_for_comms(True)  # gloo: no PREMUL_SUM",
            "    own = set()",
        ]
    before, after = _units_beside_blocks(f)
    body += [
        'if sizes["dp_replicate"] > 1:  # HSDP: replicas of dp_shard\'s sharding',
        '    dp = mesh["dp_replicate", "dp_shard" if "dp_shard" in names else "dp"]',
        *before,
        "for block in blocks:",
        indent(call("fully_shard", ["block", "mesh=dp", "mp_policy=mp_policy", *own], 3), 1),
        '    if sizes["cp"] > 1:',
        '        block.set_gradient_divide_factor(dp.size() // sizes["cp"])',
        "        block.set_force_sum_reduction_for_comms(True)  # gloo: no PREMUL_SUM",
        *after,
        call("fully_shard", ["model", "mesh=dp", "mp_policy=mp_policy", *own], 2),
    ]
    return [
        "# The data ranks; cp ranks too under dp_shard (see split_context).",
        "names = mesh.mesh_dim_names",
        'data = ("dp", "dp_shard", "ep") + (("cp",) if sizes["dp_shard"] > 1 else ())',
        "dp = flat_mesh(mesh, data)",
        'if sizes["dp_replicate"] > 1 and sizes["dp_shard"] == 1:',
        '    raise ValueError("dp_replicate (HSDP) needs a dp_shard dimension")',
        "if mp_policy is not None and (dp is None or dp.size() == 1):",
        '    raise ValueError("mp_policy is FSDP2\'s: it needs data ranks (dp_shard, ep)")',
        "if dp is not None and dp.size() > 1:",
        indent(lines(*body), 1),
    ]


def _units_beside_blocks(f: Features) -> tuple[list[str], list[str]]:
    """FSDP2's units besides the blocks, as torchtitan groups them (apply_fsdp in its
    models/llama3/infra/parallelize.py): the token embedding a unit of its own, resharded
    after forward like a block; the final norm and the LM head one unit, kept whole after
    forward, since the backward begins with them; the root holds what is left. A weight two
    units would share (a head tied to the embedding, an embedding two stacks read) keeps
    them all in the root. (lines before the blocks' units, lines after.)"""
    model, last = f.model, f.stacks[-1]
    head = model.lm_head
    if len(f.stacks) > 1 or (head is not None and head.tied_to is not None):
        return [], []
    before = [
        "# torchtitan's units: the embedding; each block; the final norm with the head.",
        f"fully_shard(model.{model.tok_emb.name}, mesh=dp, mp_policy=mp_policy)",
    ]
    if head is None:
        return before, []
    parts = [f"model.{last.name}.{last.final_norm.name}"] if last.final_norm is not None else []
    after = [
        f'if held(model, "{head.name}"):  # not on a pipeline stage before the last',
        f"    last = [{', '.join([*parts, f'model.{head.name}'])}]",
        "    fully_shard(last, mesh=dp, mp_policy=mp_policy, reshard_after_forward=False)",
    ]
    return before, after


def _context(f: Features) -> list[str]:
    """Context parallelism over "cp" for a causal decoder whose attention reads a KV cache
    (the gathered keys take the cache's place), else a refusal naming what stops it."""
    stack = f.stacks[-1]
    why = None
    if len(f.stacks) > 1:
        why = "an encoder-decoder is not split over cp"
    elif not f.cached(stack) or False in f.causalities:
        why = "only a causal decoder is split over cp"
    elif f.windowed:
        why = "sliding-window layers are not split over cp"
    elif stack.local_position is not None:
        why = "layers rotating by a local_position are not split over cp"
    if why is not None:
        refusal = call("raise ValueError", [f'"context parallelism: {why}"'], 2)
        return ['if sizes["cp"] > 1:', indent(refusal, 1)]
    angles = f.position_code(stack).angles is not None
    return [
        "",
        *copies(
            "context_parallel",
            "balanced_positions",
            "gathered",
            "GatherKeys",
            "ShareRows",
            "WholeRows",
            "ContextKeys",
            "split_context",
        ),
        'if sizes["cp"] > 1:',
        '    if sequence_parallel or sizes["ep"] > 1:',
        '        raise ValueError("context parallelism: with tp and dp_shard, no sp")',
        "    # Without dp_shard, split_context sums the blocks' gradients over cp; with it",
        "    # FSDP2 does (below).",
        '    summed = sizes["dp_shard"] == 1',
        f'    split_context(list(model.{stack.name}.blocks), mesh["cp"], {angles}, summed)',
    ]
