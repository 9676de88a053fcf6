"""The micro-batches each pipeline rank keeps in flight under torch.distributed.pipelining's
multi-stage schedules, walked along the schedule's own order (count/schedule_walk.py,
count/schedule_order.py), and each rank's saved tensors and peak against a real run.

Default suite: torch's interleaved 1F1B order, walked, holds at its peak the model chunks
Megatron-LM's interleaved schedule holds (Narayanan et al. 2021; Korthikanti et al. 2022,
Section 4.2.3: 2·(p - s - 1) + (V - 1)·p + 1 chunks on stage s of p with V chunks each, never
more than the micro-batches' chunks), wherever the micro-batches are a multiple of the
stages, as Megatron-LM requires; looped BFS (Lamy-Poirier 2022) runs every forward of a rank
before its first backward; a micro-batch count torch's schedule refuses is refused before any
process starts. Long (`-m long`): 2 gloo processes through `bench --nproc 2 --pp 2` under
GPipe and each multi-stage schedule (the zero-bubble ones with each backward in two parts; on
llama too, and ZBV on a llama with attention sinks), the losses the single process's, each
rank's saved tensors equal to the prediction and its peak within 5% (measured: within 2.7%,
benchmarks/RESULTS.md)."""

from __future__ import annotations

import json

import pytest

from archspec.backends.count.layout import Parallelism
from archspec.backends.count.schedule_order import schedule_order
from archspec.backends.count.schedule_walk import walk
from tests.tiny import as_sets


def _held(schedule: str, pp: int, per_rank: int, micro_batches: int) -> list[int]:
    """Chunks in flight at each rank's peak: the walk with one unit saved per stage."""
    stages = [k * pp for k in range(per_rank)]
    order = schedule_order(schedule, stages, pp * per_rank, pp, micro_batches)
    every = dict.fromkeys(range(pp * per_rank), 1)
    return [walk(order[rank], every).held for rank in range(pp)]


@pytest.mark.parametrize("pp,chunks,micro_batches", [(2, 2, 4), (4, 2, 8), (4, 3, 4), (2, 4, 6)])
def test_interleaved_order_holds_megatrons_chunks(pp, chunks, micro_batches):
    held = _held("Interleaved1F1B", pp, chunks, micro_batches)
    par = Parallelism(gpus=pp, pp=pp, interleave=chunks, micro_batches=micro_batches)
    assert held == [par.in_flight(stage)[0] for stage in range(pp)]


def test_looped_bfs_runs_every_forward_first():
    assert _held("LoopedBFS", 4, 2, 8) == [16] * 4


def test_a_batch_the_schedule_refuses_exits_before_launch():
    from typer.testing import CliRunner

    from archspec.cli import app

    args = ["bench", "gpt2", *as_sets(["n_layers=4", *SIZES]), *T, "--batch", "5"]
    result = CliRunner().invoke(app, [*args, "--schedule", "interleaved-1f1b"])
    assert result.exit_code == 2
    assert "--batch 5" in result.output and "multiple of the number of rounds" in result.output


SIZES = ["d_model=32", "n_heads=4", "d_ff=64", "vocab_size=64", "max_seq_len=16"]
SIZES += ["dropout.attention=0", "dropout.hidden=0"]
T = ["--device", "cpu", "--nproc", "2", "--pp", "2", "--seq", "8", "--steps", "1"]
T += ["--warmup", "1", "--json"]


LLAMA = ["n_kv_heads=4"]  # an untied head, RMSNorm, RoPE, q, k, v apart, a gated MLP
# gpt-oss's attention: sinks (a parameter beside the projections, whose gradient the
# zero-bubble schedules split from the input's), windowed and full layers alternating.
SINKS = ["n_kv_heads=2", "attention.sinks=true", "attention.sliding_window=4"]
SINKS += ["attention.window_pattern=LG"]
SETS = {"gpt2": [], "llama-2-7b": LLAMA, "llama-2-7b sinks": SINKS}


@pytest.mark.long
@pytest.mark.parametrize(
    "spec,schedule,stages",
    [
        ("gpt2", "gpipe", [[0], [1]]),
        ("gpt2", "interleaved-1f1b", [[0, 2], [1, 3]]),
        ("gpt2", "looped-bfs", [[0, 2], [1, 3]]),
        ("gpt2", "interleaved-zb", [[0, 2], [1, 3]]),
        ("gpt2", "zbv", [[0, 3], [1, 2]]),
        ("llama-2-7b", "interleaved-zb", [[0, 2], [1, 3]]),
        ("llama-2-7b", "zbv", [[0, 3], [1, 2]]),
        ("llama-2-7b sinks", "zbv", [[0, 3], [1, 2]]),
    ],
)
def test_every_rank_saved_tensors_and_peak(spec, schedule, stages):
    from typer.testing import CliRunner

    from archspec.cli import app

    sets = ["n_layers=4", *SIZES, *SETS[spec]]
    args = ["bench", spec.split()[0], *as_sets(sets), *T, "--batch", "4"]
    result = CliRunner().invoke(app, [*args, "--schedule", schedule])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    ranks = r["ranks"]
    assert [rank["stages"] for rank in ranks] == stages
    losses = next(rank["losses"] for rank in ranks if rank["losses"])
    assert losses == pytest.approx(r["reference_losses"], abs=1e-4)
    saved = [rank["saved_tensor_bytes"] for rank in ranks]
    assert saved == [rank["predicted_bytes"]["activations"] for rank in ranks]
    peaks = [rank["peak_memory_bytes"] for rank in ranks]
    assert peaks == pytest.approx([rank["predicted_peak_bytes"] for rank in ranks], rel=0.05)
