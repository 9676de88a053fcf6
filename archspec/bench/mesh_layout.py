"""The device mesh `bench --nproc` asks the generated `parallelize` for: the one place that
turns --nproc, --tp, --cp, --ep (and --pp) into mesh dimensions, and refuses, naming the
values, a layout the processes or the model cannot take, before any process starts."""

from __future__ import annotations

from archspec.backends.count.split_checks import (
    check_context_split,
    check_expert_split,
    check_generated_mesh,
)
from archspec.errors import SpecError
from archspec.ir.nodes import IR

# Outermost first, as torchtitan orders its mesh: the dimensions whose ranks talk most (tp)
# are neighbours in rank order, on one node.
ORDER = ("pp", "dp_shard", "ep", "cp", "tp")


def mesh_dims(nproc: int, tp: int = 1, cp: int = 1, ep: int = 1, pp: int = 1) -> dict[str, int]:
    """{dimension: size} over `nproc` ranks; what the model dimensions leave is dp_shard."""
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
    return {name: sizes[name] for name in ORDER}


def check_model_layout(ir: IR, dims: dict[str, int], seq: int) -> None:
    """What the generated parallelize refuses about context and expert parallelism, said
    before the launch: experts ep does not divide, a sequence 2·cp chunks do not divide,
    and expert parallelism beside cp, which it does not lay out."""
    cp, ep = dims["cp"], dims["ep"]
    check_expert_split(ir, ep)
    check_generated_mesh(cp, ep)
    check_context_split(ir, cp, seq)
