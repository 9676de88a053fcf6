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
