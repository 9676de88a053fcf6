"""The generated `parallelize(model, mesh)` on 2 gloo processes on the CPU: tensor parallelism
(tp=2, with and without sequence parallelism) and FSDP2 (dp=2) give the single-process loss,
gradients and parameters after one optimizer step (gpt2, a GQA llama, bert, a small MoE, a llama
with attention sinks and alternating windowed layers; t5 and
multi-query attention, a llama with one kv head and starcoder, with tp=2, where each rank computes
a copy of the kv head), each rank holds the parameter bytes archspec predicts for PyTorch's
layout (`torch_local_params`), and each rank's saved-tensor bytes (saved_tensors_hooks, training
mode, math attention) equal archspec's per-device activations for the generated code
(`engine="torch"`).

All cases run in one spawn of two processes: starting torch is most of the cost."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from archspec import build_ir, load_spec
from archspec.backends.count.activations import activation_bytes
from archspec.backends.count.flops import S_DEC, B, S
from archspec.backends.count.layout import Parallelism, padded_vocab
from archspec.backends.count.memory import memory_figures
from archspec.backends.count.torch_layout import torch_local_params
from archspec.backends.torchgen import generate_source
from archspec.cli import app
from tests.distributed_worker import run_on_ranks
from tests.tiny import tiny_sizes

TINY = tiny_sizes()
MODELS = {
    "gpt2": ("gpt2", TINY),
    "llama-gqa": ("llama-2-7b", [*TINY, "n_kv_heads=2"]),
    "t5": ("t5-small", [*TINY, "head_dim=8"]),
    "bert": ("bert-base", TINY),
    "moe": ("mixtral-8x7b", [*TINY, "n_kv_heads=2", "moe.n_experts=4", "moe.top_k=2"]),
    # Multi-query attention, one kv head: at tp=2 each rank computes a copy of it.
    "llama-mqa": ("llama-2-7b", [*TINY, "n_kv_heads=1"]),
    "starcoder": ("starcoder", TINY),  # gpt_bigcode
    # gpt-oss's attention: sinks split with the heads, windowed and full layers.
    "llama-sinks": (
        "llama-2-7b",
        [
            *TINY,
            "n_kv_heads=2",
            "attention.sinks=true",
            "attention.sliding_window=4",
            "attention.window_pattern=LG",
        ],
    ),  # fmt: skip
}
MQA = ("llama-mqa", "starcoder")
# (model, dp, tp, sequence parallelism, loss_parallel)
CASES = [(key, 1, 2, False, False) for key in MODELS]
CASES += [(key, 1, 2, True, False) for key in MODELS]
CASES += [(key, 2, 1, False, False) for key in MODELS if key not in ("t5", *MQA)]
CASES += [("gpt2", 1, 2, True, True), ("t5", 1, 2, False, True)]


def _name(key: str, dp: int, tp: int, sp_: bool, lp: bool = False) -> str:
    return f"{key} dp={dp} tp={tp}" + (" sp" if sp_ else "") + (" loss_parallel" if lp else "")


IDS = [_name(*case).replace(" ", "-") for case in CASES]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dist")
    irs, cases = {}, []
    for key, (spec, overrides) in MODELS.items():
        irs[key] = build_ir(load_spec(spec, overrides))
        path = folder / f"dist_{key.replace('-', '_')}.py"
        path.write_text(generate_source(irs[key]))
        subprocess.run([sys.executable, "-m", "ruff", "check", "-q", str(path)], check=True)
    for key, dp, tp, sp_, lp in CASES:
        path = str(folder / f"dist_{key.replace('-', '_')}.py")
        cases.append((_name(key, dp, tp, sp_, lp), path, dp, tp, sp_, lp))
    return irs, run_on_ranks(2, cases, folder)


@pytest.mark.parametrize("key,dp,tp,sp_,lp", CASES, ids=IDS)
def test_same_loss_and_gradients(runs, key, dp, tp, sp_, lp):
    _, ranks = runs
    for r in ranks:
        got = r[_name(key, dp, tp, sp_, lp)]
        assert got["loss"] == pytest.approx(got["ref_loss"], abs=1e-5)
        assert got["missing_grads"] == []
        assert got["grad_diff"] < 1e-5
        assert got["step_diff"] < 1e-5
        if "logits_diff" in got:
            assert got["logits_diff"] < 1e-5


@pytest.mark.parametrize("key,dp,tp,sp_,lp", CASES, ids=IDS)
def test_local_bytes_equal_prediction(runs, key, dp, tp, sp_, lp):
    """Each rank's parameter bytes are `count --gpus 2 --tp 2 --engine torch` (resp. `--zero 3`)
    weights per device, and rank by rank `torch_local_params`. Megatron-LM's figure (count's
    default engine) is larger by exactly its vocabulary padding, to 128·tp rows per table."""
    irs, ranks = runs
    ir = irs[key]
    zero = 3 if dp > 1 else 0
    torch_layout = Parallelism(gpus=2, tp=tp, zero=zero, engine="torch")
    for rank, r in enumerate(ranks):
        measured = r[_name(key, dp, tp, sp_, lp)]["local_bytes"]
        assert measured == 4 * torch_local_params(ir, torch_layout, rank)
    # FSDP2 agrees with ZeRO-3's total / dp when dp divides every first dimension, as here.
    (stage,) = memory_figures(ir, parallel=torch_layout).stages
    assert ranks[0][_name(key, dp, tp, sp_, lp)]["local_bytes"] == ir.value(stage.weights)
    result = CliRunner().invoke(app, count_command(key, tp, zero))
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["memory"]["weights"] == ir.value(stage.weights)
    (megatron,) = memory_figures(ir, parallel=Parallelism(gpus=2, tp=tp, zero=zero)).stages
    vocab, d = ir.value(ir.root.vocab_size), ir.value(ir.root.d_model)
    tables = 1 if ir.root.lm_head is None or ir.root.lm_head.tied_to else 2
    padding = tables * (padded_vocab(vocab, tp) - vocab) // tp * d if tp > 1 else 0
    assert ir.value(megatron.params) - ir.value(stage.params) == padding


def count_command(key: str, tp: int, zero: int) -> list[str]:
    spec, overrides = MODELS[key]
    sets = [arg for o in overrides for arg in ("--set", o)]
    layout = ["--gpus", "2", "--tp", str(tp), "--zero", str(zero), "--engine", "torch"]
    return ["count", spec, *sets, *layout, "--batch", "4", "--seq", "8", "--json"]


@pytest.mark.parametrize("key,dp,tp,sp_,lp", CASES, ids=IDS)
def test_saved_bytes_equal_prediction(runs, key, dp, tp, sp_, lp):
    """Exact, byte for byte. The figure is PyTorch's: with sequence parallelism each attention,
    MLP and MoE keeps the whole sequence it gathered (Megatron-LM keeps the rank's share and
    gathers again in backward), and without loss_parallel each rank keeps whole log-probabilities
    (Megatron-LM's loss is vocabulary-parallel; with loss_parallel the rank's share):
    `engine="megatron"`, count's default, says less.
    The batch of 4 sequences of 8 tokens is split over dp."""
    irs, ranks = runs
    ir = irs[key]
    values = {**ir.env, B: 4 // dp, S: 8, S_DEC: 8}
    kept = activation_bytes(
        ir, 4, "eager", tp=tp, sequence_parallel=sp_, device="cpu", engine="torch", loss_parallel=lp
    )
    for r in ranks:
        assert r[_name(key, dp, tp, sp_, lp)]["saved_bytes"] == int(kept.xreplace(values))
