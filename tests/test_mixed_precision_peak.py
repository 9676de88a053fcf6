"""The peak per rank under FSDP2's mixed precision (parallelize's mp_policy="bf16": bf16
gathered parameters and unsharded gradients, fp32 reduce-scatter inputs, sharded gradients
and AdamW states; rank_peak.py's docstring), against 2 gloo ranks through `bench --nproc 2
--zero 3 --mixed-precision` (`long`), and what count shows for it."""

from __future__ import annotations

import json

import pytest

from archspec import build_ir, load_spec
from archspec.backends.count.rank_peak import rank_peaks
from archspec.bench.mesh_layout import mesh_dims
from archspec.errors import SpecError
from tests.tiny import as_sets

NO_DROPOUT = ["dropout.attention=0", "dropout.hidden=0", "dropout.mlp=0", "dropout.embedding=0"]
SIZES = ["d_model=32", "n_heads=4", "d_ff=64", "vocab_size=64", "max_seq_len=16", *NO_DROPOUT]
LLAMA = ["n_layers=2", "n_kv_heads=4", *SIZES]
GPT2 = ["n_layers=2", *SIZES]


def test_count_shows_each_ranks_peak_under_mixed_precision():
    from typer.testing import CliRunner

    from archspec.cli import app

    args = ["count", "llama-2-7b", *as_sets(LLAMA), "--engine", "torch", "--gpus", "2"]
    args += ["--zero", "3", "--batch", "8", "--seq", "8", "--mixed-precision", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)["memory"]["rank_peaks"]
    ir = build_ir(load_spec("llama-2-7b", LLAMA))
    predicted = rank_peaks(ir, mesh_dims(2), 4, 8, "cuda", mixed_precision=True)
    assert [r["peak"] for r in shown] == [p.peak for p in predicted]
    fp32 = rank_peaks(ir, mesh_dims(2), 4, 8, "cuda")
    assert predicted[0].resident == fp32[0].resident  # fp32 shards and AdamW states
    assert predicted[0].peak < fp32[0].peak


def test_mixed_precision_needs_fsdp_alone():
    ir = build_ir(load_spec("llama-2-7b", LLAMA))
    with pytest.raises(SpecError, match="mixed precision"):
        rank_peaks(ir, mesh_dims(2, tp=2), 4, 8, "cpu", mixed_precision=True)
    mixtral = build_ir(load_spec("mixtral-8x7b", ["n_layers=2", "n_kv_heads=2", *SIZES]))
    with pytest.raises(SpecError, match="without experts"):
        rank_peaks(mixtral, mesh_dims(2), 4, 8, "cpu", mixed_precision=True)


T = ["--device", "cpu", "--nproc", "2", "--zero", "3", "--mixed-precision", "--seq", "8"]
T += ["--steps", "1", "--warmup", "1", "--json"]


def _bench(spec: str, sets: list[str], batch: int) -> tuple[list[int], list[int]]:
    from typer.testing import CliRunner

    from archspec.cli import app

    args = ["bench", spec, *as_sets(sets), *T, "--batch", str(batch)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    ranks = json.loads(result.stdout)["ranks"]
    return [r["peak_memory_bytes"] for r in ranks], [r["predicted_peak_bytes"] for r in ranks]


@pytest.mark.long
@pytest.mark.parametrize("batch", [4, 8])
def test_every_llama_rank_peak_within_5_percent_under_mixed_precision(batch):
    """Measured 329,052 (B=4, the last block's reduce-scatter) and 411,356 (B=8, the loss's
    backward) on each rank; at B=4 one rank now and then reads 345,564 (the gloo timing of
    benchmarks/RESULTS.md), 4.9% over."""
    peaks, predicted = _bench("llama-2-7b", LLAMA, batch)
    assert peaks == pytest.approx(predicted, rel=0.05)


@pytest.mark.long
@pytest.mark.parametrize("batch", [4, 8])
def test_gpt2_rank_peak_under_mixed_precision(batch):
    """Within 2% on the ranks the gloo timing of benchmarks/RESULTS.md leaves alone (258,456
    bytes at B=4, predicted 254,480; 286,360 at B=8, predicted 284,756); a rank it hits now
    and then holds 17,024 bytes more at the last block's reduce-scatter (6-8% over): not
    modelled."""
    peaks, predicted = _bench("gpt2", GPT2, batch)
    assert min(peaks) == pytest.approx(predicted[0], rel=0.02)
    assert max(peaks) <= min(peaks) + 17_024
