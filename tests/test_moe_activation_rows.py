"""A mixture of experts keeps activations per routed row (top_k copies of a token), not per
expert: what docs/plan.md's breakdown of Qwen3-30B-A3B's 220 GiB on 8 GB200s rests on. Measured
on the generated model with saved_tensors_hooks (tests/test_memory.py's `saved_bytes`), at
Qwen3-30B-A3B's routing scaled down: more experts at the same top_k add only the router's
per-expert scores; a larger top_k adds every routed row's tensors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from archspec.backends.count.flops import B, S
from archspec.backends.count.memory import activation_bytes
from tests.test_memory import saved_bytes, small_ir
from tests.tiny import built_model

SPEC = "qwen3-30b-a3b"


def measured_and_predicted(experts: int, top_k: int) -> tuple[int, int]:
    ir = small_ir(SPEC, (f"moe.n_experts={experts}", f"moe.top_k={top_k}", "moe.d_ff=32"))
    torch.manual_seed(0)
    model = built_model(ir)
    ids = torch.randint(0, 100, (2, 32))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        measured = saved_bytes(
            model, (ids,), lambda out: F.cross_entropy(out.flatten(0, 1), ids.flatten())
        )
    predicted = activation_bytes(ir, 4, "flash", device="cpu").xreplace({**ir.env, B: 2, S: 32})
    return measured, int(predicted)


def test_routed_rows_not_experts_set_the_activations() -> None:
    base, more_experts, more_routed = (measured_and_predicted(e, k)
                                       for e, k in [(4, 2), (16, 2), (16, 4)])  # fmt: skip
    for measured, predicted in (base, more_experts, more_routed):
        assert predicted == pytest.approx(measured, rel=0.01)
    # Four times the experts: only the router's scores grow (a few fp32 values per expert a
    # token); twice the routed rows: every expert-side tensor doubles.
    experts_growth = more_experts[0] - base[0]
    routed_growth = more_routed[0] - more_experts[0]
    assert 0 < experts_growth < routed_growth / 5
