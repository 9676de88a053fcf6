"""Grouped-query attention over more ranks than kv heads: a llama with 4 heads sharing 2 kv heads
at tp=4, on 4 gloo processes, with and without sequence parallelism. Each kv head is copied onto
the 2 ranks whose query heads read it (rank r computes kv head r // 2, from the whole k and v
weights). The loss, every gradient and one optimizer step equal the single-process model's; each
rank's parameter bytes and saved-tensor bytes are what archspec predicts for PyTorch's layout.
(tests/test_distributed.py covers one kv head at tp=2 on 2 processes, in the default run.)

Starting 4 processes costs about a minute on a busy 2-core machine: it is a `long` test, run
with `python -m pytest -m long`."""

from __future__ import annotations

import pytest

from archspec import build_ir, load_spec
from archspec.backends.count.activations import activation_bytes
from archspec.backends.count.flops import S_DEC, B, S
from archspec.backends.count.layout import Parallelism, stage_params
from archspec.backends.count.torch_layout import torch_local_params
from archspec.backends.torchgen import generate_source
from tests.distributed_worker import run_on_ranks
from tests.tiny import tiny_sizes

pytestmark = [pytest.mark.slow, pytest.mark.long]

GQA = tiny_sizes("n_kv_heads=2")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kv_copies")
    ir = build_ir(load_spec("llama-2-7b", GQA))
    path = folder / "gqa_kv2.py"
    path.write_text(generate_source(ir))
    cases = [(f"sp={sp_}", str(path), 1, 4, sp_, False) for sp_ in (False, True)]
    return ir, run_on_ranks(4, cases, folder)


@pytest.mark.parametrize("sp_", [False, True], ids=["tp4", "tp4-sp"])
def test_kv_copies_train_as_one_process(runs, sp_):
    ir, ranks = runs
    kept = activation_bytes(
        ir, 4, "eager", tp=4, sequence_parallel=sp_, device="cpu", engine="torch"
    )
    saved = int(kept.xreplace({**ir.env, B: 4, S: 8, S_DEC: 8}))
    torch_layout = Parallelism(gpus=4, tp=4, engine="torch")
    for rank, r in enumerate(ranks):
        got = r[f"sp={sp_}"]
        assert got["loss"] == pytest.approx(got["ref_loss"], abs=1e-5)
        assert got["missing_grads"] == []
        assert max(got["grad_diff"], got["step_diff"], got["logits_diff"]) < 1e-5
        assert got["local_bytes"] == 4 * torch_local_params(ir, torch_layout, rank)
        assert got["saved_bytes"] == saved


def test_whole_kv_weights_beside_megatron(runs):
    """The generated code keeps the whole k and v weights (both kv heads) on every rank;
    Megatron-LM keeps the one head a rank reads: 2 layers × (k, v) × 32 × 8 more elements, and
    Megatron-LM's vocabulary padding (to 128·4 rows: 128 a rank, 16 here, two tables) on top."""
    ir, ranks = runs
    (megatron,) = stage_params(ir, Parallelism(gpus=4, tp=4))
    whole_kv = 2 * 2 * 32 * 8
    padding = 2 * (128 - 16) * 32
    assert (
        4 * (ir.value(megatron.params) + whole_kv - padding) == ranks[0]["sp=False"]["local_bytes"]
    )
