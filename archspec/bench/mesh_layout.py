"""The device mesh `bench --nproc` asks the generated `parallelize` for: the one place that
turns --nproc, --tp, --cp, --ep, --dp-replicate (and --pp) into mesh dimensions, and refuses,
naming the values, a layout the processes or the model cannot take, before any process
starts."""

from __future__ import annotations

from archspec.backends.count.split_checks import (
    check_context_split,
    check_expert_split,
    check_generated_mesh,
)
from archspec.errors import SpecError
from archspec.ir.nodes import IR

# Outermost first, as torchtitan orders its mesh: the dimensions whose ranks talk most (tp)
# are neighbours in rank order, on one node; HSDP's replicas, which talk least (one all-reduce
# of each gradient shard), outside the shard groups. dp_replicate is in a mesh only where it
# is above 1: the meshes without it stay as they were (their ranks and settings).
ORDER = ("pp", "dp_replicate", "dp_shard", "ep", "cp", "tp")


def mesh_dims(
    nproc: int, tp: int = 1, cp: int = 1, ep: int = 1, pp: int = 1, dp_replicate: int = 1
) -> dict[str, int]:
    """{dimension: size} over `nproc` ranks; what the model dimensions leave is the data
    ranks, dp_shard, or under HSDP dp_replicate replicas of dp_shard."""
    asked = {"pp": pp, "ep": ep, "cp": cp, "tp": tp}
    for name, size in asked.items():
        if size < 1:
            raise SpecError(f"--{name} takes 1 or more ranks (got {size:,})")
    split = {name: size for name, size in asked.items() if size > 1}
    ranks = pp * ep * cp * tp
    if nproc % ranks:
        what = " × ".join(f"--{name} {size}" for name, size in split.items())
        if len(split) > 1:
            what += f" = {ranks} ranks"
        larger = ": the mesh has more ranks than processes" if ranks > nproc else ""
        raise SpecError(f"{what} does not divide --nproc {nproc}{larger}")
    sizes = {**asked, "dp_shard": nproc // ranks}
    if dp_replicate != 1:
        sizes |= _replicas(sizes, dp_replicate, nproc)
    return {name: sizes[name] for name in ORDER if name in sizes}


def _replicas(sizes: dict[str, int], replicas: int, nproc: int) -> dict[str, int]:
    """dp_replicate and dp_shard where `replicas` replicas share the data ranks `sizes`
    leaves; refused, naming the values, where the generated parallelize would refuse."""
    data = sizes["dp_shard"]
    if replicas < 1:
        raise SpecError(f"--dp-replicate takes 1 or more replicas (got {replicas:,})")
    beside = [f"--{name} {sizes[name]}" for name in ("pp", "cp", "ep") if sizes[name] > 1]
    if beside:
        raise SpecError(
            f"--dp-replicate {replicas} with {' and '.join(beside)}: the generated parallelize "
            "lays HSDP out beside dp_shard and tp alone",
            hint="leave out --dp-replicate (FSDP2 over all the data ranks)",
        )
    if data % replicas:
        raise SpecError(
            f"--dp-replicate {replicas} does not divide the {data} data ranks "
            f"(--nproc {nproc} / --tp {sizes['tp']})",
            hint="each replica is a whole group of FSDP2's ranks",
        )
    if data == replicas:  # parallelize refuses HSDP without a dp_shard dimension
        raise SpecError(
            f"--dp-replicate {replicas} leaves one rank in each of FSDP2's shard groups "
            f"(the {data} data ranks)",
            hint="HSDP shards over 2 or more ranks in each replica: fewer replicas",
        )
    return {"dp_replicate": replicas, "dp_shard": data // replicas}


def data_ranks(dims: dict[str, int]) -> int:
    """The ranks that each train on their own sequences: HSDP's replicas of dp_shard, and ep
    (its tp and cp ranks share a data rank's sequences)."""
    return dims.get("dp_replicate", 1) * dims["dp_shard"] * dims["ep"]


def check_model_layout(ir: IR, dims: dict[str, int], seq: int) -> None:
    """What the generated parallelize refuses about context and expert parallelism, said
    before the launch: experts ep does not divide, a sequence 2·cp chunks do not divide,
    and expert parallelism beside cp, which it does not lay out."""
    cp, ep = dims["cp"], dims["ep"]
    check_expert_split(ir, ep)
    check_generated_mesh(cp, ep)
    check_context_split(ir, cp, seq)
