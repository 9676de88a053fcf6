"""Parameters one rank holds under PyTorch's own engines: the generated `parallelize`.

`layout.stage_params` models Megatron-LM. PyTorch's DTensor tensor parallelism and FSDP2 lay
the same model out differently in two ways, both counted here:

- the vocabulary is not padded: DTensor splits the embedding rows (and the LM head's) as
  `torch.chunk` does, ceil(V / tp) rows on the first ranks and what is left on the last, where
  Megatron-LM pads V to a multiple of 128·tp first (64 rows at tp = 2: 32 per rank here, 128
  there);
- FSDP2 (ZeRO-3) shards every tensor along its first dimension, again as `torch.chunk` does,
  norms included; ZeRO's figure divides the total by dp, which agrees when dp divides every
  first dimension.

Everything else (heads, hidden units, replicated norms and routers, and k and v: split by kv
heads, or whole on every rank beyond n_kv_heads ranks, `layout.kv_ways`) is `layout.tp_share`'s
rule.
"""

from __future__ import annotations

from archspec.backends.count.layout import Parallelism, is_leaf, tp_share
from archspec.errors import SpecError
from archspec.ir.nodes import IR, Embedding, Linear, Model, Sinks
from archspec.ir.visit import walk


def chunk(n: int, ways: int, rank: int) -> int:
    """The size of `torch.chunk`'s piece `rank` of `n` split `ways` ways."""
    size = -(-n // ways)
    return max(0, min(size, n - rank * size))


def _shapes(node) -> list[tuple[int, ...]]:
    """The parameter shapes of a leaf as PyTorch stores them (a tied weight is not its own)."""
    if isinstance(node, Embedding):
        return [(node.num, node.dim)]
    if isinstance(node, Linear):
        weight = [] if node.tied_to else [(node.out_features, node.in_features)]
        return weight + ([(node.out_features,)] if node.bias else [])
    if isinstance(node, Sinks):
        return [(node.heads,)]
    return [(node.dim,)] + ([(node.dim,)] if node.bias else [])


def torch_local_params(ir: IR, par: Parallelism, rank: int) -> int:
    """Elements of the parameters rank `rank` holds: DTensor tensor parallelism when
    `par.tp > 1`, FSDP2 sharding over the `par.dp` replicas when `par.zero == 3`."""
    if par.pp > 1 or (par.tp > 1 and par.zero == 3 and par.dp > 1):
        raise SpecError("torch_local_params covers tp alone or FSDP2 alone, one pipeline stage")
    model = ir.root
    total = 0
    for placed in walk(model):
        node = placed.node
        if not is_leaf(node):
            continue
        copies = ir.value(placed.copies)
        vocab = isinstance(placed.ancestors[-1], Model) and node in (model.tok_emb, model.lm_head)
        if par.zero == 3 and par.dp > 1:
            for shape in _shapes(node):
                dims = [ir.value(d) for d in shape]
                rest = 1
                for d in dims[1:]:
                    rest *= d
                total += copies * chunk(dims[0], par.dp, rank) * rest
        elif vocab:
            rows = chunk(ir.value(model.vocab_size), par.tp, rank)
            own = not (isinstance(node, Linear) and node.tied_to)
            bias = isinstance(node, Linear) and node.bias
            total += (rows * ir.value(model.d_model) if own else 0) + (rows if bias else 0)
        else:
            weight, bias = tp_share(placed, ir, par.tp, par.engine)
            total += copies * (weight + bias)
    return total
