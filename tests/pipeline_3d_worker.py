"""One rank of tests/test_pipeline_3d.py: the generated `pipeline` over a mesh with "pp" and
"dp_shard" or "tp" (pp outermost), each stage laid out by the generated `parallelize`, against
the same model on this process alone over every data rank's rows, for one SGD step. Writes the
loss and the largest gradient difference (each gradient gathered whole) as JSON; the test
compares. `run_3d` starts the ranks."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh

from tests.distributed_worker import _load
from tests.gloo_spawn import spawn_cases

ROWS = 4  # each data rank's sequences: one per micro-batch


def _loss(out, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out.flatten(0, 1), target.flatten())


def _rows(replica: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1 + replica)
    return torch.randint(0, 64, (ROWS, 8), generator=gen), torch.randint(
        0, 64, (ROWS, 8), generator=gen
    )


def run_case(path: str, dims: dict[str, int]) -> dict:
    module = _load(path)
    replicas = dims.get("dp_shard", 1)
    parts = [_rows(r) for r in range(replicas)]
    torch.manual_seed(0)
    ref = module.Model().train()  # the specs' dropout is set to 0
    loss = _loss(ref(torch.cat([p[0] for p in parts])), torch.cat([p[1] for p in parts]))
    loss.backward()
    ref_grads = {n: p.grad for n, p in ref.named_parameters()}

    torch.manual_seed(0)
    model = module.Model().train()
    mesh = init_device_mesh("cpu", tuple(dims.values()), mesh_dim_names=tuple(dims))
    ids, targets = parts[mesh["dp_shard"].get_local_rank() if replicas > 1 else 0]
    pipe = module.pipeline(model, mesh, _loss, ROWS)
    micro: list[torch.Tensor] = []
    pipe.step(ids, target=targets, losses=micro)
    grad_diff = 0.0
    for name, p in pipe.named_parameters():
        path = name.split(".", 3)[3]  # stages.<i>.model.<the whole model's path>
        want = ref_grads.get(path)
        if want is None:  # a tied head's copy: the same gradient as the embedding's
            want = ref_grads[path.replace("lm_head", "tok_emb")]
        grad = p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
        grad_diff = max(grad_diff, (grad - want).abs().max().item())
    return {
        "loss": torch.stack(micro).mean().item() if micro else None,
        "ref_loss": loss.item(),
        "grad_diff": grad_diff,
    }


def run_3d(world: int, cases: list, folder: Path) -> list[dict]:
    """Run `cases` (key, generated file, mesh dims) on `world` spawned gloo processes, on a
    free port; what each rank measured."""
    return spawn_cases(run_case, world, cases, folder)
