"""Parameters one rank holds under the generated `parallelize` on a mesh with context or
expert parallelism (`torch_layout.torch_local_params` covers tp alone and FSDP2 alone).

- cp: every cp rank holds what its tp rank holds (the blocks split the sequence, not the
  weights); beside dp_shard, FSDP2 shards every tensor over dp_shard × cp.
- ep: each ep rank holds n_experts / ep of every mixture's experts, whole, or sharded over
  dp_shard by FSDP2 (each expert a unit); every other tensor is sharded by FSDP2 over the
  data ranks dp_shard × ep, along its first dimension as `torch.chunk` cuts it.

The mesh is `archspec.bench.mesh_layout.mesh_dims`'s {dimension: size}, outermost first: rank r
sits at the row-major coordinates of r in those sizes.
"""

from __future__ import annotations

from archspec.backends.count.layout import Parallelism, is_leaf
from archspec.backends.count.torch_layout import _shapes, chunk, torch_local_params
from archspec.errors import SpecError
from archspec.ir.nodes import IR, MoE
from archspec.ir.visit import walk


def coordinates(dims: dict[str, int], rank: int) -> dict[str, int]:
    """Rank `rank`'s index along each mesh dimension (row-major, as init_device_mesh lays
    ranks out)."""
    out = {}
    for name in reversed(dims):
        out[name] = rank % dims[name]
        rank //= dims[name]
    return out


def covered(dims: dict[str, int]) -> bool:
    """The meshes counted here: cp with tp or with dp_shard, ep with dp_shard (FSDP2 beside
    tp, which shards each tensor's tp shard, is not)."""
    tp, cp, ep, dp = dims["tp"], dims["cp"], dims["ep"], dims["dp_shard"]
    return dims.get("pp", 1) == 1 and not (dp * ep > 1 and tp > 1) and not (ep > 1 and cp > 1)


def mesh_local_params(ir: IR, dims: dict[str, int], rank: int) -> int:
    """Elements of the parameters rank `rank` holds on mesh `dims`."""
    if not covered(dims):
        raise SpecError("mesh_local_params covers cp with tp or dp_shard, ep with dp_shard")
    at = coordinates(dims, rank)
    tp, cp, ep, dp = dims["tp"], dims["cp"], dims["ep"], dims["dp_shard"]
    if ep == 1:
        if dp > 1:  # FSDP2 over dp_shard × cp
            shards = Parallelism(gpus=dp * cp, zero=3, engine="torch")
            return torch_local_params(ir, shards, at["dp_shard"] * cp + at["cp"])
        return torch_local_params(ir, Parallelism(gpus=tp, tp=tp, engine="torch"), at["tp"])
    data_rank = at["dp_shard"] * ep + at["ep"]
    total = 0
    for placed in walk(ir.root):
        node = placed.node
        if not is_leaf(node):
            continue
        expert = any(
            isinstance(up, MoE) and up.experts in placed.ancestors for up in placed.ancestors
        )
        copies = ir.value(placed.copies)
        for shape in _shapes(node):
            dims_ = [ir.value(d) for d in shape]
            rest = 1
            for d in dims_[1:]:
                rest *= d
            if expert:  # the rank's experts, sharded over dp_shard alone
                total += copies // ep * chunk(dims_[0], dp, at["dp_shard"]) * rest
            else:
                total += copies * chunk(dims_[0], dp * ep, data_rank) * rest
    return total
