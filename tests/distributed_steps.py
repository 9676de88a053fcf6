"""Several training steps of a generated model under its `parallelize`, on gloo processes,
against the same model trained on one process: the loss of every step, and every gradient of
the first. One rank of tests/test_distributed_cp_ep.py; `train_on_ranks` starts them.

A case names its mesh as {dimension: size} (parallelize reads "dp_replicate", "dp_shard",
"cp", "tp", "pp", "ep"; absent ones are 1). The ranks of the data dimensions (dp_replicate,
dp_shard, ep) each train on their own rows of the batch; tp and cp ranks see the rows of their
data rank whole (under cp, `parallelize` splits the sequence itself). The loss reported is the
mean over the data ranks, the single-process model's loss over the whole batch."""

from __future__ import annotations

import math
import re
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor

from tests.distributed_worker import _load
from tests.gloo_spawn import spawn_cases

DATA_DIMS = ("dp_replicate", "dp_shard", "ep")
BATCH, SEQ, VOCAB, STEPS, LR = 4, 8, 64, 3, 0.1


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    return ids, torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)


def _loss(model, ids: torch.Tensor, targets: torch.Tensor, padded: bool) -> torch.Tensor:
    # padded: the first 3 tokens of the first row are padding (left padding, as a batch of
    # prompts has), so the stack builds a mask and counts positions from the first token.
    mask = None
    if padded:
        mask = torch.ones_like(ids)
        mask[0, :3] = 0
    logits = model(input_ids=ids, attention_mask=mask)
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def _full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if isinstance(t, DTensor) else t


def _global(model, name: str) -> tuple[str, slice]:
    """A parameter's name in the single-process model, and its rows there: an
    expert-parallel rank holds rows `first` on of the stacked experts, under
    `<experts>.local` (`ExpertParallel.first` is the first one's index in the model)."""
    found = re.search(r"^(.*\.experts)\.local\.", name)
    if found is None:
        return name, slice(None)
    wrapper = model.get_submodule(found[1])
    rows = slice(wrapper.first, wrapper.first + wrapper.local.n_experts)
    return f"{found[1]}.{name[found.end() :]}", rows


def _train(model, ids, targets, padded: bool, data_group=None) -> tuple[list[float], dict]:
    """STEPS of SGD; the losses (averaged over the data ranks) and the first step's
    gradients, whole."""
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    losses, grads = [], {}
    for step in range(STEPS):
        loss = _loss(model, ids, targets, padded)
        loss.backward()
        measured = loss.detach().clone()
        if data_group is not None:
            dist.all_reduce(measured, op=dist.ReduceOp.AVG, group=data_group)
        losses.append(measured.item())
        if step == 0:
            for n, p in model.named_parameters():
                name, rows = _global(model, n)
                grads[name] = (rows, None if p.grad is None else _full(p.grad))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return losses, grads


def run_case(path: str, dims: dict[str, int], padded: bool = False) -> dict:
    module = _load(path)
    ids, targets = _batch()
    torch.manual_seed(0)
    ref_losses, ref_grads = _train(module.Model().eval(), ids, targets, padded)

    torch.manual_seed(0)
    model = module.Model().eval()
    names = tuple(dims)
    mesh = init_device_mesh("cpu", tuple(dims.values()), mesh_dim_names=names)
    module.parallelize(model, mesh)
    data = [name for name in DATA_DIMS if name in dims]
    group = None
    if data:
        ranks = math.prod(dims[name] for name in data)
        index = 0
        for name in data:  # this rank's place among the data ranks
            index = index * dims[name] + mesh[name].get_local_rank()
        share = BATCH // ranks
        rows = slice(index * share, (index + 1) * share)
        ids, targets = ids[rows].clone(), targets[rows].clone()
        group = (mesh[tuple(data)]._flatten() if len(data) > 1 else mesh[data[0]]).get_group()
    losses, grads = _train(model, ids, targets, padded, group)
    ref_grads = {name: g for name, (_, g) in ref_grads.items()}
    # The reference's rows of each gradient this rank holds (its experts' under ep).
    pairs = {
        n: (g, None if ref_grads[n] is None else ref_grads[n][rows])
        for n, (rows, g) in grads.items()
    }
    missing = sorted(n for n, (g, ref) in pairs.items() if g is None and ref is not None)
    grad_diff = max(
        (g - ref).abs().max().item()
        for g, ref in pairs.values()
        if g is not None and ref is not None
    )
    local = (p.to_local() if isinstance(p, DTensor) else p for p in model.parameters())
    return {
        "local_bytes": sum(t.numel() * t.element_size() for t in local),
        "losses": losses,
        "ref_losses": ref_losses,
        "grad_diff": grad_diff,
        "missing_grads": missing,
    }


def train_on_ranks(world: int, cases: list[tuple], folder: Path) -> list[dict]:
    """Run `cases` (key, generated file, mesh dims[, padded]) on `world` spawned gloo
    processes."""
    return spawn_cases(run_case, world, cases, folder)
