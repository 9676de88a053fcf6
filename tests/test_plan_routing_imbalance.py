"""Routing imbalance under expert parallelism: the busiest rank's load against uniform routing
as Megatron-Core's benchmarks draw it, and what plan does with it.

`moe_router_force_load_balancing` replaces the router's logits with normal draws (RandomSTE,
megatron/core/transformer/moe/moe_utils.py at Megatron-LM d98e8a6); the tests draw them the
same way with torch and take top_k, then count each rank's rows (its experts among a token's
top_k) and the tokens it receives at least once, and compare the busiest rank's excess over
the mean, averaged over many draws, with `routing_imbalance`.
"""

from __future__ import annotations

import json
import math
from functools import cache

import pytest
import torch

from archspec.plan.dispatch import expected_max_normal, routing_imbalance
from tests.hostile import cli, refused

CASES = [  # (tokens in all, experts, top_k, ep): Mixtral's, Qwen3-30B-A3B's, DeepSeek-like
    (8 * 1024, 8, 2, 8),
    (8 * 1024, 128, 8, 8),
    (16 * 512, 128, 8, 16),
    (4 * 2048, 64, 6, 4),
    (2 * 256, 8, 2, 2),
]


@cache
def drawn_excess(tokens: int, experts: int, top_k: int, ep: int,
                 draws: int = 240) -> dict[bool, tuple[float, float]]:  # fmt: skip
    """The busiest rank's load over the mean, less one, over `draws` routings, for its rows
    (True) and the tokens it receives (False): mean and its standard error."""
    gen = torch.Generator().manual_seed(0)
    per_rank = experts // ep
    excess: dict[bool, list[torch.Tensor]] = {True: [], False: []}
    for _ in range(draws // 24):  # 24 routings at a time
        chosen = torch.randn(24, tokens, experts, generator=gen).topk(top_k, dim=-1).indices
        rank = chosen // per_rank
        ones = torch.ones_like(rank, dtype=torch.float)
        hits = torch.zeros(24, tokens, ep).scatter_add_(2, rank, ones)
        for rows, load in ((True, hits.sum(1)), (False, (hits > 0).float().sum(1))):
            excess[rows].append(load.max(1).values / load.mean(1) - 1)
    out = {}
    for rows, parts in excess.items():
        t = torch.cat(parts)
        out[rows] = (float(t.mean()), float(t.std() / math.sqrt(len(t))))
    return out


@pytest.mark.parametrize("rows", [True, False], ids=["rows", "tokens"])
@pytest.mark.parametrize(("tokens", "experts", "top_k", "ep"), CASES)
def test_busiest_rank_matches_uniform_routing_drawn_as_megatron_draws_it(
    tokens, experts, top_k, ep, rows
):
    mean, stderr = drawn_excess(tokens, experts, top_k, ep)[rows]
    predicted = routing_imbalance(tokens, experts, top_k, ep, rows=rows) - 1
    # Within four standard errors of the draws and 6% of the excess (the normal limit of a
    # sum of a few thousand small counts).
    assert abs(predicted - mean) <= 4 * stderr + 0.06 * mean, (predicted, mean, stderr)


def test_expected_max_of_normals_known_values():
    # E[max] of 2 standard normals is 1/sqrt(pi); of 3, 3/(2 sqrt(pi)) (closed forms).
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-9)
    assert expected_max_normal(3) == pytest.approx(1.5 / math.sqrt(math.pi), rel=1e-9)
    drawn = torch.randn(200_000, 8, generator=torch.Generator().manual_seed(1)).max(1).values
    assert expected_max_normal(8) == pytest.approx(float(drawn.mean()), abs=0.01)


def test_no_imbalance_without_expert_parallelism():
    assert routing_imbalance(4096, 8, 2, 1) == 1.0
    # More tokens, a smaller excess (as 1/sqrt(tokens)).
    small, large = (routing_imbalance(t, 128, 8, 8) - 1 for t in (1024, 4096))
    assert small / large == pytest.approx(2.0, rel=1e-9)


MIXTRAL = ["plan", "mixtral-8x7b", "--gpu", "h100-sxm", "--gpus", "64", "--global-batch", "256",
           "--seq", "4096", "--ep", "8", "--tp", "1", "--pp", "1", "--batch", "1",
           "--recompute", "full", "--zero", "1", "--json"]  # fmt: skip


def _plan(*extra: str) -> dict:
    result = cli(*MIXTRAL, *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_plan_times_the_busiest_rank():
    default, even, uneven = _plan(), _plan("--moe-imbalance", "1"), _plan("--moe-imbalance", "1.5")
    load = default["layout"]["expert_load"]
    assert load == pytest.approx(routing_imbalance(8 * 4096, 8, 2, 8))
    assert default["moe_imbalance"] is None and uneven["moe_imbalance"] == 1.5
    assert uneven["layout"]["expert_load"] == 1.5
    # The experts' work and the dispatch grow with the load; the rest of the step does not.
    for part in ("compute", "ep_comm"):
        assert even["breakdown"][part] < default["breakdown"][part] < uneven["breakdown"][part]
    for part in ("dp_comm", "optimizer"):
        assert even["breakdown"][part] == uneven["breakdown"][part]
    # The dispatch's bytes scale with the load (its latency does not).
    extra = uneven["breakdown"]["ep_comm"] - even["breakdown"]["ep_comm"]
    assert extra == pytest.approx(0.5 * even["breakdown"]["ep_comm"], rel=0.05)


def test_moe_imbalance_below_one_is_refused():
    refused(cli(*MIXTRAL, "--moe-imbalance", "0.8"), "--moe-imbalance", "0.8")


def test_moe_imbalance_without_expert_parallelism_is_reported_ignored():
    result = cli("plan", "llama-2-7b", "--gpu", "h100-sxm", "--gpus", "8", "--global-batch",
                 "64", "--seq", "4096", "--tp", "1", "--pp", "1", "--batch", "1", "--zero", "1",
                 "--moe-imbalance", "1.2", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "--moe-imbalance" in json.loads(result.stdout)["ignored"]


def test_the_table_names_the_busiest_ranks_load():
    result = cli(*[a for a in MIXTRAL if a != "--json"], "--moe-imbalance", "1.5")
    assert result.exit_code == 0, result.output
    # (The table wraps its cells at the terminal's width, never cutting a figure.)
    assert "1.500×" in result.stdout and "busiest" in result.stdout


def test_experts_split_over_tensor_parallelism_take_their_groups_whole_micro_batch():
    # tp 2 beside ep 4: each expert-parallel rank is a tensor-parallel pair whose experts
    # compute rows of the pair's whole micro-batch (the pair gathers what it dispatches).
    result = cli("plan", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--gpus", "16", "--global-batch",
                 "64", "--seq", "4096", "--tp", "2", "--sp", "--pp", "1", "--ep", "4",
                 "--batch", "1", "--zero", "1", "--engine", "nemo", "--force",
                 "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    load = json.loads(result.stdout)["layout"]["expert_load"]
    assert load == pytest.approx(routing_imbalance(4 * 4096, 128, 8, 4))


def test_plan_counts_the_busiest_ranks_activations():
    """What a rank's experts keep scales with the rows they receive (routed_load.loaded, which
    count's rank counter takes too: tests/test_expert_load.py checks it against autograd's
    saved-tensor hooks on the generated model with the routing forced)."""
    acts = {x: _plan("--moe-imbalance", x)["memory"]["activations"] for x in ("1", "1.5", "2")}
    assert acts["1"] < acts["1.5"] < acts["2"]
    # Linear in the load.
    assert acts["1.5"] - acts["1"] == pytest.approx((acts["2"] - acts["1"]) / 2, rel=1e-6)
    assert _plan()["memory"]["activations"] > acts["1"]  # uniform routing: a little more
