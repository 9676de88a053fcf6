"""fp8 training runs the blocks' projections in fp8 and the output head in bf16, as every stack
of published.yaml does (opcost.py's `OpCost.in_fp8` cites Megatron-Core's output_layer,
torchtitan's Float8Linear filter and llm-foundry's tied unembedding)."""

from __future__ import annotations

import pytest
import sympy as sp

from archspec import build_ir, load_spec
from archspec.backends.count.memory import COMPUTE_BYTES
from archspec.backends.count.passes import B, S
from archspec.plan.efficiency import CALIBRATED
from archspec.plan.hardware import get_system
from archspec.plan.opcost import pass_costs
from archspec.plan.roofline import Roofline


def _numbers(cost, env):
    def put(e):
        return float(sp.sympify(e).xreplace(env))

    return cost, put(cost.flops), put(cost.bytes), tuple(put(d) for d in cost.shape)


@pytest.mark.parametrize("name", ["llama-2-7b", "gpt2"])
def test_fp8_runs_the_projections_in_fp8_and_the_head_in_bf16(name: str) -> None:
    ir = build_ir(load_spec(name))
    costs = pass_costs(ir, COMPUTE_BYTES["fp8"], "flash")
    matmuls = [c for _, block in costs.layers for c in block if c.kind == "matmul"]
    projections = [c for c in matmuls if not c.attn_core]
    head = [c for c in costs.after if c.kind == "matmul"]
    assert projections and all(c.in_fp8 for c in projections)
    assert [c.label for c in head] == ["head.linear"] and not head[0].in_fp8

    accelerator = get_system("h100-sxm").accelerator
    fp8, bf16 = (Roofline.of(accelerator, d, CALIBRATED) for d in ("fp8", "bf16"))
    env = {**ir.env, B: 4, S: 2048}
    head_numbers = _numbers(head[0], env)
    assert fp8.op_time(head_numbers) == bf16.op_time(head_numbers)
    projection = _numbers(projections[0], env)
    assert fp8.op_time(projection) < bf16.op_time(projection)
