"""NCCL-style collectives timed on the link their group spans.

A group of `n` ranks `stride` apart (Megatron-LM orders ranks tensor-parallel first, then data-
parallel, then pipeline: a tensor-parallel group has stride 1, a data-parallel one stride tp, a
pipeline one stride tp·dp) sits in one node when n·stride fits in it; then it talks over the
node's links (NVLink). Otherwise it crosses the network; with k of its members on each node,
NCCL runs k rings side by side, each through its own NIC, so the group moves data at k times one
accelerator's network bandwidth (never above the node's links).

Ring algorithms (Patarasuk and Yuan 2009; NCCL's): an all-reduce of D bytes over n ranks sends
2(n-1)/n·D per rank in 2(n-1) steps; a reduce-scatter or an all-gather half of that.

The network above the nodes (a system's `nodes_per_switch` and `oversubscription`): a leaf
switch joins some nodes, and its links up carry 1/oversubscription of what its nodes' NICs
can send. A ring, laid out node after node, leaves a leaf switch once and enters it once (per
NIC's ring), so a leaf's links up carry one NIC's worth for each NIC of a node: as much as
nodes_per_switch/oversubscription nodes' links up allow, so a ring spanning switches keeps
its rate where a leaf joins at least `oversubscription` nodes, and goes at that fraction of
it where fewer (`group_link`). An all-to-all sends every rank's share to every other, so each
rank below a leaf sends its share for ranks under other leaves up at once: that share moves
at 1/oversubscription of the NIC's rate (`network_time`).
"""

from __future__ import annotations

from dataclasses import dataclass

from archspec.plan.hardware import System


@dataclass(frozen=True)
class Link:
    bandwidth: float  # bytes/s per rank, one direction, as achieved
    latency: float  # seconds per step

    @property
    def name(self) -> str:
        return "link"


def group_link(system: System, n: int, stride: int, efficiency: float) -> Link:
    """The link a group of `n` ranks `stride` apart talks over."""
    intra = system.intra_node_gbs * 1e9 * efficiency
    if n * stride <= system.gpus_per_node or n == 1:
        return Link(intra, system.intra_node_latency_us * 1e-6)
    per_node = max(1, min(n, system.gpus_per_node // stride))
    inter = system.inter_node_gbs * 1e9 * efficiency * per_node
    nodes = -(-n * stride // system.gpus_per_node)
    if system.nodes_per_switch is not None and nodes > system.nodes_per_switch:
        inter *= min(1.0, system.nodes_per_switch / system.oversubscription)
    return Link(min(intra, inter), system.inter_node_latency_us * 1e-6)


def all_reduce(size: float, n: int, link: Link) -> float:
    if n <= 1 or size == 0:
        return 0.0
    return 2 * (n - 1) / n * size / link.bandwidth + 2 * (n - 1) * link.latency


def all_gather(size: float, n: int, link: Link) -> float:
    """Gather `size` bytes in all (each rank holds size/n); a reduce-scatter costs the same."""
    if n <= 1 or size == 0:
        return 0.0
    return (n - 1) / n * size / link.bandwidth + (n - 1) * link.latency


reduce_scatter = all_gather


def all_to_all(size: float, n: int, link: Link) -> float:
    """Each rank sends (n-1)/n of its `size` bytes, a share to every other rank (NCCL's
    all-to-all: n-1 point-to-point exchanges at once; an expert-parallel dispatch or combine)."""
    if n <= 1 or size == 0:
        return 0.0
    return (n - 1) / n * size / link.bandwidth + (n - 1) * link.latency


def spanning_all_to_all(system: System, size: float, n: int, stride: int,
                        efficiency: float) -> float:  # fmt: skip
    """An all-to-all of `size` bytes a rank over a group of `n` ranks `stride` apart, which may
    span nodes. Unlike a ring's, an all-to-all's traffic does not pass from rank to rank: each
    rank sends a share to every other, those on its node over NVLink and the rest over the
    network, so what crosses the network leaves by the node's NICs, one accelerator's network
    bandwidth for each rank's own (n - k)/n share (k the group's ranks on one node; NCCL's
    PXN may route a share through a neighbour's NIC, which keeps the node's total). The two
    parts run at once."""
    if n <= 1 or size == 0:
        return 0.0
    if n * stride <= system.gpus_per_node:
        return all_to_all(size, n, group_link(system, n, stride, efficiency))
    k = max(1, min(n, system.gpus_per_node // stride))
    near = (k - 1) / n * size / (system.intra_node_gbs * 1e9 * efficiency)
    far = network_time(system, (n - k) / n * size, off_switch(system, n, k) * size, efficiency)
    return max(near, far) + (n - 1) * system.inter_node_latency_us * 1e-6


def off_switch(system: System, n: int, k: int) -> float:
    """The share of a group of `n` ranks, `k` a node, under other leaf switches than a rank's
    own (the group's nodes placed switch after switch); 0 without a `nodes_per_switch`."""
    if system.nodes_per_switch is None:
        return 0.0
    return max(0, n - k * system.nodes_per_switch) / n


def network_time(system: System, off_node: float, off_switch_bytes: float,
                 efficiency: float) -> float:  # fmt: skip
    """Seconds for a rank to send `off_node` bytes through its own NIC, `off_switch_bytes` of
    them up through its leaf switch, which every rank below it loads alike (an all-to-all):
    the links up carry 1/oversubscription of the NICs' rate."""
    link = system.inter_node_gbs * 1e9 * efficiency
    return max(off_node, off_switch_bytes * system.oversubscription) / link


def send(size: float, link: Link) -> float:
    """A point-to-point transfer (pipeline stages)."""
    return size / link.bandwidth + link.latency if size else 0.0
