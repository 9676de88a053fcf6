"""`archspec bench --nproc`: torchrun on 2 CPU processes with gloo, and its refusals."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from archspec import build_ir, load_spec
from archspec.backends.count.layout import Parallelism
from archspec.backends.count.torch_layout import torch_local_params
from archspec.cli import app
from tests.tiny import GQA_6_2, as_sets, tiny_sizes

TINY = tiny_sizes()
SETS = as_sets(TINY)


@pytest.mark.slow
def test_nproc_2_tp_2_reports_every_rank():
    args = ["bench", "gpt2", *SETS, "--nproc", "2", "--tp", "2", "--steps", "2", "--warmup", "1"]
    result = CliRunner().invoke(app, [*args, "--batch", "2", "--json"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    ir = build_ir(load_spec("gpt2", TINY))
    assert [rank["rank"] for rank in r["ranks"]] == [0, 1]
    for rank in r["ranks"]:
        assert rank["step_time_s"] > 0 and rank["peak_memory_bytes"] > 0
        expected = 4 * torch_local_params(ir, Parallelism(gpus=2, tp=2), rank["rank"])
        assert rank["param_bytes"] == expected
    # The activations autograd keeps on each rank are what count --engine torch says.
    for rank in r["ranks"]:
        assert rank["saved_tensor_bytes"] == r["predicted_bytes"]["activations"]
    assert r["predicted_bytes"]["weights"] == r["ranks"][0]["param_bytes"]


@pytest.mark.parametrize(
    "options,message",
    [
        (["--nproc", "2", "--tp", "3"], "--tp 3 does not divide --nproc 2"),
        (["--nproc", "2"], "add --zero 3"),
        (["--nproc", "1"], "--nproc takes 2 or more"),
        # Without --nproc the options of a run over several processes would change nothing.
        (
            ["--tp", "2", "--sp", "--schedule", "gpipe"],
            "--tp 2, --schedule gpipe, --sp need --nproc",
        ),
        (["--zero", "3"], "--zero 3 needs --nproc"),
        (
            ["--nproc", "3", "--tp", "3", *as_sets(GQA_6_2)],
            "--tp 3 does not divide the 2 kv heads, nor is it a multiple of them",
        ),
    ],
)
def test_refusals(options, message):
    """Refused before torchrun starts: exit 2 and one message."""
    result = CliRunner().invoke(app, ["bench", "llama-2-7b", *SETS, *options])
    assert result.exit_code == 2
    assert message in result.output
    # Under --json the refusal is the JSON error object on stdout, as for every command.
    result = CliRunner().invoke(app, ["bench", "llama-2-7b", *SETS, *options, "--json"])
    assert result.exit_code == 2
    error = json.loads(result.stdout)["error"]
    assert message in f"{error['message']} {error['hint']}"
