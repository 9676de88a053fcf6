"""benchmarks/attention_sinks_cudnn.py (cuDNN's attention with GPT-OSS's sinks, for a GPU
session): its reference is torch's attention where the sinks add nothing and where they add
what a sink's definition says, its dry run works on CPU, and --against-plan prints a table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))

from attention_sinks_cudnn import DRY, inputs, reference  # noqa: E402


def test_the_reference_without_sinks_is_torchs_attention() -> None:
    x = inputs(DRY, torch.device("cpu"))
    q, k, v = (x[n].float() for n in ("q", "k", "v"))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    got = reference({**x, "q": q, "k": k, "v": v}, sinks=False, window=None)
    assert torch.allclose(got, expected, atol=1e-5)


def test_a_sink_scales_each_row_by_its_share_of_the_softmax() -> None:
    """A sink logit z joins the softmax's denominator only: each output row is the plain
    attention's times sum / (sum + e^z) (sums over the row's allowed scores)."""
    x = inputs(DRY, torch.device("cpu"))
    q, k, v = (x[n].float() for n in ("q", "k", "v"))
    x = {**x, "q": q, "k": k, "v": v}
    plain = reference(x, sinks=False, window=None)
    with_sinks = reference(x, sinks=True, window=None)
    groups = q.shape[1] // k.shape[1]
    scores = q @ k.repeat_interleave(groups, 1).transpose(-2, -1) / q.shape[-1] ** 0.5
    seq = q.shape[2]
    scores = scores.masked_fill(torch.ones(seq, seq).triu(1).bool(), float("-inf"))
    top = scores.amax(-1, keepdim=True)
    total = (scores - top).exp().sum(-1, keepdim=True)
    sink = (x["sinks"].view(1, -1, 1, 1) - top).exp()
    assert torch.allclose(with_sinks, plain * total / (total + sink), atol=1e-5)


def test_dry_run_then_against_plan(tmp_path: Path) -> None:
    out = tmp_path / "sinks.json"
    script = str(BENCH / "attention_sinks_cudnn.py")
    done = subprocess.run([sys.executable, script, "--dry-run", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["device"] == "cpu" and len(result["rows"]) == 4
    # A result as a GPU run writes it (times made up for the table's sake, not measurements).
    result["rows"] = [{**r, "s": 0.001 * (1 + r["sinks"]), "max_abs_error": 0.0}
                      for r in result["rows"]]  # fmt: skip
    out.write_text(json.dumps(result))
    table = subprocess.run([sys.executable, script, "--against-plan", str(out)],
                           capture_output=True, text=True, timeout=300, cwd=ROOT)  # fmt: skip
    assert table.returncode == 0, table.stderr
    assert "| yes | causal | 2.000 |" in table.stdout and "| 2.00 |" in table.stdout
