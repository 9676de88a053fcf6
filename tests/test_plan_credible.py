"""The layout `archspec plan` searches stays credible: its MFU is no higher than the best
published run of published.yaml on the same accelerator in the same precision, give or take
the planner's own cross-validated mean error (a plan that promises more than any published run
reached, by more than the planner is typically off, is the fit talking, not the hardware)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from archspec.backends.count.conventions import NO_RECOMPUTE
from archspec.cli import app
from archspec.plan import published
from archspec.plan.hardware import get_system
from archspec.plan.report import step_flops

# docs/plan.md's leave-one-source-out mean error over published.yaml.
CROSS_VALIDATED_MEAN = 0.075


def best_published_mfu(accelerator: str, fp8: bool) -> float:
    """The highest MFU (model FLOPs over the bf16 or fp16 peak) a published run reached on
    `accelerator`, from its published figure."""
    best = 0.0
    for run in published.expressible():
        acc = get_system(run.system).accelerator
        if acc.key != accelerator or (run.dtype == "fp8") != fp8:
            continue
        ir = published.cands_ir(run)
        # Model FLOPs: the forward and backward without what recomputation replays.
        flops, _ = step_flops(ir, published.training(run), NO_RECOMPUTE)
        peak = acc.peak("fp16" if run.dtype == "fp16" else "bf16") * run.gpus
        best = max(best, flops / (published.published_step(run, ir) * peak))
    assert best > 0, accelerator
    return best


@pytest.mark.parametrize(
    ("args", "accelerator", "fp8"),
    [
        (["gpt3-175b", "--gpu", "a100-80g", "--gpus", "64", "--global-batch", "64"],
         "a100-80g", False),
        (["llama-2-70b", "--gpu", "h100-sxm", "--gpus", "64", "--global-batch", "128",
          "--seq", "4096"], "h100-sxm", False),
        (["llama-3-8b", "--gpu", "h100-sxm", "--gpus", "64", "--global-batch", "128",
          "--seq", "8192", "--dtype", "fp8", "--engine", "nemo"], "h100-sxm", True),
        # A mixture of experts: the search tries expert parallelism (and folding) too.
        (["mixtral-8x7b", "--gpu", "h100-sxm", "--gpus", "64", "--global-batch", "512",
          "--seq", "4096", "--engine", "nemo"], "h100-sxm", False),
        (["llama-2-70b", "--gpu", "tpu-v5p", "--gpus", "128", "--global-batch", "256",
          "--seq", "4096", "--engine", "maxtext"], "tpu-v5p", False),
    ],
)  # fmt: skip
def test_searched_mfu_is_within_the_best_published_on_that_accelerator(
    args: list[str], accelerator: str, fp8: bool
) -> None:
    result = CliRunner().invoke(app, ["plan", *args, "--json"])
    assert result.exit_code == 0, result.output
    searched = json.loads(result.stdout)["mfu"]
    assert 0.2 < searched <= best_published_mfu(accelerator, fp8) * (1 + CROSS_VALIDATED_MEAN)
