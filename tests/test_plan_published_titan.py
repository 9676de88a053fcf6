"""torchtitan's published rows (published.yaml's torchtitan sources) and `--async-tp`, the
async tensor parallelism several of them ran: the command takes every such layout, and async TP
hides only the tensor-parallel collectives, which the published pairs (the same layout with
and without it, torchtitan's async-TP benchmark page and Table 4 of its December 2024 page)
measured faster."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from archspec.cli import app
from archspec.plan import published
from tests.test_plan_published_cli import command

runner = CliRunner()

TITAN = ("torchtitan", "torchtitan_h100", "torchtitan_405b", "torchtitan_asynctp")


def titan_runs() -> list[published.Run]:
    return [r for r in published.dataset().runs if r.source in TITAN]


def by_name(name: str) -> published.Run:
    return next(r for r in published.dataset().runs if r.name == name)


def report(args: list[str]) -> dict:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_every_torchtitan_row_is_expressible() -> None:
    assert all(r.not_expressible() is None for r in titan_runs())
    # Tables 5 and 6 (405B, FSDP 8 x TP 8 x PP 8, with CP up to 8) and the async-TP rows.
    assert sum(r.pp == 8 for r in titan_runs()) == 6
    assert sum(r.async_tp for r in titan_runs()) >= 10


PAIRS = [
    ("Llama 3.1 70B fp8 tp 8, 256 H100 (torchtitan)",
     "Llama 3.1 70B fp8 tp 8 async TP, 256 H100 (torchtitan)"),
    ("Llama 3.1 8B tp 8, 64 H100 (torchtitan 2025-06)",
     "Llama 3.1 8B tp 8 async TP, 64 H100 (torchtitan 2025-06)"),
]  # fmt: skip


@pytest.mark.parametrize(("vanilla", "asynchronous"), PAIRS)
def test_async_tp_hides_only_the_tensor_parallel_collectives(vanilla, asynchronous) -> None:
    plain, overlapped = by_name(vanilla), by_name(asynchronous)
    assert overlapped.async_tp and not plain.async_tp
    # Published: the async run is faster.
    assert overlapped.figure[1] > plain.figure[1]
    a = report(command(plain, plain.micro_batch, 1))
    b = report(command(overlapped, overlapped.micro_batch, 1))
    assert b["async_tp"] is True and "async_tp" not in a
    assert b["step_time_s"] < a["step_time_s"]
    for part, seconds in a["breakdown"].items():
        if part != "tp_comm":
            assert b["breakdown"][part] == pytest.approx(seconds, rel=1e-12)
    assert 0 < b["breakdown"]["tp_comm"] < a["breakdown"]["tp_comm"]


BASE = ["plan", "llama-2-7b", "--gpu", "h100-sxm", "--gpus", "16", "--global-batch", "32",
        "--seq", "4096", "--batch", "1", "--zero", "3", "--json"]  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--engine", "fsdp", "--tp", "8", "--async-tp"], "needs --tp above 1 and --sp"),
        (["--engine", "fsdp", "--tp", "1", "--sp", "--async-tp"], "got --tp 1"),
        (["--engine", "nemo", "--tp", "8", "--sp", "--async-tp"], "overlaps its tensor"),
        (["--engine", "megatron", "--tp", "8", "--sp", "--async-tp"], "has no such overlap"),
        (["--tp", "8", "--sp", "--async-tp"], "--engine megatron has no such overlap"),
    ],
)
def test_async_tp_is_refused_where_it_cannot_run(extra, says) -> None:
    result = runner.invoke(app, [*BASE, *extra])
    assert result.exit_code == 2
    assert says in result.output and "--async-tp" in result.output
    assert "Traceback" not in result.output


def test_async_tp_is_ignored_when_serving() -> None:
    result = runner.invoke(app, ["plan", "llama-2-7b", "--mode", "serve", "--gpu", "h100-sxm",
                                 "--async-tp", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "--async-tp" in json.loads(result.stdout)["ignored"]
