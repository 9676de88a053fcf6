"""benchmarks/serve_vs_gpu.py: `plan --mode serve` beside every generation gpu_check.py
measured (benchmarks/gpu-h100/results.json, one H100), under the profile that decodes as the
measured code did."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ROOT / "benchmarks" / "gpu-h100" / "results.json"


def test_every_measured_generate_gets_its_profile(tmp_path):
    shutil.copy(MEASURED, tmp_path / "results.json")
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "serve_vs_gpu.py"), str(tmp_path)],
                   check=True, capture_output=True, cwd=ROOT)  # fmt: skip
    table = json.loads((tmp_path / "serve_vs_plan.json").read_text())
    results = json.loads(MEASURED.read_text())
    generate = [r for part in results["parts"].values() for r in part["runs"]
                if r.get("mode") == "generate" and "step_time_s" in r]  # fmt: skip
    # One row for the generated code of every run, one more where transformers ran beside it.
    assert len(table) == len(generate) + sum("hf_step_time_s" in r for r in generate)
    by_way = {(r["run"], r["way"]): r for r in table}
    graphs = by_way[("decode llama-7b B=1 cuda graphs", "generated, cuda graphs")]
    assert graphs["engine"] == "gpt-fast"
    assert graphs["measured_s"] == next(
        r["step_time_s"] for r in generate if r["label"] == "decode llama-7b B=1 cuda graphs"
    )
    eager = by_way[("decode llama-7b B=1 eager", "generated, eager")]
    assert eager["engine"] == "transformers"
    # Compiled without CUDA graphs decodes as no published profile does: no prediction.
    assert by_way[("decode llama-7b B=1 compiled", "generated, compiled")]["engine"] is None
    # Against the measurement (not fitted to it): under CUDA graphs gpt-fast's profile within
    # the 25% (docs/plan.md: 0.87); eager, below the measured time, whose host the
    # transformers profile does not count (0.05-0.27).
    assert 0.75 < graphs["predicted_over_measured"] < 1.25
    assert all(r["predicted_over_measured"] < 0.5 for r in table if r["engine"] == "transformers")


def test_the_held_out_batches_and_prompt_stay_within_the_target(tmp_path):
    """The sweep one H100 measured later (benchmarks/gpu-h100-sweep): CUDA-graph decoding of
    the 7B at batch 8, 32 and 64 and with a 2,048-token prompt, shapes no profile was fitted
    or checked on. gpt-fast's profile within the issue's 25% at every one (docs/plan.md:
    0.88-0.90), and as flat across them as the measurement (within 5% of each other)."""
    measured = ROOT / "benchmarks" / "gpu-h100-sweep" / "results.json"
    shutil.copy(measured, tmp_path / "results.json")
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "serve_vs_gpu.py"), str(tmp_path)],
                   check=True, capture_output=True, cwd=ROOT)  # fmt: skip
    table = json.loads((tmp_path / "serve_vs_plan.json").read_text())
    ratios = [r["predicted_over_measured"] for r in table]
    assert [(r["batch"], r["prompt"]) for r in table] == [(8, 128), (32, 128), (64, 128), (1, 2048)]
    assert all(r["engine"] == "gpt-fast" for r in table)
    assert all(0.75 < x < 1.25 for x in ratios)
    assert max(ratios) / min(ratios) < 1.05
