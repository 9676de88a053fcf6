"""Hybrid sharding (HSDP, `--dp-replicate`): ZeRO shards over one replica's data-parallel
ranks, and the replicas all-reduce the gradient shard each rank holds. Measured on torch's
own FSDP2 over a 2D mesh (dp_replicate × dp_shard, as torchtitan builds it) on a fake process
group of 4 ranks (the buffers are made and the collectives called as on a real one; no data
moves), against the collectives plan times and the shard count keeps; and `--node-size`,
which makes a TPU slice (or any node) smaller than the catalogue's, so that the replicas talk
over the data-center network as MaxText's multi-slice runs do."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch
from typer.testing import CliRunner

from archspec import build_ir, load_spec
from archspec.backends.count.layout import Parallelism
from archspec.cli import app
from archspec.plan import step as step_module
from archspec.plan.fit import MemoryModel
from archspec.plan.hardware import get_system
from archspec.plan.step import Layout, StepModel, Training
from tests.test_plan_fp8_comm import SIZES, WORLD, hf_llama

REPLICAS = 2
COLLECTIVES = ("all_gather_single", "reduce_scatter_single", "all_reduce")


def fsdp2_hsdp(model: torch.nn.Module, monkeypatch) -> tuple[Counter, int]:
    """Bytes one rank's collectives move, by (collective, ranks in its group), over one
    training step of FSDP2 on a (REPLICAS, WORLD / REPLICAS) mesh; and the parameter elements
    the rank holds."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    moved: Counter = Counter()
    original = {name: getattr(dist, name) for name in COLLECTIVES}

    def recording(name):
        def record(*args, **kwargs):
            # An all-gather's output and a reduce-scatter's input are the whole; an
            # all-reduce's one tensor is what it reduces.
            tensors = [*args, *(kwargs[k] for k in ("output", "input", "tensor") if k in kwargs)]
            tensor = tensors[1] if name == "reduce_scatter_single" else tensors[0]
            ranks = dist.get_world_size(kwargs.get("group"))
            moved[name, ranks] += tensor.numel() * tensor.element_size()
            return original[name](*args, **kwargs)

        return record

    for name in COLLECTIVES:
        monkeypatch.setattr(dist, name, recording(name))
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=WORLD)
    try:
        mesh = init_device_mesh("cpu", (REPLICAS, WORLD // REPLICAS),
                                mesh_dim_names=("dp_replicate", "dp_shard"))  # fmt: skip
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for block in model.model.layers:  # torchtitan's apply_fsdp: each block, then the root
            fully_shard(block, mesh=mesh, mp_policy=policy)
        fully_shard(model, mesh=mesh, mp_policy=policy)
        held = sum(p.to_local().numel() for p in model.parameters())
        tokens = torch.randint(0, SIZES["vocab_size"], (1, SIZES["max_seq_len"]))
        model(tokens).logits.float().sum().backward()
    finally:
        dist.destroy_process_group()
    return moved, held


def planned_hsdp(monkeypatch) -> tuple[Counter, int]:
    """Bytes of the collectives plan times for the same model and step, by (collective,
    ranks); and the parameters of one device."""
    counted: Counter = Counter()

    def recording(name, collective):
        def record(size, n, link):
            if n > 1 and size:
                counted[name, n] += size
            return collective(size, n, link)

        return record

    for name in ("all_gather", "reduce_scatter", "all_reduce"):
        monkeypatch.setattr(step_module, name, recording(name, getattr(step_module, name)))
    ir = build_ir(load_spec("llama-3-8b", [f"{k}={v}" for k, v in SIZES.items()]))
    run = Training(WORLD, WORLD, SIZES["max_seq_len"], "bf16", "fp32", "flash", "fsdp")
    model = StepModel(ir, get_system("grand-teton-h100"), run)
    assert model.step(Layout(zero=3, dp_replicate=REPLICAS)).micro_batches == 1
    (params,) = model.params_per_device(1, 1)
    return counted, params


def test_fsdp2_hsdp_moves_the_bytes_the_plan_counts(monkeypatch) -> None:
    model = hf_llama().float()  # fp32 parameters, gathered in bf16, reduced in fp32
    params = sum(p.numel() for p in model.parameters())
    root = params - sum(p.numel() for p in model.model.layers.parameters())
    shard = WORLD // REPLICAS
    measured, _ = fsdp2_hsdp(model, monkeypatch)
    counted, planned_params = planned_hsdp(monkeypatch)
    assert planned_params == params  # the same model
    # The gradients reduce-scattered over the shard group in fp32, then the shard each rank
    # keeps all-reduced over the replicas in fp32: both as plan counts them.
    assert measured["reduce_scatter_single", shard] == 4 * params
    assert measured["all_reduce", REPLICAS] == 4 * params // shard
    assert counted["reduce_scatter", shard] == measured["reduce_scatter_single", shard]
    assert counted["all_reduce", REPLICAS] == measured["all_reduce", REPLICAS]
    # The bf16 weights gathered over the shard group, for the forward and again for the
    # backward (plan times its one gather twice); FSDP2 keeps the root module's (embeddings,
    # final norm, head) gathered from the forward to the backward, which plan gathers twice.
    assert measured["all_gather_single", shard] == 2 * (2 * params - root)
    assert counted["all_gather", shard] == 2 * params
    # Nothing over the whole world: every exchange is within a group.
    assert not [key for key in [*measured, *counted] if key[1] == WORLD]


def test_a_rank_holds_its_replicas_shard(monkeypatch) -> None:
    model = hf_llama().float()
    params = sum(p.numel() for p in model.parameters())
    _, held = fsdp2_hsdp(model, monkeypatch)
    assert held == params // (WORLD // REPLICAS)
    ir = build_ir(load_spec("llama-3-8b", [f"{k}={v}" for k, v in SIZES.items()]))
    memory = MemoryModel(ir, SIZES["max_seq_len"], "fp32", "fp32", "flash")
    par = Parallelism(WORLD, zero=3, dp_replicate=REPLICAS)
    (stage,) = memory.stages(par, 1, "none")
    assert stage.weights == 4 * held  # fp32 weights, the shard of one replica


def invoke(*args: str):
    return CliRunner().invoke(app, ["plan", *args])


SLICES = ["gpt3-175b", "--set", "n_layers=8", "--gpu", "tpu-v5p", "--gpus", "128",
          "--global-batch", "256", "--seq", "2048", "--tp", "4", "--zero", "3",
          "--engine", "maxtext", "--json"]  # fmt: skip


def test_two_slices_exchange_their_gradients_over_the_data_center_network() -> None:
    one = json.loads(invoke(*SLICES).stdout)
    replicated = json.loads(invoke(*SLICES, "--dp-replicate", "2").stdout)
    two = json.loads(invoke(*SLICES, "--dp-replicate", "2", "--node-size", "64").stdout)
    assert two["gpus_per_node"] == 64 and one["gpus_per_node"] == 4096
    assert two["node_size"] == 64 and "node_size" not in one
    assert two["layout"]["dp_replicate"] == 2 and one["layout"]["dp_replicate"] == 1
    # Each replica shards over half the ranks: twice the weights a chip holds.
    assert replicated["memory"]["weights"] == pytest.approx(2 * one["memory"]["weights"], rel=1e-6)
    # Over ICI the replicas' all-reduce costs little; over the DCN (6.25 GB/s a chip) more.
    dp = [r["breakdown"]["dp_comm"] for r in (one, replicated, two)]
    assert dp[2] > dp[1] and dp[2] > dp[0]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--dp-replicate", "2", "--zero", "0"], "--dp-replicate 2 replicates ZeRO's shard"),
        (["--dp-replicate", "3", "--zero", "3"], "--dp-replicate 3 does not divide the 32"),
        (["--node-size", "8192", "--zero", "3"], "--node-size 8192: tpu-v5p's nodes hold 4096"),
        (["--node-size", "0", "--zero", "3"], "--node-size must be at least 1 (got 0)"),
        (["--node-size", "48", "--zero", "3"], "--gpus 128 is not a whole number of nodes of"),
    ],
)
def test_a_layout_hybrid_sharding_cannot_run_is_refused(extra, message) -> None:
    args = [a for a in SLICES if a not in ("--zero", "3")]
    result = invoke(*args, *extra)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_hybrid_sharding_is_ignored_when_serving() -> None:
    result = invoke("llama-2-7b", "--mode", "serve", "--gpu", "h100-sxm", "--dp-replicate", "2")
    assert result.exit_code == 0, result.output
    assert "--dp-replicate" in result.output and "ignored" in result.output


def test_count_holds_one_replicas_shard() -> None:
    base = ["count", "llama-2-7b", "--seq", "4096", "--batch", "64", "--gpus", "64", "--zero",
            "3", "--json"]  # fmt: skip
    whole = json.loads(CliRunner().invoke(app, base).stdout)["memory"]
    hybrid = json.loads(CliRunner().invoke(app, [*base, "--dp-replicate", "4"]).stdout)["memory"]
    for part in ("weights", "gradients", "optimizer"):
        assert hybrid[part] == 4 * whole[part], part
    assert hybrid["activations"] == whole["activations"]
    # The torch engine lays it out as the generated parallelize does (FSDP2 on a
    # dp_replicate × dp_shard mesh): one replica's shard too (tests/test_rank_peak_hsdp.py).
    torch = CliRunner().invoke(app, [*base, "--engine", "torch", "--dp-replicate", "4"])
    assert torch.exit_code == 0, torch.output
    for part in ("weights", "gradients", "optimizer"):
        assert json.loads(torch.stdout)["memory"][part] == hybrid[part], part


def test_count_and_serving_name_the_replicas_and_the_node_size() -> None:
    """count's title and JSON name HSDP's replicas (its figures change with them); plan's
    serving report names --node-size, as its training report does."""
    from typer.testing import CliRunner

    from archspec.cli import app

    runner = CliRunner()
    args = ["count", "llama-2-70b", "--seq", "4096", "--batch", "64", "--gpus", "64", "--tp", "8",
            "--zero", "3", "--dp-replicate", "2"]  # fmt: skip
    shown = runner.invoke(app, args, env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.output
    # The title wraps at its table's width.
    assert "dp=8 ZeRO-3 over 2" in shown.output and "replicas; micro-batch" in shown.output
    report = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert report["workload"]["dp_replicate"] == 2
    serve = ["plan", "llama-2-70b", "--mode", "serve", "--gpu", "tpu-v5p", "--gpus", "8",
             "--tp", "4", "--node-size", "4"]  # fmt: skip
    assert json.loads(runner.invoke(app, [*serve, "--json"]).stdout)["node_size"] == 4
    assert "nodes of 4" in runner.invoke(app, serve, env={"COLUMNS": "400"}).output
