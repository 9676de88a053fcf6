"""One rank of tests/test_pipeline.py: the generated `pipeline` under a schedule of
torch.distributed.pipelining, against the same model on this process alone, for two SGD steps.
Writes what it measured as JSON; the test compares. `run_pipelines` starts the ranks."""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh

from archspec.bench.pipeline_rank import InFlight
from tests.distributed_worker import _load
from tests.gloo_spawn import spawn_cases

STEPS = 2


def _loss(out, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out.flatten(0, 1), target.flatten())


def run_case(path: str, schedule: str, stage_layers: list[int] | None) -> dict:
    module = _load(path)
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 64, (4, 8), generator=gen)
    targets = torch.randint(0, 64, (4, 8), generator=gen)
    torch.manual_seed(0)
    ref = module.Model().train()  # the specs' dropout is set to 0
    optimizer = torch.optim.SGD(ref.parameters(), lr=0.1)
    ref_losses, ref_grads = [], []
    for _ in range(STEPS):
        loss = _loss(ref(ids), targets)
        loss.backward()
        ref_losses.append(loss.item())
        ref_grads.append({n: p.grad.clone() for n, p in ref.named_parameters()})
        optimizer.step()
        optimizer.zero_grad()

    torch.manual_seed(0)
    model = module.Model().train()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("pp",))
    pipe = module.pipeline(model, mesh, _loss, 4, schedule=schedule, stage_layers=stage_layers)
    optimizer = torch.optim.SGD(pipe.parameters(), lr=0.1)
    losses, grad_diff = [], 0.0
    in_flight = InFlight(pipe, (ids, targets))
    for step in range(STEPS):
        micro: list[torch.Tensor] = []
        # The second step: the first infers the shapes the stages send each other.
        with in_flight.hooks if step == 1 else contextlib.nullcontext():
            pipe.step(ids, target=targets, losses=micro)
        losses.append(torch.stack(micro).mean().item() if micro else None)
        for name, p in pipe.named_parameters():
            path = name.split(".", 3)[3]  # stages.<i>.model.<the whole model's path>
            want = ref_grads[step].get(path)
            if want is None:  # a tied head's copy: the same gradient as the embedding's
                want = ref_grads[step][path.replace("lm_head", "tok_emb")]
            grad_diff = max(grad_diff, (p.grad - want).abs().max().item())
        optimizer.step()
        optimizer.zero_grad()
    return {
        "losses": losses,
        "ref_losses": ref_losses,
        "grad_diff": grad_diff,
        "param_bytes": sum(p.numel() * p.element_size() for p in pipe.parameters()),
        "saved_in_flight": in_flight.peak,
        "stages": pipe.indices,
    }


def run_pipelines(world: int, cases: list, folder: Path) -> list[dict]:
    """Run `cases` (key, generated file, schedule, stage_layers) on `world` spawned gloo
    processes, on a free port; what each rank measured."""
    return spawn_cases(run_case, world, cases, folder)
