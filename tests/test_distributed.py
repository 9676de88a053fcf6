"""The generated `parallelize(model, mesh)` on 2 gloo processes on the CPU: tensor parallelism
(tp=2, with and without sequence parallelism) and FSDP2 (dp=2) give the single-process loss,
gradients and parameters after one optimizer step (gpt2, a GQA llama, bert, a small MoE; t5 with
tp=2), each rank holds the parameter bytes archspec predicts for PyTorch's layout
(`torch_local_params`), and each rank's saved-tensor bytes (saved_tensors_hooks, training mode,
math attention) equal archspec's per-device activations for the generated code (`engine="torch"`).

All cases run in one spawn of two processes: starting torch is most of the cost."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
import torch.multiprocessing as mp

from archspec import build_ir, load_spec
from archspec.backends.count.activations import activation_bytes
from archspec.backends.count.flops import S_DEC, B, S
from archspec.backends.count.layout import Parallelism, padded_vocab
from archspec.backends.count.memory import memory_figures
from archspec.backends.count.torch_layout import torch_local_params
from archspec.backends.torchgen import generate_source
from tests.distributed_worker import worker

TINY = ["n_layers=2", "d_model=32", "n_heads=4", "d_ff=64", "vocab_size=64", "max_seq_len=16"]
MODELS = {
    "gpt2": ("gpt2", TINY),
    "llama-gqa": ("llama-2-7b", [*TINY, "n_kv_heads=2"]),
    "t5": ("t5-small", [*TINY, "head_dim=8"]),
    "bert": ("bert-base", TINY),
    "moe": ("mixtral-8x7b", [*TINY, "n_kv_heads=2", "moe.n_experts=4", "moe.top_k=2"]),
}
# (model, dp, tp, sequence parallelism)
CASES = [(key, 1, 2, False) for key in MODELS] + [(key, 1, 2, True) for key in MODELS]
CASES += [(key, 2, 1, False) for key in MODELS if key != "t5"]


def _name(key: str, dp: int, tp: int, sp_: bool) -> str:
    return f"{key} dp={dp} tp={tp}" + (" sp" if sp_ else "")


IDS = [_name(*case).replace(" ", "-") for case in CASES]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dist")
    irs, cases = {}, []
    for key, (spec, overrides) in MODELS.items():
        irs[key] = build_ir(load_spec(spec, overrides))
        path = folder / f"dist_{key.replace('-', '_')}.py"
        path.write_text(generate_source(irs[key]))
        subprocess.run([sys.executable, "-m", "ruff", "check", "-q", str(path)], check=True)
    for key, dp, tp, sp_ in CASES:
        path = str(folder / f"dist_{key.replace('-', '_')}.py")
        cases.append((_name(key, dp, tp, sp_), path, dp, tp, sp_))
    mp.spawn(worker, args=(2, _port(), cases, str(folder)), nprocs=2, join=True)
    ranks = [json.loads((folder / f"rank{r}.json").read_text()) for r in range(2)]
    return irs, ranks


@pytest.mark.parametrize("key,dp,tp,sp_", CASES, ids=IDS)
def test_same_loss_and_gradients(runs, key, dp, tp, sp_):
    _, ranks = runs
    for r in ranks:
        got = r[_name(key, dp, tp, sp_)]
        assert got["loss"] == pytest.approx(got["ref_loss"], abs=1e-5)
        assert got["missing_grads"] == []
        assert got["grad_diff"] < 1e-5
        assert got["step_diff"] < 1e-5
        if "logits_diff" in got:
            assert got["logits_diff"] < 1e-5


@pytest.mark.parametrize("key,dp,tp,sp_", CASES, ids=IDS)
def test_local_bytes_equal_prediction(runs, key, dp, tp, sp_):
    irs, ranks = runs
    ir = irs[key]
    par = Parallelism(gpus=2, tp=tp, zero=3 if dp > 1 else 0)
    for rank, r in enumerate(ranks):
        measured = r[_name(key, dp, tp, sp_)]["local_bytes"]
        assert measured == 4 * torch_local_params(ir, par, rank)
    figures = memory_figures(ir, parallel=par)
    if dp > 1:
        # ZeRO-3 divides the fp32 weights by dp: FSDP2 agrees when dp divides every dim 0.
        assert ranks[0][_name(key, dp, tp, sp_)]["local_bytes"] == ir.value(
            figures.stages[0].weights
        )
    else:
        # Megatron-LM pads the vocabulary to a multiple of 128·tp; DTensor does not.
        vocab, d = ir.value(ir.root.vocab_size), ir.value(ir.root.d_model)
        tables = 1 if ir.root.lm_head is None or ir.root.lm_head.tied_to else 2
        padding = tables * (padded_vocab(vocab, tp) - vocab) // tp * d
        assert measured == 4 * (figures.stages[0].params - padding)


@pytest.mark.parametrize("key,dp,tp,sp_", CASES, ids=IDS)
def test_saved_bytes_equal_prediction(runs, key, dp, tp, sp_):
    """Exact, byte for byte. The figure is PyTorch's: with sequence parallelism each attention,
    MLP and MoE keeps the whole sequence it gathered (Megatron-LM keeps the rank's share and
    gathers again in backward), and without loss_parallel each rank keeps whole log-probabilities
    (Megatron-LM's loss is vocabulary-parallel): `engine="megatron"`, count's default, says less.
    The batch of 4 sequences of 8 tokens is split over dp."""
    irs, ranks = runs
    ir = irs[key]
    values = {**ir.env, B: 4 // dp, S: 8, S_DEC: 8}
    kept = activation_bytes(
        ir, 4, "eager", tp=tp, sequence_parallel=sp_, device="cpu", engine="torch"
    )
    for r in ranks:
        assert r[_name(key, dp, tp, sp_)]["saved_bytes"] == int(kept.xreplace(values))
