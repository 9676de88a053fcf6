"""One rank of `archspec bench --nproc`: run under torchrun, it builds the generated model,
lays it out with its own `parallelize`, times training steps and writes its figures as JSON.

Arguments: the generated file, then a JSON file of settings; the result goes beside the
settings as rank<N>.json."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed._functional_collectives import AsyncCollectiveTensor
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import loss_parallel

from archspec.bench import memory
from archspec.bench.training_data import batch, training_loss


def _local(t: torch.Tensor) -> torch.Tensor:
    """The tensor that holds the bytes: a DTensor's local shard, a collective's result."""
    t = t._local_tensor if isinstance(t, DTensor) else t
    return t.elem if isinstance(t, AsyncCollectiveTensor) else t


class LocalLiveTensors(memory.LiveTensors):
    """LiveTensors that counts a DTensor by its local shard. The dispatch mode sees a DTensor
    op's output, whose wrapper reports the whole (global) size, and not the local ops it runs:
    counted as they were, the tp = 2 peak of a small gpt2 read 7.0 MiB instead of 5.3 MiB."""

    def _add(self, t: torch.Tensor) -> None:
        super()._add(_local(t))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = super().__torch_dispatch__(func, types, args, kwargs)
        self._resized()
        return out

    def _resized(self) -> None:
        """Follow storages resized in place: FSDP2 frees a unit's unsharded parameters with
        `untyped_storage().resize_(0)` when it reshards and allocates them again the same
        way before the next all-gather, neither of which is an op the mode sees."""
        for key, ref in list(self._seen.items()):
            storage = ref()
            if storage is not None and storage.nbytes() != self._size[key]:
                self.live += storage.nbytes() - self._size[key]
                self._size[key] = storage.nbytes()
        self.peak = max(self.peak, self.live)


class SavedTensors:
    """Bytes of the distinct storages autograd keeps for backward (saved_tensors_hooks),
    weights left out (the rank's shards, and FSDP2's gathered whole weights and their views):
    the activations the prediction counts."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.weights = {_local(p).untyped_storage().data_ptr() for p in model.parameters()}
        self.kept: dict[int, int] = {}
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        base = t if t._base is None else t._base
        if not (base.is_leaf and base.requires_grad):
            storage = _local(t).untyped_storage()
            if storage.data_ptr() not in self.weights:
                self.kept[storage.data_ptr()] = storage.nbytes()
        return t

    @property
    def bytes(self) -> int:
        return sum(self.kept.values())


class ReceivedRows:
    """The rows an expert-parallel rank's experts receive while it is entered, per call
    in the order they run (`by_layer`: one per mixture layer in a forward): each
    `ExpertParallel` (the modules with `mix`) hands its experts (`local`) the rows the
    ranks' tokens chose them for, and a forward pre-hook reads how many, changing nothing.
    `experts` is empty where the model has no expert-parallel mixture."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.experts = [m.local for m in model.modules() if hasattr(m, "mix")]
        self.by_layer: list[int] = []

    @property
    def rows(self) -> int:
        return sum(self.by_layer)

    def __enter__(self) -> ReceivedRows:
        self.handles = [e.register_forward_pre_hook(self._count) for e in self.experts]
        return self

    def _count(self, module: torch.nn.Module, args: tuple) -> None:
        self.by_layer.append(args[0].size(0))

    def __exit__(self, *exc) -> None:
        for handle in self.handles:
            handle.remove()


def main(source: str, settings_path: str) -> None:
    s = json.loads(Path(settings_path).read_text())
    cuda = torch.cuda.is_available() and s["device"] != "cpu"
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if s.get("threads") is not None:  # --threads: each rank's, as the one-process bench's
        torch.set_num_threads(s["threads"])
    dist.init_process_group("nccl" if cuda else "gloo")
    spec = importlib.util.spec_from_file_location("generated_model", source)
    module = importlib.util.module_from_spec(spec)
    sys.modules["generated_model"] = module
    spec.loader.exec_module(module)
    if s["pp"] > 1:  # stages of the model under a pipeline schedule
        from archspec.bench.pipeline_rank import run_pipeline_rank

        result = run_pipeline_rank(module, s, device, rank, world)
        Path(settings_path).with_name(f"rank{rank}.json").write_text(json.dumps(result))
        finish()
        return
    torch.manual_seed(s["seed"])  # the same weights on every rank before sharding
    with device:
        model = module.Model(module.Config())
    dims = s["mesh"]  # archspec.bench.mesh_layout.mesh_dims
    mesh = init_device_mesh(device.type, tuple(dims.values()), mesh_dim_names=tuple(dims))
    mp_policy = "bf16" if s["mixed_precision"] else None
    module.parallelize(
        model, mesh, mp_policy=mp_policy, sequence_parallel=s["sequence_parallel"],
        loss_parallel=s["loss_parallel"],
    )  # fmt: skip
    # Logits split over the vocabulary: the loss and its backward under loss_parallel().
    split_loss = loss_parallel if s["loss_parallel"] else contextlib.nullcontext
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = data_rank(mesh, dims)
    inputs, targets = batch(s, data, device)
    ids = inputs["input_ids"]
    losses: list[float] = []

    def step(saved: SavedTensors | None = None, mark=lambda phase: None) -> None:
        with saved.hooks if saved is not None else contextlib.nullcontext(), split_loss():
            loss = training_loss(model(**inputs), targets, s["vocab"])
        mark("forward")
        with split_loss():
            loss.backward()
        mark("backward")
        optimizer.step()
        mark("optimizer")
        optimizer.zero_grad(set_to_none=True)
        losses.append(_local(loss.detach()).item())

    for _ in range(s["warmup"]):
        step()
    saved = SavedTensors(model)
    received = ReceivedRows(model)  # in the measured step, which the prediction is for
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
        with received:
            step(saved)
        peak = torch.cuda.max_memory_allocated(device)
    else:
        # Tensor bytes alive during one step: the shards, their gradients and moments, what
        # the step creates (see archspec.bench.memory).
        states = [_local(t) for st in optimizer.state.values() for t in st.values()]
        params = [_local(p) for p in model.parameters()]
        grads = [_local(p.grad) for p in model.parameters() if p.grad is not None]
        phases: dict[str, int] = {}

        def mark(phase: str) -> None:
            """The phase's own high-water mark above the resident tensors, then a new one."""
            phases[phase] = tracker.peak - tracker.baseline
            tracker.peak = tracker.live

        with LocalLiveTensors([*params, *grads, *states, ids, targets]) as tracker, received:
            step(saved, mark)
        peak = max(phases.values()) + tracker.baseline
    times = []
    for _ in range(s["steps"]):
        if cuda:
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        step()
        if cuda:
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    local = sum(_local(p).numel() * p.element_size() for p in model.parameters())
    result = {
        "rank": rank,
        "losses": losses,
        "step_times_s": times,
        "peak_memory_bytes": peak,
        "param_bytes": local,
        "saved_tensor_bytes": saved.bytes,
        "threads": torch.get_num_threads() if not cuda else None,
    }
    if received.experts:  # under ep: the routing the measured step took
        result["expert_rows_received"] = received.rows
        result["expert_rows_by_layer"] = received.by_layer
    if not cuda:  # where the peak is: each phase's high-water mark above the resident tensors
        result["resident_bytes"] = tracker.baseline
        result["phase_peak_bytes"] = phases
    Path(settings_path).with_name(f"rank{rank}.json").write_text(json.dumps(result))
    finish()


def data_rank(mesh, dims: dict[str, int]) -> int:
    """The rank's index among the data ranks (dp_replicate, dp_shard, ep; row-major, as
    `mesh_layout.data_ranks` counts them and `reference_losses` lays their batches side by
    side): each its own sequences, its tp and cp ranks the same ones."""
    index = 0
    for name in ("dp_replicate", "dp_shard", "ep"):
        if name in dims:
            index = index * dims[name] + mesh[name].get_local_rank()
    return index


def finish() -> None:
    """Tear the process group down once every rank is done with it: a rank that destroyed
    gloo's group while the other still had work on it aborted the other ("terminate called
    without an active exception", SIGABRT, about one 2-rank --cp 2 run in 15 under load)."""
    dist.barrier()
    dist.destroy_process_group()


def record_failure(settings_path: str, exc: Exception) -> None:
    """The rank's own error, next to its results: torchrun reports only that a child failed
    (ChildFailedError), and the command's message should say why."""
    rank = os.environ.get("RANK", "unknown")
    error = Path(settings_path).with_name(f"rank{rank}.error")
    error.write_text(f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":
    try:
        main(sys.argv[1], sys.argv[2])
    except Exception as exc:
        record_failure(sys.argv[2], exc)
        raise
    # The results are written and the group destroyed: leave without running the C++
    # destructors, where gloo's threads could still abort a finished rank ("terminate called
    # without an active exception", after both ranks had written their results, about one run
    # in two hundred under load, with the barrier).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
