"""`plan --mode serve` against `bench --mode generate` on this machine's CPU: the generated
model's prefill and decode step, timed as bench runs them, against the plan's prediction on a
CPU entry whose bandwidth and matmul peak are measured (archspec/plan/serve_vs_bench.py).

What the plan does not model on a CPU (eager PyTorch's dispatch per op, the cache's reads) is
what the error holds; docs/plan.md shows it. The checks bound it: a factor of 1.5 for the
models docs/plan.md shows (long; a batch-8 decode step is its known miss), a factor of 2 for a
small one (default suite)."""

from __future__ import annotations

import math

import pytest

from archspec.cli.common import compile_spec
from archspec.plan.serve_vs_bench import CASES, compare

SMALL = ["n_layers=2", "d_model=512", "n_heads=8", "d_ff=1408"]


def _within(errors: tuple[float, float], factor: float) -> bool:
    return all(abs(math.log1p(e)) < math.log(factor) for e in errors)


def test_a_small_llama_decodes_on_this_cpu_as_planned() -> None:
    cpu, c = compare(compile_spec("llama-2-7b", SMALL), "small", 1, 32, 4, runs=2)
    a = cpu.accelerator
    assert 1 < a.memory_bandwidth_gbs < 1000 and 0 < cpu.gemv_fraction <= 1
    assert 0 < a.peak_tflops["fp32"] < 100 and cpu.matmul_half >= 0
    assert _within(c.errors, 2.0), (c.measured, c.predicted)


@pytest.mark.long
@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case[0]}-b{case[2]}")
def test_the_documented_models_run_on_this_cpu_as_planned(case) -> None:
    name, overrides, batch, prompt, new = case
    _, c = compare(compile_spec(name, overrides), name, batch, prompt, new)
    # A decode step of several rows is the documented miss (about twice the prediction: eight
    # rows per F.linear run far below the 16-row probe's rate); its prefill is checked.
    errors = c.errors if batch == 1 else c.errors[:1]
    assert _within(errors, 1.5), (c.measured, c.predicted)
