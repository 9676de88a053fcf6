"""One rank of `archspec bench --nproc`: run under torchrun, it builds the generated model,
lays it out with its own `parallelize`, times training steps and writes its figures as JSON.

Arguments: the generated file, then a JSON file of settings; the result goes beside the
settings as rank<N>.json."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor

from archspec.bench import memory


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if isinstance(t, DTensor) else t


def main(source: str, settings_path: str) -> None:
    s = json.loads(Path(settings_path).read_text())
    cuda = torch.cuda.is_available() and s["device"] != "cpu"
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")
    spec = importlib.util.spec_from_file_location("generated_model", source)
    module = importlib.util.module_from_spec(spec)
    sys.modules["generated_model"] = module
    spec.loader.exec_module(module)
    torch.manual_seed(s["seed"])  # the same weights on every rank before sharding
    with device:
        model = module.Model(module.Config())
    tp = s["tp"]
    mesh = init_device_mesh(device.type, (world // tp, tp), mesh_dim_names=("dp", "tp"))
    module.parallelize(model, mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    # Each data-parallel replica its own sequences; the tp ranks of a replica the same ones.
    gen = torch.Generator().manual_seed(s["seed"] + mesh["dp"].get_local_rank())
    ids = torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=gen).to(device)
    inputs = {"input_ids": ids}
    if s["encoder_decoder"]:
        inputs["decoder_input_ids"] = ids
    targets = torch.randint(0, s["vocab"], (s["batch"], s["seq"]), generator=gen).to(device)

    def step() -> None:
        out = model(**inputs)
        out = out[0] if isinstance(out, tuple) else out
        if out.size(-1) == s["vocab"]:
            loss = F.cross_entropy(out.flatten(0, 1).float(), targets.flatten())
        else:
            loss = out.float().square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)

    for _ in range(s["warmup"]):
        step()
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
        step()
        peak = torch.cuda.max_memory_allocated(device)
    else:
        # Tensor bytes alive during one step: the shards, their gradients and moments, what
        # the step creates (see archspec.bench.memory).
        states = [_local(t) for st in optimizer.state.values() for t in st.values()]
        params = [_local(p) for p in model.parameters()]
        grads = [_local(p.grad) for p in model.parameters() if p.grad is not None]
        with memory.LiveTensors([*params, *grads, *states, ids, targets]) as tracker:
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
    local = sum(_local(p).numel() * p.element_size() for p in model.parameters())
    result = {"rank": rank, "step_times_s": times, "peak_memory_bytes": peak, "param_bytes": local}
    Path(settings_path).with_name(f"rank{rank}.json").write_text(json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
