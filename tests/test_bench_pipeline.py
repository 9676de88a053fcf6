"""`archspec bench --nproc 2 --pp 2`: the generated pipeline under torchrun on 2 CPU processes
with gloo. The rank of the last stage reports the loss of every step, equal to the model trained
alone on one process (`reference_losses`, the issue's done-when command); a layout that does not
divide is refused before any process starts."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from archspec import build_ir, load_spec
from archspec.backends.count.params import parameter_count
from archspec.cli import app
from tests.tiny import as_sets, tiny_sizes

NO_DROPOUT = ["dropout.attention=0", "dropout.hidden=0"]
TINY = tiny_sizes(n_layers=4)


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec,layers", [("gpt2", None), ("llama-2-7b", "1,3")], ids=["gpt2", "llama-uneven"]
)
def test_pipeline_losses_and_bytes_equal_the_prediction(spec, layers):
    """The done-when command (gpt2, tied head) and uneven stages (llama: RoPE's angles built on
    each stage): the losses are the single process's; each rank's parameter bytes and saved
    tensors in flight (1F1B: stage s holds 2 - s micro-batches) are count's, to the byte."""
    args = ["bench", spec, *as_sets([*TINY, *NO_DROPOUT]), "--device", "cpu"]
    args += ["--nproc", "2", "--pp", "2", "--batch", "4", "--steps", "2", "--warmup", "1"]
    args += ["--stage-layers", layers] if layers else []
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    counts = [int(n) for n in layers.split(",")] if layers else [2, 2]
    assert (r["pp"], r["schedule"], r["stage_layers"]) == (2, "1F1B", counts)
    first, last = r["ranks"]
    assert first["losses"] is None  # the loss is computed on the last stage's rank
    assert len(r["reference_losses"]) == 4  # warm-up, the measured step, 2 timed steps
    assert last["losses"] == pytest.approx(r["reference_losses"], abs=1e-4)
    for rank in r["ranks"]:
        assert rank["param_bytes"] == rank["predicted_bytes"]["weights"]
        assert rank["saved_tensor_bytes"] == rank["predicted_bytes"]["activations"]
    # Every parameter on one rank; a tied head's copy on the last besides.
    ir = build_ir(load_spec(spec, [*TINY, *NO_DROPOUT]))
    tied = ir.root.lm_head.tied_to is not None
    copy = ir.value(ir.root.vocab_size) * ir.value(ir.root.d_model) if tied else 0
    total = ir.value(parameter_count(ir.root))
    assert first["param_bytes"] + last["param_bytes"] == 4 * (total + copy)


@pytest.mark.parametrize(
    "options,message",
    [
        (["--nproc", "2", "--pp", "4"], "--pp 4 does not divide --nproc 2: the mesh has more"),
        (["--nproc", "2", "--pp", "2", "--stage-layers", "1,1,2"], "lists 3 stages, not the"),
        (
            ["--nproc", "2", "--pp", "2", "--stage-layers", "1,2"],
            "adds up to 3 layers, not the model's 4",
        ),
        (["--nproc", "2", "--pp", "2", "--stage-layers", "a,b"], "as whole numbers"),
        (
            ["--nproc", "2", "--pp", "2", "--set", "n_layers=3"],
            "2 pipeline stages do not divide the 3 layers",
        ),
        (
            ["--nproc", "2", "--pp", "2", "--schedule", "zbv", "--set", "n_layers=6"],
            "4 stages do not divide the 6 layers",
        ),
        (["--nproc", "2", "--pp", "2", "--schedule", "foo"], "--schedule 'foo' is not one of"),
    ],
)
def test_refusals(options, message):
    """Refused before torchrun starts: exit 2 and one message naming the values."""
    result = CliRunner().invoke(app, ["bench", "gpt2", *as_sets(TINY), *options])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_an_encoder_decoder_is_refused_naming_what_is_missing():
    result = CliRunner().invoke(app, ["bench", "t5-small", "--nproc", "2", "--pp", "2"])
    assert result.exit_code == 2
    assert "every decoder block reads the encoder output" in result.output


@pytest.mark.slow
def test_tensor_parallel_losses_equal_the_single_process_model():
    """Every tp rank computes the loss of the whole batch: each reports the reference's."""
    args = ["bench", "gpt2", *as_sets([*TINY, *NO_DROPOUT]), "--device", "cpu", "--nproc", "2"]
    args += ["--tp", "2", "--batch", "2", "--steps", "1", "--warmup", "1", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    for rank in r["ranks"]:
        assert rank["losses"] == pytest.approx(r["reference_losses"], abs=1e-4)
