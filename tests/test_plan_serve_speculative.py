"""`plan --mode serve --draft`: speculative decoding against Leviathan et al. 2023's expected
tokens per round, and the verifying pass against a decode step's weights."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from archspec.cli import app
from archspec.cli.common import compile_spec
from archspec.plan.hardware import get_system
from archspec.plan.serve import predict_serving
from archspec.plan.serve_speculative import Speculation, speculative_decode_s

A100 = get_system("a100-80g")


def invoke(*args: str):
    return CliRunner().invoke(app, ["plan", *args])


@pytest.mark.parametrize(("k", "accept", "expected"), [(1, 0.5, 1.5), (4, 0.8, 3.3616),
                                                        (5, 0.0, 1.0)])  # fmt: skip
def test_tokens_a_round_are_the_papers_equation_1(k, accept, expected) -> None:
    # Leviathan, Kalman and Matias 2023, Equation 1: (1 - α^(γ+1)) / (1 - α).
    draft = compile_spec("llama-2-7b", None)
    assert Speculation(draft, k, accept).tokens_per_round == pytest.approx(expected)


def test_a_round_reads_the_targets_weights_once_and_the_draft_k_times() -> None:
    target, draft = compile_spec("llama-2-70b", None), compile_spec("llama-2-7b", None)
    big = predict_serving(target, A100, 1, 16, 64)
    small = predict_serving(draft, A100, 1, 16, 64)
    k = 4
    # No token accepted: a round is k draft steps and a verifying pass over k + 1 positions,
    # which at batch 1 costs what one decode step does (its weights, read once).
    nothing = speculative_decode_s(target, Speculation(draft, k, 0.0), A100, 1, 16, 64)
    assert nothing == pytest.approx(k * small.decode_token_s + big.decode_token_s, rel=0.03)
    faster = [speculative_decode_s(target, Speculation(draft, k, a), A100, 1, 16, 64)
              for a in (0.5, 0.7, 0.9)]  # fmt: skip
    assert faster[0] > faster[1] > faster[2] and faster[2] < big.decode_token_s


def test_speculation_options_each_refused_with_one_clear_message() -> None:
    base = ["llama-2-70b", "--mode", "serve", "--gpu", "a100-80g"]
    for extra, message in (
        (["--draft", "llama-2-7b"], "--draft needs --accept"),
        (["--accept", "0.7"], "give --draft SPEC too"),
        (["--draft", "llama-2-7b", "--accept", "1"], "probability below 1"),
        (["--draft", "llama-2-7b", "--accept", "0.7", "--speculate", "0"], "at least 1"),
        (["--draft", "t5-small", "--accept", "0.7"], "the target's layout"),
    ):
        result = invoke(*base, *extra)
        assert result.exit_code == 2, (extra, result.output)
        assert message in result.stderr and "Traceback" not in result.output


def test_the_report_says_the_draft_and_holds_its_weights() -> None:
    base = ["llama-2-70b", "--mode", "serve", "--gpu", "a100-80g", "--dtype", "int4",
            "--group", "32", "--json"]  # fmt: skip
    plain = json.loads(invoke(*base).stdout)
    result = invoke(*base, "--draft", "llama-2-7b", "--speculate", "5", "--accept", "0.7")
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert r["draft"]["model"] == "llama-2-7b" and r["draft"]["speculate"] == 5
    assert r["draft"]["tokens_per_round"] == pytest.approx((1 - 0.7**6) / 0.3)
    assert r["memory"]["weights"] > plain["memory"]["weights"]
    assert r["decode_token_s"] < plain["decode_token_s"]
    assert "warning" not in r  # one tokenizer: Llama 2's 32,000 tokens


def test_a_draft_of_another_vocabulary_is_warned_of() -> None:
    result = invoke("llama-2-7b", "--mode", "serve", "--gpu", "a100-80g", "--draft", "gpt2",
                    "--accept", "0.7", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "vocabulary (50,257) is not the model's (32,000)" in json.loads(result.stdout)["warning"]
