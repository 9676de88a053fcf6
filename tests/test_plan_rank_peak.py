"""`plan --engine fsdp`'s training report carries count's per-rank peak of a step (the
generated parallelize's layout: count's `--engine torch`, measured against real runs in
tests/test_rank_peak.py and tests/test_rank_peak_2d.py) where count covers the layout and
settings: fp32 with AdamW, no recomputation, no gradient accumulation."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from archspec.cli import app
from tests.tiny import as_sets

SIZES = ["n_layers=2", "n_kv_heads=4", "d_model=32", "n_heads=4", "d_ff=64", "vocab_size=64"]
LAYOUT = ["--tp", "2", "--zero", "3", "--recompute", "none", "--seq", "8"]


def _plan(*more: str) -> dict:
    args = ["plan", "llama-2-7b", *as_sets(SIZES), "--gpu", "h100", "--gpus", "4"]
    result = CliRunner().invoke(app, [*args, *LAYOUT, "--json", *more])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_plan_shows_counts_rank_peaks():
    r = _plan("--global-batch", "8", "--batch", "4", "--dtype", "fp32", "--engine", "fsdp")
    args = ["count", "llama-2-7b", *as_sets(SIZES), "--engine", "torch", "--gpus", "4"]
    args += ["--tp", "2", "--zero", "3", "--batch", "8", "--seq", "8", "--json"]
    count = json.loads(CliRunner().invoke(app, args).stdout)
    assert r["memory"]["rank_peaks"] == count["memory"]["rank_peaks"]


def test_no_peak_where_count_has_none():
    """bf16 (count's peak is fp32's), and gradient accumulation (micro-batches)."""
    assert "rank_peaks" not in _plan("--global-batch", "8", "--engine", "fsdp")["memory"]
    fp32 = ["--dtype", "fp32", "--engine", "fsdp", "--batch", "1"]
    assert "rank_peaks" not in _plan("--global-batch", "8", *fp32)["memory"]


def _both(spec: str, sizes: list[str], layout: list[str], dp: int) -> tuple[dict, dict]:
    """plan --engine fsdp's report and count --engine torch's for one layout of 4 ranks, two
    sequences a data-parallel rank (one micro-batch: count has no gradient accumulation)."""
    common = [spec, *as_sets(sizes), "--gpus", "4", "--zero", "3", "--seq", "8", *layout]
    plan = ["plan", *common, "--gpu", "h100", "--global-batch", str(2 * dp), "--batch", "2"]
    plan += ["--dtype", "fp32", "--engine", "fsdp", "--recompute", "none", "--json"]
    count = ["count", *common, "--engine", "torch", "--batch", str(2 * dp), "--json"]
    results = [CliRunner().invoke(app, args) for args in (plan, count)]
    for result in results:
        assert result.exit_code == 0, result.output
    return tuple(json.loads(result.stdout)["memory"] for result in results)


def test_plan_shows_rank_peaks_under_cp_and_ep():
    """Context and expert parallelism (count's --cp and --ep, measured against real runs in
    tests/test_rank_peak.py and tests/test_rank_peak_ep_fsdp.py)."""
    plan, count = _both("llama-2-7b", SIZES, ["--tp", "1", "--cp", "2"], dp=2)
    assert plan["rank_peaks"] == count["rank_peaks"]
    moe = ["n_layers=2", "d_model=32", "n_heads=4", "n_kv_heads=4", "d_ff=64", "vocab_size=64"]
    plan, count = _both("mixtral-8x7b", [*moe, "moe.n_experts=4"], ["--tp", "1", "--ep", "2"], dp=4)
    assert plan["rank_peaks"] == count["rank_peaks"]
