"""`--dtype fp8`: training as torchao.float8 runs it (convert_to_float8_training on a bf16
model: fp8 matmul inputs cast on the fly, bf16 weights that the optimizer updates directly,
Float8Linear's autograd function saving the bf16 input and weight for the backward).

The optimizer's state bytes are checked against torch.optim.AdamW on bf16 parameters (torchao
is not installed here); the rest is the bf16 accounting, which tests/test_memory.py checks."""

from __future__ import annotations

import json

import torch
from typer.testing import CliRunner

from archspec.backends.count.memory import memory_figures
from archspec.backends.count.params import parameter_count
from archspec.cli import app
from archspec.ir.build import build_ir
from archspec.spec.resolve import load_spec


def test_adamw_keeps_its_moments_in_the_parameters_dtype() -> None:
    layer = torch.nn.Linear(64, 32).bfloat16()
    optimizer = torch.optim.AdamW(layer.parameters())
    layer(torch.randn(4, 64, dtype=torch.bfloat16)).sum().backward()
    optimizer.step()
    params = sum(p.numel() for p in layer.parameters())
    moments = sum(
        t.untyped_storage().nbytes()
        for state in optimizer.state.values()
        for t in state.values()
        if t.dim() > 0
    )
    assert moments == 4 * params  # two bf16 moments, no fp32 master copy


def test_fp8_bytes_per_parameter() -> None:
    ir = build_ir(load_spec("llama-2-7b"))
    n = ir.value(parameter_count(ir.root))
    fp8 = memory_figures(ir, "fp8", "adamw")
    bf16 = memory_figures(ir, "bf16", "adamw")
    assert fp8.weights.xreplace(ir.env) == 2 * n
    assert fp8.gradients.xreplace(ir.env) == 2 * n
    assert fp8.optimizer_states.xreplace(ir.env) == 4 * n
    assert fp8.activations == bf16.activations  # autograd keeps the bf16 inputs


def test_count_says_what_fp8_assumes() -> None:
    args = ["count", "llama-2-7b", "--seq", "4096", "--dtype", "fp8"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "weights (bf16, fp8 matmuls)" in result.output
    assert "torchao.float8" in " ".join(result.output.split())
    memory = json.loads(CliRunner().invoke(app, [*args, "--json"]).output)["memory"]
    assert "torchao.float8" in memory["training_assumes"]
