"""Offline throughput under continuous batching (trtllm-bench's runs, `offline_tokens_per_s`):
each is checked against what bounds it physically and against settings its sources publish,
not against archspec's own numbers."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from archspec.cli import app
from archspec.plan.serve_engine import load_engines, serving_system
from archspec.plan.serve_validation import OFFLINE, load_dataset, parts_of
from archspec.spec.resolve import load_spec

OFFLINE_FIGURES = [f for f in load_dataset()[1] if f.metric == OFFLINE]


def _plan(*args: str) -> dict:
    result = CliRunner().invoke(app, ["plan", *args, "--mode", "serve", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _cache_bytes_a_position(model: str, kv_bytes: int) -> int:
    """Keys and values of every layer for one position, from the model's config values."""
    spec = load_spec(model)
    head_dim = spec.d_model // spec.n_heads
    return 2 * spec.n_layers * spec.n_kv_heads * head_dim * kv_bytes


def test_the_published_throughput_needs_an_fp8_cache() -> None:
    """The rows assume an fp8 KV cache (their source names the checkpoints, not the cache):
    with a 16-bit one, Llama 3.1 8B's 22,714 tokens/s at 128 -> 2048 on one H100 would read
    the cache faster than the HBM's whole bandwidth at any batch, weights not even counted."""
    (f,) = [g for g in OFFLINE_FIGURES if g.model == "llama-3.1-8b" and g.gpu == "h100-sxm"
            and (g.prompt, g.new_tokens) == (128, 2048)]  # fmt: skip
    assert f.kv == "fp8" and f.value == 22714
    bandwidth = serving_system(f.gpu).accelerator.bandwidth
    mean_positions = f.prompt + f.new_tokens / 2  # the cache a decode step reads, on average
    for kv_bytes, possible in ((2, False), (1, True)):
        bound = bandwidth / (mean_positions * _cache_bytes_a_position(f.model, kv_bytes))
        assert (f.value <= bound) == possible


def test_every_offline_step_takes_at_least_its_bytes_at_peak_bandwidth() -> None:
    """No prediction beats the hardware: a step reads the weights and the batch's cache."""
    engine = load_engines()["tensorrt-llm-1.0"]
    for f in OFFLINE_FIGURES:
        parts = parts_of(f)
        step = parts.mixed_step_s(engine, f.stored, f.new_tokens)
        positions = f.prompt + f.new_tokens / 2
        cache = f.batch * positions * _cache_bytes_a_position(f.model, 1) / f.tp
        assert step >= (parts.weights_bytes + cache) / parts.bandwidth, f


def test_the_batch_is_what_the_published_saturation_implies() -> None:
    """NVIDIA NIM's Llama 3.3 70B sweep on two H100s (5,000 -> 500, fp8) stops growing at 920
    tokens/s with 93.2 ms between tokens: about 86 sequences in flight. TensorRT-LLM's profile
    reserves each request's whole length (GUARANTEED_NO_EVICT) in 0.9 of the device: within
    10% of that, where a paged cache's mean length would hold a third more."""
    args = ["llama-3.3-70b", "--gpu", "h100-sxm", "--gpus", "2", "--tp", "2", "--dtype",
            "fp8", "--kv-dtype", "fp8", "--prompt", "5000", "--new-tokens", "500",
            "--concurrency", "250"]  # fmt: skip
    implied = 920.12 * 93.2e-3
    batch = _plan(*args, "--engine", "tensorrt-llm-1.0")["batching"]["batch"]
    assert batch == pytest.approx(implied, rel=0.10)


def test_trtllm_bench_caps_the_batch_at_4096() -> None:
    """Llama 3.1 8B at 128 -> 128 on an H200: the fp8 cache holds some 7,600 sequences, and
    trtllm-bench builds for at most 4,096 (tuning.py's finetune_setting)."""
    args = ["llama-3.1-8b", "--gpu", "h200", "--dtype", "fp8", "--kv-dtype", "fp8", "--prompt",
            "128", "--new-tokens", "128", "--concurrency", "30000"]  # fmt: skip
    capped = _plan(*args, "--engine", "tensorrt-llm-1.0")["batching"]
    assert capped["batch"] == capped["max_batch"] == 4096
    assert _plan(*args, "--engine", "tensorrt-llm")["batching"]["max_batch"] > 7000
