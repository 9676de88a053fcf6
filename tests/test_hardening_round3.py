"""Issue #30 (hardening, round 3): plan on encoder-decoders, checkpoints that inflate, sizes
that grow with depth, and config values import-hf must refuse plainly."""

from __future__ import annotations

import json

import pytest

from archspec import build_ir, load_spec
from archspec.spec.resolve import builtin_names
from tests.hostile import cli

ENCODER_DECODERS = [
    name for name in builtin_names() if build_ir(load_spec(name)).root.layout == "encoder-decoder"
]

# t5-small as transformers builds it: T5ForConditionalGeneration(...).num_parameters(), and
# its config's decoder (num_decoder_layers 6, num_heads 8 of d_kv 64).
T5_SMALL_PARAMS = 60_506_624
T5_SMALL_DECODER_LAYERS, T5_SMALL_INNER = 6, 8 * 64


def _plan(*args: str) -> dict:
    result = cli("plan", *args, "--gpu", "h100-sxm", "--json")
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout)


def test_encoder_decoders_are_among_the_builtins() -> None:
    assert {"t5-small", "bart-base", "flan-t5-small"} <= set(ENCODER_DECODERS)


@pytest.mark.parametrize("name", ENCODER_DECODERS)
def test_plan_trains_and_serves_every_encoder_decoder(name: str) -> None:
    train = _plan(name, "--gpus", "8", "--global-batch", "64", "--seq", "128")
    assert train["step_time_s"] > 0 and 0 < train["mfu"] < 1
    assert train["tokens_per_s"] == pytest.approx(64 * 128 / train["step_time_s"])
    serve = _plan(name, "--mode", "serve", "--prompt", "64", "--new-tokens", "16")
    assert serve["prefill_s"] > 0 and serve["tokens_per_s"] > 0


def test_plan_of_t5_small_against_its_config() -> None:
    train = _plan("t5-small", "--global-batch", "8", "--tp", "1", "--batch", "8")
    assert train["memory"]["weights"] == 2 * T5_SMALL_PARAMS  # bf16
    serve = _plan("t5-small", "--mode", "serve", "--prompt", "512", "--new-tokens", "128")
    # The prompt is the encoder's: cross-attention caches its 512 positions' keys and values;
    # the decoder's self-attention caches its start token and the 128 it generates.
    per_position = 2 * T5_SMALL_DECODER_LAYERS * T5_SMALL_INNER * 2  # K and V, bf16
    assert serve["memory"]["kv_cache"] == per_position * (512 + 1 + 128)
