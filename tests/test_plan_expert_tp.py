"""Expert tensor parallelism (`--etp`): the experts split over the tp ranks as the dense layers
are (the default), or held whole with the expert-parallel groups folded over tp × cp × dp
(`--etp 1`, Megatron-Core's MoE parallel folding: megatron/core/transformer/moe/README.md,
"MoE Parallel Folding", at Megatron-LM d98e8a6)."""

from __future__ import annotations

import json

import pytest

from tests.hf_reference import build_meta
from tests.hostile import cli, refused

QWEN = ["plan", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--engine", "nemo", "--force", "--json"]


def _plan(*layout: str) -> dict:
    result = cli(*QWEN, *layout)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_folding_breaks_the_ep_below_dp_bound_as_megatrons_readme_says():
    # The README's example: "TP=4, CP=2, DP=8, PP=4 → max EP=8"; "With Folding: Same attention
    # config, but MoE uses ETP=1, EP=64, EDP=1".
    layout = ["--gpus", "256", "--global-batch", "64", "--seq", "8192", "--tp", "4", "--cp",
              "2", "--pp", "4", "--sp", "--batch", "1", "--zero", "1"]  # fmt: skip
    refused(cli(*QWEN, *layout, "--ep", "64"), "--ep 64", "8 data-parallel ranks")
    report = _plan(*layout, "--ep", "64", "--etp", "1")
    assert report["layout"]["ep"] == 64 and report["layout"]["etp"] == 1
    assert _plan(*layout, "--ep", "8")["layout"]["etp"] == 4  # the default: the tp


def test_held_whole_a_rank_holds_its_experts_whole():
    """A rank's weights under --etp 1 less under --etp 2 (tp 2, ep 8): the experts a rank
    holds go from 1/16 to 1/8 of them, counted from transformers' Qwen3MoeForCausalLM."""
    model = build_meta("qwen3-30b-a3b")
    experts = sum(p.numel() for name, p in model.named_parameters() if ".mlp.experts." in name)
    layout = ["--gpus", "16", "--global-batch", "64", "--seq", "4096", "--tp", "2", "--sp",
              "--pp", "1", "--ep", "8", "--batch", "1", "--zero", "1"]  # fmt: skip
    whole, split = _plan(*layout, "--etp", "1"), _plan(*layout)
    extra = whole["memory"]["weights"] - split["memory"]["weights"]
    assert extra == pytest.approx(2 * experts * (1 / 8 - 1 / 16), rel=1e-6)  # bf16


def test_held_whole_the_experts_need_no_tensor_parallel_collectives():
    layout = ["--gpus", "16", "--global-batch", "64", "--seq", "4096", "--tp", "2", "--sp",
              "--pp", "1", "--ep", "8", "--batch", "1", "--zero", "1"]  # fmt: skip
    whole, split = _plan(*layout, "--etp", "1"), _plan(*layout)
    # Split, each MoE layer reduce-scatters and gathers its experts' output over tp as the
    # attention does its own; whole, only the attention's remain: half the collectives.
    assert whole["breakdown"]["tp_comm"] == pytest.approx(split["breakdown"]["tp_comm"] / 2,
                                                          rel=0.02)  # fmt: skip
    # Folded, the 8 expert ranks are 8 neighbours (one node); split, 8 data-parallel ranks
    # 2 apart (two nodes, over the network).
    assert whole["breakdown"]["ep_comm"] < split["breakdown"]["ep_comm"]


def test_bad_expert_tp_is_refused_naming_the_values():
    layout = ["--gpus", "16", "--global-batch", "64", "--seq", "4096", "--tp", "4", "--pp",
              "1", "--ep", "8", "--batch", "1", "--zero", "1"]  # fmt: skip
    refused(cli(*QWEN, *layout, "--sp", "--etp", "2"), "--etp 2", "--tp 4")
    refused(cli(*QWEN, *layout, "--etp", "1"), "--etp 1", "--sp")
    refused(cli(*QWEN, *layout, "--sp", "--etp", "1", "--ep", "32"), "--ep 32", "16 ranks")
    result = cli(*QWEN, "--gpus", "16", "--global-batch", "64", "--seq", "4096", "--tp", "2",
                 "--sp", "--pp", "1", "--batch", "1", "--zero", "1", "--etp", "1")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "--etp" in json.loads(result.stdout)["ignored"]
