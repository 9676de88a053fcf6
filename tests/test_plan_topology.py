"""The network above the nodes: a system's nodes per leaf switch and its oversubscription.

A ring leaves and enters a leaf switch once, so it keeps its rate while the leaf has links up
for the rings passing through it; an all-to-all sends every rank's share for ranks under other
leaves up at once, at 1/oversubscription of the NICs' rate (collectives.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from archspec.plan.collectives import group_link, spanning_all_to_all
from archspec.plan.hardware import get_system
from tests.hostile import cli, refused

SYSTEM = """\
systems:
  tapered-h100:
    accelerator: h100-sxm
    name: H100 nodes, two to a leaf switch, 4:1 oversubscribed above
    gpus_per_node: 8
    intra_node_gbs: 450
    inter_node_gbs: 50
    intra_node_latency_us: 1
    inter_node_latency_us: 5
    nodes_per_switch: {nodes}
    oversubscription: {over}
    source: a test's
"""


def test_all_to_all_across_leaves_moves_at_the_uplinks_rate():
    flat = get_system("h100-sxm")
    tapered = replace(flat, nodes_per_switch=2, oversubscription=4.0)
    size = 64e6
    # 32 ranks, 8 a node, on 4 nodes: a rank sends 24/32 of its bytes off its node, 16/32 of
    # them to the other leaf, which its leaf's links up carry at a quarter of the NICs' rate.
    link = flat.inter_node_gbs * 1e9
    latency = 31 * flat.inter_node_latency_us * 1e-6
    assert spanning_all_to_all(flat, size, 32, 1, 1.0) == pytest.approx(24 / 32 * size / link
                                                                        + latency)  # fmt: skip
    assert spanning_all_to_all(tapered, size, 32, 1, 1.0) == pytest.approx(
        16 / 32 * size * 4 / link + latency
    )
    # Within one leaf, nothing changes.
    assert spanning_all_to_all(tapered, size, 16, 1, 1.0) == spanning_all_to_all(
        flat, size, 16, 1, 1.0
    )
    # Non-blocking above (oversubscription 1): nothing changes.
    level = replace(flat, nodes_per_switch=2, oversubscription=1.0)
    assert spanning_all_to_all(level, size, 32, 1, 1.0) == spanning_all_to_all(
        flat, size, 32, 1, 1.0
    )


def test_rings_keep_their_rate_while_a_leaf_has_links_up_for_them():
    flat = get_system("h100-sxm")
    # A data-parallel ring of 64 nodes (stride 8): through 8 leaves of 8 nodes at 4:1, each
    # leaf has 2 nodes' links up, more than the one NIC's worth per rail a ring takes.
    wide = replace(flat, nodes_per_switch=8, oversubscription=4.0)
    assert group_link(wide, 64, 8, 1.0) == group_link(flat, 64, 8, 1.0)
    # Two nodes to a leaf at 4:1: half a node's links up, so the ring goes at half its rate.
    narrow = replace(flat, nodes_per_switch=2, oversubscription=4.0)
    assert group_link(narrow, 64, 8, 1.0).bandwidth == pytest.approx(
        group_link(flat, 64, 8, 1.0).bandwidth / 2
    )


def _plan(tmp_path, nodes, over):
    path = tmp_path / "tapered.yaml"
    path.write_text(SYSTEM.format(nodes=nodes, over=over))
    result = cli("plan", "qwen3-30b-a3b", "--system", str(path), "--gpu", "tapered-h100",
                 "--gpus", "32", "--global-batch", "64", "--seq", "4096", "--tp", "1",
                 "--pp", "1", "--ep", "32", "--batch", "1", "--zero", "1", "--engine", "nemo",
                 "--force", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_plan_costs_expert_parallelism_across_an_oversubscribed_leaf(tmp_path):
    level, tapered = _plan(tmp_path, 2, 1), _plan(tmp_path, 2, 4)
    assert tapered["breakdown"]["ep_comm"] > 1.5 * level["breakdown"]["ep_comm"]
    # The gradients' ring crosses the leaves too: two nodes a leaf at 4:1 have half a node's
    # links up, so it goes at half its rate; the compute does not move.
    assert tapered["breakdown"]["dp_comm"] > level["breakdown"]["dp_comm"]
    assert tapered["breakdown"]["compute"] == level["breakdown"]["compute"]


def test_catalogue_lists_the_topology_and_refuses_bad_values(tmp_path):
    path = tmp_path / "tapered.yaml"
    path.write_text(SYSTEM.format(nodes=4, over=2))
    rows = json.loads(cli("plan", "--list-systems", "--system", str(path), "--json").stdout)
    row = next(r for r in rows if r["name"] == "tapered-h100")
    assert (row["nodes_per_switch"], row["oversubscription"]) == (4, 2)
    path.write_text(SYSTEM.format(nodes=4, over=0.5))
    refused(cli("plan", "--list-systems", "--system", str(path)), "oversubscription", "0.5")
    path.write_text(SYSTEM.format(nodes=2.5, over=2))
    refused(cli("plan", "--list-systems", "--system", str(path)), "nodes_per_switch")
