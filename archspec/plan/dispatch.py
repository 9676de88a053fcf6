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

Routing is taken as uniform: a token's top_k distinct experts are any top_k of the E, so a
group of E/g experts (a rank's, a node's) escapes all of them with probability
C(E - E/g, top_k) / C(E, top_k). That is what the published benchmarks run: Megatron-Core's
`moe_router_force_load_balancing` ("only for benchmark", which Megatron-Bridge's performance
recipes set) replaces the router's logits with normal draws (RandomSTE in
megatron/core/transformer/moe/moe_utils.py at Megatron-LM d98e8a6), so each token's top_k is a
uniform draw. Uniform is not equal: each MoE layer waits at its combine for the rank that
received the most rows, whose expected excess over the mean `routing_imbalance` gives. A
learned router is less even than that; `--moe-imbalance` says by how much.
"""

from __future__ import annotations

from functools import cache
from math import comb, erf, exp, pi, sqrt

from archspec.plan.collectives import network_time, spanning_all_to_all
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
    # Of those nodes, the ones under other leaf switches (collectives.network_time).
    per_switch = min(nodes, system.nodes_per_switch or nodes)
    beyond = touched(nodes, experts, top_k) * (nodes - per_switch) / nodes
    far = network_time(system, token_bytes * remote, token_bytes * beyond, efficiency)
    return max(near, far) + (ep - 1) * system.inter_node_latency_us * 1e-6


def host_wait(host_forward: float, forwards: int, layer_forward: float) -> float:
    """Seconds a micro-batch's MoE layer forwards (`forwards` of them: the layers, and again
    where recomputation replays them) wait on the host beyond the device's `layer_forward` (a
    layer's kernels and its dispatch and combine): the host's time for each, `host_forward`
    (the fitted time per expert times the experts a rank holds, engines.py)."""
    return forwards * max(0.0, host_forward - layer_forward)


def routing_imbalance(tokens: int, experts: int, top_k: int, ep: int,
                      rows: bool = True) -> float:  # fmt: skip
    """The expected load of the busiest of `ep` ranks over the mean, where the ranks route
    `tokens` tokens in all (one micro-batch each), each to top_k distinct experts drawn
    uniformly, and each rank holds E/ep of the E experts. `rows`: the load is the rows its
    experts compute (what the all-to-all dispatcher sends it, too); else the tokens sent to it
    at least once (a fused dispatcher's).

    A rank's load is a sum over the tokens of independent counts: hypergeometric for rows (its
    experts among a token's top_k: mean top_k/ep, variance top_k·(1/ep)·(1 - 1/ep)·(E -
    top_k)/(E - 1); the ranks' rows sum to top_k, so two ranks' have covariance -1/(ep - 1) of
    that), Bernoulli for tokens (touched with probability p = 1 - q1, q1 = C(E - E/ep, top_k)/
    C(E, top_k); two ranks both with 1 - 2·q1 + q2, q2 = C(E - 2·E/ep, top_k)/C(E, top_k)).
    Over thousands of tokens the sums are normal (the central limit theorem), and ep normals
    of deviation σ and correlation ρ exceed their mean at the largest by σ·sqrt(1 - ρ) times
    `expected_max_normal(ep)` (they are sqrt(1 - ρ)·σ times ep independent ones less their
    mean, plus a share common to all). tests/test_plan_routing_imbalance.py checks both loads
    against top_k of torch's normal logits, as Megatron-Core draws them."""
    if ep <= 1 or tokens <= 0 or top_k <= 0:
        return 1.0
    group = experts // ep
    if rows:
        mean = top_k / ep
        var = top_k / ep * (1 - 1 / ep) * (experts - top_k) / max(experts - 1, 1)
        both = -var / (ep - 1)
    else:
        missed = comb(experts - group, top_k) / comb(experts, top_k)
        mean = 1 - missed
        var = mean * missed
        both = 1 - 2 * missed + comb(experts - 2 * group, top_k) / comb(experts, top_k) - mean**2
    if var <= 0:
        return 1.0  # every token reaches every rank alike
    deviation = sqrt(tokens * var) * sqrt(1 - both / var) * expected_max_normal(ep)
    return 1 + deviation / (tokens * mean)


@cache
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normals]: the integral of x·n·φ(x)·Φ(x)^(n-1), by
    Simpson's rule over [-12, 12] (what lies beyond is below 1e-30)."""
    steps, lo, hi = 4800, -12.0, 12.0
    h = (hi - lo) / steps
    total = 0.0
    for i in range(steps + 1):
        x = lo + i * h
        density = exp(-x * x / 2) / sqrt(2 * pi)
        f = x * n * density * (0.5 * (1 + erf(x / sqrt(2)))) ** (n - 1)
        total += f * (1 if i in (0, steps) else 4 if i % 2 else 2)
    return total * h / 3
