"""`archspec plan` quotes the left-out errors of the published runs most like the plan asked
for (track_record.py): the stored errors are the ones docs/plan.md's cross-validated table
shows, each run is filed under its own engine, accelerator, experts and precision, and a plan
on a part no run of its stack used says so instead of borrowing another part's errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archspec.cli import app
from archspec.ir.nodes import MoE
from archspec.ir.visit import walk
from archspec.plan import published, track_record
from archspec.plan.hardware import get_system, tensor_core_twin
from archspec.plan.serve_engine import PRECISION_CLASSES, serving_system

runner = CliRunner()
DOCS = Path(__file__).resolve().parents[1] / "docs" / "plan.md"


def docs_left_out() -> dict[str, float]:
    """Run name -> the left-out error docs/plan.md's table shows (its last column)."""
    names = {r.name for r in published.dataset().runs}
    out = {}
    for line in DOCS.read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) == 9 and cells[1] in names and cells[7].endswith("%"):
            out[cells[1]] = float(cells[7].rstrip("%")) / 100
    return out


def test_the_record_holds_every_published_run_with_the_error_the_docs_show() -> None:
    stored = {r["name"]: r for r in track_record.stored()}
    shown = docs_left_out()
    assert set(stored) == {r.name for r in published.expressible()} == set(shown)
    # The docs show each to 0.1%.
    for name, error in shown.items():
        assert stored[name]["left_out"] == pytest.approx(error, abs=0.000501), name


def test_each_run_is_filed_under_its_engine_accelerator_experts_and_precision() -> None:
    stored = {r["name"]: r for r in track_record.stored()}
    for run in published.expressible():
        row = stored[run.name]
        accelerator = tensor_core_twin(get_system(run.system).accelerator.key)
        moe = any(isinstance(p.node, MoE) for p in walk(published.cands_ir(run).root))
        assert (row["engine"], row["accelerator"], row["moe"], row["fp8"]) == (
            run.engine, accelerator, moe, run.dtype == "fp8"), run.name  # fmt: skip
        assert row["source"] == run.source


def plan_json(args: list[str]) -> dict:
    result = runner.invoke(app, ["plan", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


GPT_OSS_B200 = ["gpt-oss-120b", "--set", "max_seq_len=4096", "--gpu", "b200", "--gpus", "64",
                "--global-batch", "1280", "--seq", "4096", "--grad-dtype", "bf16",
                "--engine", "nemo", "--tp", "1", "--pp", "1", "--ep", "8", "--zero", "1",
                "--batch", "4", "--recompute", "selective", "--recompute-modules",
                "layernorm,moe_act", "--ep-dispatch", "alltoall"]  # fmt: skip


def test_a_plan_quotes_the_runs_of_its_stack_part_experts_and_precision() -> None:
    record = plan_json(GPT_OSS_B200)["track_record"]
    assert record["matched"] == ["accelerator", "moe", "fp8"]
    shown = docs_left_out()
    # NeMo's bf16 MoE runs on a B200: GPT-OSS 120B's, the docs' largest miss on that part.
    assert record["figures"] == ["GPT-OSS 120B, 64 B200 (NeMo 26.04.01)"]
    error = shown[record["figures"][0]]
    assert record["published_over_predicted"] == pytest.approx([1 + error] * 2, abs=0.000501)


def test_a_part_no_run_of_the_stack_used_is_said_so() -> None:
    # Megatron-LM's own runs are all on A100s: a plan on an MI300X quotes them as other
    # parts' and says none ran there.
    args = ["llama-2-7b", "--gpu", "mi300x", "--gpus", "8", "--global-batch", "64",
            "--seq", "4096", "--engine", "megatron"]  # fmt: skip
    record = plan_json(args)["track_record"]
    assert "accelerator" not in record["matched"]
    stored = {r["name"]: r for r in track_record.stored()}
    assert {stored[n]["accelerator"] for n in record["figures"]} == {"a100-80g"}
    text = runner.invoke(app, ["plan", *args], env={"COLUMNS": "200"}).output
    assert "none on mi300x" in text


def test_a_what_if_quotes_no_record() -> None:
    for what_if in (["--mfu", "0.4"], ["--efficiency", "0.6"]):
        assert "track_record" not in plan_json([*GPT_OSS_B200, *what_if])


# Serving: docs/plan.md's serving table, `| engine | model | gpu × n | ... |` rows.
SERVING_METRICS = ("ttft_ms", "decode_token_ms", "batch_latency_s", "static_tokens_per_s",
                   "static_tokens_per_s_per_gpu", "generate_tokens_per_s",
                   "generate_decode_tokens_per_s", "offline_tokens_per_s")  # fmt: skip


def docs_serving() -> list[tuple[float | None, float | None]]:
    """(left out, typical with its engine left out) of each figure, in the table's order."""

    def pct(cell: str) -> float | None:
        return None if cell == "—" else float(cell.rstrip("%")) / 100

    out = []
    for line in DOCS.read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) == 14 and cells[7] in SERVING_METRICS:
            out.append((pct(cells[10]), pct(cells[12])))
    return out


def test_the_serving_record_holds_every_figure_with_the_errors_the_docs_show() -> None:
    from archspec.plan.serve_profiles import ENGINE_NAMES
    from archspec.plan.serve_validation import load_dataset, unstated

    stored = track_record.stored(track_record.SERVING)
    timed = [f for f in load_dataset()[1] if not unstated(f)]
    # In the validation's order (its table's): engine after engine.
    figures = [f for key in ENGINE_NAMES for f in timed if f.engine == key]
    assert len(stored) == len(figures) == len(docs_serving())
    for row, f, (left_out, typical) in zip(stored, figures, docs_serving(), strict=True):
        accelerator = tensor_core_twin(serving_system(f.gpu).accelerator.key)
        assert (row["engine"], row["accelerator"], row["metric"], row["source"]) == (
            f.engine, accelerator, f.metric, f.source)  # fmt: skip
        assert row["precision"] == PRECISION_CLASSES[f.precision]
        for got, shown in ((row["left_out"], left_out), (row["typical_left_out"], typical)):
            assert (got is None) == (shown is None), row["name"]
            if got is not None:
                assert got == pytest.approx(shown, abs=0.000501), row["name"]


def test_a_serving_plan_quotes_its_profile_figures_and_the_ideal_none() -> None:
    args = ["llama-3.3-70b", "--mode", "serve", "--gpu", "mi300x", "--gpus", "8", "--tp", "8",
            "--dtype", "fp8", "--batch", "64", "--prompt", "2048", "--new-tokens", "2048",
            "--prompt-cached"]  # fmt: skip
    record = plan_json([*args, "--engine", "vllm-rocm-0.10"])["track_record"]
    stored = [r for r in track_record.stored(track_record.SERVING)
              if r["engine"] == "vllm-rocm-0.10"]  # fmt: skip
    assert record["matched"] == ["accelerator", "precision"]
    assert record["figures"] == [r["name"] for r in stored] and len(stored) == 32
    errors = [r["left_out"] for r in stored]
    assert record["published_over_predicted"] == [1 + min(errors), 1 + max(errors)]
    # The ideal profile was fitted to nothing: no errors to quote.
    assert "track_record" not in plan_json(args)
    # The typical profile quotes every engine's figures, each predicted without its engine.
    typical = plan_json([*args, "--engine", "typical"])["track_record"]
    assert len({n.split()[0] for n in typical["figures"]}) > 1
