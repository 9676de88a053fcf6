"""`archspec bench`'s predicted peak memory against what it measures on the CPU (its tensor
tracker, archspec/bench/memory.py), for every mode, on gpt2 cut down: within 5%.

- forward: the weights and the forward's largest transient moment (the widest MLP step, or
  the head's logits when the vocabulary is large);
- generate: the weights, the KV cache at its final length and the prefill's transient;
- train: the peak of the whole step (count.step_peak): weights and AdamW's moments plus the
  loss's backward, a block's backward or the end of the backward with the tied matrix's second
  gradient, whichever is largest.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from archspec.cli import app

GPT2 = ["n_layers=2", "d_model=128", "n_heads=4", "d_ff=512", "vocab_size=1000"]
WIDE_VOCAB = ["n_layers=2", "d_model=64", "n_heads=4", "d_ff=256", "vocab_size=5000"]
FAST = ["--device", "cpu", "--threads", "1", "--steps", "1", "--warmup", "1"]

CASES = [
    (mode, sets, batch, seq)
    for mode in ("forward", "generate", "train")
    for sets, batch, seq in ((GPT2, 1, 16), (GPT2, 4, 64), (WIDE_VOCAB, 4, 64))
]


@pytest.mark.parametrize("mode, sets, batch, seq", CASES)
def test_predicted_peak_within_5_percent(mode, sets, batch, seq) -> None:
    args = ["bench", "gpt2", *[w for s in sets for w in ("--set", s)], *FAST]
    args += ["--mode", mode, "--batch", str(batch), "--seq", str(seq), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["memory_measured_by"] == "tensor tracker"
    measured, predicted = out["peak_memory_bytes"], out["predicted_memory_bytes"]
    assert measured == pytest.approx(predicted, rel=0.05), (mode, measured, predicted)
