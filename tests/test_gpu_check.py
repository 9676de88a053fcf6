"""benchmarks/gpu_check.py --dry-run: every part of the GPU measurement runs on CPU at tiny
sizes and writes its files, so the script is known to work before a GPU ever sees it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("train", "vs_hf", "decode", "fp8", "plan")
# The figure each part's runs must have when they ran.
FIGURES = {
    "train": ("tokens_per_s", "peak_memory_bytes", "predicted_memory_bytes"),
    "vs_hf": ("tokens_per_s", "hf_tokens_per_s", "speedup"),
    "decode": ("tokens_per_s", "roofline_tokens_per_s", "fraction_of_roofline"),
    "fp8": ("tokens_per_s", "loss", "speedup_over_bf16"),  # bf16 in a dry run (no torchao)
    "plan": ("predicted_step_time_s", "predicted_over_eager", "predicted_over_compiled"),
}


@pytest.mark.long  # about 60-100 s: 16 processes that each import torch (run before a GPU session)
def test_dry_run_measures_every_part(tmp_path: Path) -> None:
    script = ROOT / "benchmarks" / "gpu_check.py"
    done = subprocess.run([sys.executable, str(script), "--dry-run", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["environment"]["dry_run"] is True
    assert set(results["parts"]) == set(PARTS)
    for part, entry in results["parts"].items():
        assert entry["runs"], part
        for run in entry["runs"]:
            assert "error" not in run, (run["label"], run.get("stderr_tail"))
            assert "skipped" not in run, run  # a minute's budget is plenty for tiny sizes
            for key in FIGURES[part]:
                assert math.isfinite(run[key]) and run[key] > 0, (run["label"], key)
    table = (tmp_path / "table.md").read_text()
    assert table.startswith("Device: ") and "torch " in table and "CUDA " in table
    labels = [r["label"] for e in results["parts"].values() for r in e["runs"]]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert [row.split(" | ")[0][2:] for row in rows[1:]] == labels


def test_a_run_cut_off_or_failing_is_recorded_with_why(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    p = {**gpu_check.DRY, "out": str(tmp_path)}
    run = gpu_check.train_runs(p)[0]
    cut = gpu_check.run_in_child(p, run, timeout=0.5)
    assert cut["skipped"].startswith("killed after")
    failed = gpu_check.run_in_child(p, {**run, "model": "no-such-model"}, timeout=60)
    assert failed["error"] == ["KeyError: 'no-such-model'"]
    rows = gpu_check.markdown({"environment": gpu_check.environment(p), "parts": {
        "train": {"runs": [{"label": "a", **cut}, {"label": "b", **failed}]}}})  # fmt: skip
    assert "| a | killed after" in rows and "| b | error: KeyError" in rows


def test_the_sweep_runs_only_when_asked_and_stale_rows_go(tmp_path: Path, monkeypatch) -> None:
    """The held-out sweep (a budget of 0) is left out of the whole check and run by --only or
    --part; a row whose run this version no longer makes (a changed shape) is dropped."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    ran: list[str] = []
    monkeypatch.setattr(
        gpu_check,
        "run_in_child",
        lambda p, run, left: ran.append(run["label"]) or {"tokens_per_s": 1.0},
    )
    p = {**gpu_check.DRY, "out": str(tmp_path)}
    results = gpu_check.main_run(p, tmp_path, total=60)
    assert "sweep" not in results["parts"]
    assert not any(label in ran for label in (r["label"] for r in gpu_check.sweep_runs(p)))
    sweep = [r["label"] for r in gpu_check.sweep_runs(p)]
    stale = {"label": "train llama-1b compiled B=1 S=99", "tokens_per_s": 2.0}
    results["parts"]["sweep"] = {"budget_s": 0, "runs": [stale]}
    gpu_check.write(results, tmp_path)
    ran.clear()
    results = gpu_check.main_run(p, tmp_path, only=sweep, total=60)
    assert ran == sweep
    assert [r["label"] for r in results["parts"]["sweep"]["runs"]] == sweep


def test_decode_roofline_counts_the_weights_once_a_step(tmp_path: Path) -> None:
    """A decode step of batch B reads the weights once and B caches: the roofline's bytes a
    token are (weights + B·cache) / B, so a batch of 8 has a higher roofline than one."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    p = {**gpu_check.DRY, "out": str(tmp_path)}
    rows = {}
    for batch in (1, 2):
        run = {**gpu_check.sweep_runs(p)[0]}
        run["settings"] = {**run["settings"], "batch": batch}
        rows[batch] = gpu_check.decode_run(p, run)
    one, two = rows[1]["bytes_per_token"], rows[2]["bytes_per_token"]
    from archspec.backends.count.flops_report import kv_cache_bytes_per_token

    _, ir = gpu_check._ir(p, "llama-7b")
    s = gpu_check.sweep_runs(p)[0]["settings"]
    cache = kv_cache_bytes_per_token(ir, "bf16") * (s["seq"] + s["new_tokens"])
    weights = one - cache
    assert two == pytest.approx((weights + 2 * cache) / 2)
