"""The generated `parallelize`'s layouts beyond tensor parallelism: expert parallelism over
"ep" (`archspec.runtime.expert_parallel`), context parallelism over "cp"
(`archspec.runtime.context_parallel`) and FSDP2 over the data ranks. The mesh is read
once, by `mesh_sizes` (`archspec.runtime.mesh`).

The data ranks are "dp_shard" (or "dp") and "ep": each trains on its own rows of the batch
(an "ep" rank is a data rank that also holds its share of the experts, as in torchtitan,
where ep borrows the data-parallel ranks). FSDP2 shards every block, then the root, over
them all, the experts of an expert-parallel layout left out: each rank holds its own.
"""

from __future__ import annotations

from archspec.backends.torchgen.copied import runtime_sources
from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.text import call, indent, lines
from archspec.ir.nodes import MoE

DATA = '("dp", "dp_shard", "ep")'


def copies(module: str, *names: str) -> list[str]:
    """The named functions and classes of archspec.runtime.<module>, each followed by a
    blank line, for parallelize's body."""
    return [line for code in runtime_sources(module, *names) for line in (code, "")]


def _refusals() -> list[str]:
    return [
        'if sizes["pp"] > 1 or sizes["dp_replicate"] > 1:',
        "    raise ValueError(",
        "        f\"pp={sizes['pp']}, dp_replicate={sizes['dp_replicate']}: \"",
        '        "parallelize lays out dp_shard, cp, tp and ep"',
        "    )",
    ]


def _experts(f: Features) -> list[str]:
    moes = sorted({f.cls(node) for node, _ in f.classes(MoE)})
    if not moes:
        return [
            'if sizes["ep"] > 1:',
            "    raise ValueError(f\"ep={sizes['ep']}: this model has no experts\")",
        ]
    body = [
        'if sizes["tp"] > 1 or sizes["cp"] > 1 or sizes["dp_shard"] > 1:',
        '    raise ValueError("expert parallelism is planned over ep alone")',
        'ep = mesh["ep"]',
        "# Every data rank (ep and dp_shard) its own rows: each expert's gradient is",
        "# divided by their number.",
        'data_ranks = sizes["ep"] * sizes["dp_shard"]',
        "for module in model.modules():",
        f"    if isinstance(module, ({', '.join(moes)},)):",
        "        if len(module.experts) % ep.size():",
        "            n = len(module.experts)",
        '            raise ValueError(f"ep={ep.size()} does not divide the {n} experts")',
        "        module.experts = ExpertParallel(module.experts, ep, data_ranks)",
    ]
    styles = copies("expert_parallel", "AllToAll", "ExpertParallel")
    return ["", *styles, 'if sizes["ep"] > 1:', indent(lines(*body), 1)]


def more_layouts(f: Features) -> list[str]:
    """The lines after tensor parallelism: refusals, expert and context parallelism."""
    return [*_refusals(), *_experts(f), *_context(f)]


def data_parallel(f: Features) -> list[str]:
    """FSDP2 over the data ranks; an expert-parallel rank's own experts left out."""
    moe = any(True for _ in f.classes(MoE))
    own = "ignored_params=own"
    body = [
        "mp_policy = mp_policy or MixedPrecisionPolicy()  # default: no casts",
    ]
    if moe:
        body += [
            "# An expert-parallel rank's own experts: not sharded over the others.",
            'own = {p for m in model.modules() if hasattr(m, "mix") for p in m.parameters()}',
        ]
    else:
        own = ""
    args = f"mesh=dp, mp_policy=mp_policy{', ' + own if own else ''}"
    body += [
        "for block in blocks:",
        f"    fully_shard(block, {args})",
        f"fully_shard(model, {args})",
    ]
    return [
        f"dp = flat_mesh(mesh, {DATA})",
        "if dp is not None and dp.size() > 1:",
        indent(lines(*body), 1),
    ]


def _context(f: Features) -> list[str]:
    """Context parallelism over "cp" for a causal decoder whose attention reads a KV cache
    (the gathered keys take the cache's place), else a refusal naming what stops it."""
    stack = f.stacks[-1]
    why = None
    if len(f.stacks) > 1:
        why = "an encoder-decoder's cross-attention is not split over cp"
    elif not f.cached(stack) or False in f.causalities:
        why = "only a causal decoder's sequence is split over cp"
    elif f.windowed:
        why = "sliding-window layers keep their own cache: not split over cp"
    if why is not None:
        refusal = call("raise ValueError", [f'"context parallelism: {why}"'], 2)
        return ['if sizes["cp"] > 1:', indent(refusal, 1)]
    rope = f.position_code(stack).angles is not None
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
        '    if sequence_parallel or sizes["dp_shard"] > 1 or sizes["ep"] > 1:',
        '        raise ValueError("context parallelism: over cp and tp, no sp")',
        f'    split_context(list(model.{stack.name}.blocks), mesh["cp"], rope={rope})',
    ]
