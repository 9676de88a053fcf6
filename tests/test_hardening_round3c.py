"""Issue #30 (hardening, round 3), what was noticed last: the memory refusal's hint, and
`bench --nproc --threads` reaching the ranks."""

from __future__ import annotations

import json

import pytest

from tests.hostile import cli, refused

BENCH_TINY = ["--set", "n_layers=1", "--set", "d_model=8", "--set", "n_heads=2",
              "--set", "d_ff=16", "--set", "vocab_size=16", "--set", "max_seq_len=8"]  # fmt: skip


def test_the_memory_refusal_suggests_no_smaller_batch_than_one() -> None:
    err = refused(cli("bench", "llama-2-70b", "--device", "cpu", "--batch", "1"), "needs about")
    assert "--batch" not in err and "a shorter --seq" in err
    err = refused(cli("bench", "llama-2-70b", "--device", "cpu", "--batch", "2"), "needs about")
    assert "a smaller --batch or --seq" in err


@pytest.mark.slow
def test_bench_nproc_threads_reach_every_rank() -> None:
    """Each rank runs on the --threads the command names, as the one-process bench does."""
    args = ["gpt2", *BENCH_TINY, "--nproc", "2", "--tp", "2", "--device", "cpu",
            "--steps", "1", "--warmup", "0", "--seq", "4", "--threads", "1", "--json"]  # fmt: skip
    result = cli("bench", *args)
    assert result.exit_code == 0, (result.output, result.exception)
    ranks = json.loads(result.stdout)["ranks"]
    assert [r["threads"] for r in ranks] == [1, 1]


def test_a_system_file_number_of_thousands_of_digits_is_refused_plainly(tmp_path) -> None:
    """Found by the long profile of tests/test_properties_inputs.py: an integer too large for
    a float ended in OverflowError (math.isfinite)."""
    huge = "1" + "0" * 2200
    path = tmp_path / "system.yaml"
    path.write_text(
        "accelerators:\n  myacc:\n    name: a\n    peak_tflops: {bf16: " + huge + "}\n"
        "    memory_gib: 80\n    memory_bandwidth_gbs: 2000\n    source: t\n"
        "systems:\n  mysys:\n    accelerator: myacc\n    name: s\n    gpus_per_node: 8\n"
        "    intra_node_gbs: 300\n    inter_node_gbs: 25\n    intra_node_latency_us: 1\n"
        "    inter_node_latency_us: 5\n    source: t\n"
    )
    args = ["plan", "gpt2", "--gpu", "mysys", "--system", str(path), "--gpus", "8",
            "--global-batch", "8"]  # fmt: skip
    err = refused(cli(*args), "peak_tflops.bf16", "over the limit", "(2,201 characters)")
    assert len(err) < 500
