"""What a training plan charges for attention sinks: cuDNN's measured cost per query row and
head (attention_kernels.CUDNN_SINK_ROW_S), where the attention is cuDNN's (Transformer
Engine's stacks, `--attn-kernel cudnn`), and nothing where the kernel takes the sinks among its
tiles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archspec.cli import app
from archspec.plan import roofline
from archspec.plan.attention_kernels import CUDNN_SINK_ROW_S

runner = CliRunner()
MEASURED = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu-h200-kernels"


def test_the_charge_per_row_is_the_h200_measurement() -> None:
    """The constant is the mean of what the sinks added to the causal and the windowed kernel,
    over the rows and heads measured: the two additions are within 3% of each other where
    their pairs differ 16-fold, so the cost goes with the rows."""
    result = json.loads((MEASURED / "sinks_cudnn.json").read_text())
    by = {(r["sinks"], r["mask"]): r["s"] for r in result["rows"]}
    added = [by[(True, mask)] - by[(False, mask)] for mask in ("causal", "window 128")]
    assert abs(added[0] / added[1] - 1) < 0.03
    sizes = result["sizes"]
    rows = sizes["batch"] * sizes["heads"] * sizes["seq"]
    assert CUDNN_SINK_ROW_S == pytest.approx(sum(added) / 2 / rows, rel=1e-6)


def step(args: list[str]) -> dict:
    result = runner.invoke(app, ["plan", "gpt-oss-120b", "--set", "max_seq_len=4096", "--gpu",
                                 "h100", "--gpus", "8", "--global-batch", "16", "--seq", "4096",
                                 "--ep", "8", "--batch", "1", *args, "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def added_by_sinks(args: list[str], monkeypatch: pytest.MonkeyPatch) -> float:
    """The step's compute with the sinks' charge, less the same without it."""
    charged = step(args)["breakdown"]["compute"]
    with monkeypatch.context() as m:
        m.setattr(roofline, "CUDNN_SINK_ROW_S", 0.0)
        return charged - step(args)["breakdown"]["compute"]


def test_transformer_engines_stack_pays_the_rows_flash_attention_does_not(monkeypatch) -> None:
    # GPT-OSS 120B: 36 layers of 64 query heads; each rank runs 2 micro-batches of 4,096 rows.
    rows = 36 * 64 * 4096 * 2
    charge = pytest.approx(rows * CUDNN_SINK_ROW_S, rel=1e-6)
    assert added_by_sinks(["--engine", "nemo"], monkeypatch) == charge
    # torchtitan's stack (fsdp) runs the rule's FlashAttention kernel: the sinks' logit per
    # row costs nothing beside the pairs, unless the run says its kernel is cuDNN's.
    assert added_by_sinks(["--engine", "fsdp"], monkeypatch) == 0
    assert added_by_sinks(["--engine", "fsdp", "--attn-kernel", "cudnn"], monkeypatch) == charge
    # A materialised attention pays for its sink column as memory traffic instead (opcost.py).
    assert added_by_sinks(["--engine", "nemo", "--attn", "eager"], monkeypatch) == 0
