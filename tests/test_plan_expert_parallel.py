"""Expert parallelism in plan's step: the experts' matmuls at the rows all ranks route to them,
and the all-to-all that carries those rows, on NVLink inside a node and over each rank's
network link beyond it."""

from __future__ import annotations

import pytest

from archspec.cli.common import compile_spec
from archspec.plan.collectives import all_to_all, group_link, spanning_all_to_all
from archspec.plan.hardware import get_system
from archspec.plan.step import Layout, StepModel, Training

# Mixtral 8x7B (its config.json): 8 experts of three 4096 × 14336 projections a layer, 2 a token.
EXPERTS, TOP_K, WIDTH, FFN = 8, 2, 4096, 14336
SEQ = 4096


def expert_items(model: StepModel, ep: int) -> list[tuple]:
    _, runs, _ = model.numbers(1, 1, ep)
    return [item for _, ops in runs for item in ops if item[0].expert]


def test_each_expert_multiplies_the_rows_every_rank_routes_to_it() -> None:
    model = StepModel(compile_spec("mixtral-8x7b", None), get_system("h100-sxm"),
                      Training(16, 32, SEQ))  # fmt: skip
    alone, spread = expert_items(model, 1), expert_items(model, 8)
    assert len(alone) == len(spread) == 3  # gate, up and down projections
    for (_, flops, moved, shape), (_, flops8, moved8, shape8) in zip(alone, spread,
                                                                       strict=True):  # fmt: skip
        # One rank's 4,096 tokens send 2 rows each to 8 experts: 1,024 an expert. Under EP 8 a
        # rank holds one expert, which gets its share of all eight ranks' tokens.
        assert shape[0] == SEQ * TOP_K / EXPERTS
        assert shape8 == (8 * shape[0], shape[1], shape[2])
        assert flops8 == flops  # routing balanced: as much work on a rank either way
        # It reads one expert's weights, not eight (bf16: 2 bytes an element).
        assert moved - moved8 == pytest.approx(2 * 7 * WIDTH * FFN, rel=1e-12)
    step1 = model.step(Layout(zero=1))
    step8 = model.step(Layout(zero=1, ep=8))
    assert step8.breakdown["compute"] < step1.breakdown["compute"]


def test_an_all_to_all_inside_a_node_runs_on_nvlink() -> None:
    h100 = get_system("h100-sxm")
    size = 64e6
    nvlink = group_link(h100, 8, 1, 0.8)
    assert spanning_all_to_all(h100, size, 8, 1, 0.8) == all_to_all(size, 8, nvlink)
    # GB200 NVL72: 32 ranks of one NVLink domain.
    nvl72 = get_system("gb200-nvl72")
    assert spanning_all_to_all(nvl72, size, 32, 1, 0.8) == pytest.approx(
        31 / 32 * size / (900e9 * 0.8) + 31 * 1e-6
    )


def test_an_all_to_all_across_nodes_sends_each_ranks_far_share_through_its_own_nic() -> None:
    h100 = get_system("h100-sxm")  # 8 GPUs a node, one 400 Gb/s NIC (50 GB/s) each
    size = 64e6
    # 16 ranks on two nodes: 7/16 of a rank's bytes to its node's others over NVLink, 8/16
    # over its NIC, at once; the network part is the longer.
    far = 8 / 16 * size / (50e9 * 0.8)
    near = 7 / 16 * size / (450e9 * 0.8)
    assert far > near
    assert spanning_all_to_all(h100, size, 16, 1, 0.8) == pytest.approx(far + 15 * 5e-6)
    # A ring's link for the same group pools the node's eight NICs; an all-to-all cannot.
    pooled = all_to_all(size, 16, group_link(h100, 16, 1, 0.8))
    assert spanning_all_to_all(h100, size, 16, 1, 0.8) > 3 * pooled
    # Ranks tp apart: with tp 2 a node holds 4 of the group, 12/16 of the bytes leave it.
    assert spanning_all_to_all(h100, size, 16, 2, 0.8) == pytest.approx(
        12 / 16 * size / (50e9 * 0.8) + 15 * 5e-6
    )


def test_the_host_makes_each_moe_forward_the_slower_of_the_two() -> None:
    """A MoE layer waits on the host (dispatch.py): the host runs at most a layer ahead, so a
    MoE layer's forward takes the longer of the host's time for it (per expert a rank holds)
    and the device's, once per forward and once more per replay."""
    from dataclasses import replace

    ir = compile_spec("mixtral-8x7b", None)
    model = StepModel(ir, get_system("h100-sxm"), Training(16, 32, SEQ))
    layout = Layout(zero=1, ep=8)
    assert model.step(layout).breakdown["host"] == 0.0  # no host time given

    def with_host(per_expert: float) -> StepModel:
        return model.with_efficiency(replace(model.eff, host_moe_expert=per_expert))

    # A host far quicker than the device costs nothing; one far slower sets the pace.
    quick = with_host(1e-6).step(layout)
    assert quick.seconds == pytest.approx(model.step(layout).seconds)
    slow = with_host(0.5).step(layout)  # one expert a rank under EP 8: 0.5 s a layer
    waited = slow.breakdown["host"] / slow.micro_batches
    device_forward = 0.5 - waited / 32  # Mixtral's 32 MoE layers
    assert 0 < device_forward < 0.05  # the layer's own forward, well under the host's
    # Replayed under full recomputation: twice the forwards.
    again = with_host(0.5).step(replace(layout, recompute="full"))
    assert again.breakdown["host"] / again.micro_batches == pytest.approx(2 * waited)
    # Without expert parallelism a rank holds all 8 experts: eight times the host's time.
    alone = with_host(0.5).step(Layout(zero=1))
    assert alone.breakdown["host"] / alone.micro_batches > 7 * waited


def test_ep_dispatch_on_the_command_line() -> None:
    import json

    from typer.testing import CliRunner

    from archspec.cli import app

    runner = CliRunner()
    base = ["plan", "mixtral-8x7b", "--gpu", "h100-sxm", "--gpus", "16", "--global-batch", "32",
            "--seq", "4096", "--zero", "1"]  # fmt: skip
    wrong = runner.invoke(app, [*base, "--ep", "8", "--ep-dispatch", "all2all"])
    assert wrong.exit_code == 2
    assert "--ep-dispatch takes one of: fused, alltoall" in " ".join(wrong.output.split())
    assert "alltoall" in wrong.output.split("did you mean")[-1]
    report = json.loads(runner.invoke(app, [*base, "--ep", "8", "--ep-dispatch", "alltoall",
                                            "--json"]).stdout)  # fmt: skip
    assert report["ep_dispatch"] == "alltoall" and "host" in report["breakdown"]
    inert = runner.invoke(app, [*base, "--ep", "1", "--ep-dispatch", "alltoall", "--json"])
    assert json.loads(inert.stdout)["ignored"] == ["--ep-dispatch"]


def test_the_groups_a_token_touches_by_counting_every_routing() -> None:
    from itertools import combinations

    from archspec.plan.dispatch import touched

    # 8 experts on 4 ranks, 2 a token: count the ranks each of the 28 routings touches.
    for experts, groups, top_k in ((8, 4, 2), (12, 3, 4), (16, 8, 3)):
        size = experts // groups
        routings = list(combinations(range(experts), top_k))
        mean = sum(len({e // size for e in r}) for r in routings) / len(routings)
        assert touched(groups, experts, top_k) == pytest.approx(mean, rel=1e-12)


def test_what_each_dispatcher_sends() -> None:
    from archspec.plan.dispatch import dispatch_time

    h100 = get_system("h100-sxm")
    hidden = 4096 * 4096 * 2.0  # 4,096 tokens of width 4,096 in bf16
    # Megatron-Core's all-to-all: one row per (token, expert), over NCCL's all-to-all.
    assert dispatch_time(h100, hidden, 128, 8, 8, 1, 0.8, "alltoall") == spanning_all_to_all(
        h100, 8 * hidden, 8, 1, 0.8
    )
    # One expert a rank (Mixtral on 8): a token's two experts are two ranks either way.
    fused = dispatch_time(h100, hidden, 8, 2, 8, 1, 0.8, "fused")
    assert fused == pytest.approx(dispatch_time(h100, hidden, 8, 2, 8, 1, 0.8, "alltoall"))
    # 16 experts a rank: a token's 8 land on 8 × (1 - C(112, 8)/C(128, 8)) ranks, fewer than 8.
    assert dispatch_time(h100, hidden, 128, 8, 8, 1, 0.8, "fused") < 0.7 * dispatch_time(
        h100, hidden, 128, 8, 8, 1, 0.8, "alltoall"
    )
    # Over two nodes a token crosses the network once for the other node (if any of its
    # experts is there), not once for each of its rows there.
    from math import comb

    other_node = 1 - comb(64, 8) / comb(128, 8)
    far = hidden * other_node / (50e9 * 0.8)
    assert dispatch_time(h100, hidden, 128, 8, 16, 1, 0.8, "fused") == pytest.approx(
        far + 15 * 5e-6
    )


def test_a_fused_dispatch_over_a_part_filled_node_still_crosses_the_network() -> None:
    """12 ranks on 8-GPU nodes span two nodes, the second part-filled; counting whole nodes
    (12 // 8) took them for one node's NVLink."""
    from math import comb

    from archspec.plan.dispatch import dispatch_time

    h100 = get_system("h100-sxm")
    hidden = 4096 * 4096 * 2.0
    other_node = 1 - comb(48, 8) / comb(96, 8)  # 96 experts, half a node's
    far = hidden * other_node / (50e9 * 0.8)  # once to the other node, by its NIC
    assert dispatch_time(h100, hidden, 96, 8, 12, 1, 0.8, "fused") == pytest.approx(far + 11 * 5e-6)
