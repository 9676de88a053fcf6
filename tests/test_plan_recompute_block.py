"""`--recompute full:N`: Megatron-Core's full recomputation of the first N layers of each pipeline
chunk (recompute_method block), checked against the generated model with its first N blocks
checkpointed, and through `plan`."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from typer.testing import CliRunner

from archspec.backends.count.activations import activation_parts
from archspec.backends.count.flops import S_DEC, B, S
from archspec.bench.memory import LiveTensors, resident_tensors
from archspec.cli import app
from archspec.errors import SpecError
from archspec.plan.recompute_block import block_layers, full_share, is_full
from archspec.runtime.checkpoint import maybe_checkpoint
from tests.test_memory import small_ir
from tests.tiny import built_model

LAYERS = 4


class Checkpointed(nn.Module):
    """A block run through the generated code's checkpoint: its input kept, its forward run
    again before its backward (what Megatron-Core's block method does to its first N)."""

    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, *args, **kwargs):
        return maybe_checkpoint(self.block, *args, enabled=True, **kwargs)


def kept_bytes(checkpointed: int, b: int = 2, s: int = 32) -> tuple[int, object]:
    """What a training forward of a small Llama leaves alive with its first `checkpointed`
    blocks under full recomputation and the others keeping every activation (fp32, CPU)."""
    ir = small_ir("llama-2-70b", ("dropout.hidden=0.1", "dropout.attention=0.1",
                                  f"n_layers={LAYERS}"))  # fmt: skip
    model = built_model(ir, checkpoint=None)
    stack = model.decoder
    for i in range(checkpointed):
        stack.blocks[i] = Checkpointed(stack.blocks[i])
    with LiveTensors(resident_tensors(model)) as tracker:
        tokens = torch.randint(0, 100, (b, s))
        targets = torch.randint(0, 100, (b, s))
        out = F.cross_entropy(model(tokens).flatten(0, 1), targets.flatten())
        kept = tracker.live - tracker.baseline
    out.backward()
    return kept - 4, ir  # the loss itself


@pytest.mark.parametrize("n", [1, 3])
def test_the_first_n_blocks_checkpointed_keep_what_full_keeps_the_rest_what_none_keeps(n) -> None:
    """Measured: each checkpointed block keeps what count's full recomputation keeps of a
    block, the others what no recomputation keeps: the share `full:N` mixes them by."""
    kept, ir = kept_bytes(n)
    values = {**ir.env, B: 2, S: 32, S_DEC: 16}

    def per_block(policy: str):
        parts = activation_parts(ir, 4, "eager", policy, device="cpu")
        ((count, each),) = parts.layers
        assert int(count.xreplace(values)) == LAYERS
        return parts, each.xreplace(values)

    none, none_block = per_block("none")
    _, full_block = per_block("full")
    predicted = (none.total - none.rebuilt).xreplace(values) - n * (none_block - full_block)
    assert kept == predicted
    assert full_share(f"full:{n}", LAYERS) == n / LAYERS


def test_full_n_reads_and_refuses() -> None:
    assert block_layers("full:5") == 5 and block_layers("full") is None
    assert is_full("full") and is_full("full:2") and not is_full("selective")
    assert full_share("full:8", 4) == 1 and full_share("none", 4) == 0
    for bad in ("full:0", "full:x", "full:-1", "full:"):
        with pytest.raises(SpecError, match="whole number, at least 1"):
            block_layers(bad)


def _plan(recompute: str) -> dict:
    result = CliRunner().invoke(app, [
        "plan", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--global-batch", "64",
        "--batch", "1", "--seq", "4096", "--pp", "2", "--interleave", "2",
        "--recompute", recompute, "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_plan_times_and_holds_the_share_it_recomputes() -> None:
    """32 layers over 2 stages of 2 chunks: 8 a chunk. full:8 is full; full:2 recomputes a
    quarter of each chunk: a quarter of full's replayed time and of the activations it saves,
    the model FLOPs unchanged and a quarter of the replayed ones in the hardware FLOPs."""
    none, full, part = _plan("none"), _plan("full"), _plan("full:2")
    assert _plan("full:8")["step_time_s"] == pytest.approx(full["step_time_s"])

    def share(key) -> float:
        return (key(part) - key(none)) / (key(full) - key(none))

    assert share(lambda r: r["breakdown"]["recompute"]) == pytest.approx(0.25, rel=1e-6)
    assert share(lambda r: r["memory"]["activations"]) == pytest.approx(0.25, abs=0.02)
    assert part["mfu"] * part["step_time_s"] == pytest.approx(none["mfu"] * none["step_time_s"])
    assert share(lambda r: r["hfu"] * r["step_time_s"]) == pytest.approx(0.25, rel=1e-3)


def test_full_n_is_refused_where_it_means_nothing() -> None:
    result = CliRunner().invoke(app, ["plan", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "8",
                                      "--global-batch", "64", "--recompute", "full:0"])  # fmt: skip
    assert result.exit_code == 2 and "whole number, at least 1" in result.stderr
    result = CliRunner().invoke(app, ["plan", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "8",
                                      "--global-batch", "64", "--recompute", "full:2",
                                      "--recompute-modules", "layernorm"])  # fmt: skip
    assert result.exit_code == 2 and "no meaning" in result.stderr
