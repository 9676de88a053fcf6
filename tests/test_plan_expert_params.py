"""plan's parameters per stage under expert parallelism, where dense and MoE layers mix
(DeepSeek's first layers are dense): the experts a stage holds are its own layers', as count
deals them out (archspec/backends/count/layout.py's stage_params), not an even share."""

from __future__ import annotations

import pytest

from archspec.backends.count.layout import Parallelism, stage_params
from archspec.cli.common import resolve_spec
from archspec.ir.build import build_ir
from archspec.plan.fit import MemoryModel


@pytest.mark.parametrize(("model", "stage_layers"),
                         [("deepseek-v2-lite", (3, 24)), ("deepseek-v3", (32, 29)),
                          ("qwen3-30b-a3b", (20, 28))])  # fmt: skip
def test_each_stage_holds_its_own_layers_experts(model: str, stage_layers) -> None:
    ir = build_ir(resolve_spec(model, []))
    ep = 8
    par = Parallelism(gpus=2 * ep, pp=2, ep=ep, stage_layers=stage_layers)
    counted = [int(s.params.xreplace(ir.env)) for s in stage_params(ir, par)]
    memory = MemoryModel(ir, 4096, "bf16", "bf16", "flash")
    planned = [params for _, params in memory.params(1, 2, stage_layers, ep)]
    assert planned == pytest.approx(counted, abs=1)
