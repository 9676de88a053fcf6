"""One rank of `archspec bench --nproc N --pp P`: the generated model split by its own
`pipeline` into stages, trained under a schedule of torch.distributed.pipelining, one sequence
per micro-batch; beside pp, each stage laid out over dp_shard (FSDP2) and tp by `parallelize`.
Reports what `distributed_rank` reports for its layouts, for this rank's stages: step times,
losses (on the ranks of the last stage), parameter bytes, the peak of the saved tensors in
flight and of the whole step."""

from __future__ import annotations

import time
import weakref
from typing import Any

import torch
from torch.distributed.device_mesh import init_device_mesh

from archspec.bench.distributed_rank import LocalLiveTensors, _local
from archspec.bench.training_data import batch, training_loss


class InFlight:
    """The saved tensors alive at once (saved_tensors_hooks): each storage counted once from
    the first time autograd saves it until the last saved reference to it is freed (after its
    micro-batch's backward). Weights are left out (FSDP2's gathered ones too); a stage's input,
    a leaf that needs a gradient like a weight, is not. The schedule's micro-batches of the
    `batch` tensors (token ids, targets) are views of the whole batch's storage: each counts its
    own slice, what a micro-batch adds. `peak` is the most bytes at any moment: what the
    micro-batches a schedule keeps in flight hold."""

    def __init__(self, model: torch.nn.Module, batch: tuple[torch.Tensor, ...] = ()) -> None:
        self.weights = {_local(p).untyped_storage().data_ptr() for p in model.parameters()}
        self.batch = {t.untyped_storage().data_ptr() for t in batch}
        self.refs: dict[int, int] = {}  # storage -> saved references alive
        self.sizes: dict[int, int] = {}
        self.live = self.peak = 0
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)

    def pack(self, t: torch.Tensor) -> Any:
        storage = _local(t).untyped_storage()
        key, size = storage.data_ptr(), storage.nbytes()
        base = t if t._base is None else t._base
        if key in self.weights or isinstance(base, torch.nn.Parameter):  # FSDP2's gathered
            return t
        if key in self.batch:  # a micro-batch's slice
            key, size = t.data_ptr(), t.numel() * t.element_size()
        if not self.refs.get(key):
            self.sizes[key] = size
            self.live += size
            self.peak = max(self.peak, self.live)
        self.refs[key] = self.refs.get(key, 0) + 1
        return _Saved(t, key, self)

    @staticmethod
    def unpack(saved: Any) -> torch.Tensor:
        return saved.t if isinstance(saved, _Saved) else saved

    def release(self, key: int) -> None:
        self.refs[key] -= 1
        if not self.refs[key]:
            self.live -= self.sizes[key]


class _Saved:
    """A saved tensor, which tells `InFlight` when autograd lets go of it. Held detached: a
    saved output held whole would point back at the node that saves it (autograd itself
    saves outputs without their grad_fn for that reason), a cycle that outlives the node
    wherever a backward keeps its graph (the zero-bubble schedules' input backward,
    retain_graph=True, leaves a node its weight backward never runs), and would keep the
    node's every saved tensor alive for good."""

    def __init__(self, t: torch.Tensor, key: int, owner: InFlight) -> None:
        self.t = t.detach()
        weakref.finalize(self, owner.release, key)


def run_pipeline_rank(module: Any, s: dict[str, Any], device: torch.device, rank: int, world: int):
    torch.manual_seed(s["seed"])  # the same weights on every rank before the split
    with device:
        model = module.Model(module.Config())
    dims = s["mesh"]  # pp outermost (archspec.bench.mesh_layout.mesh_dims)
    mesh = init_device_mesh(device.type, tuple(dims.values()), mesh_dim_names=tuple(dims))
    # Each data rank its own sequences; its tp ranks and pipeline stages the same ones.
    inputs, targets = batch(s, mesh["dp_shard"].get_local_rank(), device)

    def loss_fn(out: Any, target: torch.Tensor) -> torch.Tensor:
        return training_loss(out, target, s["vocab"])

    pipe = module.pipeline(
        model, mesh, loss_fn, s["batch"], schedule=s["schedule"], stage_layers=s["stage_layers"]
    )
    optimizer = torch.optim.AdamW(pipe.parameters(), lr=1e-4)
    losses: list[float | None] = []

    def step() -> None:
        micro: list[torch.Tensor] = []
        pipe.step(inputs["input_ids"], target=targets, losses=micro)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(torch.stack(micro).mean().item() if micro else None)

    for _ in range(s["warmup"]):
        step()
    in_flight = InFlight(pipe, (inputs["input_ids"], targets))
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
        with in_flight.hooks:
            step()
        peak = torch.cuda.max_memory_allocated(device)
    else:
        states = [_local(t) for st in optimizer.state.values() for t in st.values()]
        params = [_local(p) for p in pipe.parameters()]
        grads = [_local(p.grad) for p in pipe.parameters() if p.grad is not None]
        with LocalLiveTensors([*params, *grads, *states, inputs["input_ids"], targets]) as tracker:
            with in_flight.hooks:
                step()
        peak = tracker.peak
    times = []
    for _ in range(s["steps"]):
        if cuda:
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        step()
        if cuda:
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return {
        "rank": rank,
        "stages": pipe.indices,
        "losses": None if all(loss is None for loss in losses) else losses,
        "step_times_s": times,
        "peak_memory_bytes": peak,
        "param_bytes": sum(_local(p).numel() * p.element_size() for p in pipe.parameters()),
        "saved_tensor_bytes": in_flight.peak,
    }
