"""The generated `parallelize(model, mesh)`: tensor parallelism and FSDP2 from the IR.

The plan is read off the IR, whose names are the generated model's attribute paths, so every
family gets one: Megatron-LM's split (Shoeybi et al. 2019) with PyTorch's DTensor styles.
The mesh is read by `mesh_sizes` (archspec.runtime.mesh); expert and context parallelism and
FSDP2 are written by `parallel_layouts.py`.
Column-parallel q, k, v and MLP gate/up give each rank whole heads and a slice of the hidden
units; row-parallel o and down sum the partial outputs. Beyond n_kv_heads ranks (multi-query
attention at tp = 2, say) k and v are whole on every rank and each rank keeps a copy of the kv
head its query heads read (`CopiedKVHeads` in `archspec.runtime.tensor_parallel`, with the
other styles the plan copies in), as Megatron-LM and vLLM copy kv heads. Experts are split the
same way (each expert's hidden units over the tp ranks, no expert parallelism); the router,
norms, position tables and the pooler are replicated. The token embedding is vocabulary-parallel
(rows split, outputs summed) and the LM head column-parallel over the vocabulary with its logits
gathered, so the loss is computed outside as on one device (with `loss_parallel` they stay
split, for torch's loss_parallel(), torchtitan's choice); a tied head is tied again to the
sharded embedding (both shard the same matrix by rows). T5's relative bias table is split by
heads, so the mask the stack builds carries only the rank's heads. FSDP2 then shards every
block, then the root, over "dp".

Sequence parallelism (Korthikanti et al. 2022), an option, is torchtitan's: between the
sublayers of the blocks each rank keeps its share of the sequence (the residual stream, the norms
with SequenceParallel, the residual dropout); each attention / MLP / MoE gathers the whole
sequence on entry (PrepareModuleInput, Shard(1) -> Replicate, kept a DTensor so that the input
gradients of its column-parallel projections add up and are reduce-scattered once) and the
row-parallel o and down reduce-scatter their sums back to the rank's share (output Shard(1)).
Past the blocks, as torchtitan (`archspec.ir.sequence_ends`): where only elementwise steps sit
between the token embedding and the blocks, the embedding reduce-scatters its sums over the
sequence (`SequenceRows`: the stack reads the whole length, so each rank's rows come in a
whole-shaped tensor, zeros elsewhere, and the first block keeps its own); else the embedding's
sums are all-reduced and the first block splits them. Where the final norm feeds the LM head
alone, the norm runs on each rank's share and the head gathers it; else the last block gathers
its output, so what a stack computes after its blocks (the encoder output a decoder attends
to, the pooler) sees the whole sequence as without it.

Everything torch.distributed is imported inside the function: a single-device user never
imports it.
"""

from __future__ import annotations

import re

from archspec.backends.torchgen.copied import runtime_sources
from archspec.backends.torchgen.exprs import ExprPrinter
from archspec.backends.torchgen.features import Features, UnsupportedIR
from archspec.backends.torchgen.parallel_layouts import copies as _copies
from archspec.backends.torchgen.parallel_layouts import data_parallel, more_layouts
from archspec.backends.torchgen.text import INDENT, call, docstring, indent, lines
from archspec.ir.nodes import MLP, Attention, Block, Linear, MoE, Norm, Repeat, Stack
from archspec.ir.sequence_ends import embeddings_split, final_norm_split
from archspec.ir.visit import walk

COLWISE = "ColwiseParallel()"
ROWWISE = "RowwiseParallel()"
# Sequence parallelism: the sum of a row-parallel projection is reduce-scattered over the
# sequence instead of all-reduced.
ROWWISE_SUMMED = "RowwiseParallel(output_layouts=summed)"
SEQUENCE_NORM = "SequenceParallel(use_local_output=True)"
STYLES = (  # torch.distributed.tensor.parallel's names, imported as the plan uses them
    "ColwiseParallel",
    "ParallelStyle",
    "PrepareModuleInput",
    "PrepareModuleInputOutput",
    "PrepareModuleOutput",
    "RowwiseParallel",
    "SequenceParallel",
    "parallelize_module",
)


def _styles(*names: str) -> list[str]:
    """The parallel styles of those names (archspec.runtime.tensor_parallel), each followed by
    a blank line, for the plan's code."""
    return [line for code in runtime_sources("tensor_parallel", *names) for line in (code, "")]


def block_plan(block: Block, kv_style=None) -> dict[str, str]:
    """{attribute path inside the block: style} for one block class (a mixture's stacked
    experts one entry).
    `kv_style(attention, k_or_v)`, when given, is the style of an attention's k and v (else
    they are column-parallel, as q)."""
    plan: dict[str, str] = {}
    for placed in walk(block):
        node, parent = placed.node, placed.ancestors[-1] if placed.ancestors else None
        if isinstance(parent, MoE) and node is parent.experts:  # stacked: one module
            plan[f"{parent.name}.{node.name}"] = "StackedExperts()"
        if not isinstance(node, Linear) or parent is None:
            continue
        if any(isinstance(up, Repeat) for up in placed.ancestors):
            continue  # an expert's projection: split with the others (StackedExperts)
        path = ".".join(part.name for part in (*placed.ancestors[1:], node))
        # The sum of the block's own o and down is `summed`: all-reduced (Replicate), or
        # reduce-scattered over the sequence (Shard(1)) under sequence parallelism. A shared
        # expert's is all-reduced: the MoE combines whole outputs.
        direct = len(placed.ancestors) == 2
        if isinstance(parent, Attention):
            rowwise = ROWWISE_SUMMED if direct else ROWWISE
            if parent.latent is not None and node is parent.latent.q_down:
                continue  # the query latent: whole on every rank (`_latent_heads`)
            if node in (parent.k, parent.v) and kv_style is not None:
                plan[path] = kv_style(parent, node)
            else:
                plan[path] = rowwise if node is parent.o else COLWISE
        elif isinstance(parent, MLP):
            rowwise = ROWWISE_SUMMED if direct else ROWWISE
            plan[path] = rowwise if node is parent.down else COLWISE
        # Anything else (the MoE router) stays whole on every rank.
    return plan


def sequence_plan(f: Features, block: Block, stack: Stack) -> dict[str, str]:
    """The block's entries under sequence parallelism: its norms sequence-parallel, each
    sublayer gathering the sequence on entry (o and down reduce-scatter on exit: `block_plan`);
    an MoE's experts all-reduce as without it and the MoE hands back the rank's share."""
    plan: dict[str, str] = {}
    for placed in walk(block):
        node = placed.node
        parent = placed.ancestors[-1] if placed.ancestors else None
        if parent is block and isinstance(node, Norm):
            plan[node.name] = SEQUENCE_NORM
        elif parent is block and isinstance(node, (Attention, MLP)):
            arity = 1 + len(f.sublayer_args(stack, node))
            # Latent attention's whole kv_down and q_down take plain tensors.
            latent = isinstance(node, Attention) and node.latent is not None
            plan[node.name] = f"gather({arity}, Shard(1), Replicate(), {latent})"
        elif parent is block and isinstance(node, MoE):
            plan[node.name] = "whole_moe()"
        elif parent is block:
            # A parameter of the block itself would see only the rank's tokens.
            raise UnsupportedIR(f"sequence parallelism with a block's own {node.name}")
    return plan


def model_plan(f: Features) -> dict[str, str]:
    """{attribute path from the root: style} for the leaves outside the blocks."""
    rowwise = "RowwiseParallel(input_layouts=Replicate())"
    plan = {f.model.tok_emb.name: "embedding" if embeddings_split(f.model) else rowwise}
    for stack in f.stacks:
        if stack.rel_bias is not None:
            plan[f"{stack.name}.{stack.rel_bias.name}"] = COLWISE  # a column per head
    if f.lm_head is not None:
        plan[f.lm_head.name] = "head"
    return plan


def _dict(name: str, plan: dict[str, str]) -> list[str]:
    return [f"{name} = {{", *(f'{INDENT}"{k}": {v},' for k, v in plan.items()), "}"]


def _head_checks(f: Features, size: ExprPrinter) -> list[str]:
    """Refusals for what cannot be split: heads, and key/value heads when neither tp nor their
    count divides the other."""
    out = []
    for expr in dict.fromkeys(size(node.n_heads) for node, _ in f.classes(Attention)):
        message = f'f"tp={{tp.size()}} does not divide the {{{expr}}} heads"'
        out += [f"if {expr} % tp.size():", indent(call("raise ValueError", [message], 3), 1)]
    for expr in dict.fromkeys(size(node.n_kv_heads) for node in _grouped(f)):
        message = f'f"tp={{tp.size()}} does not divide the {{{expr}}} kv heads"'
        out += [
            f"if {expr} % tp.size() and tp.size() % {expr}:",
            "    raise ValueError(",
            f"        {message}",
            '        ", nor is it a multiple of them"',
            "    )",
        ]
    return out


def _grouped(f: Features) -> list[Attention]:
    """The attention classes whose kv heads may be fewer than the query heads (GQA, MQA)."""
    out = []
    for node, _ in f.classes(Attention):
        assert isinstance(node, Attention)
        if node.n_kv_heads != node.n_heads:
            out.append(node)
    return out


def _block_plans(f: Features, name: str, plan_of) -> list[str]:
    """`name = {BlockClass: {path: style}}` for each block class."""
    out = [f"{name} = {{"]
    for node, stack in f.classes(Block):
        assert isinstance(node, Block) and stack is not None
        plan = plan_of(node, stack)
        out += [
            f"{INDENT}{f.cls(node)}: {{",
            *(f'{INDENT * 2}"{k}": {v},' for k, v in plan.items()),
        ]
        out.append(f"{INDENT}}},")
    return [*out, "}"]


def walk_all(f: Features):
    return (placed.node for placed in walk(f.model))


def _sequence_parallel(f: Features) -> list[str]:
    """The lines that lay the blocks out sequence-parallel, or a refusal naming what stops it."""
    try:
        plans = _block_plans(f, "sequence_plans", lambda node, stack: sequence_plan(f, node, stack))
    except UnsupportedIR as error:
        return [f'raise ValueError("{error}")']
    moe = any(isinstance(node, MoE) for node in walk_all(f))
    out = [
        *(_styles("gather", "whole_moe") if moe else _styles("gather")),
        *plans,
        "for block in blocks:",
        "    parallelize_module(block, tp, sequence_plans[type(block)])",
    ]
    split_embeddings, split_norm = embeddings_split(f.model), final_norm_split(f.model)
    if split_embeddings:
        out.append("# Each stack's first block keeps its rows of the embeddings.")
    else:
        out.append("# Each stack's first block splits its input along the sequence.")
    if split_norm:
        out.append("# The final norm runs on each rank's share, the head gathers it.")
    else:
        out += [
            "# The last gathers its output: the stack sees the whole sequence.",
            "last = PrepareModuleOutput(",
            "    output_layouts=Shard(1),",
            "    desired_output_layouts=Replicate(),",
            ")",
        ]
    for stack in f.stacks:
        arity = len(f.block_params(stack))
        blocks = f"model.{stack.name}.blocks"
        out.append(f"first = {blocks}[0]")
        if split_embeddings:
            out.append("keep_own_rows(first, tp)")
        else:
            out += [
                f"split = gather({arity}, Replicate(), Shard(1), True)",
                "parallelize_module(first, tp, split)",
            ]
        out += [
            "# Checked first: the whole sequence's length.",
            "first.register_forward_pre_hook(check_divisible, prepend=True)",
        ]
        if split_norm and stack.final_norm is not None:
            out += [
                "norm = SequenceParallel(use_local_output=True)",
                f"parallelize_module(model.{stack.name}.{stack.final_norm.name}, tp, norm)",
            ]
        elif not split_norm:
            out.append(f"parallelize_module({blocks}[-1], tp, last)")
    return out


def _latent_heads(f: Features) -> list[str]:
    """Latent attention under tp, as torchtitan's DeepSeek-V3 plan and vLLM split it: every
    rank projects the whole latents (kv_down, q_down and their norms are replicated), and
    kv_up, q and o split by heads as in any attention; the rotated key all heads share gets
    the sum of every rank's heads' gradients (`SharedKeyGradient`). The layer counts its
    heads (its split, and the copies of that key): the rank's own."""
    latent = [f.cls(node) for node, _ in f.classes(Attention) if node.latent is not None]
    if not latent:
        return []
    return [
        "for module in model.modules():",
        f"    if isinstance(module, ({', '.join(latent)},)):",
        "        module.n_heads //= tp.size()",
    ]


def _head_sinks(f: Features) -> list[str]:
    """Attention sinks under tp: one per query head, so each rank keeps its own heads'
    (Shard(0), the rows q keeps of its weight), a DTensor whose local part
    `sink_attention` reads; their gradients need no sum, as q's do not."""
    sinks = [f.cls(node) for node, _ in f.classes(Attention) if node.sinks is not None]
    if not sinks:
        return []
    classes = sinks[0] if len(sinks) == 1 else f"({', '.join(sinks)})"
    return [
        "# One sink per query head: each rank keeps its heads' sinks, as q their rows.",
        "for module in model.modules():",
        f"    if isinstance(module, {classes}):",
        "        own = distribute_tensor(module.sinks.data, tp, [Shard(0)])",
        "        module.sinks = nn.Parameter(own)",
    ]


def _tensor_parallel(f: Features, size: ExprPrinter) -> list[str]:
    if any(n.mask.bias and not n.mask.learned_bias for n, _ in f.classes(Attention)):
        return [
            "# The stack computes a slope for every head: it cannot hand a rank its own.",
            'raise ValueError("tensor parallelism does not split ALiBi\'s per-head slopes")',
        ]
    if any(n.qk_norm_all for n, _ in f.classes(Attention)):
        return [
            "# q_norm and k_norm reduce over every head's channels, which column-parallel q",
            "# and k would scatter over the ranks.",
            'raise ValueError("tensor parallelism does not split q/k norms over all heads")',
        ]
    body = ['tp = mesh["tp"]', "config = model.config", *_head_checks(f, size)]
    if f.lm_head is not None and final_norm_split(f.model):
        body += [
            "# Under sequence parallelism the head gathers the sequence on entry.",
            "given = Shard(1) if sequence_parallel else Replicate()",
            "if loss_parallel:  # the logits a DTensor split over the vocabulary",
            "    head = ColwiseParallel(",
            "        input_layouts=given, output_layouts=Shard(-1), use_local_output=False",
            "    )",
            "else:  # gathered: the loss is computed as on one device",
            "    head = ColwiseParallel(input_layouts=given, output_layouts=Replicate())",
        ]
    elif f.lm_head is not None:
        body += [
            "if loss_parallel:  # the logits a DTensor split over the vocabulary",
            "    head = ColwiseParallel(output_layouts=Shard(-1), use_local_output=False)",
            "else:  # gathered: the loss is computed as on one device",
            "    head = ColwiseParallel(output_layouts=Replicate())",
        ]
    if embeddings_split(f.model):
        body += [
            "",
            *_styles("InSequence", "OwnRows", "SequenceRows", "keep_own_rows"),
            "if sequence_parallel:  # its sums reduce-scattered over the sequence",
            "    embedding = SequenceRows()",
            "else:",
            "    embedding = RowwiseParallel(input_layouts=Replicate())",
        ]
    body += _dict("root_plan", model_plan(f))
    body += [
        "# Those this model holds: a pipeline stage (pipeline()) holds some.",
        "root_plan = {k: v for k, v in root_plan.items() if held(model, k)}",
        "parallelize_module(model, tp, root_plan)",
    ]
    head = f.lm_head
    if head is not None and head.tied_to:
        embedding = head.tied_to.rpartition(".")[0]
        body += [
            "# The head and the embedding shard the same matrix by rows: tie them again.",
            f'if held(model, "{head.name}") and held(model, "{embedding}"):',
            f"    model.{head.name}.weight = model.{head.tied_to}",
        ]
    grouped = _grouped(f)
    if grouped:
        body += ["", *_styles("CopiedKVHeads", "kv_heads")]
    if any(node.latent is not None for node, _ in f.classes(Attention)):
        body += ["", *_styles("SharedKeyGradient")]
    if f.classes(MoE):  # after a blank line, unless styles above end in one
        body += [""] if body[-1] else []
        body += _styles("SumGradient", "SumOutput", "StackedExperts")
    body.append("# Inside each block: the attribute paths of its class.")
    body.append("summed = Shard(1) if sequence_parallel else Replicate()")

    def kv_style(attention: Attention, projection: Linear) -> str:
        if attention.latent is not None:  # kv_down whole, kv_up split by heads
            if projection is attention.k:
                return f"SharedKeyGradient({size(attention.latent.rope_dim)})"
            return COLWISE
        if attention not in grouped:
            return COLWISE
        return f"kv_heads({size(attention.n_kv_heads)}, {size(attention.head_dim)}, tp.size())"

    body += _block_plans(f, "block_plans", lambda node, stack: block_plan(node, kv_style))
    body += [
        "for block in blocks:",
        "    parallelize_module(block, tp, block_plans[type(block)])",
        *_latent_heads(f),
        *_head_sinks(f),
        "if sequence_parallel:",
        "",
        "    def check_divisible(block, args):",
        "        length = args[0].size(1)",
        "        if length % tp.size():",
        '            message = f"tp={tp.size()} does not divide the {length} positions"',
        '            raise ValueError(f"sequence parallelism: {message}")',
        "",
        indent(lines(*_sequence_parallel(f)), 1),
    ]
    return body


DOC = """Lay the model out over `mesh`, a DeviceMesh whose dimensions are named among
"dp_shard" (or "dp"), "cp", "tp" and "ep"; an absent one has size 1.

Tensor parallelism over "tp": each rank keeps its share of the heads (q, k, v column-
parallel, o row-parallel; with more ranks than kv heads, a copy of the kv head its query
heads read, from whole k and v weights), of the MLP hidden units (gate and up column-
parallel, down row-parallel; every expert likewise), and of the vocabulary (embedding
rows, LM head columns, logits gathered). Norms, position tables, the router and the
pooler are replicated. Latent attention keeps its latents whole on every rank and
splits q, kv_up and o by heads.

Expert parallelism over "ep": each rank keeps n_experts / ep of the experts and trains
on its own rows of the batch; tokens reach their experts with all_to_all_single. Context
parallelism over "cp" (a causal decoder): the blocks split the sequence in 2·cp chunks,
rank r holding chunks r and 2·cp - 1 - r, and each attention all-gathers the keys and
values; the sequence length must be a multiple of 2·cp.

Then FSDP2 over the data ranks ("dp_shard", or "dp", and "ep"), in torchtitan's units:
the token embedding, each block, the final norm with the LM head (not resharded after
forward), then the root (an expert-parallel rank's own experts left out; a tied head
stays in the root with the embedding). mp_policy, FSDP2's mixed precision: "bf16" for
torchtitan's (parameters gathered and computed with in bf16, gradients reduced in fp32,
the sharded parameters and the optimizer in fp32), or a
torch.distributed.fsdp.MixedPrecisionPolicy; None casts nothing.

sequence_parallel (with tp > 1, for training): between their sublayers the blocks keep
each rank's share of the sequence (norms, residual stream, residual dropout); attention
and the MLP gather the whole sequence and reduce-scatter their output back; where
nothing with parameters sits between them, the embedding reduce-scatters its output and
the final norm runs on each rank's share, the LM head gathering it. The sequence
length must be a multiple of tp.

loss_parallel (with tp > 1 and an LM head): the logits stay split over the vocabulary, a
DTensor; compute the cross-entropy and its backward under
torch.distributed.tensor.parallel.loss_parallel(), so no rank holds all the logits.

Returns the model; build it under the same seed on every rank (or load weights after)."""


def parallelize_function(f: Features, size: ExprPrinter) -> str:
    stacks = ", ".join(f"*model.{stack.name}.blocks" for stack in f.stacks)
    tensor_parallel = _tensor_parallel(f, size)
    layouts = more_layouts(f)  # context and expert parallelism
    # Imported here, not at the top: a single-device user never loads torch.distributed.
    imports = ["from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard"]
    # The names the code uses (comments left out: they name DTensor too).
    text = re.sub(r"#.*", "", "\n".join([*tensor_parallel, *layouts]))
    tensors = (
        "DTensor",
        "Placement",
        "Replicate",
        "Shard",
        "distribute_module",
        "distribute_tensor",
    )
    placements = [n for n in tensors if re.search(rf"\b{n}\b", text)]
    if placements:
        # On one line if it fits ruff's default line length, else one name a line.
        line = f"from torch.distributed.tensor import {', '.join(placements)}"
        if len(INDENT + line) > 88:
            line = lines(
                "from torch.distributed.tensor import (", *(f"    {n}," for n in placements), ")"
            )
        imports.append(line)
    styles = [name for name in STYLES if re.search(rf"\b{name}\b", text)]
    if styles:
        imports += [
            "from torch.distributed.tensor.parallel import (",
            *(f"    {name}," for name in styles),
            ")",
        ]
    body = [
        docstring(DOC, 1),
        *imports,
        "",
        *_copies("mesh", "mesh_sizes", "flat_mesh"),
        *_copies("pipeline", "held"),
        "sizes = mesh_sizes(mesh)",
        f"blocks = [{stacks}]",
        'if sizes["tp"] > 1:',
        indent(lines(*tensor_parallel), 1),
        *layouts,
        *data_parallel(f),
        "return model",
    ]
    params = [
        "model: Model",
        'mesh: "torch.distributed.DeviceMesh"',
        "mp_policy=None",
        "sequence_parallel: bool = False",
        "loss_parallel: bool = False",
    ]
    head = call("def parallelize", params, 0, " -> Model:")
    return lines(head, indent(lines(*body), 1))
