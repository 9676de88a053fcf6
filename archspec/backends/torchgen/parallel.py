"""The generated `parallelize(model, mesh)`: tensor parallelism and FSDP2 from the IR.

The plan is read off the IR, whose names are the generated model's attribute paths, so every
family gets one: Megatron-LM's split (Shoeybi et al. 2019) with PyTorch's DTensor styles.
Column-parallel q, k, v and MLP gate/up give each rank whole heads and a slice of the hidden
units; row-parallel o and down sum the partial outputs. Experts are split the same way (each
expert's hidden units over the tp ranks, no expert parallelism); the router, norms, position
tables and the pooler are replicated. The token embedding is vocabulary-parallel (rows split,
outputs summed) and the LM head column-parallel over the vocabulary with its logits gathered,
so the loss is computed outside as on one device; a tied head is tied again to the sharded
embedding (both shard the same matrix by rows). T5's relative bias table is split by heads, so
the mask the stack builds carries only the rank's heads. FSDP2 then shards every block, then
the root, over "dp".

Everything torch.distributed is imported inside the function: a single-device user never
imports it. Sequence parallelism is not offered: the stacks derive positions from the length
of their input, which sequence parallelism would shard.
"""

from __future__ import annotations

from archspec.backends.torchgen.exprs import ExprPrinter
from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.text import INDENT, call, docstring, indent, lines
from archspec.ir.nodes import MLP, Attention, Block, Linear, Repeat
from archspec.ir.visit import walk

COLWISE = "ColwiseParallel()"
ROWWISE = "RowwiseParallel()"


def block_plan(block: Block) -> dict[str, str]:
    """{attribute path inside the block (`*` for any expert): style} for one block class."""
    plan: dict[str, str] = {}
    for placed in walk(block):
        node, parent = placed.node, placed.ancestors[-1] if placed.ancestors else None
        if not isinstance(node, Linear):
            continue
        # A module of a Repeat (an expert) is any index: `*`, which parallelize_module matches.
        chain = (*placed.ancestors[1:], node)
        path = ".".join(
            "*" if isinstance(up, Repeat) else part.name
            for up, part in zip(placed.ancestors, chain, strict=True)
        )
        if isinstance(parent, Attention):
            plan[path] = ROWWISE if node is parent.o else COLWISE
        elif isinstance(parent, MLP):
            plan[path] = ROWWISE if node is parent.down else COLWISE
        # Anything else (the MoE router) stays whole on every rank.
    return plan


def model_plan(f: Features) -> dict[str, str]:
    """{attribute path from the root: style} for the leaves outside the blocks."""
    plan = {f.model.tok_emb.name: "RowwiseParallel(input_layouts=Replicate())"}
    for stack in f.stacks:
        if stack.rel_bias is not None:
            plan[f"{stack.name}.{stack.rel_bias.name}"] = COLWISE  # a column per head
    if f.lm_head is not None:
        plan[f.lm_head.name] = "ColwiseParallel(output_layouts=Replicate())"
    return plan


def _dict(name: str, plan: dict[str, str]) -> list[str]:
    return [f"{name} = {{", *(f'{INDENT}"{k}": {v},' for k, v in plan.items()), "}"]


def _head_checks(f: Features, size: ExprPrinter) -> list[str]:
    """Refusals for what cannot be split: heads, key/value heads, ALiBi's per-head slopes."""
    counts: dict[str, str] = {}
    for node, _ in f.classes(Attention):
        assert isinstance(node, Attention)
        counts.setdefault(size(node.n_heads), "heads")
        counts.setdefault(size(node.n_kv_heads), "kv heads")
    out = []
    for expr, what in counts.items():
        message = f'f"tp={{tp.size()}} does not divide the {{{expr}}} {what}"'
        out += [f"if {expr} % tp.size():", indent(call("raise ValueError", [message], 3), 1)]
    return out


def _tensor_parallel(f: Features, size: ExprPrinter) -> list[str]:
    if any(n.mask.bias and not n.mask.learned_bias for n, _ in f.classes(Attention)):
        return [
            "# The stack computes a slope for every head: it cannot hand a rank its own.",
            'raise ValueError("tensor parallelism does not split ALiBi\'s per-head slopes")',
        ]
    body = ["config = model.config", *_head_checks(f, size)]
    body += _dict("root_plan", model_plan(f))
    body.append("parallelize_module(model, tp, root_plan)")
    head = f.lm_head
    if head is not None and head.tied_to:
        body += [
            "# The head and the embedding shard the same matrix by rows: tie them again.",
            f"model.{head.name}.weight = model.{head.tied_to}",
        ]
    body.append("# Inside each block: the attribute paths of its class.")
    plans = {f.cls(node): block_plan(node) for node, _ in f.classes(Block)}
    body.append("block_plans = {")
    for cls, plan in plans.items():
        body += [f"{INDENT}{cls}: {{", *(f'{INDENT * 2}"{k}": {v},' for k, v in plan.items())]
        body.append(f"{INDENT}}},")
    body += [
        "}",
        "for block in blocks:",
        "    parallelize_module(block, tp, block_plans[type(block)])",
    ]
    return body


DOC = """Lay the model out over `mesh`, a DeviceMesh with dimensions "dp" and "tp".

Tensor parallelism over "tp": each rank keeps its share of the heads (q, k, v
column-parallel, o row-parallel), of the MLP hidden units (gate and up column-parallel,
down row-parallel; every expert likewise), and of the vocabulary (embedding rows, LM head
columns, logits gathered). Norms, position tables, the router and the pooler are
replicated. Then FSDP2 over "dp": each block is sharded, then the root; `mp_policy` is an
optional torch.distributed.fsdp.MixedPrecisionPolicy. Either dimension may have size 1.
Returns the model; build it under the same seed on every rank (or load weights after)."""


def parallelize_function(f: Features, size: ExprPrinter) -> str:
    stacks = ", ".join(f"*model.{stack.name}.blocks" for stack in f.stacks)
    tensor_parallel = _tensor_parallel(f, size)
    # Imported here, not at the top: a single-device user never loads torch.distributed.
    imports = ["from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard"]
    if any("parallelize_module" in line for line in tensor_parallel):
        imports += [
            "from torch.distributed.tensor import Replicate",
            "from torch.distributed.tensor.parallel import (",
            "    ColwiseParallel,",
            "    RowwiseParallel,",
            "    parallelize_module,",
            ")",
        ]
    body = [
        docstring(DOC, 1),
        *imports,
        "",
        'tp, dp = mesh["tp"], mesh["dp"]',
        f"blocks = [{stacks}]",
        "if tp.size() > 1:",
        indent(lines(*tensor_parallel), 1),
        "if dp.size() > 1:",
        "    mp_policy = mp_policy or MixedPrecisionPolicy()  # default: no casts",
        "    for block in blocks:",
        "        fully_shard(block, mesh=dp, mp_policy=mp_policy)",
        "    fully_shard(model, mesh=dp, mp_policy=mp_policy)",
        "return model",
    ]
    params = ["model: Model", 'mesh: "torch.distributed.DeviceMesh"', "mp_policy=None"]
    head = call("def parallelize", params, 0, " -> Model:")
    return lines(head, indent(lines(*body), 1))
