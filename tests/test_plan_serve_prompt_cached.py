"""`plan --mode serve --prompt-cached`: prompts whose keys and values are already in the engine's
prefix cache. The published figures that need it (AMD's vLLM 0.10 latency table, whose benchmark
repeats one batch to an engine that keeps prompts) are checked against the hardware's peak, not
against archspec's own numbers; the option's refusals each give one clear message."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from archspec.cli import app
from archspec.plan.serve_engine import serving_system
from archspec.plan.serve_validation import load_dataset
from archspec.spec.resolve import load_spec

CACHED = [f for f in load_dataset()[1] if f.prompt_cached]
SERVE = ["plan", "llama-3.1-405b", "--mode", "serve", "--gpu", "mi300x", "--gpus", "8",
         "--tp", "8", "--batch", "64", "--prompt", "2048", "--new-tokens", "2048",
         "--dtype", "fp8", "--engine", "vllm-rocm-0.10"]  # fmt: skip


def _matmul_flops_a_token(model: str) -> float:
    """2 × the weights every token multiplies by (projections and MLP, from the config's
    shapes): a lower bound of a prompt position's forward work, attention's scores left out."""
    s = load_spec(model)
    head_dim = s.d_model // s.n_heads
    attention = 2 * s.d_model * s.d_model + 2 * s.d_model * s.n_kv_heads * head_dim
    return 2 * s.n_layers * (attention + 3 * s.d_model * s.d_ff)


def test_the_longer_prompts_were_not_prefilled_in_the_timed_runs() -> None:
    """Llama 3.1 405B's 2048-token prompts add less to a batch than their 1,920 extra positions
    would take to prefill at the MI300X's whole fp8 peak, though they also lengthen the cache
    every step reads: the timed iterations found the prompts in the prefix cache."""
    pairs = {}
    for f in CACHED:
        if f.model == "llama-3.1-405b" and f.batch >= 16:
            pairs.setdefault(f.batch, {})[f.prompt] = f
    assert sorted(pairs) == [16, 32, 64, 128]
    peak = serving_system("mi300x").accelerator.peak("fp8")
    for batch, by_prompt in pairs.items():
        short, long = by_prompt[128], by_prompt[2048]
        extra = batch * (long.prompt - short.prompt) * _matmul_flops_a_token(long.model)
        prefill_at_peak = extra / long.tp / peak
        assert long.published_s - short.published_s < prefill_at_peak, batch


def _plan(*extra: str) -> dict:
    result = CliRunner().invoke(app, [*SERVE, *extra, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_cached_prompt_costs_a_decode_step_not_a_prefill() -> None:
    fresh, cached = _plan(), _plan("--prompt-cached")
    assert cached["prompt_cached"] and not fresh["prompt_cached"]
    assert cached["decode_token_s"] == fresh["decode_token_s"]
    assert cached["prefill_s"] == pytest.approx(cached["decode_token_s"])  # no request overhead
    assert cached["prefill_s"] < fresh["prefill_s"] / 10
    assert cached["generate_s"] == pytest.approx(2048 * cached["decode_token_s"])


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--no-kv-cache"], "--no-kv-cache does not keep"),
        (["--concurrency", "8"], "continuous batching"),
        (["--draft", "llama-3.1-8b", "--accept", "0.7"], "speculative decoding"),
    ],
)
def test_what_it_is_not_modelled_with_is_refused(extra: list[str], message: str) -> None:
    result = CliRunner().invoke(app, [*SERVE, "--prompt-cached", *extra])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_training_reports_it_as_ignored() -> None:
    args = ["plan", "llama-2-7b", "--gpu", "h100-sxm", "--gpus", "8", "--global-batch", "64",
            "--seq", "4096", "--tp", "1", "--prompt-cached", "--json"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "--prompt-cached" in json.loads(result.stdout)["ignored"]
