"""Expert parallelism's token dispatch: what one all-to-all of a MoE layer moves, and how long.

A MoE layer under expert parallelism sends each token's hidden state to the ranks holding the
experts it is routed to, and the experts' outputs back (the combine moves the same bytes the
other way; the backward does both again). How many copies a token makes depends on the
dispatcher:

- `alltoall`, Megatron-Core's MoEAlltoAllTokenDispatcher: it permutes the tokens into one row
  per (token, routed expert) and exchanges those rows with one NCCL all-to-all
  (megatron/core/transformer/moe/token_dispatcher.py at Megatron-LM d98e8a6), so a token
  routed to two experts of one rank goes there twice: top_k rows a token, (ep - 1)/ep of them
  to other ranks. Over nodes, each rank's off-node rows leave by its own network link
  (collectives.spanning_all_to_all).
- `fused`, DeepEP and HybridEP (NeMo's flex dispatcher): the dispatch is laid out per token
  and rank, and per token and node (DeepEP's get_dispatch_layout returns is_token_in_rank and
  num_tokens_per_rdma_rank; its normal kernels forward "from NVLink domain to RDMA domain":
  deepseek-ai/DeepEP docs/legacy.md at 0297fc8), so a token reaches each rank holding any of
  its experts once, and crosses the network once to each other node holding any of them, the
  rest of the way over NVLink.

A MoE layer also waits on the host. Megatron-Core's all-to-all dispatcher copies each layer's
token counts to the host and waits for them before its all-to-all, whose split sizes it needs
there (MoEAlltoAllTokenDispatcher._maybe_dtoh_and_synchronize, "before_ep_alltoall", whenever
ep > 1); HybridEP without a bound on each rank's tokens "sizes buffers dynamically (CPU sync
in dispatch)" (_HybridEPManager, both in megatron/core/transformer/moe/token_dispatcher.py at
Megatron-LM d98e8a6); and Transformer Engine's GroupedLinear, the experts' matmuls, takes its
split sizes to the host (`m_splits.tolist()`) and quantizes and multiplies expert by expert
from Python (transformer_engine/pytorch/module/grouped_linear.py at TransformerEngine
d0067d0). So the host never runs more than a layer ahead of the device, and each MoE layer's
forward takes the longer of the device's time and the host's, which grows with the experts a
rank holds (`host_wait`; the backward reuses the split sizes and runs ahead). Runs that
capture the whole iteration in a CUDA graph with a static token bound (Megatron-Bridge's
later full-iteration presets) escape it; plan does not time those.

Routing is taken as uniform and balanced: a token's top_k distinct experts are any top_k of
the E, so a group of E/g experts (a rank's, a node's) escapes all of them with probability
C(E - E/g, top_k) / C(E, top_k).
"""

from __future__ import annotations

from math import comb

from archspec.plan.collectives import spanning_all_to_all
from archspec.plan.hardware import System

DISPATCHERS = ("fused", "alltoall")


def touched(groups: int, experts: int, top_k: int) -> float:
    """The expected number of `groups` equal groups of `experts` experts that a token's top_k
    distinct experts fall in."""
    if groups <= 1:
        return float(groups)
    missed = comb(experts - experts // groups, top_k) / comb(experts, top_k)
    return groups * (1 - missed)


def dispatch_time(system: System, token_bytes: float, experts: int, top_k: int, ep: int,
                  stride: int, efficiency: float, dispatcher: str) -> float:  # fmt: skip
    """Seconds of one dispatch (or combine) of a rank's tokens, `token_bytes` of hidden state in
    all, over `ep` expert-parallel ranks `stride` apart."""
    if ep <= 1 or token_bytes == 0:
        return 0.0
    if dispatcher == "alltoall":
        return spanning_all_to_all(system, token_bytes * top_k, ep, stride, efficiency)
    # Fused: once to each other rank holding any of a token's experts, over NVLink; and where
    # the group spans nodes, once to each other node holding any, over the rank's own link.
    per_node = max(1, min(ep, system.gpus_per_node // stride))
    # The nodes the group spans (a last one part-filled is taken as holding its share).
    nodes = -(-ep // per_node)
    ranks = touched(ep, experts, top_k) * (ep - 1) / ep
    near = token_bytes * ranks / (system.intra_node_gbs * 1e9 * efficiency)
    if ep * stride <= system.gpus_per_node:
        return near + (ep - 1) * system.intra_node_latency_us * 1e-6
    remote = touched(nodes, experts, top_k) * (nodes - 1) / nodes
    far = token_bytes * remote / (system.inter_node_gbs * 1e9 * efficiency)
    return max(near, far) + (ep - 1) * system.inter_node_latency_us * 1e-6


def host_wait(host_forward: float, forwards: int, layer_forward: float) -> float:
    """Seconds a micro-batch's MoE layer forwards (`forwards` of them: the layers, and again
    where recomputation replays them) wait on the host beyond the device's `layer_forward` (a
    layer's kernels and its dispatch and combine): the host's time for each, `host_forward`
    (the fitted time per expert times the experts a rank holds, engines.py)."""
    return forwards * max(0.0, host_forward - layer_forward)
