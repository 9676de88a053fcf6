"""The device mesh `bench --nproc` asks the generated `parallelize` for: the one place that
turns --nproc, --tp, --cp, --ep (and --pp) into mesh dimensions, and refuses, naming the
values, a layout the processes or the model cannot take, before any process starts."""

from __future__ import annotations

from archspec.errors import SpecError
from archspec.ir.nodes import IR, Attention, MoE
from archspec.ir.visit import walk

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
    if ep > 1:
        moes = [p.node for p in walk(ir.root) if isinstance(p.node, MoE)]
        if not moes:
            raise SpecError(f"--ep {ep}: {ir.name} has no experts")
        for moe in moes:
            experts = ir.value(moe.n_experts)
            if experts % ep:
                raise SpecError(f"--ep {ep} does not divide the {experts} experts")
        if cp > 1:
            raise SpecError(
                f"--ep {ep} with --cp {cp}: expert parallelism is laid out beside data and "
                "tensor parallelism, not context parallelism"
            )
    if cp > 1:
        if ir.root.layout != "decoder":
            raise SpecError(f"--cp {cp}: only a causal decoder is split over cp")
        if any(isinstance(p.node, Attention) and p.node.mask.windowed for p in walk(ir.root)):
            raise SpecError(f"--cp {cp}: sliding-window layers are not split over cp")
        if any(stack.local_position is not None for stack in ir.root.stacks):
            raise SpecError(f"--cp {cp}: layers rotating by a local_position are not split over cp")
        if seq % (2 * cp):
            raise SpecError(
                f"--cp {cp}: the {seq} positions do not split into {2 * cp} equal chunks",
                hint="causal load balancing gives each rank two chunks: --seq a multiple "
                f"of {2 * cp}",
            )
