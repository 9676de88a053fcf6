"""The peak per rank under FSDP2's mixed precision (parallelize's mp_policy="bf16"): rank_peak
counts each tensor of its moments in its dtype (bf16 gathered parameters and unsharded
gradients, fp32 reduce-scatter inputs and sharded gradients), but the peak measured on 2 gloo
ranks is in a unit's post_backward reduce-scatter, not one of those moments (7-12% above them
for a tiny llama, benchmarks/RESULTS.md): count and bench give no peak there, and rank_peaks
refuses the layouts its mixed-precision terms do not cover."""

from __future__ import annotations

import json

import pytest

from archspec import build_ir, load_spec
from archspec.backends.count.rank_peak import rank_peaks
from archspec.bench.mesh_layout import mesh_dims
from archspec.errors import SpecError

SIZES = ["d_model=32", "n_heads=4", "d_ff=64", "vocab_size=64", "max_seq_len=16"]


def test_count_gives_no_peak_under_mixed_precision():
    from typer.testing import CliRunner

    from archspec.cli import app
    from tests.tiny import as_sets

    args = ["count", "llama-2-7b", *as_sets(["n_layers=2", "n_kv_heads=4", *SIZES])]
    args += ["--engine", "torch", "--gpus", "2", "--zero", "3", "--batch", "8", "--seq", "8"]
    for extra, shown in (([], True), (["--mixed-precision"], False)):
        result = CliRunner().invoke(app, [*args, *extra, "--json"])
        assert result.exit_code == 0, result.output
        assert ("rank_peaks" in json.loads(result.stdout)["memory"]) is shown


def test_mixed_precision_needs_fsdp_alone():
    ir = build_ir(load_spec("llama-2-7b", ["n_layers=2", "n_kv_heads=4", *SIZES]))
    with pytest.raises(SpecError, match="mixed precision"):
        rank_peaks(ir, mesh_dims(2, tp=2), 4, 8, "cpu", mixed_precision=True)
    mixtral = build_ir(load_spec("mixtral-8x7b", ["n_layers=2", "n_kv_heads=2", *SIZES]))
    with pytest.raises(SpecError, match="without experts"):
        rank_peaks(mixtral, mesh_dims(2), 4, 8, "cpu", mixed_precision=True)
