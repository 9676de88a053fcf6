"""The collectives of one training step (forward and backward) under tp=2 with sequence
parallelism, on 2 gloo processes: the generated `parallelize` against the same generated llama
laid out the way torchtitan lays out its llama, written here with torch's own parallel styles
as the reference. torchtitan's `apply_tp` (torchtitan/models/llama3/infra/parallelize.py, and
the PyTorch TP tutorial, pytorch/tutorials intermediate_source/TP_tutorial.rst, which shows the
same plan): the embedding RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
the norms SequenceParallel, attention and feed-forward PrepareModuleInput(Shard(1) ->
Replicate()), their projections ColwiseParallel, o and down RowwiseParallel(output_layouts=
Shard(1)), the head ColwiseParallel(input_layouts=Shard(1)).

Each collective is recorded as it is dispatched (torch's functional collectives, which DTensor
issues, and c10d's), with the bytes a rank sends in a ring over n ranks: an all-reduce
2(n-1)/n of its tensor, an all-gather (n-1)/n of its output, a reduce-scatter (n-1)/n of its
input. Both layouts give the single-process loss and gradients."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)
from torch.utils._python_dispatch import TorchDispatchMode

from archspec import build_ir, load_spec
from archspec.backends.torchgen import generate_source
from tests.distributed_worker import _load
from tests.gloo_spawn import spawn_cases
from tests.tiny import tiny_sizes

pytestmark = pytest.mark.slow

# The collectives' names, functional (DTensor's) and c10d's, by kind.
KINDS = {
    "all_reduce": "all_reduce",
    "allreduce_": "all_reduce",
    "all_gather_into_tensor": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather",
    "_allgather_base_": "all_gather",
    "reduce_scatter_tensor": "reduce_scatter",
    "_reduce_scatter_base_": "reduce_scatter",
}


class Collectives(TorchDispatchMode):
    """Counts each collective dispatched and the bytes this rank sends for it."""

    def __init__(self, ranks: int) -> None:
        super().__init__()
        self.ranks, self.counts, self.sent = ranks, Counter(), Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        kind = KINDS.get(func._schema.name.split("::")[-1])
        if kind is not None:
            first = args[0][0] if isinstance(args[0], (list, tuple)) else args[0]
            size = first.numel() * first.element_size()
            n = self.ranks
            share = {"all_reduce": 2 * size, "all_gather": n * size, "reduce_scatter": size}
            self.counts[kind] += 1
            self.sent[kind] += share[kind] * (n - 1) // n
        return out


def torchtitan_layout(model, tp) -> None:
    """torchtitan's llama plan on the generated model's names. The residual stream stays a
    DTensor (o and down hand back Shard(1) DTensors) so that the stack, which reads the
    sequence's length off the embedding's output, sees the whole length."""
    parallelize_module(
        model,
        tp,
        {
            "tok_emb": RowwiseParallel(
                input_layouts=Replicate(), output_layouts=Shard(1), use_local_output=False
            ),
            "decoder.final_norm": SequenceParallel(),
            "lm_head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
        },
    )
    for block in model.decoder.blocks:
        plan = {
            "attn_norm": SequenceParallel(),
            "attn": PrepareModuleInput(
                input_layouts=(Shard(1), None, None, None),
                desired_input_layouts=(Replicate(), None, None, None),
            ),
            "attn.q": ColwiseParallel(),
            "attn.k": ColwiseParallel(),
            "attn.v": ColwiseParallel(),
            "attn.o": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
            "mlp_norm": SequenceParallel(),
            "mlp": PrepareModuleInput(
                input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)
            ),
            "mlp.gate": ColwiseParallel(),
            "mlp.up": ColwiseParallel(),
            "mlp.down": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
        }
        parallelize_module(block, tp, plan)


def _step(model, ids, targets, ranks: int) -> tuple[float, dict, Collectives]:
    counted = Collectives(ranks)
    with counted:
        logits = model(ids)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss.backward()
        # A gradient left Partial (a sequence-parallel norm's) is summed before any
        # optimizer reads it: counted here.
        for p in model.parameters():
            if isinstance(p.grad, DTensor) and p.grad.placements != p.placements:
                p.grad = p.grad.redistribute(p.device_mesh, p.placements)
    grads = {}
    for name, p in model.named_parameters():
        g = p.grad
        grads[name] = g.full_tensor() if isinstance(g, DTensor) else g
    return loss.item(), grads, counted


def run(path: str) -> dict:
    module = _load(path)
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 64, (4, 8), generator=gen)
    targets = torch.randint(0, 64, (4, 8), generator=gen)
    torch.manual_seed(0)
    ref_loss, ref_grads, _ = _step(module.Model().eval(), ids, targets, 1)
    tp = init_device_mesh("cpu", (2,), mesh_dim_names=("tp",))
    out = {"ref_loss": ref_loss}
    for name in ("archspec", "torchtitan"):
        torch.manual_seed(0)
        model = module.Model().eval()
        if name == "archspec":
            module.parallelize(model, tp, sequence_parallel=True)
        else:
            torchtitan_layout(model, tp["tp"])
        loss, grads, counted = _step(model, ids, targets, 2)
        diff = max((grads[n] - g).abs().max().item() for n, g in ref_grads.items())
        out[name] = {
            "loss": loss,
            "grad_diff": diff,
            "counts": dict(counted.counts),
            "sent": dict(counted.sent),
        }
    return out


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    folder = tmp_path_factory.mktemp("tp_collectives")
    path = folder / "llama_tp.py"
    path.write_text(generate_source(build_ir(load_spec("llama-2-7b", tiny_sizes("n_kv_heads=2")))))
    return [rank["llama"] for rank in spawn_cases(run, 2, [("llama", str(path))], folder)]


@pytest.mark.parametrize("layout", ["archspec", "torchtitan"])
def test_both_layouts_train_as_one_process(ranks, layout):
    for r in ranks:
        assert r[layout]["loss"] == pytest.approx(r["ref_loss"], abs=1e-5)
        assert r[layout]["grad_diff"] < 1e-5


def test_collectives_as_torchtitan(ranks):
    """Per sublayer one all-gather in and one reduce-scatter out (and their mirrors in
    backward), the embedding reduce-scattered, the head gathering the final norm's share,
    each sequence-parallel norm's weight gradient all-reduced: torchtitan's collectives,
    kind by kind, and no more bytes."""
    for r in ranks:
        ours, theirs = r["archspec"], r["torchtitan"]
        assert ours["counts"] == theirs["counts"]
        assert sum(ours["sent"].values()) <= sum(theirs["sent"].values()), (ours, theirs)
