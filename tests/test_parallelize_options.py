"""parallelize's options as `bench --nproc` and `count --engine torch` flags: FSDP2's mixed
precision as torchtitan sets it (`--mixed-precision`, parallelize(mp_policy="bf16"): bf16
compute, fp32 sharded parameters, gradients and reduction) and the loss on logits split over
the vocabulary (`--loss-parallel`, parallelize(loss_parallel=True), the loss under torch's
loss_parallel()).

On 2 gloo processes (`long`): with --loss-parallel every step's loss is the single-process
model's and each rank's saved tensors are count's figure byte for byte; with
--mixed-precision the losses agree to bf16's precision and each rank's parameters are fp32
shards and its saved tensors count's figure, byte for byte. The refusals and count's
figures run in the default suite."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from archspec import build_ir, load_spec
from archspec.cli import app
from tests.tiny import as_sets, tiny_sizes

NO_DROPOUT = ["dropout.attention=0", "dropout.hidden=0", "dropout.mlp=0", "dropout.embedding=0"]
SETS = as_sets(tiny_sizes(*NO_DROPOUT))
STEPS = ["--steps", "2", "--warmup", "1", "--batch", "2", "--device", "cpu", "--json"]


def _count(*layout: str) -> dict:
    args = ["count", "gpt2", *SETS, "--seq", "16", "--batch", "2", "--engine", "torch"]
    result = CliRunner().invoke(app, [*args, *layout, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_count_loss_parallel_splits_the_log_probabilities() -> None:
    """Under loss_parallel each of 2 ranks keeps half the fp32 log-softmax (B·S·V values)."""
    whole = _count("--gpus", "2", "--tp", "2")
    split = _count("--gpus", "2", "--tp", "2", "--loss-parallel")
    assert split["workload"]["loss_parallel"] and not whole["workload"]["loss_parallel"]
    ir = build_ir(load_spec("gpt2", tiny_sizes()))
    vocab = ir.value(ir.root.vocab_size)
    logits = 2 * 16 * vocab * 4
    assert whole["memory"]["activations"] - split["memory"]["activations"] == logits // 2


def test_count_mixed_precision_keeps_fp32_shards_and_computes_in_bf16() -> None:
    fp32 = _count("--gpus", "2", "--zero", "3")
    mixed = _count("--gpus", "2", "--zero", "3", "--mixed-precision")
    bf16 = _count("--gpus", "2", "--zero", "3", "--dtype", "bf16")
    for part in ("weights", "gradients", "optimizer"):
        assert mixed["memory"][part] == fp32["memory"][part]  # no bf16 master copy either
    assert mixed["memory"]["activations"] == bf16["memory"]["activations"]
    assert mixed["memory"]["activations"] < fp32["memory"]["activations"]


MIXED = "--mixed-precision is FSDP2's"


@pytest.mark.parametrize(
    "command,message",
    [
        (["count", "--gpus", "2", "--tp", "2", "--mixed-precision"], MIXED),
        (["count", "--gpus", "2", "--zero", "3", "--loss-parallel"], "--loss-parallel splits"),
        (["count", "--gpus", "2", "--zero", "3", "--engine", "megatron", "--mixed-precision"],
         MIXED),
        (["bench", "--nproc", "2", "--tp", "2", "--mixed-precision"], MIXED),
        (["bench", "--nproc", "2", "--zero", "3", "--loss-parallel"], "--loss-parallel splits"),
    ],
)  # fmt: skip
def test_refusals(command: list[str], message: str) -> None:
    """Exit 2 and one message, before any process starts."""
    head, *layout = command
    engine = ["--engine", "torch"] if head == "count" and "--engine" not in layout else []
    workload = ["--seq", "16"] if head == "count" else ["--device", "cpu"]
    result = CliRunner().invoke(app, [head, "gpt2", *SETS, *workload, *engine, *layout])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def _bench(*layout: str) -> dict:
    result = CliRunner().invoke(app, ["bench", "gpt2", *SETS, "--nproc", "2", *layout, *STEPS])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.long
def test_bench_loss_parallel_equals_one_process_and_count() -> None:
    r = _bench("--tp", "2", "--loss-parallel")
    assert r["loss_parallel"]
    for rank in r["ranks"]:
        assert rank["losses"] == pytest.approx(r["reference_losses"], abs=1e-5)
        assert rank["saved_tensor_bytes"] == r["predicted_bytes"]["activations"]
        assert rank["param_bytes"] == r["predicted_bytes"]["weights"]


@pytest.mark.long
def test_bench_mixed_precision_trains_in_bf16_from_fp32_shards() -> None:
    r = _bench("--zero", "3", "--mixed-precision")
    assert r["mixed_precision"]
    # Each data rank reports the loss of its own sequences: their mean is the whole batch's.
    means = [sum(step) / 2 for step in zip(*(rank["losses"] for rank in r["ranks"]), strict=True)]
    assert means == pytest.approx(r["reference_losses"], abs=1e-3)  # bf16 compute
    for rank in r["ranks"]:
        assert rank["param_bytes"] == r["predicted_bytes"]["weights"]  # fp32 shards
        # Op by op in bf16 but the loss's fp32 log-softmax and the CPU LayerNorm's bf16
        # statistics (tests/test_mixed_precision_saved.py): 63,748 bytes on each rank.
        kept, predicted = rank["saved_tensor_bytes"], r["predicted_bytes"]["activations"]
        assert kept == predicted == 63_748
