"""`archspec bench --nproc --cp / --ep`: the mesh archspec.bench.mesh_layout builds, its
refusals before torchrun starts (exit 2, naming the values), and one 2-process run each of a
llama at cp=2 and a Mixtral at ep=2 on gloo. (tests/test_distributed_cp_ep.py checks the losses
of the same layouts against one process.)"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from archspec import build_ir, load_spec
from archspec.backends.count.params import parameter_count
from archspec.bench.mesh_layout import mesh_dims
from archspec.cli import app
from archspec.ir.nodes import MoE
from archspec.ir.visit import walk
from tests.tiny import as_sets, tiny_sizes

SETS = as_sets(tiny_sizes())
MOE = as_sets(tiny_sizes("n_kv_heads=2", "moe.n_experts=4", "moe.top_k=2"))
RUN = ["--device", "cpu", "--steps", "2", "--warmup", "1", "--seq", "8", "--json"]


def test_mesh_dims_outermost_first():
    assert mesh_dims(8, tp=2, cp=2) == {"pp": 1, "dp_shard": 2, "ep": 1, "cp": 2, "tp": 2}
    assert mesh_dims(2, ep=2) == {"pp": 1, "dp_shard": 1, "ep": 2, "cp": 1, "tp": 1}


@pytest.fixture
def no_launch(monkeypatch):
    """torchrun must not start: a refusal comes first."""
    import archspec.bench.distributed as distributed

    def launched(*args, **kwargs):
        raise AssertionError(f"torchrun was launched: {args}")

    monkeypatch.setattr(distributed.subprocess, "run", launched)


@pytest.mark.parametrize(
    "spec,options,message",
    [
        ("llama-2-7b", ["--cp", "2", "--tp", "2"], "--cp 2 × --tp 2 = 4 ranks does not divide"),
        ("llama-2-7b", ["--cp", "4"], "--nproc 2: the mesh has more ranks than processes"),
        ("llama-2-7b", ["--cp", "3"], "--cp 3 does not divide --nproc 2"),
        ("llama-2-7b", ["--cp", "2", "--seq", "6"], "the 6 positions do not split into 4"),
        ("bert-base", ["--cp", "2", "--seq", "8"], "only a causal decoder is split"),
        ("llama-2-7b", ["--ep", "2"], "llama-2-7b has no experts"),
        ("mixtral-8x7b", ["--ep", "2", "--set", "moe.n_experts=3"], "not divide the 3 experts"),
        ("llama-2-7b", ["--cp", "0"], "--cp takes 1 or more ranks"),
        ("mixtral-8x7b", ["--ep", "2", "--cp", "2", "--nproc", "4"], "not context parallelism"),
    ],
)
def test_refusals_before_any_process(no_launch, spec, options, message):
    sets = MOE if spec.startswith("mixtral") else SETS
    args = ["bench", spec, *sets, "--device", "cpu", "--nproc", "2", *options]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert message in result.output


def _run(spec: str, sets: list[str], options: list[str]) -> dict:
    args = ["bench", spec, *sets, "--nproc", "2", *options, *RUN]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.slow
def test_cp_2_holds_every_weight_on_each_rank():
    r = _run("llama-2-7b", SETS, ["--cp", "2"])
    assert r["mesh"]["cp"] == 2 and r["predicted_bytes"] is None
    ir = build_ir(load_spec("llama-2-7b", tiny_sizes()))
    whole = 4 * ir.value(parameter_count(ir.root))
    assert [rank["param_bytes"] for rank in r["ranks"]] == [whole, whole]
    assert [rank["predicted_param_bytes"] for rank in r["ranks"]] == [whole, whole]


@pytest.mark.slow
def test_ep_2_holds_half_the_experts():
    """FSDP2 shards the dense weights over the 2 ranks; each keeps 2 of the 4 experts whole."""
    r = _run("mixtral-8x7b", MOE, ["--ep", "2", "--batch", "2"])
    assert r["mesh"]["ep"] == 2
    ir = build_ir(load_spec("mixtral-8x7b", tiny_sizes("n_kv_heads=2", "moe.n_experts=4")))
    total = ir.value(parameter_count(ir.root))
    experts = sum(
        ir.value(placed.copies * parameter_count(placed.node.experts))
        for placed in walk(ir.root)
        if isinstance(placed.node, MoE)
    )
    assert sum(rank["param_bytes"] for rank in r["ranks"]) == 4 * total
    for rank in r["ranks"]:
        assert rank["param_bytes"] == 4 * ((total - experts) // 2 + experts // 2)
        assert rank["predicted_param_bytes"] == rank["param_bytes"]
