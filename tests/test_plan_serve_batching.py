"""`plan --mode serve --rate/--concurrency/--plot`: continuous batching held to Little's law
and to count's KV-cache model (the batch a paged cache holds), and its options' messages."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from archspec.backends.count.memory import kv_cache_bytes
from archspec.backends.count.params import parameter_count
from archspec.backends.count.passes import KV_LEN, B
from archspec.cli import app
from archspec.cli.common import compile_spec
from archspec.plan.hardware import get_system
from archspec.plan.serve import Precision
from archspec.plan.serve_batching import Server
from archspec.plan.serve_engine import get_engine

A100 = get_system("a100-80g")
P, T = 512, 256


@pytest.fixture(scope="module")
def server() -> Server:
    ir = compile_spec("llama-3.1-8b", None)
    return Server(ir, A100, P, T, 1, 1, Precision("fp16"), get_engine("tensorrt-llm"))


def _most_sequences(ir, engine, positions: int) -> int:
    weights = 2 * ir.value(parameter_count(ir.root))  # count's (checked against transformers)
    per_sequence = float(kv_cache_bytes(ir, 2).xreplace({**ir.env, B: 1, KV_LEN: positions}))
    free = A100.accelerator.memory_bytes * engine.usable_memory - weights
    return math.floor(free / per_sequence)


def test_the_paged_cache_holds_sequences_at_their_mean_length(server: Server) -> None:
    paged = get_engine("typical")  # admits on the positions so far (vLLM's PagedAttention)
    assert not paged.reserves_whole_sequence
    mean = Server(server.ir, A100, P, T, 1, 1, Precision("fp16"), paged)
    assert mean.max_batch == _most_sequences(server.ir, paged, P + T // 2)


def test_tensorrt_llm_reserves_each_sequence_whole(server: Server) -> None:
    # Its scheduler admits a request once its whole length fits (GUARANTEED_NO_EVICT).
    engine = get_engine("tensorrt-llm")
    assert server.max_batch == _most_sequences(server.ir, engine, P + T)


def test_a_rate_gets_the_smallest_batch_that_keeps_up(server: Server) -> None:
    rate = 4.0
    point = server.at_rate(rate)
    b = point.batch
    # Little's law for the sequences decoding: rate x time in decode <= B, and not at B - 1.
    assert rate * T * server.step_s(b) <= b
    assert rate * T * server.step_s(b - 1) > b - 1
    assert point.requests_per_s >= rate and point.tpot_s == server.step_s(b)


def test_clients_beyond_the_cache_wait_their_turn(server: Server) -> None:
    full = server.at_concurrency(server.max_batch)
    more = server.at_concurrency(server.max_batch + 100)
    assert more.batch == full.batch == server.max_batch
    # Little's law: 100 waiting, served at the full batch's request rate.
    assert more.ttft_s - full.ttft_s == pytest.approx(100 / full.requests_per_s)


def test_the_curve_trades_latency_for_throughput(server: Server) -> None:
    sweep = server.sweep()
    assert sweep[0].batch == 1 and sweep[-1].batch == server.max_batch
    for a, b in zip(sweep, sweep[1:], strict=False):
        assert b.tpot_s >= a.tpot_s and b.tokens_per_s >= a.tokens_per_s


def invoke(*args: str):
    return CliRunner().invoke(app, ["plan", *args])


def test_batching_options_each_refused_with_one_clear_message(tmp_path) -> None:
    base = ["llama-3.1-8b", "--mode", "serve", "--gpu", "a100-80g"]
    for extra, message in (
        (["--rate", "4", "--concurrency", "8"], "not both"),
        (["--rate", "4", "--batch", "8"], "--batch is found by continuous batching"),
        (["--rate", "0"], "--rate must be a number above 0"),
        (["--rate", "nan"], "--rate must be a number above 0"),
        (["--rate", "1000"], "more than this server sustains"),
        (["--concurrency", "0"], "--concurrency must be at least 1"),
        (["--plot", str(tmp_path / "a.txt")], "must end in .png or .svg"),
        (["--rate", "1", "--draft", "llama-2-7b", "--accept", "0.7"], "not modelled"),
    ):
        result = invoke(*base, *extra)
        assert result.exit_code == 2, (extra, result.output)
        assert message in result.stderr and "Traceback" not in result.output


def test_the_report_carries_the_point_and_the_chart_is_written(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    chart = tmp_path / "serve.svg"
    result = invoke("llama-3.1-8b", "--mode", "serve", "--gpu", "a100-80g", "--rate", "4",
                    "--plot", str(chart), "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert r["batching"]["rate"] == 4 and r["batch"] == r["batching"]["batch"]
    assert chart.read_text().startswith("<?xml")


def test_a_batch_the_cache_holds_is_reported_as_fitting() -> None:
    """At the most clients the paged cache holds, the memory the report shows is the cache at
    its mean length, within what is usable (it once showed every sequence at full length and
    said 'does not fit' beside 'the cache holds')."""
    ir = compile_spec("llama-2-7b", [])
    server = Server(ir, get_system("h100-sxm"), 512, 128, 1, 1, Precision("bf16"),
                    get_engine("ideal"))  # fmt: skip
    result = invoke("llama-2-7b", "--mode", "serve", "--gpu", "h100-sxm", "--concurrency",
                    str(server.max_batch), "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert r["batching"]["batch"] == server.max_batch and r["fits"] and "warning" not in r
    assert r["memory"]["total"] <= r["memory"]["usable"]
    assert r["batching"]["cache_held"] == "paged, mean"
    # An engine that reserves each sequence's whole length reports the cache so, and fits.
    whole = invoke("llama-2-7b", "--mode", "serve", "--gpu", "h100-sxm", "--concurrency",
                   "10000", "--engine", "tensorrt-llm", "--dtype", "fp16", "--json")  # fmt: skip
    w = json.loads(whole.stdout)
    assert w["batching"]["cache_held"] == "whole length" and w["fits"]
    assert w["memory"]["total"] <= w["memory"]["usable"] and "warning" not in w


def test_one_client_waits_on_no_other_prompt(server: Server) -> None:
    one = server.at_concurrency(1)
    assert one.ttft_s == pytest.approx(one.step_s / 2 + server.prefill_s, rel=1e-12)


def test_the_prompt_wait_is_that_of_a_queue_of_one_server(server: Server) -> None:
    """Prompts arriving at random, each the same work, served one after another: the mean
    wait (Lindley's recursion over simulated arrivals) is what the closed form gives."""
    import random

    batch = server.max_batch // 2
    work = server._parts(batch).joining_prompt_s(server.engine, server.precision)
    rate = batch / (T * server.step_s(batch))
    rng, wait, total, n = random.Random(0), 0.0, 0.0, 200_000
    for _ in range(n):
        total += wait
        wait = max(0.0, wait + work - rng.expovariate(rate))
    assert server.prefill_wait_s(batch) == pytest.approx(total / n, rel=0.05)
