"""Pipeline parallelism for a generated model, with torch.distributed.pipelining.

A stage is the whole generated model with what other stages run taken out, so it runs
the model's own forward, written once: the first stage from the token ids through its
blocks, a later one from the hidden states it receives through its blocks, the last
one on to the final norm and the head. Each block's other arguments (the mask, RoPE's
angles) are what the stack computes from the input's shape, so every stage computes
them itself; a later stage runs the embedding steps on a detached copy of its input
(no graph, the embedding modules replaced by stand-ins without parameters) and its
first block takes the real input instead. A stage before the last ends the forward at
its last block (`StageOutput`). The blocks keep their indices in the whole model, so
a stage's parameter names are the whole model's.

The generated `pipeline` copies these into itself, one level in (each line fits in 88
columns there), after its import of torch.distributed.pipelining; the generated
`parallelize` copies `held`, with which it lays out a stage as it does a whole model.
"""

import torch
from torch import Tensor, nn


def stage_layer_ranges(
    n_layers: int, n_stages: int, stage_layers: list[int] | None = None
) -> list[range]:
    # Consecutive layers per stage: as many each, or the counts listed.
    if stage_layers is None:
        if n_layers % n_stages:
            raise ValueError(
                f"{n_stages} pipeline stages do not divide the {n_layers} layers:"
                " list each stage's layers (stage_layers)"
            )
        stage_layers = [n_layers // n_stages] * n_stages
    if len(stage_layers) != n_stages:
        given = len(stage_layers)
        raise ValueError(f"stage_layers lists {given} stages, not {n_stages}")
    if min(stage_layers) < 1 or sum(stage_layers) != n_layers:
        raise ValueError(
            f"stage_layers {list(stage_layers)} must give each stage one layer or"
            f" more and add up to the {n_layers} layers"
        )
    starts = [sum(stage_layers[:i]) for i in range(n_stages)]
    return [range(s, s + n) for s, n in zip(starts, stage_layers, strict=True)]


def pipeline_stage_indices(
    looped: bool,
    v_shape: bool,
    rank: int,
    pp: int,
    per_rank: int,
) -> list[int]:
    # The stages a rank holds: one; or `per_rank`, every pp-th (looped schedules:
    # interleaved 1F1B, zero bubble); or two meeting in a V (r and 2pp - 1 - r).
    if v_shape:
        return [rank, 2 * pp - 1 - rank]
    if looped:
        return [rank + k * pp for k in range(per_rank)]
    return [rank]


def held(model: nn.Module, path: str) -> nn.Module | None:
    # The module at `path` if the model holds it with its parameters: a pipeline
    # stage (pipeline()) holds some, the others None or stand-ins without any.
    parent, _, name = path.rpartition(".")
    module = getattr(model.get_submodule(parent), name, None)
    if module is None or next(module.parameters(), None) is None:
        return None
    return module


class StageBlocks(nn.ModuleDict):
    # A stage's blocks under their indices in the whole model, iterated in order
    # (the stack loops over them as over its ModuleList).
    def __init__(self, blocks: nn.ModuleList, layers: range) -> None:
        super().__init__({str(i): blocks[i] for i in layers})

    def __iter__(self):
        return iter(self.values())

    def __getitem__(self, index: int | str) -> nn.Module:
        if isinstance(index, int):
            return list(self.values())[index]
        return super().__getitem__(index)


class StageOutput(Exception):
    # Ends the model's forward at a stage's last block: the rest is later stages'.
    def __init__(self, x: Tensor) -> None:
        super().__init__("a pipeline stage's output")
        self.x = x


class PassedThrough(nn.Module):
    # An embedding step of the first stage, on a later one: what it gets goes on.
    def forward(self, x: Tensor, *args, **kwargs) -> Tensor:
        return x


class NoPositions(nn.Module):
    # A table the first stage adds to the embeddings, on a later one: adds nothing
    # (its `weight[0]` too, BERT's segment 0).
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("weight", torch.zeros(1), persistent=False)

    def forward(self, index: Tensor, *args, **kwargs) -> Tensor:
        return self.weight[0]


class PipelineStageModel(nn.Module):
    # One stage: `model` keeps the blocks of `layers` of its stack `stack` (an
    # attribute path), the embedding modules (`embedding`, and `tables` whose output
    # is added) if first, the final norm and head modules (`head`) if last.
    def __init__(
        self,
        model: nn.Module,
        stack: str,
        layers: range,
        first: bool,
        last: bool,
        embedding: tuple[str, ...],
        tables: tuple[str, ...],
        head: tuple[str, ...],
    ) -> None:
        super().__init__()
        stacked = model.get_submodule(stack)
        if getattr(stacked, "checkpoint", None) == "full":
            # A block's recomputation would not see the input the stage gave it.
            raise ValueError("pipeline stages do not run with checkpoint='full'")
        stacked.blocks = StageBlocks(stacked.blocks, layers)
        stand_ins = {} if first else {p: PassedThrough() for p in embedding}
        stand_ins |= {} if first else {p: NoPositions() for p in tables}
        stand_ins |= {} if last else dict.fromkeys(head)
        for path, module in stand_ins.items():
            parent, _, name = path.rpartition(".")
            setattr(model.get_submodule(parent), name, module)
        self.model, self.stack, self.first, self.last = model, stack, first, last
        self.input: Tensor | None = None  # a later stage's input, in its forward
        self.running = False
        self.handles: list = []
        self.hook_blocks()

    def hook_blocks(self) -> None:
        # The first block takes the real input before any other hook sees its input;
        # the last one hands its output on after its other hooks (FSDP2's) ran.
        for handle in self.handles:
            handle.remove()
        blocks = list(self.model.get_submodule(self.stack).blocks)
        self.handles = []
        if not self.first:
            pre = blocks[0].register_forward_pre_hook(self.take_input, prepend=True)
            self.handles.append(pre)
        if not self.last:
            self.handles.append(blocks[-1].register_forward_hook(self.hand_on))

    def lay_out(self, parallelize, mesh) -> None:
        # The stage's model laid out over `mesh` (the pipeline mesh's other
        # dimensions) by the model's own parallelize: tensor parallelism, FSDP2's
        # units. Under FSDP2 the stage is then the root unit around them, as in
        # torchtitan: torch.distributed.pipelining drives it, each micro-batch's
        # gradients kept whole until the last backward reduces them once.
        from torch.distributed.fsdp import FSDPModule, fully_shard

        parallelize(self.model, mesh)
        if isinstance(self.model, FSDPModule):
            data = "dp_shard" if "dp_shard" in mesh.mesh_dim_names else "dp"
            fully_shard(self, mesh=mesh[data])
        self.hook_blocks()

    def take_input(self, block: nn.Module, args: tuple) -> tuple | None:
        if self.input is None:
            return None
        x, self.input = self.input, None
        return (x, *args[1:])

    def hand_on(self, block: nn.Module, args: tuple, out: Tensor) -> None:
        if self.running:
            raise StageOutput(out)

    def forward(self, x: Tensor) -> Tensor:
        # The first stage gets token ids; a later one hidden states, whose detached
        # copy goes through the embedding steps (for the shapes they give the mask).
        inputs = x if self.first else x.detach()
        self.input = None if self.first else x
        self.running = True
        try:
            return self.model(inputs)
        except StageOutput as done:
            return self.ended(inputs, done.x)
        finally:
            self.input, self.running = None, False

    def ended(self, inputs: Tensor, x: Tensor) -> Tensor:
        # The model's forward ended at this stage's last block: its own forward
        # hooks still run, on x (FSDP2's reshards its unit and hooks its backward).
        model = self.model
        for key, hook in list(model._forward_hooks.items()):
            kwargs = ({},) if key in model._forward_hooks_with_kwargs else ()
            out = hook(model, (inputs,), *kwargs, x)
            x = x if out is None else out
        return x


class Pipeline(nn.Module):
    # This rank's stages and the schedule that runs them (`step`). A head tied to
    # the embedding keeps its own copy on the last stage; the two copies' gradients
    # are summed after each step, as Megatron-LM sums them: the copies stay equal.
    def __init__(
        self,
        stages: list[PipelineStageModel],
        indices: list[int],
        n_stages: int,
        schedule: type,
        mesh,
        loss_fn,
        n_microbatches: int,
        tied: tuple[str, str] | None,
        owners: list[int],
    ) -> None:
        super().__init__()
        from torch.distributed.pipelining import PipelineStage
        from torch.distributed.pipelining.schedules import PipelineScheduleSingle

        self.stages, self.indices, self.n_stages = (
            nn.ModuleList(stages),
            indices,
            n_stages,
        )
        pp = mesh["pp"]
        device = next(self.stages.parameters()).device
        piped = [
            PipelineStage(s, i, n_stages, device, group=pp.get_group())
            for s, i in zip(stages, indices, strict=True)
        ]
        chosen = piped[0] if issubclass(schedule, PipelineScheduleSingle) else piped
        self.schedule = schedule(chosen, n_microbatches, loss_fn=loss_fn)
        self.tied: list[Tensor] = []
        self.tied_group = None
        if tied is None:
            return
        held = dict(zip(indices, stages, strict=True))
        first, last = held.get(0), held.get(n_stages - 1)
        if owners[0] != owners[-1]:
            # Each pipeline of the mesh: the ranks holding its first and last stage.
            dim = mesh.mesh_dim_names.index("pp")
            rows = mesh.mesh.movedim(dim, -1).reshape(-1, pp.size()).tolist()
            for row in rows:  # every rank creates every group, in the same order
                ends = [row[owners[0]], row[owners[-1]]]
                group = torch.distributed.new_group(ends)
                if torch.distributed.get_rank() in row:
                    self.tied_group = group
        if first is not None:
            self.tied.append(first.model.get_parameter(tied[0]))
        if last is not None:
            self.tied.append(last.model.get_parameter(tied[1]))

    def step(self, *inputs: Tensor, target: Tensor | None = None, losses=None):
        # One training step's forwards and backwards over the micro-batches: the
        # inputs go to the first stage, the targets to the last (every rank passes
        # all).
        args = inputs if 0 in self.indices else ()
        last = self.n_stages - 1 in self.indices
        kwargs = {"target": target, "losses": losses} if last else {}
        out = self.schedule.step(*args, **kwargs)
        # A DTensor's gradient may come back whole (tp's embedding): as its weight.
        for w in self.tied:
            held = getattr(w, "placements", None)
            if held is not None and w.grad.placements != held:
                w.grad = w.grad.redistribute(w.device_mesh, held)
        # Each rank's own share of them, under tp or FSDP2 (DTensors).
        grads = [getattr(w.grad, "_local_tensor", w.grad) for w in self.tied]
        if self.tied_group is not None:
            for grad in grads:
                torch.distributed.all_reduce(grad, group=self.tied_group)
        elif grads:  # both copies on this rank (two stages in a V)
            total = grads[0] + grads[1]
            for grad in grads:
                grad.copy_(total)
        return out


def build_pipeline(
    model: nn.Module,
    make_model,
    mesh,
    loss_fn,
    n_microbatches: int,
    schedule: str,
    stage_layers: list[int] | None,
    stages_per_rank: int,
    stack: str,
    embedding: tuple[str, ...],
    tables: tuple[str, ...],
    head: tuple[str, ...],
    tied: tuple[str, str] | None,
    parallelize=None,
) -> Pipeline:
    # This rank's stages of `model` (a second stage: `make_model()` given the same
    # weights), the schedule named `schedule` (torch's names: 1F1B, GPipe,
    # Interleaved1F1B, InterleavedZeroBubble, ZBVZeroBubble, ...) over mesh["pp"];
    # each stage laid out by `parallelize` over the mesh's other dimensions
    # (torchtitan's order: "pp" outermost), where one has more than one rank.
    from torch.distributed.pipelining.schedules import (
        PipelineScheduleSingle,
        ScheduleDualPipeV,
        ScheduleInterleavedZeroBubble,
        ScheduleZBVZeroBubble,
        get_schedule_class,
    )

    kind = get_schedule_class(schedule)
    pp = mesh["pp"]
    v_shape = issubclass(kind, ScheduleZBVZeroBubble)
    looped = not issubclass(kind, PipelineScheduleSingle)
    per_rank = 2 if v_shape else stages_per_rank if looped else 1
    n_stages = pp.size() * per_rank
    owners = [0] * n_stages  # the pp rank holding each stage
    for rank in range(pp.size()):
        for i in pipeline_stage_indices(looped, v_shape, rank, pp.size(), per_rank):
            owners[i] = rank
    rank = pp.get_local_rank()
    indices = pipeline_stage_indices(looped, v_shape, rank, pp.size(), per_rank)
    blocks = model.get_submodule(stack).blocks
    layers = stage_layer_ranges(len(blocks), n_stages, stage_layers)
    state = model.state_dict()
    policies = [m.checkpoint for m in model.modules() if hasattr(m, "checkpoint")]
    stages = []
    for i in indices:
        whole = model
        if stages:  # a model of its own, with the same weights and checkpointing
            whole = make_model().to(next(model.parameters()).device)
            whole.load_state_dict(state)
            whole.set_checkpoint(policies[0] if policies else None)
        ends = (i == 0, i == n_stages - 1)  # first, last
        parts = (embedding, tables, head)
        stages.append(PipelineStageModel(whole, stack, layers[i], *ends, *parts))
    others = tuple(name for name in mesh.mesh_dim_names if name != "pp")
    spread = [name for name in others if mesh[name].size() > 1]
    beside = [name for name in spread if name not in ("dp", "dp_shard", "tp")]
    if beside:
        raise ValueError(f"pipeline stages over dp_shard and tp, not {beside}")
    halves = (
        ScheduleInterleavedZeroBubble,
        ScheduleZBVZeroBubble,
        ScheduleDualPipeV,
    )
    if "dp_shard" in spread and issubclass(kind, halves):
        # Measured: the weights FSDP2 shards got no gradient.
        raise ValueError(f"{schedule} splits the backward: FSDP2 does not follow")
    for stage in stages if spread else ():
        stage.lay_out(parallelize, mesh[others])
    return Pipeline(
        stages, indices, n_stages, kind, mesh, loss_fn, n_microbatches, tied, owners
    )
