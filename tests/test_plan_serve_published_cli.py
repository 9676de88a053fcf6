"""Every published serving figure of published_serving.yaml, given to `archspec plan --mode
serve` as a user would give it (its settings as options, its engine's shipped profile), is timed
as the validation harness (serve_validation.py) times it: the errors docs/plan.md's serving
table reports are the command's. The command's figure is read in the unit its source reports
(a time to first token in ms, a static batch's tokens/s per GPU, ...) and turned into seconds
by the dataset's own conversion (`Figure.published_s`)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from archspec.cli import app
from archspec.plan.serve_engine import get_engine
from archspec.plan.serve_validation import Figure, load_dataset, parts_of
from tests.one_of_each import one_of_each, options_set

runner = CliRunner()
FIGURES = load_dataset()[1]


def command(f: Figure) -> list[str]:
    # An offline run's requests, all queued at once, are its clients (continuous batching).
    load = ["--concurrency", str(f.requests)] if f.requests else ["--batch", str(f.batch)]
    args = [
        "plan", f.model, "--mode", "serve", "--gpu", f.gpu, "--gpus", str(f.gpus),
        "--tp", str(f.tp), *load, "--prompt", str(f.prompt),
        "--new-tokens", str(f.new_tokens), "--dtype", f.precision, "--engine", f.engine,
    ]  # fmt: skip
    if f.group is not None:
        args += ["--group", str(f.group)]
    if f.kv is not None:
        args += ["--kv-dtype", f.kv]
    if not f.kv_cache:
        args.append("--no-kv-cache")
    if f.prompt_cached:
        args.append("--prompt-cached")
    return [*args, "--json"]


def in_its_unit(f: Figure, report: dict) -> float:
    """The command's value of the figure's metric, in the unit the source gives it."""
    return {
        "ttft_ms": report["prefill_s"] * 1e3,
        "decode_token_ms": report["decode_token_s"] * 1e3,
        "generate_decode_tokens_per_s": 1 / report["decode_token_s"],
        "generate_tokens_per_s": report["new_tokens"] / report["generate_s"],
        "static_tokens_per_s": report["batch_tokens_per_s"],
        "static_tokens_per_s_per_gpu": report["batch_tokens_per_s_per_gpu"],
        "batch_latency_s": report["generate_s"],
        "offline_tokens_per_s": (report["batching"] or {}).get("tokens_per_s"),
    }[f.metric]


def _name(f: Figure) -> str:
    precision = f.precision + (f"-g{f.group}" if f.group else "") + (f"-kv{f.kv}" if f.kv else "")
    return (f"{f.source}-{f.model}-{f.gpu}x{f.gpus}-{precision}-b{f.batch}-{f.prompt}to"
            f"{f.new_tokens}-{f.metric}")  # fmt: skip


def test_every_figure_is_named_once() -> None:
    assert len({_name(f) for f in FIGURES}) == len(FIGURES)


# One figure per source, engine, metric and set of options by default (tests/one_of_each.py);
# `-m long`: all.
CASES = one_of_each(
    FIGURES,
    lambda f: (f.source, f.engine, f.metric, f.precision, f.tp > 1,
               options_set(f, {"assumed", "prompt_range", "new_tokens_range"})),
    ids=_name,
)  # fmt: skip


@pytest.mark.parametrize("figure", CASES)
def test_the_command_times_every_published_figure_as_the_harness_does(figure: Figure) -> None:
    predicted = figure.predicted_s(parts_of(figure), get_engine(figure.engine))
    result = runner.invoke(app, command(figure))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    timed = replace(figure, value=in_its_unit(figure, report)).published_s
    assert timed == pytest.approx(predicted, rel=1e-9)
    if figure.requests:  # the batch the harness times is the one the command finds
        assert report["batching"]["batch"] == figure.batch
    assert report["kv_cache"] == figure.kv_cache
    # A batch archspec's memory model says does not fit is timed and flagged, never refused.
    assert report["fits"] == (report["memory"]["total"] <= report["memory"]["usable"])


def test_a_batch_that_does_not_fit_is_timed_and_flagged() -> None:
    # Llama-2-70B's 129 GiB of bf16 weights on one A100-80GB: timed, with a warning.
    args = ["plan", "llama-2-70b", "--mode", "serve", "--gpu", "a100-80g", "--engine",
            "gpt-fast", "--json"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["fits"] is False
    assert report["decode_token_s"] > 0
    assert "would not fit" in report["warning"] and "warning:" in result.stderr


def test_a_request_beyond_learned_positions_is_timed_with_a_note() -> None:
    # GPT-2's 1,024 learned positions: 1,000 prompt tokens and 100 new ones run beyond them.
    args = ["plan", "gpt2", "--mode", "serve", "--gpu", "a100-80g", "--prompt", "1000"]
    beyond = runner.invoke(app, [*args, "--new-tokens", "100", "--json"])
    within = runner.invoke(app, [*args, "--new-tokens", "24", "--json"])
    assert beyond.exit_code == within.exit_code == 0
    assert "S = 1,100 is beyond gpt2's 1,024 learned positions" in beyond.stderr
    assert "beyond" not in within.stderr


@pytest.mark.parametrize("spelling", ["RTX 4090", "nvidia-rtx-4090", "rtx_4090"])
def test_an_accelerator_served_alone_takes_the_common_spellings(spelling: str) -> None:
    # As a system's name does ("H100" is h100-sxm): the sources write "RTX 4090".
    result = runner.invoke(app, ["plan", "llama-2-7b", "--mode", "serve", "--gpu", spelling,
                                 "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["system"] == "rtx-4090"


def test_an_unknown_accelerator_is_refused_with_the_nearest_name() -> None:
    result = runner.invoke(app, ["plan", "llama-2-7b", "--mode", "serve", "--gpu", "rtx4080"])
    assert result.exit_code == 2
    assert "unknown system or accelerator 'rtx4080'" in result.stderr
    assert "did you mean 'rtx-4090'?" in result.stderr
