"""Continuous batching checked against a published concurrency sweep (serve_concurrency.py):
the command's `--concurrency` gives what the check reports, and docs/plan.md shows the check
as the code computes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archspec.cli import app
from archspec.plan.serve_concurrency import load_sweeps, predicted, table
from archspec.plan.serve_engine import load_engines

POINTS = load_sweeps()


def test_the_sweep_is_read_whole_from_its_source() -> None:
    assert [p.concurrency for p in POINTS] == [1, 5, 25, 50, 100, 150, 200, 250]
    for p in POINTS:
        # Throughput is output tokens a second: at one client, the first token and the gaps.
        if p.concurrency == 1:
            one = p.new_tokens / (p.ttft_ms + (p.new_tokens - 1) * p.itl_ms) * 1e3
            assert one == pytest.approx(p.tokens_per_s, rel=0.002)


@pytest.mark.parametrize("point", POINTS[::3], ids=lambda p: f"c{p.concurrency}")
def test_the_command_predicts_what_the_check_reports(point) -> None:
    args = ["plan", point.model, *[a for s in point.sets for a in ("--set", s)], "--mode",
            "serve", "--gpu", point.gpu, "--gpus", str(point.gpus), "--tp", str(point.tp),
            "--dtype", point.precision, "--kv-dtype", point.kv, "--prompt", str(point.prompt),
            "--new-tokens", str(point.new_tokens), "--concurrency", str(point.concurrency),
            "--engine", point.engine, "--json"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    batching = json.loads(result.stdout)["batching"]
    expected = predicted(point, load_engines()[point.engine])
    assert batching["ttft_s"] == pytest.approx(expected.ttft_s, rel=1e-9)
    assert batching["tpot_s"] == pytest.approx(expected.tpot_s, rel=1e-9)
    assert batching["tokens_per_s"] == pytest.approx(expected.tokens_per_s, rel=1e-9)


def test_docs_show_the_check_as_computed() -> None:
    docs = (Path(__file__).parent.parent / "docs" / "plan.md").read_text()
    assert table() in docs
