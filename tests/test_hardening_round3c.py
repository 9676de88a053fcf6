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
