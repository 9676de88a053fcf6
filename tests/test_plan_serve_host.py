"""An eager engine whose profile counts no host time says when its decode step may be the
host's: the step's device time a layer is below the host time eager decoding was measured to
take on an H100 machine (serve_engine.EAGER_HOST_LAYER_S, docs/plan.md)."""

import json

from typer.testing import CliRunner

from archspec.cli import app
from archspec.plan.serve_engine import EAGER_HOST_LAYER_S


def _serve(model: str, *args: str) -> dict:
    result = CliRunner().invoke(app, ["plan", model, "--mode", "serve", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_transformers_on_an_h100_warns_with_the_step_a_layer():
    report = _serve("llama-2-7b", "--gpu", "h100", "--engine", "transformers",
                    "--prompt", "128", "--new-tokens", "128")  # fmt: skip
    per_layer_us = report["decode_token_s"] / 32 * 1e6
    assert per_layer_us < EAGER_HOST_LAYER_S[0] * 1e6
    assert f"{per_layer_us:.0f} us a layer" in report["warning"]
    assert "host may set its pace" in report["warning"]


def test_no_warning_where_the_host_cannot_bind_or_is_counted():
    # CUDA graphs: no host issues the kernels.
    assert "warning" not in _serve("llama-2-7b", "--gpu", "h100", "--engine", "gpt-fast")
    # GPTQ-for-LLaMa's profile fits its host time (host_layer_us) already.
    assert "warning" not in _serve("llama-2-7b", "--gpu", "h100", "--engine", "gptq-for-llama",
                                   "--dtype", "int4", "--group", "128")  # fmt: skip
    # An L4 (300 GB/s) reads a 7B's layer in about 1.6 ms, beyond any host time measured.
    assert "warning" not in _serve("llama-2-7b", "--gpu", "l4", "--engine", "transformers")
