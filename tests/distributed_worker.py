"""One rank of tests/test_distributed.py (and tests/test_distributed_kv_copies.py): every
generated model under `parallelize`, against the same model on this process alone, on each mesh.
Writes what it measured as JSON; the test compares. `run_on_ranks` starts the ranks."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed._functional_collectives import AsyncCollectiveTensor
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import loss_parallel
from torch.nn.attention import SDPBackend, sdpa_kernel

from tests.gloo_spawn import spawn_cases


def _load(path: str):
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _data(encdec: bool) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    data = {"input_ids": torch.randint(0, 64, (4, 8), generator=gen)}
    if encdec:
        data["decoder_input_ids"] = torch.randint(0, 64, (4, 8), generator=gen)
    data["targets"] = torch.randint(0, 64, (4, 8), generator=gen)
    return data


def _loss(model, data: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    inputs = {k: v for k, v in data.items() if k != "targets"}
    out = model(**inputs)
    out = out[0] if isinstance(out, tuple) else out  # (hidden states, pooled): an encoder
    if out.size(-1) != 64:  # no LM head: any scalar of the hidden states will do
        return out.square().mean(), out
    return F.cross_entropy(out.flatten(0, 1), data["targets"].flatten()), out


def saved_bytes(model, data: dict[str, torch.Tensor], vocab_split: bool = False) -> int:
    """Bytes of the distinct storages autograd keeps for backward on this rank, in training
    mode (with each spec's dropout) and PyTorch's math attention, as tests/test_memory.py
    measures one device. Weights are left out: the rank's shards, and the whole parameters
    FSDP2 gathers for the forward (leaves that need a gradient, and their views). A DTensor
    counts its local tensor."""
    weights = {_local(t).untyped_storage().data_ptr() for t in model.parameters()}
    kept: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        base = t if t._base is None else t._base  # FSDP2 saves views of its whole weights
        if base.is_leaf and base.requires_grad:
            return t
        storage = _local(t).untyped_storage()
        if storage.data_ptr() not in weights:
            kept[storage.data_ptr()] = storage.nbytes()
        return t

    model.train()
    with sdpa_kernel(SDPBackend.MATH), torch.autograd.graph.saved_tensors_hooks(pack, _same):
        with _loss_context(vocab_split):
            loss, _ = _loss(model, data)
    with _loss_context(vocab_split):
        loss.backward()
    model.eval()
    model.zero_grad(set_to_none=True)
    return sum(kept.values())


def _same(t: torch.Tensor) -> torch.Tensor:
    return t


def _local(t: torch.Tensor) -> torch.Tensor:
    """The tensor holding the storage: a DTensor's local shard, a collective's result."""
    t = t._local_tensor if isinstance(t, DTensor) else t
    return t.elem if isinstance(t, AsyncCollectiveTensor) else t


def _full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if isinstance(t, DTensor) else t


def _loss_context(vocab_split: bool):
    """loss_parallel() for logits split over the vocabulary, else nothing."""
    return loss_parallel() if vocab_split else contextlib.nullcontext()


def run_case(path: str, dp: int, tp: int, sequence_parallel: bool, vocab_split: bool) -> dict:
    rank = dist.get_rank()
    module = _load(path)
    encdec = "decoder_input_ids" in module.Model.forward.__code__.co_varnames
    data = _data(encdec)
    torch.manual_seed(0)
    ref = module.Model().eval()  # eval: no dropout, so both sides compute the same thing
    ref_loss, ref_logits = _loss(ref, data)
    ref_loss.backward()
    ref_grads = {n: p.grad for n, p in ref.named_parameters()}
    torch.optim.SGD(ref.parameters(), lr=0.1).step()

    torch.manual_seed(0)
    model = module.Model().eval()
    mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))
    module.parallelize(model, mesh, sequence_parallel=sequence_parallel, loss_parallel=vocab_split)
    if dp > 1:  # each replica takes its share of the batch
        share = data["input_ids"].size(0) // dp
        # A copy, not a view: the embedding keeps the ids, and a view would keep all of them.
        data = {k: v[rank * share : (rank + 1) * share].clone() for k, v in data.items()}
    with _loss_context(vocab_split):
        loss, logits = _loss(model, data)
        loss.backward()
    measured = _full(loss.detach()).clone()
    if dp > 1:
        dist.all_reduce(measured, op=dist.ReduceOp.AVG)
    local_bytes = 0
    grad_diff, missing = 0.0, []
    for name, p in model.named_parameters():
        local = p.to_local() if isinstance(p, DTensor) else p
        local_bytes += local.numel() * local.element_size()
        want = ref_grads[name]
        if p.grad is None:
            # Only a parameter unused on one device too (an expert no token chose).
            if want is not None:
                missing.append(name)
            continue
        got = _full(p.grad)
        want = torch.zeros_like(got) if want is None else want
        grad_diff = max(grad_diff, (got - want).abs().max().item())
    # One optimizer step on the shards gives the single-process parameters.
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    reference = dict(ref.named_parameters())
    step_diff = max(
        (_full(p.detach()) - reference[name].detach()).abs().max().item()
        for name, p in model.named_parameters()
    )
    out = {
        "saved_bytes": saved_bytes(model, data, vocab_split),
        "step_diff": step_diff,
        "loss": measured.item(),
        "ref_loss": ref_loss.item(),
        "grad_diff": grad_diff,
        "missing_grads": missing,
        "local_bytes": local_bytes,
    }
    if dp == 1:
        out["logits_diff"] = (_full(logits) - ref_logits).abs().max().item()
    return out


def run_on_ranks(
    world: int, cases: list[tuple[str, str, int, int, bool, bool]], folder: Path
) -> list[dict]:
    """Run `cases` on `world` spawned gloo processes; what each rank measured."""
    return spawn_cases(run_case, world, cases, folder)
