"""Saved tensors under bf16 compute from fp32 parameters (FSDP2's mp_policy="bf16", as
`parallelize(model, mesh, mp_policy="bf16")` and `count/bench --mixed-precision` set it),
against torch.autograd.graph.saved_tensors_hooks on the CPU.

FSDP2's policy runs each unit's forward on bf16 copies of its parameters (buffers stay as
they are: RoPE's fp32 angles, cast to the activations' dtype where they are read) and casts
the floating inputs of each unit to bf16; the loss casts the logits to fp32 first, as
torchtitan's and bench's do. One process reproduces it: the parameters cast to bf16, the
model's inputs token ids. The 2-process run (tests/test_parallelize_options.py, `long`)
measures the same bytes on each rank (63,748 for gpt2).

What differs from "every tensor in bf16", op by op (each in its one place): the loss keeps
an fp32 log-softmax (`ActivationCounter.op_loss`); on the CPU, LayerNorm keeps its mean and
1/std in bf16 and RMSNorm (torch's composite, and Gemma's and OLMo's norms, which call
`.float()`) an fp32 copy of its input, fp32 statistics and an fp32 normalised input
(`NormKind.kept_bytes`). SDPA's log-sum-exp is fp32 in every dtype.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from archspec.backends.count.activations import activation_bytes
from archspec.backends.count.flops import B, S
from archspec.bench.training_data import training_loss
from tests.test_memory import saved_bytes, small_ir
from tests.tiny import built_model, tiny_sizes

NO_DROPOUT = ["dropout.attention=0", "dropout.hidden=0", "dropout.mlp=0", "dropout.embedding=0"]
# The models the 2-process measurements run (tests/test_parallelize_options.py and
# tests/test_rank_peak_2d.py), with the sizes those runs measured.
MEASURED = {
    "gpt2": (tiny_sizes(*NO_DROPOUT), 2, 16, 63_748),
    "llama-2-7b": (["n_layers=2", "n_kv_heads=4", *tiny_sizes(), *NO_DROPOUT[:2]], 4, 8, 110_980),
}


def _bf16_compute(model: torch.nn.Module) -> torch.nn.Module:
    """What FSDP2's mp_policy="bf16" computes with: bf16 parameters, buffers as they are."""
    for p in model.parameters():
        p.data = p.data.to(torch.bfloat16)
    return model


def _measured(ir, b: int, s: int) -> int:
    model = _bf16_compute(built_model(ir))
    vocab = ir.value(ir.root.vocab_size)
    ids, targets = torch.randint(0, vocab, (2, b, s))
    return saved_bytes(model, (ids,), lambda out: training_loss(out, targets, vocab))


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_saved_tensors_under_mixed_precision_are_exact(name: str) -> None:
    """The bytes each rank kept in the 2-process FSDP2 runs, in one process, and count's."""
    from archspec import build_ir, load_spec

    overrides, b, s, on_two_ranks = MEASURED[name]
    ir = build_ir(load_spec(name, overrides))
    measured = _measured(ir, b, s)
    assert measured == on_two_ranks
    predicted = activation_bytes(ir, 2, "flash", device="cpu", engine="torch")
    assert predicted.xreplace({**ir.env, B: b, S: s}) == measured


@pytest.mark.parametrize("name", ["gemma-2b", "olmo-1b"])
def test_norms_that_upcast_keep_fp32(name: str) -> None:
    """Gemma's and OLMo's norms call .float(): an fp32 copy of the input, fp32 statistics."""
    ir = small_ir(name, ("dropout.attention=0",))
    predicted = activation_bytes(ir, 2, "flash", device="cpu", engine="torch")
    assert predicted.xreplace({**ir.env, B: 2, S: 16}) == _measured(ir, 2, 16)


def test_fp32_compute_is_unchanged() -> None:
    """The same interpreter in fp32: every norm keeps its input and fp32 statistics."""
    ir = small_ir("llama-2-7b")
    model = built_model(ir)
    ids, targets = torch.randint(0, 100, (2, 2, 16))
    measured = saved_bytes(
        model, (ids,), lambda out: F.cross_entropy(out.flatten(0, 1), targets.flatten())
    )
    predicted = activation_bytes(ir, 4, "flash", device="cpu", engine="torch")
    assert predicted.xreplace({**ir.env, B: 2, S: 16}) == measured
